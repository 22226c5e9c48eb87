"""Whether floodmark's JVM host runs in Spark 4.3's Real-time Mode, and what stops it.

    .venv/bin/python bench/real_time_probe.py

Starts a Kafka broker of its own on loopback, fills a topic, builds the query of a Kafka-to-Kafka tumbling count
on the JVM map side and the JVM host (``EventTimeAggregation(..., map_side="jvm", host="jvm")``: Kafka and
floodmark's tick source, unioned, into Spark's own ``transformWithState``) and starts its carrier rows with
``trigger(realTime="5 seconds")`` in update mode, in the ways Real-time Mode could take it. Prints, per attempt,
whether the query ran a batch and, if not, the first line of Spark's error. Measured on Spark 4.3.0 (2026-11-28):

- floodmark's query as it runs (its foreachBatch sink): refused at start, OPERATOR_OR_SINK_NOT_IN_ALLOWLIST
  (ForeachBatchSink);
- its carrier rows to Spark's Kafka sink: fails, INPUT_STREAM_NOT_SUPPORTED (floodmark's tick source,
  ``floodmark.ticks.TickSourceProvider$TickStream``);
- either, with ``spark.sql.streaming.realTimeMode.allowlistCheck=false``: fails, INPUT_STREAM_NOT_SUPPORTED.

docs/PERFORMANCE.md ("Real-time Mode") says what else would have to change.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session, read_kafka, topic_partitions
from floodmark_dev.kafka import KafkaBroker

ALLOWLIST_CHECK = "spark.sql.streaming.realTimeMode.allowlistCheck"


def attempt(start, seconds: float = 30.0) -> str:
    """Start a query with ``start()``; what happened: a batch ran, or Spark's error (its first line)."""
    try:
        query = start()
    except Exception as error:  # refused as it starts
        return f"refused at start: {first_line(error)}"
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if query.exception() is not None:
                return f"failed: {first_line(query.exception())}"
            if query.lastProgress is not None:
                return f"ran a batch ({query.lastProgress['numInputRows']} input rows)"
            time.sleep(0.5)
        return f"no batch and no error in {seconds:.0f} s"
    finally:
        query.stop()


def first_line(error: object) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="floodmark-rtm-"))
    spark = local_session("floodmark-real-time-probe", cores=2, shuffle_partitions=2)
    results: list[tuple[str, str]] = []
    with KafkaBroker(work_dir=work / "broker") as broker:
        broker.create_topic("in", partitions=2)
        for partition in (0, 1):
            broker.produce("in", [f'{{"ts": {1_000 * i}, "k": "k{i % 7}"}}' for i in range(1_000)], partition=partition)
        broker.create_topic("out")
        source = read_kafka(spark, broker.bootstrap_servers, "in", "ts LONG, k STRING")
        aggregation = EventTimeAggregation(
            source,
            event_time="ts",
            key_by=["k"],
            spec=WindowSpec(windows.Tumbling(60_000), {"n": aggregates.count()}),
            time=SourceTime(
                WatermarkStrategy.for_bounded_out_of_orderness(5_000),
                split="partition",
                known_splits=topic_partitions(spark, broker.bootstrap_servers, "in"),
            ),
            map_side="jvm",
            host="jvm",
        )

        def carrier(name: str):
            frame, *_ = aggregation.pipeline.build(str(work / name / "fm"), spark)
            return frame

        def to_foreach_batch(name: str):
            def start():
                return (
                    carrier(name)
                    .writeStream.foreachBatch(lambda frame, batch_id: frame.count())
                    .outputMode("update")
                    .option("checkpointLocation", str(work / name / "spark"))
                    .trigger(realTime="5 seconds")
                    .start()
                )

            return start

        def to_kafka(name: str):
            def start():
                return (
                    carrier(name)
                    .select(F.col("fm_kind").alias("value"))
                    .writeStream.format("kafka")
                    .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                    .option("topic", "out")
                    .outputMode("update")
                    .option("checkpointLocation", str(work / name / "spark"))
                    .trigger(realTime="5 seconds")
                    .start()
                )

            return start

        results.append(("floodmark's query as it runs (foreachBatch sink)", attempt(to_foreach_batch("a"))))
        results.append(("its carrier rows to Spark's Kafka sink", attempt(to_kafka("b"))))
        spark.conf.set(ALLOWLIST_CHECK, "false")
        results.append((f"foreachBatch, {ALLOWLIST_CHECK}=false", attempt(to_foreach_batch("c"))))
        results.append((f"Kafka sink, {ALLOWLIST_CHECK}=false", attempt(to_kafka("d"))))
        spark.conf.unset(ALLOWLIST_CHECK)
    table = Table(title="Real-time Mode (trigger(realTime='5 seconds'), update mode), Spark 4.3")
    table.add_column("attempt")
    table.add_column("result")
    for name, result in results:
        table.add_row(name, result)
    Console(width=200).print(table)
    spark.stop()


if __name__ == "__main__":
    main()
