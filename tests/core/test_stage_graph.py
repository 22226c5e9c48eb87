"""Seed 003 on the engine-free core: a graph of stages run one micro-batch at a time (``MicroBatchPipeline``).

The pipeline is the book's Examples 3-1..3-3: per-user sessions (gap 1 min) over the mobile and over the
console source, flattened into fixed 2-minute windows computing the mean session length.
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.apps.games import GAP_MS, SOURCES, WINDOW_MS, game_stages
from floodmark.core.pipeline import MicroBatchPipeline
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.watermarks import SourceWatermarks, WatermarkStrategy
from floodmark.core.watermarks.graph import StageGraph
from floodmark.simulator import games

GAP, WINDOW = GAP_MS, WINDOW_MS


def run(records: dict, combiner: TimestampCombiner, bound: int, config: games.GamesConfig):
    """Run every batch; source watermarks = max event time seen - bound (then MAX at the end of input)."""
    pipeline = MicroBatchPipeline(dict.fromkeys(SOURCES, "ts"), game_stages(combiner))
    seen = {name: MIN_TIMESTAMP for name in records}
    batches = games.batch_count(records)
    history = []
    for b in range(batches + 3):  # the end of input, then one batch per stage to flush
        inputs = {name: frame[frame["batch"] == b] for name, frame in records.items()}
        before = pipeline.graph.input_watermarks()
        pipeline.run_batch(inputs, processing_time=config.start_ms + b * config.batch_ms)
        for name, frame in inputs.items():
            if len(frame):
                seen[name] = max(seen[name], int(frame["ts"].max()) - bound)
        ended = b >= batches - 1
        after = pipeline.end_batch({n: (MAX_TIMESTAMP if ended else w, False) for n, w in seen.items()})
        history.append((before, pipeline.graph.output_watermarks(), after))
    return pipeline, history


def final_means(pipeline: MicroBatchPipeline) -> dict[int, float]:
    panes = pipeline.results["means"].emitted.all_panes()
    assert all(p.timing.value == "ON_TIME" for p in panes)
    return {p.window.start: p.value["mean_length"] for p in panes}


@pytest.mark.parametrize("combiner", [TimestampCombiner.END_OF_WINDOW, TimestampCombiner.EARLIEST])
def test_two_stage_means_equal_the_straight_computation(combiner):
    config = games.GamesConfig()
    records = games.generate(config)
    pipeline, _ = run(records, combiner, bound=60_000, config=config)
    for name in ("mobile_sessions", "console_sessions"):
        assert not pipeline.results[name].emitted.late
    assert not pipeline.results["means"].emitted.late
    timestamp = "end" if combiner is TimestampCombiner.END_OF_WINDOW else "earliest"
    sessions = pd.concat(
        [games.session_lengths(records[source], GAP, timestamp) for source in ("mobile", "console")],
        ignore_index=True,
    )
    expected = games.mean_session_lengths(sessions, WINDOW)
    assert final_means(pipeline) == pytest.approx(expected)
    assert sum(p.value["sessions"] for p in pipeline.results["means"].emitted.all_panes()) == len(sessions)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), bound=st.sampled_from([0, 5_000, 60_000]))
def test_stage_watermark_invariants(seed, bound):
    """After every batch: a stage's next input watermark is the MIN of its upstreams' output watermarks,
    no output watermark is above its input, nothing regresses, and EARLIEST never runs ahead of END_OF_WINDOW."""
    config = games.GamesConfig(seed=seed, duration_ms=5 * 60_000)
    records = games.generate(config)
    runs = {c: run(records, c, bound, config)[1] for c in (TimestampCombiner.END_OF_WINDOW, TimestampCombiner.EARLIEST)}
    for history in runs.values():
        previous_in = previous_out = None
        for before, outputs, after in history:
            assert after["means"] == max(before["means"], min(outputs["mobile_sessions"], outputs["console_sessions"]))
            for stage in outputs:
                assert outputs[stage] <= before[stage]
                if previous_in is not None:
                    assert before[stage] >= previous_in[stage] and outputs[stage] >= previous_out[stage]
            previous_in, previous_out = before, outputs
    eow, earliest = runs.values()
    for (_, _, a), (_, _, b) in zip(eow, earliest, strict=True):
        assert b["means"] <= a["means"]


def test_earliest_holds_the_downstream_watermark_back():
    config = games.GamesConfig()
    records = games.generate(config)
    eow = run(records, TimestampCombiner.END_OF_WINDOW, 60_000, config)[1]
    earliest = run(records, TimestampCombiner.EARLIEST, 60_000, config)[1]
    behind = [
        a["means"] - b["means"]
        for (_, _, a), (_, _, b) in zip(eow, earliest, strict=True)
        if a["means"] < MAX_TIMESTAMP
    ]
    assert max(behind) > GAP  # sessions still open hold the mean stage back by more than a gap


@pytest.mark.parametrize(
    ("upstreams", "error"),
    [
        ({"a": ["nowhere"]}, "neither a source nor a stage"),
        ({"a": ["b"], "b": ["a"]}, "cycle"),
        ({"a": []}, "no upstream"),
        ({"src": ["src"]}, "unique"),
    ],
)
def test_graph_definitions_refused(upstreams, error):
    with pytest.raises(ValueError, match=error):
        StageGraph(["src"], upstreams)


def test_idle_upstreams_are_left_out_and_levels_follow_the_graph():
    graph = StageGraph(["m", "c"], {"ms": ["m"], "cs": ["c"], "mean": ["ms", "cs"], "late": ["mean", "m"]})
    assert graph.levels == {"ms": 1, "cs": 1, "mean": 2, "late": 3}
    assert graph.order == ["ms", "cs", "mean", "late"]
    graph.advance({"m": (100, False), "c": (50, True)}, {})
    assert graph.input_watermarks()["cs"] == 50 and graph.idle["cs"]
    graph.advance({"m": (200, False), "c": (50, True)}, {"ms": 150})
    # mean: console's stage is idle, so only mobile's output (min(100, 150) = 100) counts
    assert graph.input_watermarks()["mean"] == 100
    restored = StageGraph(["m", "c"], graph.upstreams)
    restored.restore(graph.snapshot())
    assert restored.snapshot() == graph.snapshot()


def test_the_games_demo_percentile_table_shows_the_trade_off():
    """Figure 3-11 on the demo's batches: lower percentiles fire no later and send no fewer records late."""
    from floodmark.apps.games_demo import demo_config, percentile_table

    config = demo_config(1)
    rows = {row["percentile"]: row for row in percentile_table(games.generate(config), config)}
    assert rows[100]["late"] == 0
    assert rows[33]["late"] >= rows[66]["late"] >= rows[100]["late"]
    assert rows[33]["late"] > 0
    for low, high in ((33, 66), (66, 100)):
        assert all(rows[low]["first"][w] <= b for w, b in rows[high]["first"].items())
    assert any(rows[33]["first"][w] < b for w, b in rows[100]["first"].items())


def lags(records: dict, config: games.GamesConfig, silent_from: int | None) -> list[tuple[int, int]]:
    """The means stage's (event-time lag, processing-time lag) after every batch, in ms; with ``silent_from``,
    console split 1 sends nothing from that batch on (and no idleness is configured: it holds its source)."""
    if silent_from is not None:
        console = records["console"]
        records = {**records, "console": console[(console["split"] != 1) | (console["batch"] < silent_from)]}
    pipeline = MicroBatchPipeline(dict.fromkeys(SOURCES, "ts"), game_stages(TimestampCombiner.END_OF_WINDOW))
    sources = {
        name: SourceWatermarks(
            WatermarkStrategy.for_bounded_out_of_orderness(5_000), periodic_interval=1, splits=["0", "1"]
        )
        for name in SOURCES
    }
    out = []
    for b in range(games.batch_count(records)):
        now = config.start_ms + (b + 1) * config.batch_ms
        inputs = {name: frame[frame["batch"] == b] for name, frame in records.items()}
        pipeline.run_batch(inputs, now)
        for name, source in sources.items():
            frame = inputs[name]
            source.on_batch(games.split_stats(frame))
            source.advance_processing_time(now)
        pipeline.end_batch({n: (s.watermark, s.idle) for n, s in sources.items()}, now)
        times = pipeline.stage_times("means", now)
        out.append((times.event_time_lag, times.processing_time_lag))
    return out


def test_stuck_and_buffering_are_told_apart_by_the_processing_time_lag():
    """Seed 003's processing-time watermark: in a normal run the means stage's processing-time lag stays
    bounded (its records wait for their 2-minute window to close, no more) while it buffers; when an upstream
    split goes silent the stage is stuck: its event-time lag and its processing-time lag both keep rising."""
    config = games.GamesConfig(duration_ms=12 * 60_000, batch_ms=20_000)
    records = games.generate(config)
    normal = lags(records, config, silent_from=None)
    stuck = lags(records, config, silent_from=12)
    steady = normal[6 : len(normal) - 6]  # after the start, before the sources run dry
    bound = WINDOW + GAP + 60_000 + 3 * config.batch_ms  # window + session gap + console delay + batches
    assert max(p for _, p in steady) <= bound
    assert max(e for e, _ in steady) <= bound
    tail = stuck[16 : len(stuck) - 6]
    assert all(b[0] > a[0] and b[1] >= a[1] for a, b in itertools.pairwise(tail)), "both lags rise"
    assert tail[-1][1] > bound and tail[-1][0] > bound


@given(
    batches=st.lists(
        st.tuples(st.integers(0, 1_000), st.integers(0, 1_000), st.none() | st.integers(0, 900)), min_size=1, max_size=6
    ),
    idle=st.booleans(),
)
def test_ending_the_sources_before_a_batch_is_advancing_with_them_at_max(batches, idle):
    """``end_sources`` after batch N: the stages reading sources get what ``advance`` would have given them after
    batch N had the sources been MAX then (the folded flush of ``Controller.begin_batch``); the stages reading
    stages keep the input watermark they had for batch N (their upstreams have not run at MAX yet), which is
    ``advance``'s too unless an upstream was idle (then ``advance`` counts it again, lower)."""
    upstreams = {"ms": ["m"], "cs": ["c"], "mean": ["ms", "cs"], "late": ["mean", "m"]}
    graph = StageGraph(["m", "c"], upstreams)
    for m, c, hold in batches[:-1]:
        graph.advance({"m": (m, False), "c": (c, idle)}, {"ms": hold, "mean": hold})
    m, c, hold = batches[-1]
    holds = {"ms": hold, "mean": hold}
    at_max = StageGraph(["m", "c"], upstreams)
    at_max.restore(graph.snapshot())
    at_max.advance({"m": (MAX_TIMESTAMP, False), "c": (MAX_TIMESTAMP, False)}, holds)
    graph.advance({"m": (m, False), "c": (c, idle)}, holds)
    before = graph.input_watermarks()
    ended = graph.end_sources()
    assert ended["ms"] == ended["cs"] == MAX_TIMESTAMP == at_max.input_watermarks()["cs"]
    assert ended["mean"] == before["mean"]
    if not idle:
        assert ended == at_max.input_watermarks()
        assert graph.snapshot() == at_max.snapshot()
