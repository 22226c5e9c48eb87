"""Seed 003 on Spark: a two-stage pipeline in one streaming query (``floodmark.spark.Pipeline``, issue 13).

Mobile and console game events (the console source lagging), per-user sessions (gap 1 min) over each,
flattened into fixed 2-minute windows computing the mean session length: *Streaming Systems* Examples
3-1..3-3, run once with END_OF_WINDOW and once with EARLIEST session timestamps. Both runs read the same
files, one per source and batch, so batch boundaries are the same; the core's ``MicroBatchPipeline`` is
the reference.
"""

from __future__ import annotations

import itertools
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from spark_helpers import read_output
from test_spark_recovery import kill_after, run_driver
from typer.testing import CliRunner

from floodmark.apps.cli import app
from floodmark.apps.games import (
    DEMO_MARKER,
    GAP_MS,
    SOURCES,
    WINDOW_MS,
    game_pipeline,
    game_stages,
    straight_means,
    write_input,
)
from floodmark.apps.games_demo import stage_lags
from floodmark.apps.live import Totals, render
from floodmark.core.pipeline import MicroBatchPipeline
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.windows import Window
from floodmark.explain.window import WindowStatus
from floodmark.simulator import games
from floodmark.spark import DiscardSink, FunctionSink, Outputs

pytestmark = pytest.mark.spark

CONFIG = games.GamesConfig(duration_ms=5 * 60_000, batch_ms=20_000)
STAGES = ("mobile_sessions", "console_sessions", "means")


@pytest.fixture(scope="module")
def game_input(tmp_path_factory):
    records = games.generate(CONFIG)
    directory = tmp_path_factory.mktemp("games")
    write_input(records, directory / "in")
    return records, directory


def run_pipeline(spark, directory, combiner: TimestampCombiner):
    """A run laid out as ``floodmark demo games`` lays out its runs (what ``floodmark explain`` reads)."""
    out = directory / combiner.name
    pipeline = game_pipeline(spark, directory / "in", combiner)
    query = pipeline.run_to_completion(str(out / "checkpoint"), str(out), timeout_s=600)
    (directory / DEMO_MARKER).write_text("")
    return query, out


@pytest.fixture(scope="module")
def runs(spark, game_input):
    _, directory = game_input
    return {c: run_pipeline(spark, directory, c) for c in (TimestampCombiner.END_OF_WINDOW, TimestampCombiner.EARLIEST)}


@pytest.mark.parametrize("combiner", [TimestampCombiner.END_OF_WINDOW, TimestampCombiner.EARLIEST])
def test_two_stage_means_equal_the_straight_computation(spark, game_input, runs, combiner):
    records, _ = game_input
    query, out = runs[combiner]
    for stage in STAGES:
        assert read_output(spark, out / stage / "late").empty, stage
        assert read_output(spark, out / stage / "dead_letter").empty, stage
    expected = straight_means(records, combiner)
    timestamp = "end" if combiner is TimestampCombiner.END_OF_WINDOW else "earliest"
    sessions = pd.concat([games.session_lengths(records[n], GAP_MS, timestamp) for n in SOURCES])
    means = read_output(spark, out / "means" / "panes")
    assert set(means["timing"]) == {"ON_TIME"}
    assert dict(zip(means["window_start"], means["mean_length"], strict=True)) == pytest.approx(expected)
    assert means["sessions"].sum() == len(sessions)
    session_panes = sum(len(read_output(spark, out / s / "panes")) for s in ("mobile_sessions", "console_sessions"))
    assert session_panes == len(sessions)
    assert sum(r.records for r in query.reports) == sum(len(f) for f in records.values())


def test_stages_writing_to_functions_and_files_give_the_same_panes_and_are_watched(spark, game_input, runs, tmp_path):
    """The first stage whose pane sink writes files runs the batch (here the last one); the others write from
    the cache, to functions. The same run is watched: its Prometheus endpoint (``start(metrics_port=0)``)
    scraped while it runs, and the live view drawn from its reports."""
    _, directory = game_input
    collected: dict[str, list[pd.DataFrame]] = {name: [] for name in STAGES}

    def keep(stage: str) -> FunctionSink:
        return FunctionSink(lambda rows, batch_id: collected[stage].append(rows.toPandas()))

    outputs = {
        "mobile_sessions": Outputs(keep("mobile_sessions"), keep("mobile_sessions"), keep("mobile_sessions")),
        "console_sessions": Outputs(keep("console_sessions"), keep("console_sessions"), keep("console_sessions")),
        "means": str(tmp_path / "means"),
    }
    pipeline = game_pipeline(spark, directory / "in", TimestampCombiner.END_OF_WINDOW)
    query = pipeline.start(str(tmp_path / "ckpt"), outputs, "0 seconds", "games", metrics_port=0)
    try:
        assert query.metrics is not None and query.metrics.url.startswith("http://127.0.0.1:")
        query.await_batches(4, timeout_s=300)
        scraped = scrape(query.metrics.url)
        seen = len(query.reports)
        query.finish_when_input_exhausted(timeout_s=600)
    finally:
        query.stop()
    _, out = runs[TimestampCombiner.END_OF_WINDOW]
    columns = ["user", "window_start", "window_end", "events", "timing"]
    for stage in ("mobile_sessions", "console_sessions"):
        expected = read_output(spark, out / stage / "panes")[columns].sort_values(columns, ignore_index=True)
        got = pd.concat(collected[stage])[columns].sort_values(columns, ignore_index=True)
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    means = read_output(spark, tmp_path / "means" / "panes")
    expected_means = read_output(spark, out / "means" / "panes")
    assert dict(zip(means["window_start"], means["mean_length"], strict=True)) == dict(
        zip(expected_means["window_start"], expected_means["mean_length"], strict=True)
    )
    assert sum(r.records for r in query.reports) == sum(
        r.records for r in runs[TimestampCombiner.END_OF_WINDOW][0].reports
    )

    assert 4 <= scraped[("floodmark_batches_total", ())] <= seen + 1
    for stage in STAGES:
        assert ("floodmark_stage_input_watermark_seconds", (("stage", stage),)) in scraped, stage
        assert (
            0
            <= scraped[("floodmark_stage_panes_total", (("stage", stage),))]
            <= query.stage_reconciliation(stage).panes
        )
    splits = {labels for name, labels in scraped if name == "floodmark_split_watermark_seconds"}
    assert splits == {(("split", label),) for label in query.reports[-1].splits}
    assert all(label.split("/")[0] in SOURCES for ((_, label),) in splits), "labelled <source>/<split>"
    with pytest.raises(OSError):
        urllib.request.urlopen(query.metrics.url, timeout=5)  # stopped with the query

    totals = Totals()
    for report in query.reports:
        totals.add(report)
    console = Console(width=200, record=True)
    console.print(render(query.reports[-1], totals, "games"))
    text = console.export_text()
    for stage in STAGES:
        (row,) = [line for line in text.splitlines() if line.startswith(f"│ {stage} ")]
        assert f"{totals.stages[stage].panes:,}" in row, row


def test_intermediate_panes_can_go_unwritten_and_the_last_stage_is_the_same(spark, game_input, runs, tmp_path):
    """``Outputs.files(root, panes=False)`` for the session stages: no pane files and no write for them (the means
    stage's pane write runs the batch), the same means, and their reports still count their panes."""
    _, directory = game_input
    outputs = {
        "mobile_sessions": Outputs.files(str(tmp_path / "mobile_sessions"), panes=False),
        "console_sessions": Outputs.files(str(tmp_path / "console_sessions"), panes=False),
        "means": str(tmp_path / "means"),
    }
    pipeline = game_pipeline(spark, directory / "in", TimestampCombiner.END_OF_WINDOW)
    query = pipeline.run_to_completion(str(tmp_path / "ckpt"), outputs, timeout_s=600)
    _, out = runs[TimestampCombiner.END_OF_WINDOW]
    assert (
        not (tmp_path / "mobile_sessions" / "panes").exists() and not (tmp_path / "console_sessions" / "panes").exists()
    )
    means, expected = read_output(spark, tmp_path / "means" / "panes"), read_output(spark, out / "means" / "panes")
    assert dict(zip(means["window_start"], means["mean_length"], strict=True)) == dict(
        zip(expected["window_start"], expected["mean_length"], strict=True)
    )
    for stage in ("mobile_sessions", "console_sessions"):
        assert sum(r.stages[stage].panes for r in query.reports) == len(read_output(spark, out / stage / "panes"))
    with pytest.raises(ValueError, match="cannot be discarded"):
        Outputs(DiscardSink(), DiscardSink(), FunctionSink(lambda rows, batch_id: None))


def test_stage_watermarks_propagate_and_earliest_holds_the_mean_stage_back(runs):
    inputs = {}
    for combiner, (query, _) in runs.items():
        previous = None
        for report in query.reports:
            stages = report.stages
            assert stages["means"].next_input_watermark == max(
                stages["means"].input_watermark,
                min(stages["mobile_sessions"].output_watermark, stages["console_sessions"].output_watermark),
            )
            for name, stage in stages.items():
                assert stage.output_watermark <= stage.input_watermark, (combiner, report.batch_id, name)
                if previous is not None:
                    assert stage.input_watermark >= previous[name].input_watermark
                    assert stage.output_watermark >= previous[name].output_watermark
            previous = stages
        # At each batch that read input: both runs read the same files, one per source and batch, so these are
        # the same points of the input. A batch without input (a tick the driver asked for when something came
        # due in processing time) can come between them in one run and not the other (seen once in CI: 29
        # batches against 28).
        inputs[combiner] = [r.stages["means"].input_watermark for r in query.reports if r.records]
    eow, earliest = inputs[TimestampCombiner.END_OF_WINDOW], inputs[TimestampCombiner.EARLIEST]
    assert len(eow) == len(earliest) > 0
    assert all(e <= w for e, w in zip(earliest, eow, strict=True))
    assert any(e < w < MAX_TIMESTAMP for e, w in zip(earliest, eow, strict=True)), "EARLIEST holds the means back"


def test_every_stage_reconciles_and_explains(spark, game_input, runs):
    """Each stage's input is its sources' rows or its upstream stages' panes, and every one of them reached a
    window or the late output; a stage reading a source explains a key's window from that source's splits, the
    means stage from its upstream stages (with EARLIEST, sessions still open hold it back by their panes), and
    a pipeline's definition explains the same from the checkpoint after the query stopped."""
    records, directory = game_input
    query, out = runs[TimestampCombiner.END_OF_WINDOW]
    panes = {stage: read_output(spark, out / stage / "panes") for stage in STAGES}
    for source in SOURCES:
        stage = query.stage_reconciliation(f"{source}_sessions")
        assert (stage.input_rows, stage.dead_letters) == (len(records[source]), 0), stage.describe()
        assert stage.window_pairs == stage.records == stage.in_windows, "sessions: one window per record, none late"
        assert stage.panes == len(panes[f"{source}_sessions"])
    means = query.stage_reconciliation("means")
    assert means.input_rows == len(panes["mobile_sessions"]) + len(panes["console_sessions"]), means.describe()
    assert means.window_pairs == means.records == means.input_rows and means.panes == len(panes["means"])
    whole = query.reconciliation
    assert whole.records == sum(len(f) for f in records.values()) and whole.dead_letters == 0

    session = panes["mobile_sessions"].iloc[0]
    explanation = query.explain(
        session["user"], Window(session["window_start"], session["window_end"]), "mobile_sessions"
    )
    assert explanation.operator_watermark == MAX_TIMESTAMP, "the last batch ran with the end of input"
    assert explanation.status is WindowStatus.EXPIRED, explanation.text()  # fired; no allowed lateness
    assert explanation.combined_watermark == query.controller.watermarks_at(source="mobile").watermark
    with pytest.raises(ValueError, match="say which one"):
        query.explain(session["user"], Window(0, 60_000))
    means = query.explain(None, Window(0, WINDOW_MS), "means")
    assert means.status is WindowStatus.EXPIRED and not means.splits, means.text()
    assert {u.name for u in means.upstreams} == {"mobile_sessions", "console_sessions"}

    early, early_out = runs[TimestampCombiner.EARLIEST]
    definition = game_pipeline(spark, directory / "in", TimestampCombiner.EARLIEST)
    held_by_panes = []
    cli_checked = False
    for report in early.reports:
        watermark = report.stages["means"].next_input_watermark
        if not 0 <= watermark < MAX_TIMESTAMP:
            continue
        window = Window(watermark // WINDOW_MS * WINDOW_MS, watermark // WINDOW_MS * WINDOW_MS + WINDOW_MS)
        explanation = early.explain(None, window, "means", batch=report.batch_id)
        # DUE only if the watermark sits on the window's last millisecond.
        assert explanation.status in (WindowStatus.WAITING_FOR_WATERMARK, WindowStatus.DUE), explanation.text()
        assert explanation.combined_watermark == watermark
        checkpoint = str(early_out / "checkpoint")
        assert definition.explain(checkpoint, None, window, "means", report.batch_id) == explanation
        holders = [u.name for u in explanation.upstreams if u.held_by_panes and u.watermark == watermark]
        if holders and not cli_checked:  # floodmark explain on the run's files says the same
            args = ["explain", str(early_out), "--stage", "means", "--window-start", str(window.start)]
            result = CliRunner().invoke(app, [*args, "--batch", str(report.batch_id)])
            assert result.exit_code == 0, result.output
            assert f"as of the end of batch {report.batch_id}:" in result.output and "Upstreams:" in result.output
            assert f"upstream stage {holders[0]!r} holds the input watermark" in " ".join(result.output.split())
            cli_checked = True
        held_by_panes += holders
    assert held_by_panes, "with EARLIEST an open session's pane holds the means stage at some batch"


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """``{(sample name, ((label, value), ...) without the query label): value}`` of a Prometheus endpoint."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "query"))
            assert sample.labels.get("query") == "games"
            samples[(sample.name, labels)] = sample.value
    return samples


@pytest.mark.parametrize("combiner", [TimestampCombiner.END_OF_WINDOW, TimestampCombiner.EARLIEST])
def test_spark_pipeline_equals_the_core_reference(spark, game_input, runs, combiner):
    """The same batches through the core's MicroBatchPipeline, with the source watermarks the Spark run's
    driver computed: every stage's panes, with their batch, are the same."""
    records, _ = game_input
    query, out = runs[combiner]
    reference = MicroBatchPipeline(dict.fromkeys(SOURCES, "ts"), game_stages(combiner))
    controller = query.controller
    pane_batches: dict[str, list[int]] = {name: [] for name in reference.stages}
    for report in query.reports:
        b = report.batch_id
        emitted = reference.run_batch({n: f[f["batch"] == b] for n, f in records.items()}, report.processing_time)
        for name, e in emitted.items():
            pane_batches[name] += [b] * e.pane_count()
        sources, _ = controller._graph(controller.entry_for_batch(b + 1))
        ended = controller.entry_for_batch(b + 1).end_of_input
        reference.end_batch({n: (MAX_TIMESTAMP, False) if ended else (s.watermark, s.idle) for n, s in sources.items()})
        assert reference.graph.input_watermarks() == controller.entry_for_batch(b + 1).stage_watermarks, b
    for name, stage in reference.stages.items():
        panes = reference.results[name].emitted.all_panes()
        expected = sorted(
            (b, str(p.key), p.window.start, p.window.end, p.timestamp, p.timing.value, *p.value.values())
            for b, p in zip(pane_batches[name], panes, strict=True)
        )
        got = read_output(spark, out / name / "panes")
        keys = got[stage.key_by[0]].astype(str) if stage.key_by else pd.Series(["None"] * len(got))
        actual = sorted(
            zip(
                got["batch_id"],
                keys,
                got["window_start"],
                got["window_end"],
                got["pane_timestamp"],
                got["timing"],
                *(got[c] for c in stage.result_names),
                strict=True,
            )
        )
        assert len(actual) == len(expected), name
        for a, e in zip(actual, expected, strict=True):
            assert a[:6] == e[:6] and a[6:] == pytest.approx(e[6:]), (name, a, e)


PIPELINE_DRIVER = Path(__file__).with_name("pipeline_driver.py")


def stage_outputs(spark, root: Path) -> dict[str, list]:
    """Every stage's panes without batch ids (a restart may cut batches differently), sorted."""
    out = {}
    for stage in STAGES:
        panes = read_output(spark, root / stage / "panes")
        out[stage] = sorted(map(tuple, panes.drop(columns=["batch_id"]).astype(str).values.tolist()))
    return out


def test_kill_minus_nine_during_a_two_stage_run_loses_and_repeats_nothing(spark, game_input, runs):
    """The driver is killed with -9 mid-stream and started again: every stage's outputs equal the
    uninterrupted run's (the END_OF_WINDOW run above)."""
    _, directory = game_input
    crash = directory / "crash"
    args = (directory / "in", crash / "ckpt", crash / "out", "END_OF_WINDOW")
    killed_after = kill_after(crash / "ckpt", 6, *args, script=PIPELINE_DRIVER)
    assert killed_after < len(runs[TimestampCombiner.END_OF_WINDOW][0].reports), "killed in the middle of the run"
    second = run_driver(*args, script=PIPELINE_DRIVER)
    assert second.wait(timeout=600) == 0
    _, reference = runs[TimestampCombiner.END_OF_WINDOW]
    assert stage_outputs(spark, crash / "out") == stage_outputs(spark, reference)


def test_a_stuck_stage_is_told_from_a_buffering_one(spark, game_input, runs):
    """Seed 003's processing-time watermark on Spark: console split 1 goes silent after batch 6 (no
    idleness: it holds the console source back), so the means stage stops firing: its event-time and
    processing-time lags both rise until the end of input. In the normal run (above) its processing-time
    lag stays within a window, a session gap and the console's delay."""
    records, directory = game_input
    console = records["console"]
    silent = {**records, "console": console[(console["split"] != 1) | (console["batch"] < 6)]}
    write_input(silent, directory / "silent")
    query = game_pipeline(spark, directory / "silent", TimestampCombiner.END_OF_WINDOW).run_to_completion(
        str(directory / "stuck" / "ckpt"), str(directory / "stuck" / "out"), timeout_s=600
    )
    ending = next(i for i, r in enumerate(query.reports) if r.next_watermark == MAX_TIMESTAMP)
    stuck = stage_lags(query.reports[:ending], CONFIG)["means"]
    normal = stage_lags(runs[TimestampCombiner.END_OF_WINDOW][0].reports[:ending], CONFIG)["means"]
    # A record waits in the means stage for its 2-minute window, whose end waits for the sessions before it
    # (a gap): at most WINDOW + GAP of processing time while the stage buffers (the core gives 160 s here).
    processing_bound, event_bound = WINDOW_MS + GAP_MS, WINDOW_MS + GAP_MS + 20_000
    steady = slice(4, ending - 5)  # after the start, before the sources run dry
    assert np.nanmax(normal[1][steady]) <= processing_bound and np.nanmax(normal[0][steady]) <= event_bound
    tail = slice(10, ending)
    event, processing = stuck[0][tail], stuck[1][tail]
    assert all(b > a for a, b in itertools.pairwise(event)), event
    assert all(b >= a for a, b in itertools.pairwise(processing)), processing
    assert processing[-1] > processing_bound and event[-1] > event_bound

    # Why the means stage's next window waits: the console sessions, behind their input, the console source,
    # which the silent split holds.
    watermark = query.reports[ending - 1].stages["means"].next_input_watermark
    start = watermark // WINDOW_MS * WINDOW_MS
    explanation = query.explain(
        None, Window(start, start + WINDOW_MS), "means", batch=query.reports[ending - 1].batch_id
    )
    assert explanation.upstreams[0].name == "console_sessions", explanation.text()
    assert "upstream stage 'console_sessions' holds the input watermark" in explanation.reason
    console_window = query.explain(
        None, Window(start, start + WINDOW_MS), "console_sessions", batch=query.reports[ending - 1].batch_id
    )
    assert "1" in {s.split.split("/")[-1] for s in console_window.holding_splits}, console_window.text()
