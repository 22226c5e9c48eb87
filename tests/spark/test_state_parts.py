"""State format 2 on real Spark: a bucket's state in parts whose values stay under a cap however large the state is,
and a restart from such a checkpoint, on both hosts (``floodmark.spark.stateful.bucket_state``; the JVM host's
``floodmark.host.WindowLevel``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from floodmark import WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.apps.outputs import read_output
from floodmark.core import segments as core_segments
from floodmark.spark import EventTimeAggregation, SourceTime
from floodmark.spark import plan as spark_plan

SCHEMA = "ts LONG, k STRING, v DOUBLE"
MINUTE = 60_000
KEYS = 60_000
CAP = 1_024


def write_part(directory: Path, name: str, rows: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(json.dumps(row) + "\n" for row in rows))


def part(first_key: int, ts: int) -> list[dict]:
    """One record for each of KEYS keys from ``first_key`` on, in the window [0, 1 min)."""
    return [{"ts": ts, "k": f"key-{i}", "v": float(i % 7)} for i in range(first_key, first_key + KEYS)]


def aggregation(spark, input_dir: Path, host: str, early: bool = False) -> EventTimeAggregation:
    """:arg early: early panes every 5 records of a window (the partials then no longer wait apart)."""
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(input_dir))
    trigger = triggers.AfterWatermark(early=triggers.AfterCount(5)) if early else triggers.Default()
    aggregate = {"n": aggregates.count(), "total": aggregates.sum("v")}
    return EventTimeAggregation(
        frame,
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(MINUTE), aggregate, trigger=trigger),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(MINUTE)),
        buckets=1,
        host=host,
    )


def stored_values(spark, checkpoint: Path, host: str):
    """Spark's own reader of the state store: each stored value as (bucket, part, segment id, size in bytes); the
    part is ``head`` or ``segment``."""
    read = spark.read.format("statestore")
    if host == "python":
        parts = read.option("stateVarName", "parts").load(str(checkpoint / "spark"))
        rows = parts.selectExpr(
            "key.fm_bucket AS bucket",
            "user_map_key.part AS part",
            "user_map_key.id AS id",
            "length(user_map_value.blob) AS size",
        )
        return rows.collect()
    segments = (
        read.option("stateVarName", "segments")
        .load(str(checkpoint / "spark"))
        .selectExpr(
            "key._2 AS bucket", "'segment' AS part", "user_map_key._1 AS id", "length(user_map_value.value) AS size"
        )
    )
    head = read.option("stateVarName", "operator").option("flattenCollectionTypes", "true")
    heads = head.load(str(checkpoint / "spark")).selectExpr(
        "key._2 AS bucket", "'head' AS part", "CAST(NULL AS BIGINT) AS id", "length(list_element.value) AS size"
    )
    return segments.unionByName(heads).collect()


@pytest.mark.parametrize(("host", "early"), [("python", False), ("jvm", False), ("python", True), ("jvm", True)])
def test_a_bucket_state_far_larger_than_one_value_restarts_from_its_checkpoint(
    spark, tmp_path, monkeypatch, host, early
):
    """``early``: the restart adds early firings, so the stored segments are merged into their windows at once and
    deleted (``floodmark.driver.definition_changes``)."""
    assert KEYS > core_segments.DEFER_ABOVE, "the first batch's partials already make a segment"
    monkeypatch.setattr(spark_plan, "STATE_VALUE_BYTES", CAP)
    input_dir, checkpoint, out = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "out"
    # Two batches of new windows (half the keys of the second are new, half add to windows of the first).
    write_part(input_dir, "part-1.json", part(0, 1_000))
    write_part(input_dir, "part-2.json", part(KEYS // 2, 2_000))
    query = aggregation(spark, input_dir, host).start(str(checkpoint), str(out), "0 seconds")
    query.await_settled()
    query.stop()
    assert not any(report.panes for report in query.reports), "no window fired: the state holds them all"
    assert sum(report.records for report in query.reports) == 2 * KEYS

    # Each bucket's parts, cut into chunks no larger than the cap.
    sizes = stored_values(spark, checkpoint, host)
    assert sizes and max(r.size for r in sizes) <= CAP
    segments = {(r.bucket, r.id) for r in sizes if r.part == "segment"}
    assert len(segments) == 2, "one segment per batch: nothing merged before the watermark reaches them"
    assert sum(r.size for r in sizes) > 10 * CAP, "the state is many values' worth"

    # The restart reads the segments back and fires every window with the records of both runs.
    write_part(input_dir, "part-3.json", [{"ts": 10 * MINUTE, "k": "late-key", "v": 0.0}])
    handle = aggregation(spark, input_dir, host, early).run_to_completion(str(checkpoint), str(out))
    assert handle.reports[0].batch_id > 0, "resumed after the batches of the checkpoint"
    panes = read_output(out, "panes")
    got = {r.k: (r.n, r.total) for r in panes.itertuples() if r.k != "late-key"}
    expected: dict[str, tuple[int, float]] = {}
    for row in part(0, 1_000) + part(KEYS // 2, 2_000):
        n, total = expected.get(row["k"], (0, 0.0))
        expected[row["k"]] = (n + 1, total + row["v"])
    assert got == expected
    assert not [r for r in stored_values(spark, checkpoint, host) if r.part == "segment"], "no segment left stored"
