"""The clickstream simulator as a Spark streaming source: offsets, pacing, and a real query that reads exactly
what :func:`generate` says (paced run, stopped, restarted from its checkpoint under AvailableNow)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from floodmark.apps.clickstream_source import (
    ClickstreamSource,
    ClickstreamStreamReader,
    TickRange,
    parse_source_options,
    read_clickstream,
)
from floodmark.simulator import ClickstreamConfig, generate, generate_tick

CONFIG = ClickstreamConfig(
    seed=11,
    splits=3,
    records_per_tick_per_split=30,
    ticks=16,
    idle_split=1,
    idle_from_tick=6,
    late_burst_tick=9,
    late_burst_records=7,
    bad_records_per_tick=1,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reader_offsets_follow_the_injected_clock():
    clock = FakeClock()
    reader = ClickstreamStreamReader(CONFIG, ticks_per_second=2.0, clock=clock)
    start = reader.initialOffset()
    assert start == {"tick": -1}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"tick": 0}
    clock.now += 1.0
    assert reader.latestOffset({"tick": 0}, ReadAllAvailable()) == {"tick": 2}
    clock.now += 100.0
    assert reader.latestOffset({"tick": 2}, ReadAllAvailable()) == {"tick": 15}, "bounded: the last tick"
    assert reader.latestOffset({"tick": 15}, ReadAllAvailable()) == {"tick": 15}
    # 94 records per tick before the idle split stops: a limit of 200 rows takes two ticks at a time.
    assert reader.latestOffset({"tick": 2}, ReadMaxRows(200)) == {"tick": 4}

    restarted = ClickstreamStreamReader(CONFIG, ticks_per_second=2.0, clock=clock)
    assert restarted.latestOffset({"tick": 7}, ReadAllAvailable()) == {"tick": 8}, "continues from its offset"
    now = ClickstreamStreamReader(CONFIG, ticks_per_second=0.001, clock=clock)
    now.prepareForTriggerAvailableNow()
    assert now.latestOffset({"tick": 3}, ReadAllAvailable()) == {"tick": 15}, "AvailableNow: no pacing"
    assert now.getDefaultReadLimit() == ReadAllAvailable()
    assert ClickstreamStreamReader(CONFIG, 1.0, 50).getDefaultReadLimit() == ReadMaxRows(50)


def test_reader_partitions_and_read():
    reader = ClickstreamStreamReader(CONFIG, clock=FakeClock())
    assert reader.partitions({"tick": 4}, {"tick": 4}) == []
    parts = reader.partitions({"tick": 4}, {"tick": 7})
    assert [(p.split, p.start_tick, p.end_tick) for p in parts] == [(s, 4, 7) for s in range(CONFIG.splits)]
    batches = list(reader.read(TickRange(0, 4, 7)))
    read = pd.concat([b.to_pandas() for b in batches], ignore_index=True)
    expected = pd.concat([generate_tick(CONFIG, 0, t) for t in (5, 6, 7)], ignore_index=True)
    assert read["id"].tolist() == expected["id"].tolist()
    assert read["ts"].isna().tolist() == expected["ts"].isna().tolist()
    assert list(reader.read(TickRange(1, 6, 9))) == [], "the idle split reads nothing"


def test_source_options():
    config, rate, cap = parse_source_options({**CONFIG.as_options(), "ticks_per_second": "inf"})
    assert (config, rate, cap) == (CONFIG, float("inf"), None)
    assert parse_source_options({"seed": "1", "Max_Records_Per_Batch": "10"})[2] == 10
    for options, message in [
        ({"seed": "1", "ticks_per_second": "0"}, "'ticks_per_second' must be > 0"),
        ({"seed": "1", "ticks_per_second": "fast"}, "'ticks_per_second' must be a number"),
        ({"seed": "1", "max_records_per_batch": "0"}, "'max_records_per_batch' must be >= 1"),
        ({"seed": "1", "rate": "3"}, "unknown clickstream option 'rate'"),
        ({"seed": "x"}, "option 'seed' must be an integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_source_options(options)


def test_bad_option_fails_at_load(spark):
    spark.dataSource.register(ClickstreamSource)
    with pytest.raises(Exception, match="unknown clickstream option 'splitz'"):
        spark.readStream.format("floodmark_clickstream").options(seed="1", splitz="3").load()


def _end_tick(progress: dict | None) -> int:
    if not progress or not progress["sources"][0]["endOffset"]:
        return -1
    offset = progress["sources"][0]["endOffset"]
    return int((offset if isinstance(offset, dict) else json.loads(offset))["tick"])


def test_paced_stream_then_restart_reads_exactly_the_generated_records(spark, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    paced = (
        read_clickstream(spark, CONFIG, ticks_per_second=1.0)
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    deadline = time.monotonic() + 60
    while _end_tick(paced.lastProgress) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    paced.stop()
    first_run = [p for p in paced.recentProgress if p["numInputRows"] > 0]
    assert first_run, "the paced query read nothing"
    stopped_at = _end_tick(first_run[-1])
    assert 0 <= stopped_at < CONFIG.ticks - 1, "stopped before the end (else the restart proves little)"

    rest = (
        read_clickstream(spark, CONFIG, ticks_per_second=float("inf"), max_records_per_batch=150)
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert rest.awaitTermination(60)
    second_run = [p for p in rest.recentProgress if p["numInputRows"] > 0]
    assert _end_tick(second_run[-1]) == CONFIG.ticks - 1
    assert max(p["numInputRows"] for p in second_run) <= 150

    got = spark.read.parquet(out).toPandas().sort_values("id", ignore_index=True)
    expected = generate(CONFIG).sort_values("id", ignore_index=True)
    assert got["id"].is_unique, "a replayed or restarted batch duplicated records"
    assert got["id"].tolist() == expected["id"].tolist(), "records missing or invented"
    assert got["ts"].isna().tolist() == expected["ts"].isna().tolist()
    good = expected["ts"].notna().to_numpy()
    assert np.array_equal(got["ts"][good].astype(np.int64), expected["ts"][good].astype(np.int64))
    for column in ("channel", "behavior", "split"):
        assert got[column].tolist() == expected[column].tolist()
