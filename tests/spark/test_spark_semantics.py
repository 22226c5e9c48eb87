"""floodmark on real local Spark, against native Spark on the same input."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F
from spark_helpers import read_output, write_batches

from floodmark import WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.spark import EventTimeAggregation, FunctionSink, Outputs, SourceTime

pytestmark = pytest.mark.spark

SECOND = 1_000
MINUTE = 60 * SECOND
SCHEMA = "ts LONG, k STRING, p INT, v DOUBLE"


def frame(rows):
    return pd.DataFrame(rows, columns=["ts", "k", "p", "v"]).astype({"ts": "Int64", "p": "int32", "v": "float64"})


def stream(spark, directory, files_per_batch=1):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", files_per_batch).parquet(str(directory))


def native_window_count(events, delay, size):
    """Native Spark's way: withWatermark (global MAX - delay) + groupBy(window, key).count()."""
    return (
        events.withColumn("t", F.timestamp_millis("ts"))
        .withWatermark("t", delay)
        .groupBy(F.window("t", size), "k")
        .count()
    )


def lagging_split_batches():
    """Split 1 runs three minutes behind split 0, far more than the 5 s bound.

    (Spark filters late rows with the previous batch's watermark, so a lag of
    two batches would still slip through natively.)
    """
    batches = []
    for b in range(6):
        rows = [(b * MINUTE + s * SECOND, "a", 0, 1.0) for s in range(0, 60, 10)]
        rows += [((b - 3) * MINUTE + s * SECOND, "a", 1, 1.0) for s in range(0, 60, 10) if b >= 3]
        batches.append(frame(rows))
    return batches


LOGS = ("offsets", "commits")
"""Spark's logs of a query's checkpoint: the batches it planned, the batches it committed."""


def test_lagging_split_is_not_dropped_by_floodmark_but_is_by_native_spark(spark, tmp_path):
    batches = lagging_split_batches()
    write_batches(tmp_path / "in", batches)
    total = sum(len(b) for b in batches)

    agg = EventTimeAggregation(
        stream(spark, tmp_path / "in"),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count()}),
        time=SourceTime(
            WatermarkStrategy.for_bounded_out_of_orderness(5 * SECOND),
            split="p",
            known_splits=["0", "1"],  # like Kafka's partitions: known before their first record
        ),
    )
    handle = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    # The run stops after its flush, committed, with no batch planned after it (nothing could fire).
    spark_log = Path(handle.spark_checkpoint.directory)
    offsets, commits = ({int(f.name) for f in (spark_log / log).iterdir() if f.name.isdigit()} for log in LOGS)
    assert max(offsets) == max(commits) == handle.reports[-1].batch_id
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert panes["n"].sum() == total, "every record of the lagging split is counted"
    by_window = dict(zip(panes["window_start"], panes["n"], strict=True))
    assert [by_window[w * MINUTE] for w in range(6)] == [12, 12, 12, 6, 6, 6]
    assert read_output(spark, tmp_path / "out" / "late").empty

    native = native_window_count(stream(spark, tmp_path / "in"), delay="5 seconds", size="1 minute")
    query = native.writeStream.outputMode("append").format("memory").queryName("native_lagging").start()
    try:
        query.processAllAvailable()
        query.processAllAvailable()
        dropped = sum(op.numRowsDroppedByWatermark for pr in query.recentProgress for op in pr.stateOperators)
        native = {r["window"]["start"].timestamp(): r["count"] for r in spark.table("native_lagging").collect()}
    finally:
        query.stop()
    # Spark's global MAX watermark drops the whole lagging split (the metric counts partial aggregates).
    assert [native[w * 60] for w in range(3)] == [6, 6, 6], "native counts only split 0"
    assert dropped > 0


def test_idle_split_blocks_windows_unless_idleness_is_configured(spark, tmp_path):
    batches = [frame([(0, "a", 0, 1.0), (1_000, "a", 1, 1.0)])]  # split 1 says one thing, then nothing
    batches += [frame([(b * 30 * SECOND, "a", 0, 1.0)]) for b in range(1, 6)]
    write_batches(tmp_path / "in", batches)

    def fired(strategy, name):
        agg = EventTimeAggregation(
            stream(spark, tmp_path / "in"),
            event_time="ts",
            key_by=["k"],
            spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count()}),
            time=SourceTime(strategy, split="p"),
        )
        handle = agg.start(
            str(tmp_path / name / "ckpt"), str(tmp_path / name / "out"), trigger_interval="500 milliseconds"
        )
        try:
            handle.await_settled(timeout_s=240)
        finally:
            handle.stop()
        return read_output(spark, tmp_path / name / "out" / "panes")

    bound = WatermarkStrategy.for_bounded_out_of_orderness(SECOND)
    assert fired(bound, "plain").empty, "the idle split holds the MIN watermark at 0"
    panes = fired(bound.with_idleness(1_500), "idle")
    assert sorted(panes["window_start"]) == [0, MINUTE], "windows of the active split fire"
    assert panes.loc[panes.window_start == 0, "n"].item() == 3


def lone_window_aggregation(spark, tmp_path):
    """Seed 000's lone record (9 s, one split) into 10 s windows with its idle-advancing generator (wait 2 s)."""
    write_batches(tmp_path / "in", [frame([(9 * SECOND, "a", 0, 1.0)])])
    return EventTimeAggregation(
        stream(spark, tmp_path / "in"),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(10 * SECOND), {"n": aggregates.count()}),
        time=SourceTime(WatermarkStrategy.for_idle_advancing(bound=0, wait=2 * SECOND, interval=200), split="p"),
    )


def test_lone_event_window_fires_with_the_seed000_generator_not_natively(spark, tmp_path):
    agg = lone_window_aggregation(spark, tmp_path)
    interval_ms = 1_000
    handle = agg.start(str(tmp_path / "ckpt"), str(tmp_path / "out"), trigger_interval="1 second")
    try:
        deadline = time.monotonic() + 120
        while not any(r.panes for r in handle.reports):
            assert time.monotonic() < deadline, "the lone window never fired"
            handle.await_batches(1, timeout_s=60)
    finally:
        handle.stop()
    ingested = next(r for r in handle.reports if r.records)
    emitted = next(r for r in handle.reports if r.panes)
    # Panes leave at the end of the batch that fired them: that batch's processing time + one interval.
    # Counted from the end of the batch that read the record, as in the idle test below: that batch's own
    # length is Spark's (11 s when it starts the Python workers, when this test runs first; 4 s on a loaded
    # machine), not floodmark's wait.
    elapsed = emitted.processing_time - ingested.next_processing_time
    assert elapsed <= 2_000 + 2 * interval_ms, f"fired {elapsed} ms after the end of the event's batch"
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert panes[["window_start", "n", "timing"]].values.tolist() == [[0, 1, "ON_TIME"]]

    native = native_window_count(stream(spark, tmp_path / "in"), delay="0 seconds", size="10 seconds")
    query = (
        native.writeStream.outputMode("append")
        .format("memory")
        .queryName("native_lone")
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        query.processAllAvailable()
        time.sleep(5)
        assert spark.table("native_lone").count() == 0, "native Spark never emits the last window"
    finally:
        query.stop()


@pytest.mark.parametrize("tick_source", ["jvm", "python"])
def test_an_idle_query_runs_no_batch_until_something_can_fire(spark, tmp_path, monkeypatch, tick_source):
    """Issue 12: with no input and nothing to fire the query runs no batch at all (it used to run one per
    trigger); the driver asks for a batch when the watermark can reach a window, so the lone window of seed
    000 still fires within wait + two triggers of its record's batch. With either tick source
    (spark/sources/ticks.py)."""
    if tick_source == "python":
        monkeypatch.setenv("FLOODMARK_PYTHON_TICKS", "1")
    agg = lone_window_aggregation(spark, tmp_path)
    interval_ms = 500
    handle = agg.start(str(tmp_path / "ckpt"), str(tmp_path / "out"), trigger_interval=f"{interval_ms} milliseconds")
    try:
        handle.await_settled(timeout_s=120)
        settled = len(handle.reports)
        time.sleep(10 * interval_ms / 1000)
        idle_batches = len(handle.reports) - settled
        plan = handle.controller.next_batch
    finally:
        handle.stop()
    ingested = next(r for r in handle.reports if r.records)
    emitted = next(r for r in handle.reports if r.panes)
    # From the end of the batch that read the record (the first batch, which also starts the Python workers).
    assert emitted.processing_time - ingested.next_processing_time <= 2_000 + 2 * interval_ms
    # Between the record and its pane: the batch the watermark reached the window in, and the one that fired
    # it (a trigger per 500 ms would have run about seven).
    assert emitted.batch_id - ingested.batch_id <= 3
    assert idle_batches == 0, f"{idle_batches} batches ran in 10 idle triggers"
    assert plan is not None and plan.waits_for_input and plan.at - plan_time(handle) >= 50_000
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert panes[["window_start", "n", "timing"]].values.tolist() == [[0, 1, "ON_TIME"]]


def plan_time(handle) -> int:
    """Processing time of the newest control entry (when the driver made its last plan)."""
    return handle.reports[-1].next_processing_time


@pytest.mark.parametrize(
    ("map_side", "host"), [("arrow", "python"), ("jvm", "python"), ("arrow", "jvm"), ("jvm", "jvm")]
)
def test_late_panes_late_output_and_dead_letters_keep_the_query_running(spark, tmp_path, map_side, host):
    batches = [
        frame([(1 * SECOND, "a", 0, 1.0), (70 * SECOND, "a", 0, 1.0)]),  # watermark -> 70 s - 1 ms
        frame([(5 * SECOND, "a", 0, 1.0)]),  # window [0, 60 s) fired, within 20 s lateness: LATE pane
        frame([(200 * SECOND, "a", 0, 1.0)]),  # watermark -> 200 s
        frame([(6 * SECOND, "a", 0, 1.0), (None, "b", 0, 1.0)]),  # beyond lateness; missing timestamp
        frame([(10**15, "c", 0, 1.0), (201 * SECOND, "a", 0, 1.0)]),  # far future: dead letter
    ]
    write_batches(tmp_path / "in", batches)
    agg = EventTimeAggregation(
        stream(spark, tmp_path / "in"),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(
            windows.Tumbling(MINUTE),
            {"n": aggregates.count(), "total": aggregates.sum("v")},
            trigger=triggers.AfterWatermark(late=triggers.AfterCount(1)),
            allowed_lateness=20 * SECOND,
        ),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0), split="p"),
        max_future_skew=aggregates_skew(),
        map_side=map_side,
        host=host,
    )
    agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    panes = read_output(spark, tmp_path / "out" / "panes").sort_values(["window_start", "pane_index"])
    first = panes[panes.window_start == 0]
    assert first[["timing", "n"]].values.tolist() == [["ON_TIME", 1], ["LATE", 1]]
    late = read_output(spark, tmp_path / "out" / "late")
    assert late[["k", "window_start", "window_end", "event_time", "reason"]].values.tolist() == [
        ["a", 0, MINUTE, 6 * SECOND, "EXPIRED"]
    ]
    assert late["lateness"].item() == 200 * SECOND - 1 - 6 * SECOND
    dead = read_output(spark, tmp_path / "out" / "dead_letter").sort_values("k")
    assert dead["k"].tolist() == ["b", "c"]
    assert dead["reason"].iloc[0] == "missing timestamp"
    assert "ahead of processing time" in dead["reason"].iloc[1]
    assert '"k": "c"' in dead["record"].iloc[1]
    assert panes["n"].sum() == 5, "1 + 1 (window 0) + 70 s + 200 s + 201 s records"


def aggregates_skew():
    return 365 * 24 * 3600 * SECOND  # one year: the 10**15 ms record (year 33658) is corrupt


def test_a_function_sink_that_raises_stops_the_query_with_one_line_that_says_why(spark, tmp_path, capfd):
    """Your function's error fails the batch with floodmark's line (which batch, doing what, why), raised from
    the query's handle; Spark's log says the query ended, without pages of Python traceback and Java stack."""
    write_batches(tmp_path / "in", [frame([(0, "a", 0, 1.0), (SECOND, "b", 0, 2.0)])])

    def sink_down(rows, batch_id):
        raise ValueError("the sink is down\nand a second line")

    aggregation = EventTimeAggregation(
        stream(spark, tmp_path / "in"),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count()}),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0), split="p"),
    )
    files = Outputs.files(str(tmp_path / "out"))
    outputs = Outputs(FunctionSink(sink_down), files.late, files.dead_letter)
    expected = (
        r"^the floodmark query failed: floodmark batch \d+ failed while writing its panes output to "
        r"FunctionSink\(.*\): ValueError: the sink is down\. The batch was not committed"
    )
    with pytest.raises(RuntimeError, match=expected):
        aggregation.run_to_completion(str(tmp_path / "ckpt"), outputs, timeout_s=300)
    time.sleep(1)  # the JVM's stderr reaches ours through a thread (floodmark.spark.driver.session)
    log = capfd.readouterr().err
    assert "terminated with error" in log
    assert "\tat org.apache.spark" not in log and "Traceback" not in log
