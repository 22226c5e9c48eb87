"""The clickstream simulator (seed 001 with seed 000's idle split): pure, fast, no Spark."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.simulator import (
    BEHAVIORS,
    CHANNELS,
    COLUMNS,
    DEMO_TICKS_PER_SECOND,
    ClickstreamConfig,
    generate,
    generate_tick,
    limit_end_tick,
    paced_latest_tick,
    straight_counts,
    tick_processing_time,
    tick_record_count,
)

SMALL = ClickstreamConfig(
    seed=7,
    splits=3,
    records_per_tick_per_split=40,
    tick_ms=5_000,
    ticks=20,
    jitter_ms=30_000,
    idle_split=2,
    idle_from_tick=12,
    late_burst_tick=15,
    late_burst_records=11,
    late_burst_age_ms=400_000,
    bad_records_per_tick=2,
)


@st.composite
def configs(draw) -> ClickstreamConfig:
    splits = draw(st.integers(1, 5))
    ticks = draw(st.integers(1, 12))
    idle = draw(st.booleans())
    idle_split = draw(st.integers(0, splits - 1)) if idle else None
    idle_from = draw(st.integers(0, ticks + 2)) if idle else None
    burst_tick = draw(st.one_of(st.none(), st.integers(0, ticks - 1)))
    if burst_tick is not None and splits == 1 and idle and burst_tick >= idle_from:
        burst_tick = None
    return ClickstreamConfig(
        seed=draw(st.integers(0, 2**32)),
        splits=splits,
        records_per_tick_per_split=draw(st.integers(0, 30)),
        tick_ms=draw(st.integers(1, 20_000)),
        ticks=ticks,
        start_ms=draw(st.integers(0, 2 * 10**12)),
        source_lateness_ms=draw(st.integers(0, 300_000)),
        jitter_ms=draw(st.integers(0, 60_000)),
        idle_split=idle_split,
        idle_from_tick=idle_from,
        late_burst_tick=burst_tick,
        late_burst_records=draw(st.integers(1, 20)) if burst_tick is not None else 0,
        late_burst_age_ms=draw(st.integers(0, 900_000)),
        bad_records_per_tick=draw(st.integers(0, 4)),
    )


def _regular_and_burst(config: ClickstreamConfig, frame: pd.DataFrame, split: int, tick: int):
    """(regular, burst, bad) parts of one (split, tick) frame, by position (regular first, then burst, then bad)."""
    regular = config.records_per_tick_per_split if config.is_producing(split, tick) else 0
    good = frame[frame["ts"].notna()]
    return good.iloc[:regular], good.iloc[regular:], frame[frame["ts"].isna()]


def test_columns_and_dtypes():
    frame = generate_tick(SMALL, 0, 0)
    assert tuple(frame.columns) == COLUMNS
    assert str(frame["ts"].dtype) == "Int64"  # nullable: the config has bad records
    assert frame["id"].dtype == np.int64 and frame["split"].dtype == np.int32
    assert set(frame["channel"]) <= set(CHANNELS) and set(frame["behavior"]) <= set(BEHAVIORS)
    clean = dataclasses.replace(SMALL, bad_records_per_tick=0)
    assert generate_tick(clean, 0, 0)["ts"].dtype == np.int64


def test_deterministic_regardless_of_call_order():
    forwards = {(s, t): generate_tick(SMALL, s, t) for t in range(SMALL.ticks) for s in range(SMALL.splits)}
    backwards = {(s, t): generate_tick(SMALL, s, t) for t in reversed(range(SMALL.ticks)) for s in (2, 0, 1)}
    for key, frame in forwards.items():
        pd.testing.assert_frame_equal(frame, backwards[key])
    pd.testing.assert_frame_equal(generate(SMALL), generate(SMALL))
    other_seed = generate(dataclasses.replace(SMALL, seed=8))
    assert not generate(SMALL)["ts"].equals(other_seed["ts"])


def test_counts_per_tick_idle_burst_and_bad():
    for tick in range(SMALL.ticks):
        frames = [generate_tick(SMALL, split, tick) for split in range(SMALL.splits)]
        producing = 3 if tick < 12 else 2
        burst = 11 if tick == 15 else 0
        assert sum(len(f) for f in frames) == producing * 40 + burst + 2 == tick_record_count(SMALL, tick)
        assert sum(int(f["ts"].isna().sum()) for f in frames) == 2
        if tick >= 12:
            assert frames[2].empty, "the idle split produces nothing from idle_from_tick on, bad records included"
        for split, frame in enumerate(frames):
            assert len(frame) == tick_record_count(SMALL, tick, split)
            assert (frame["split"] == split).all()


def test_burst_spread_over_producing_splits():
    sizes = [len(_regular_and_burst(SMALL, generate_tick(SMALL, s, 15), s, 15)[1]) for s in range(3)]
    assert sorted(sizes) == [0, 5, 6]  # split 2 is idle at tick 15; 11 records over splits 0 and 1


def test_ids_unique_over_the_run():
    frame = generate(ClickstreamConfig.demo(), ticks=40)
    assert frame["id"].is_unique
    assert generate(SMALL)["id"].is_unique


@settings(max_examples=60, deadline=None)
@given(configs())
def test_timestamp_bounds_and_accounting(config: ClickstreamConfig):
    total = 0
    ids = []
    for tick in range(config.ticks):
        ptime = tick_processing_time(config, tick)
        newest = ptime - config.source_lateness_ms
        for split in range(config.splits):
            frame = generate_tick(config, split, tick)
            total += len(frame)
            ids.append(frame["id"].to_numpy())
            regular, burst, bad = _regular_and_burst(config, frame, split, tick)
            if not config.is_producing(split, tick):
                assert frame.empty
                continue
            ts = regular["ts"].to_numpy(dtype=np.int64)
            assert len(ts) == config.records_per_tick_per_split
            assert ((ts >= newest - config.jitter_ms) & (ts <= newest)).all()
            burst_ts = burst["ts"].to_numpy(dtype=np.int64)
            assert (burst_ts <= newest - config.late_burst_age_ms).all()
            assert (burst_ts >= newest - config.late_burst_age_ms - config.jitter_ms).all()
            if tick != config.late_burst_tick:
                assert burst.empty
            assert len(bad) == frame["ts"].isna().sum()
    everything = generate(config)
    assert len(everything) == total == sum(tick_record_count(config, t) for t in range(config.ticks))
    assert np.array_equal(np.sort(np.concatenate(ids)), np.sort(everything["id"].to_numpy()))
    assert everything["id"].is_unique
    assert int(everything["ts"].isna().sum()) == sum(
        min(1, len(config.producing_splits(t))) * config.bad_records_per_tick for t in range(config.ticks)
    )
    assert len(everything) - everything["ts"].isna().sum() == config.late_burst_records + sum(
        config.records_per_tick_per_split * len(config.producing_splits(t)) for t in range(config.ticks)
    )


def test_generate_subsets_of_ticks():
    assert len(generate(SMALL, ticks=0)) == 0
    assert tuple(generate(SMALL, ticks=0).columns) == COLUMNS
    pd.testing.assert_frame_equal(generate(SMALL, ticks=5), generate(SMALL, ticks=range(5)))
    picked = generate(SMALL, ticks=[3, 15])
    assert len(picked) == tick_record_count(SMALL, 3) + tick_record_count(SMALL, 15)


def test_straight_counts_against_a_manual_count():
    frame = generate(SMALL)
    counts = straight_counts(frame)
    good = frame.dropna(subset=["ts"])
    assert counts["count"].sum() == len(good)
    assert list(counts.columns) == ["window_start", "channel", "behavior", "count"]
    assert (counts["window_start"] % 60_000 == 0).all()
    row = counts.iloc[len(counts) // 2]
    ts = good["ts"].astype(np.int64)
    manual = (
        (ts >= row.window_start)
        & (ts < row.window_start + 60_000)
        & (good["channel"] == row.channel)
        & (good["behavior"] == row.behavior)
    ).sum()
    assert manual == row["count"]
    tiny = pd.DataFrame(
        {"ts": pd.array([59_999, 60_000, -1, None], dtype="Int64"), "channel": list("aaaa"), "behavior": ["X"] * 4}
    )
    assert straight_counts(tiny)[["window_start", "count"]].values.tolist() == [[-60_000, 1], [0, 1], [60_000, 1]]


def test_demo_config():
    demo = ClickstreamConfig.demo()
    assert demo.splits == 4 and demo.seed == 1 and demo.idle_split == 3
    event_minutes = demo.ticks * demo.tick_ms / 60_000
    assert 15 <= event_minutes <= 20
    assert 1_000 <= tick_record_count(demo, 0) <= 2_000
    assert 0.5 <= demo.idle_from_tick / demo.ticks <= 0.7
    assert 45 <= demo.ticks / DEMO_TICKS_PER_SECOND <= 60, "the demo should run in about a minute"


def test_options_round_trip():
    for config in (SMALL, ClickstreamConfig.demo(), ClickstreamConfig(seed=3)):
        options = config.as_options()
        assert all(isinstance(v, str) for v in options.values())
        assert ClickstreamConfig.from_options(options) == config
    assert "idle_split" not in ClickstreamConfig(seed=3).as_options()
    assert ClickstreamConfig.from_options({"SEED": "4", "idle_split": "None", "idle_from_tick": ""}).seed == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"splits": 0}, "splits must be >= 1"),
        ({"ticks": 0}, "ticks must be >= 1"),
        ({"tick_ms": 0}, "tick_ms must be >= 1"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"jitter_ms": -5}, "jitter_ms must be >= 0"),
        ({"records_per_tick_per_split": 2.5}, "records_per_tick_per_split must be an integer"),
        ({"splits": True}, "splits must be an integer"),
        ({"idle_split": 1}, "idle_split and idle_from_tick must be given together"),
        ({"idle_split": 4, "idle_from_tick": 0}, r"idle_split must be a split in 0\.\.3"),
        ({"late_burst_records": 5}, "late_burst_records > 0 needs late_burst_tick"),
        ({"late_burst_tick": 3}, "late_burst_records is 0"),
        ({"late_burst_tick": 10, "late_burst_records": 1, "ticks": 10}, r"late_burst_tick must be a tick in 0\.\.9"),
        (
            {"splits": 1, "idle_split": 0, "idle_from_tick": 2, "late_burst_tick": 5, "late_burst_records": 1},
            "no split produces at late_burst_tick 5",
        ),
    ],
)
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ClickstreamConfig(**{"seed": 1, **kwargs})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"splits": "4"}, "'seed' is required"),
        ({"seed": "1", "splits": "four"}, "option 'splits' must be an integer, got 'four'"),
        ({"seed": "1", "split": "4"}, "unknown clickstream option 'split'"),
        ({"seed": "1", "ticks": "None"}, "option 'ticks' must be an integer"),
        ({"seed": "1", "ticks": "0"}, "ticks must be >= 1"),
    ],
)
def test_option_errors(options, message):
    with pytest.raises(ValueError, match=message):
        ClickstreamConfig.from_options(options)


def test_generate_tick_refuses_out_of_range():
    with pytest.raises(ValueError, match="split must be in"):
        generate_tick(SMALL, 3, 0)
    with pytest.raises(ValueError, match="tick must be in"):
        generate_tick(SMALL, 0, SMALL.ticks)


def test_pacing():
    config = ClickstreamConfig(seed=1, ticks=10)
    assert paced_latest_tick(config, -1, 0.0, 2.0) == 0  # the next tick is available at once
    assert paced_latest_tick(config, -1, 0.49, 2.0) == 0
    assert paced_latest_tick(config, -1, 0.5, 2.0) == 1
    assert paced_latest_tick(config, 4, 1.0, 2.0) == 7  # a restarted reader continues from its offset
    assert paced_latest_tick(config, -1, 100.0, 2.0) == 9  # bounded: stays at the last tick
    assert paced_latest_tick(config, -1, 0.0, float("inf")) == 9
    assert paced_latest_tick(config, 9, 5.0, 2.0) == 9


def test_limit_end_tick():
    config = ClickstreamConfig(seed=1, splits=2, records_per_tick_per_split=10, ticks=10)  # 20 records per tick
    assert limit_end_tick(config, -1, 9, 60) == 2
    assert limit_end_tick(config, -1, 9, 59) == 1
    assert limit_end_tick(config, -1, 9, 5) == 0, "one tick is never split"
    assert limit_end_tick(config, 3, 5, 1_000) == 5
    assert limit_end_tick(config, 5, 5, 10) == 5
