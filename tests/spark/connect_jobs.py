"""Jobs that run the same on a classic session and over Spark Connect (``tests/spark/test_connect.py``): their
input, their definitions and what is compared. Imported by the tests and by ``connect_driver.py``, the Connect
client (a process of its own: a Connect session switches the whole process's PySpark into Connect mode)."""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spark_helpers import stamp_in_order

from floodmark import TimestampCombiner, WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.core.windows import Window
from floodmark.spark import (
    EventTimeAggregation,
    FloodmarkQuery,
    KafkaSink,
    Outputs,
    Pipeline,
    SourceTime,
    read_dead_letters,
    read_json_lines,
    read_kafka,
    read_late,
    topic_partitions,
)
from floodmark.spark.outputs.results import RECORD_FIELDS

MINUTE = 60_000
SCHEMA = "ts LONG, user STRING, channel STRING, partition INT"


def write_input(root: Path, files: int = 4, rows: int = 400, seed: int = 7) -> None:
    """``files`` JSON-lines files of clicks over two partitions, out of order within 40 s, some late by minutes,
    and two lines that are not records (dead letters with their text)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    paths = [root / f"part-{f}.jsonl" for f in range(files)]
    for f, path in enumerate(paths):
        lines = []
        for i in range(rows):
            at = (f * rows + i) * 1_500 - rng.randint(0, 20_000)  # within the 30 s bound
            if rng.random() < 0.03:
                at -= 5 * MINUTE  # late
            user = f"u{rng.randint(0, 9)}"
            lines.append(json.dumps({"ts": at, "user": user, "channel": rng.choice("ab"), "partition": i % 2}))
        if f == 1:
            lines[10:10] = ['{"ts": "yesterday", "user": "u1"', "not json at all"]
        path.write_text("\n".join(lines) + "\n")
    stamp_in_order(paths)  # the file source's order is the files' order


def source(spark: Any, root: Path) -> Any:
    return read_json_lines(spark, str(root), SCHEMA, {"maxFilesPerTrigger": "1"})


TIME = SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(30_000), split="partition")


def aggregation(spark: Any, root: Path, on_jvm: bool = False) -> EventTimeAggregation:
    """The README's job: a count per channel and minute, late records within 2 minutes update their window, on the
    Python host; with ``on_jvm``, combined by the JVM map side and run on the JVM host."""
    return EventTimeAggregation(
        source(spark, root),
        event_time="ts",
        key_by="channel",
        spec=WindowSpec(windows.Tumbling(MINUTE), {"clicks": aggregates.count()}, allowed_lateness=2 * MINUTE),
        time=TIME,
        **({"map_side": "jvm", "host": "jvm"} if on_jvm else {"host": "python"}),
    )


def pipeline(spark: Any, root: Path) -> Pipeline:
    """Two stages on the Python host: sessions per user, then the mean session length per two minutes (a derived
    column)."""
    job = Pipeline(host="python")
    job.source("clicks", source(spark, root), event_time="ts", time=TIME)
    job.stage(
        "sessions",
        upstream="clicks",
        key_by="user",
        spec=WindowSpec(
            windows.Sessions(20_000), {"events": aggregates.count()}, timestamp_combiner=TimestampCombiner.EARLIEST
        ),
    )
    job.stage(
        "means",
        upstream="sessions",
        spec=WindowSpec(windows.Tumbling(2 * MINUTE), {"mean": aggregates.mean("length")}),
        columns={"length": "window_end - window_start"},
    )
    return job


KAFKA_SCHEMA = "ts LONG, user STRING, channel STRING"


def produce(broker: Any, topic: str, root: Path) -> int:
    """The lines of :func:`write_input`'s files to ``topic`` (two partitions, as the lines say): how many."""
    broker.create_topic(topic, partitions=2)
    count = 0
    for path in sorted(root.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            partition = json.loads(line).get("partition", 0) if line.startswith("{") and line.endswith("}") else 0
            count += broker.produce(topic, [line], partition=partition)
    return count


def kafka(spark: Any, servers: str, prefix: str) -> EventTimeAggregation:
    """:func:`aggregation` from topic ``<prefix>-clicks`` (its partitions, as the broker says, are the splits)."""
    source = read_kafka(
        spark, servers, f"{prefix}-clicks", schema=KAFKA_SCHEMA, options={"maxOffsetsPerTrigger": "500"}
    )
    known = tuple(topic_partitions(spark, servers, f"{prefix}-clicks"))  # the broker's, asked by floodmark's jar
    time = SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(30_000), split="partition", known_splits=known)
    spec = WindowSpec(windows.Tumbling(MINUTE), {"clicks": aggregates.count()}, allowed_lateness=2 * MINUTE)
    return EventTimeAggregation(source, event_time="ts", key_by="channel", spec=spec, time=time)


def run_kafka(
    spark: Any, servers: str, prefix: str, root: Path, trigger: str = "0 seconds", listeners: tuple = ()
) -> FloodmarkQuery:
    """:func:`kafka` to the end of its topic: panes and late records exactly-once to ``<prefix>-panes`` and
    ``<prefix>-late`` (transactional id prefix ``prefix``), dead letters at-least-once to ``<prefix>-dead``."""
    exactly_once = Outputs.kafka(servers, f"{prefix}-panes", f"{prefix}-late", "-", transactional_id_prefix=prefix)
    outputs = Outputs(exactly_once.panes, exactly_once.late, KafkaSink(servers, f"{prefix}-dead"))
    return kafka(spark, servers, prefix).run_to_completion(
        str(root / "ckpt"), outputs, trigger, timeout_s=600, listeners=list(listeners)
    )


HOUR = 60 * MINUTE
REPLAY_SCHEMA = "timestamp LONG, channel STRING, behavior STRING"


def produce_skewed(broker: Any, topic: str) -> int:
    """``topic`` of five partitions: partition 0 starts two hours behind partitions 1-3, partition 4 is silent;
    how many records."""
    broker.create_topic(topic, partitions=5)
    produced = 0
    for partition in range(4):
        start, step = (0, 6_000) if partition == 0 else (2 * HOUR, 12_000)
        values = [
            json.dumps({"timestamp": ts, "channel": f"ch{partition}", "behavior": "CLICK"})
            for ts in range(start, 4 * HOUR, step)
        ]
        produced += broker.produce(topic, values, partition=partition)
    return produced


def replay(spark: Any, servers: str, topic: str, root: Path, aligned: bool) -> FloodmarkQuery:
    """A count per channel and minute over :func:`produce_skewed`'s topic, 120 records per batch, partitions idle
    after 2 s; ``aligned``: watermark alignment with 10 minutes of drift."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(5_000).with_idleness(2_000)
    if aligned:
        strategy = strategy.with_watermark_alignment(topic, 10 * MINUTE)
    known = topic_partitions(spark, servers, topic)
    source = read_kafka(spark, servers, topic, REPLAY_SCHEMA, options={"maxOffsetsPerTrigger": "120"})
    return EventTimeAggregation(
        source,
        event_time="timestamp",
        key_by=["channel", "behavior"],
        spec=WindowSpec(windows.Tumbling(MINUTE), {"count": aggregates.count()}),
        time=SourceTime(strategy, split="partition", known_splits=known),
    ).run_to_completion(str(root / "ckpt"), str(root / "out"), timeout_s=600)


def replay_summary(query: FloodmarkQuery) -> dict[str, Any]:
    """The peak of open windows, the splits alignment paused, the late records of a :func:`replay`, and how many
    split-batches had unread records (``behind``) and were idle all the same (``idle_behind``)."""
    reports = query.reports
    return {
        "peak": max(r.open_windows for r in reports),
        "paused": sorted({split for r in reports for split in r.paused_splits}),
        "late": sum(r.late for r in reports),
        "batches": len(reports),
        "behind": sum(1 for r in reports for s, unread in r.split_backlog.items() if unread),
        "idle_behind": sum(1 for r in reports for s, unread in r.split_backlog.items() if unread and r.splits[s][1]),
    }


def records_read_back(spark: Any, out: Path) -> dict[str, Any]:
    """The late records and dead letters under ``out`` as ``read_late`` and ``read_dead_letters`` give them without a
    schema (the records' schema inferred by Spark): each one's inferred schema and its rows, in one order."""
    found = {}
    for kind, read in (("late", read_late), ("dead_letter", read_dead_letters)):
        frame = read(spark, str(out)).drop("batch_id")
        rows = sorted(json.dumps(row.asDict(recursive=True), sort_keys=True, default=str) for row in frame.collect())
        found[kind] = {"schema": frame.schema[RECORD_FIELDS].dataType.simpleString(), "rows": rows}
    return found


JOBS = {"aggregation": aggregation, "pipeline": pipeline, "jvm": lambda spark, root: aggregation(spark, root, True)}
STAGES = {
    "aggregation": ["aggregation"],
    "pipeline": ["sessions", "means"],
    "kafka": ["aggregation"],
    "jvm": ["aggregation"],
}


def run(spark: Any, job: str, root: Path) -> FloodmarkQuery:
    """Run ``job`` over ``root/in`` to the end of its input, into ``root/ckpt`` and ``root/out``."""
    built = JOBS[job](spark, root / "in")
    return built.run_to_completion(str(root / "ckpt"), str(root / "out"), timeout_s=600)


def summary(query: FloodmarkQuery, job: str) -> dict[str, Any]:
    """What the handle says about the run (compared between a classic and a Connect run)."""
    key = None if job == "pipeline" else "a"
    explained = query.explain(key, Window(0, 2 * MINUTE), STAGES[job][-1])  # the texts name wall-clock times
    return {
        "batches": query.batches_completed,
        "reports": len(query.reports),
        "last_watermark": query.reports[-1].watermark,
        "reconciliation": asdict(query.reconciliation),
        "stages": {stage: asdict(query.stage_reconciliation(stage)) for stage in STAGES[job]},
        "explained": [explained.status.name, explained.operator_watermark],
    }
