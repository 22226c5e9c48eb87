"""Seed 000 for real: a 3-partition Kafka topic with one silent partition, native Spark against floodmark.

The topic holds seed 000's records, ``{"timestamp": <seconds>, ...}`` (its assigner: seconds * 1000), in
partitions 0 and 1; partition 2 never receives anything. Windows are 10 s tumbling counts, bound 1 s.
Phase 1 fills the windows [0, 10) and [10, 20); once partition 2 has been idle (5 s) for the runs that
detect idleness, phase 2 adds a last record at 28 s (the window [20, 30)), and nothing comes after it.

* native Spark (``withWatermark``: global MAX - 1 s): [0, 10) and [10, 20); the last window never.
* floodmark, bounded out-of-orderness only: nothing: the silent partition, known from the topic, holds
  the watermark at its start (seed 000's problem).
* with ``with_idleness(5 s)``: [0, 10) and [10, 20) once partition 2 is idle; the last window never.
* with seed 000's generator (wait 2 s), idleness and watermark alignment (2 s of drift: the silent
  partition, without a watermark and later idle, must not hold the group back): every window, the last one
  within max(wait, window end - last record + bound) + two triggers of the batch that read the last record.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from pyspark.sql import functions as F

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.apps.outputs import read_output
from floodmark.spark import EventTimeAggregation, SourceTime, read_kafka, topic_partitions

pytestmark = pytest.mark.spark

SECOND = 1_000
WINDOW = 10 * SECOND
BOUND = 1 * SECOND
WAIT = 2 * SECOND
IDLE = 5 * SECOND
TRIGGER = 1 * SECOND
LAST_RECORD_S = 28
SCHEMA = "timestamp LONG, user STRING"
STRATEGIES = {
    "bounded": WatermarkStrategy.for_bounded_out_of_orderness(BOUND),
    "idleness": WatermarkStrategy.for_bounded_out_of_orderness(BOUND).with_idleness(IDLE),
    "seed-000": WatermarkStrategy.for_idle_advancing(BOUND, WAIT, interval=200)
    .with_idleness(IDLE)
    .with_watermark_alignment("seed-000", 2 * SECOND),
}


def produce_phase_1(broker, topic):
    for partition in (0, 1):
        seconds = range(partition, 20, 2)  # 0, 2, ... 18 and 1, 3, ... 19
        broker.produce(topic, [json.dumps({"timestamp": s, "user": f"u{s % 3}"}) for s in seconds], partition=partition)


def produce_phase_2(broker, topic):
    broker.produce(topic, [json.dumps({"timestamp": LAST_RECORD_S, "user": "u0"})], partition=0)


def floodmark_run(spark, broker, topic, strategy, tmp_path):
    source = read_kafka(spark, broker.bootstrap_servers, topic, schema=SCHEMA)
    aggregation = EventTimeAggregation(
        source,
        event_time=F.col("timestamp") * 1000,  # seed 000's assigner: seconds -> ms
        key_by=["user"],
        spec=WindowSpec(window=windows.Tumbling(timedelta(seconds=10)), aggregate={"count": aggregates.count()}),
        time=SourceTime(
            strategy, split="partition", known_splits=topic_partitions(spark, broker.bootstrap_servers, topic)
        ),
    )
    return aggregation.start(str(tmp_path / "ckpt"), str(tmp_path / "out"), trigger_interval=f"{TRIGGER} milliseconds")


def native_run(spark, broker, topic, emitted):
    """Native Spark's seed-000 job; ``emitted`` gets ``(wall ms, window start ms)`` per emitted window."""
    source = read_kafka(spark, broker.bootstrap_servers, topic, schema=SCHEMA)
    counts = (
        source.withColumn("t", F.timestamp_seconds("timestamp"))
        .withWatermark("t", "1 second")
        .groupBy(F.window("t", "10 seconds"))
        .count()
    )

    def collect(frame, _batch_id):
        now = int(time.time() * 1000)
        emitted.extend((now, row.start) for row in frame.select(F.unix_millis("window.start").alias("start")).collect())

    return counts.writeStream.outputMode("append").foreachBatch(collect).trigger(processingTime="1 second").start()


def fired_windows(handle, out):
    """``{window start: processing time of the batch that emitted it}``."""
    panes = read_output(out, "panes")
    at = {r.batch_id: r.processing_time for r in handle.reports}
    # A batch's panes are on disk a moment before its report is recorded: count them once it is.
    return {int(p.window_start): at[int(p.batch_id)] for p in panes.itertuples() if int(p.batch_id) in at}


def read(handle) -> int:
    """Records the run has read so far."""
    return sum(r.records for r in handle.reports)


def wait_until(condition, timeout_s, what, runs=()):
    deadline = time.monotonic() + timeout_s
    while not condition():
        for handle in runs:
            handle._check()  # a failed query fails the test now, with its error
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {[len(h.reports) for h in runs]} batches"
        time.sleep(0.2)


def test_seed000_on_kafka_native_against_floodmark(spark, kafka_broker, tmp_path):
    broker = kafka_broker
    # Native, bounded only and idleness side by side on one topic (which windows fire, not when); the
    # seed-000 run on a copy of it whose last record comes once the others are stopped, so that its
    # triggers keep their pace on this 2-core machine.
    broker.create_topic("seed000", partitions=3)
    broker.create_topic("seed000-timed", partitions=3)
    native_emitted: list[tuple[int, int]] = []
    native = native_run(spark, broker, "seed000", native_emitted)
    runs = {
        name: floodmark_run(spark, broker, "seed000", STRATEGIES[name], tmp_path / name)
        for name in ("bounded", "idleness")
    }
    runs["seed-000"] = floodmark_run(spark, broker, "seed000-timed", STRATEGIES["seed-000"], tmp_path / "seed-000")
    seed_run = runs["seed-000"]
    others = [h for name, h in runs.items() if name != "seed-000"]
    try:
        # The cold first batch (Python workers, the tick source) takes many seconds on 2 cores: seed 000's
        # generator counts that processing time, so the records come after it, as a live topic's would.
        for handle in runs.values():
            handle.await_batches(1, timeout_s=240)
        produce_phase_1(broker, "seed000")
        produce_phase_1(broker, "seed000-timed")
        # Every record read and whatever can fire fired: partition 2 (and the others, silent too) marked idle
        # where idleness is detected.
        wait_until(lambda: all(read(h) >= 20 and h.settled for h in runs.values()), 240, "phase 1", runs.values())
        produce_phase_2(broker, "seed000")
        wait_until(lambda: all(read(h) >= 21 and h.settled for h in others), 240, "phase 2", others)
        for handle in others:
            handle.stop()
        native.stop()
        produce_phase_2(broker, "seed000-timed")
        wait_until(
            lambda: 20 * SECOND in fired_windows(seed_run, tmp_path / "seed-000" / "out"),
            120,
            "the last window from the seed-000 run",
            [seed_run],
        )
    finally:
        for handle in runs.values():
            handle.stop()
        native.stop()

    fired = {name: fired_windows(h, tmp_path / name / "out") for name, h in runs.items()}
    start = min(r.processing_time for h in runs.values() for r in h.reports)
    native_start = min((t for t, _ in native_emitted), default=0)
    print("\nwindows emitted (window start s: processing time s after the first batch)")
    print(f"  native   : { {w // SECOND: round((t - native_start) / SECOND, 1) for t, w in native_emitted} }")
    for name, windows_at in fired.items():
        print(f"  {name:9}: { {w // SECOND: round((t - start) / SECOND, 1) for w, t in sorted(windows_at.items())} }")

    assert sorted(w for _, w in native_emitted) == [0, 10 * SECOND], "native: the last window never fires"
    assert fired["bounded"] == {}, "the silent partition holds the watermark at its start"
    assert sorted(fired["idleness"]) == [0, 10 * SECOND], "idleness releases it; the last window still waits"
    assert sorted(fired["seed-000"]) == [0, 10 * SECOND, 20 * SECOND]
    ingested = next(r for r in seed_run.reports if r.max_event_time == LAST_RECORD_S * SECOND)
    # Seed 000's generator: after `wait` of silence its watermark is logical time - bound - 1, logical time
    # moving one interval per interval: the window's end - 1 is reached this long after the last record.
    silence = max(WAIT, 30 * SECOND - LAST_RECORD_S * SECOND + BOUND)
    elapsed = fired["seed-000"][20 * SECOND] - ingested.processing_time
    print(f"  the last window: {elapsed} ms after the batch that read its record (allowed {silence} + 2 triggers)")
    assert elapsed <= silence + 2 * TRIGGER
