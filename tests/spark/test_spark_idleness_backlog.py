"""Idle only when caught up, on Spark: a split with records or files still unread is never idle, a caught-up silent
one is (the core's rule: tests/core/test_idleness_backlog.py)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pytest

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.apps.outputs import read_output
from floodmark.spark import EventTimeAggregation, SourceTime, read_files_in_order

pytestmark = pytest.mark.spark

SECOND = 1_000
GATEWAYS, FILES, PER_FILE = ("g1", "g2"), 6, 50


def _write_history(root: Path) -> int:
    """Two gateways' uploads over the same hour, a folder each: read in path order, every file of ``g1`` comes
    before any of ``g2``. Each file: 50 records, 10 s apart, the gateway's name in the record too."""
    for gateway in GATEWAYS:
        folder = root / f"gateway={gateway}"
        folder.mkdir(parents=True)
        for f in range(FILES):
            lines = [
                json.dumps({"ts": (f * PER_FILE + i) * 10 * SECOND, "gw": gateway, "device": f"d{i % 5}"})
                for i in range(PER_FILE)
            ]
            (folder / f"{f:04d}.jsonl").write_text("\n".join(lines) + "\n")
    return len(GATEWAYS) * FILES * PER_FILE


def _replay(spark, root: Path, out: Path, split: str):
    """Counts per device and minute, one file per batch, idle after 300 ms without records."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5)).with_idleness(300)
    events = read_files_in_order(spark, root, order="path", files_per_batch=1)
    return EventTimeAggregation(
        events,
        event_time="ts",
        key_by="device",
        spec=WindowSpec(windows.Tumbling(timedelta(minutes=1)), {"count": aggregates.count()}),
        time=SourceTime(strategy, split=split, known_splits=GATEWAYS),
    ).run_to_completion(str(out / "ckpt"), str(out / "out"), trigger_interval="100 milliseconds", timeout_s=600)


def test_a_gateway_whose_files_come_later_in_the_order_is_never_idle(spark, tmp_path):
    """Split by the folder, ``g2`` has files unread until the last six batches: it holds the watermark back, and
    nothing is late. Split by the same value read from the records (the source cannot say which files hold
    which split: the timeout alone decides), ``g2`` goes idle while ``g1`` is read and its records come late."""
    produced = _write_history(tmp_path / "history")
    runs = {split: _replay(spark, tmp_path / "history", tmp_path / split, split) for split in ("gateway", "gw")}
    folder, column = runs["gateway"].reports, runs["gw"].reports
    late = {split: sum(r.late for r in query.reports) for split, query in runs.items()}
    print(f"\nlate records: {late['gateway']} split by folder, {late['gw']} by the timeout alone (of {produced})")
    assert late["gateway"] == 0
    assert late["gw"] > 0, "the baseline: the timeout alone makes g2 idle while g1's files are read"
    behind = [r.split_backlog.get("g2") for r in folder if r.split_records.get("g1")]
    assert behind and all(b and b > 0 for b in behind), "g2 was behind while g1 was read"
    assert not any(idle for r in folder for split, (_, idle) in r.splits.items() if r.split_backlog.get(split))
    assert all(not r.split_backlog for r in column), "a split read from the records: the source does not say"
    panes = read_output(tmp_path / "gateway" / "out", "panes")
    assert sum(panes["count"]) == produced


KAFKA_SCHEMA = "ts LONG, device STRING"


def _counts(source, idleness=500):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5)).with_idleness(idleness)
    return EventTimeAggregation(
        source,
        event_time="ts",
        key_by="device",
        spec=WindowSpec(windows.Tumbling(timedelta(minutes=1)), {"count": aggregates.count()}),
        time=SourceTime(strategy, split="partition", known_splits=["0", "1", "2"]),
    )


def test_a_throttled_partition_is_behind_never_idle_and_a_caught_up_silent_one_is_idle(spark, kafka_broker, tmp_path):
    """Partition 0 holds ten minutes of history, read 40 records a batch (``maxOffsetsPerTrigger`` shared by
    backlog); partition 1 an hour later, a few records; partition 2 is known and silent. Read through
    ``read_kafka``, partition 0 is behind (its unread records counted) and never idle until it has caught up,
    partition 2 is idle (caught up) and stops holding the watermark back, and no record is late. The baseline,
    Spark's Kafka source read directly (floodmark cannot know what is unread: the timeout alone): Spark's rate limit
    gives every partition with a backlog at least one record a batch, so it never goes silent there either."""
    from pyspark.sql import functions as F

    from floodmark.spark import read_kafka

    topic = "throttled"
    kafka_broker.create_topic(topic, partitions=3)
    history = [json.dumps({"ts": s * SECOND, "device": f"d{s % 4}"}) for s in range(600)]
    produced = kafka_broker.produce(topic, history, partition=0)
    ahead = [json.dumps({"ts": (3_600 + s) * SECOND, "device": "d9"}) for s in range(10)]
    produced += kafka_broker.produce(topic, ahead, partition=1)
    options = {"maxOffsetsPerTrigger": "40"}
    servers = kafka_broker.bootstrap_servers
    told = _counts(read_kafka(spark, servers, topic, schema=KAFKA_SCHEMA, options=options))
    told_run = told.run_to_completion(str(tmp_path / "told"), str(tmp_path / "told-out"), timeout_s=600)
    plain = spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers).option("subscribe", topic)
    plain = plain.option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "40").load()
    parsed = plain.select(F.from_json(F.col("value").cast("string"), KAFKA_SCHEMA).alias("v"), "partition")
    baseline = _counts(parsed.select("v.*", "partition"))
    baseline_run = baseline.run_to_completion(str(tmp_path / "base"), str(tmp_path / "base-out"), timeout_s=600)

    reports = told_run.reports
    late = {"told": sum(r.late for r in reports), "baseline": sum(r.late for r in baseline_run.reports)}
    print(f"\nlate records: {late} of {produced}; batches {len(reports)} and {len(baseline_run.reports)}")
    assert late["told"] == 0
    reading = [r for r in reports if r.split_records.get("0")]
    assert len(reading) >= 10 and all(r.split_records["0"] <= 40 for r in reading)
    behind = [r for r in reading if r.split_backlog.get("0")]
    assert len(behind) >= len(reading) - 1, "partition 0 is behind in every batch but its last"
    assert not any(r.splits["0"][1] for r in behind), "a partition with unread records is never idle"
    assert any(r.splits["2"][1] and r.split_backlog.get("2") == 0 for r in reports), "2: caught up, silent: idle"
    assert all(not r.split_backlog for r in baseline_run.reports), "Spark's own source read directly does not say"
    panes = read_output(tmp_path / "told-out", "panes")
    assert sum(panes["count"]) == produced


def test_with_idleness_that_advances_the_last_window_fires_when_input_stops(spark, tmp_path):
    """A running query (not a bounded run: nothing ends its input) whose source goes quiet: with
    ``with_idleness(500 ms, advance=True)`` the watermark goes on with processing time once the split is idle, and the
    last window fires without another record; without ``advance`` it waits for one."""
    from floodmark.spark import read_json_lines

    folder = tmp_path / "in"
    folder.mkdir()
    lines = [json.dumps({"ts": ts, "device": "d1"}) for ts in range(0, 10_500, 100)]
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    fired = {}
    for advance in (True, False):
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(500, advance=advance)
        query = EventTimeAggregation(
            read_json_lines(spark, str(folder), "ts LONG, device STRING"),
            event_time="ts",
            key_by="device",
            spec=WindowSpec(windows.Tumbling(timedelta(seconds=2)), {"count": aggregates.count()}),
            time=SourceTime(strategy),
        ).start(str(tmp_path / f"ckpt-{advance}"), str(tmp_path / f"out-{advance}"), trigger_interval="0.1 seconds")
        try:
            query.await_settled(timeout_s=120)
            if not advance:
                time.sleep(3)  # six idle timeouts: the watermark stays, nothing more fires
        finally:
            query.stop()
        panes = read_output(tmp_path / f"out-{advance}", "panes")
        fired[advance] = sorted(zip(panes["window_start"], panes["count"], strict=True))
    assert fired[True] == [(start, 20) for start in range(0, 10_000, 2_000)] + [(10_000, 5)]
    assert fired[False] == fired[True][:-1], "without advance the last window waits for a record after it"
