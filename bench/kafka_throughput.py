"""floodmark vs native Spark between Kafka topics: tumbling-window count, rows/second, pane latency.

    .venv/bin/python bench/kafka_throughput.py --rows 1000000 --keys 100 100000

The records of bench/throughput.py (4 splits, ``--minutes`` of event time, in order per split with a little
jitter) as JSON values in a 4-partition topic of a real broker on loopback (split = partition). Both engines
read the topic with Spark's Kafka source, ``maxOffsetsPerTrigger`` = rows / ``--batches``, and write their
windows' counts to a topic: native ``withWatermark + groupBy(window, key).count()`` with ``availableNow``;
floodmark's ``EventTimeAggregation`` (per-partition watermarks, bound 5 s) with ``run_to_completion`` and
``Outputs.kafka`` (the clickstream job's text lines), at-least-once and exactly-once (``transactional_id_prefix``: a
Kafka transaction per batch, written through the driver; its panes read ``read_committed``). "pane latency"
counts batches from the one after which floodmark's watermark passed a window's end to the one whose write
put its pane in the output topic (1 = the next trigger; the final flush is not a sample). Each engine runs
once unmeasured, then ``--repeat`` times alternating; medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table
from throughput import generate, latency_in_batches, steady_rate

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, Outputs, SourceTime, local_session, read_kafka, topic_partitions
from floodmark.spark.outputs.sinks import PANE_ID_HEADER
from floodmark.spark.sources.inputs import MapSide
from floodmark.spark.stateful.jvm_level import Host
from floodmark_dev.kafka import KafkaBroker

VALUE_SCHEMA = "ts LONG, k STRING"


def fill_topic(broker: KafkaBroker, topic: str, data: Path) -> int:
    broker.create_topic(topic, partitions=4)
    frame = pd.concat([pd.read_parquet(f) for f in sorted(data.glob("*.parquet"))], ignore_index=True)
    for partition, rows in frame.groupby("p"):
        lines = rows[["ts", "k"]].to_json(orient="records", lines=True).splitlines()
        broker.produce(topic, lines, partition=int(partition))
    return len(frame)


def native_minute_counts(spark, broker: KafkaBroker, topic: str, per_batch: int):
    """Native Spark's count per ``k`` and 1-minute window of ``topic`` (global watermark: MAX event time - 5 s)."""
    source = read_kafka(
        spark, broker.bootstrap_servers, topic, VALUE_SCHEMA, options={"maxOffsetsPerTrigger": str(per_batch)}
    )
    return (
        source.withColumn("t", F.timestamp_millis("ts"))
        .withWatermark("t", "5 seconds")
        .groupBy(F.window("t", "1 minute"), "k")
        .count()
    )


def native_run(spark, broker: KafkaBroker, topic: str, per_batch: int, work: Path) -> tuple[float, float]:
    out = f"{work.name}-out"
    broker.create_topic(out)
    counts = native_minute_counts(spark, broker, topic, per_batch).select(
        F.col("k").alias("key"), F.to_json(F.struct("window", "k", "count")).alias("value")
    )
    started = time.perf_counter()
    query = (
        counts.writeStream.outputMode("append")
        .format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", out)
        .option("checkpointLocation", str(work / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    rows = sum(p.numInputRows for p in query.recentProgress)
    return rows / elapsed, steady_rate(query.recentProgress)


def minute_counts(
    spark,
    broker: KafkaBroker,
    topic: str,
    per_batch: int,
    strategy: WatermarkStrategy,
    map_side: MapSide = "arrow",
    host: Host = "python",
) -> EventTimeAggregation:
    """floodmark's count per key ``k`` and 1-minute window of ``topic``'s JSON values ``{"ts", "k"}``, a partition a
    split (every partition known), ``per_batch`` records per batch at most."""
    source = read_kafka(
        spark, broker.bootstrap_servers, topic, VALUE_SCHEMA, options={"maxOffsetsPerTrigger": str(per_batch)}
    )
    return EventTimeAggregation(
        source,
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(60_000), {"n": aggregates.count()}),
        time=SourceTime(
            strategy, split="partition", known_splits=topic_partitions(spark, broker.bootstrap_servers, topic)
        ),
        map_side=map_side,
        host=host,
    )


def floodmark_run(
    spark,
    broker: KafkaBroker,
    topic: str,
    per_batch: int,
    work: Path,
    exactly_once: bool = False,
    map_side: MapSide = "arrow",
    host: Host = "python",
):
    prefix = work.name
    for kind in ("panes", "late", "dead"):
        broker.create_topic(f"{prefix}-{kind}")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(5_000)
    aggregation = minute_counts(spark, broker, topic, per_batch, strategy, map_side, host)
    outputs = Outputs.kafka(
        broker.bootstrap_servers,
        f"{prefix}-panes",
        f"{prefix}-late",
        f"{prefix}-dead",
        pane_format="text",
        transactional_id_prefix=prefix if exactly_once else None,
    )
    started = time.perf_counter()
    handle = aggregation.run_to_completion(str(work / "ckpt"), outputs, timeout_s=3_600)
    elapsed = time.perf_counter() - started
    panes = pd.DataFrame(
        [
            {
                "window_end": json.loads(dict(m.headers)[PANE_ID_HEADER])["window_end"],
                "n": int(m.text().split()[-1]),
                "batch_id": int(dict(m.headers)["floodmark-batch-id"]),
            }
            for m in broker.consume(f"{prefix}-panes")
        ]
    )
    return elapsed, int(panes["n"].sum()), handle, panes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[100, 100_000])
    parser.add_argument("--minutes", type=int, default=10, help="event-time span of the input")
    parser.add_argument("--batches", type=int, default=8, help="micro-batches the topic is read in")
    parser.add_argument("--repeat", type=int, default=2, help="runs per engine (the table shows medians)")
    parser.add_argument("--map-side", choices=["arrow", "jvm"], default="arrow", help="floodmark's map side")
    parser.add_argument("--host", choices=["python", "jvm"], default="python", help="floodmark's stateful host")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="floodmark-kafka-bench-"))
    console = Console(width=200)
    table = Table(
        title=f"Kafka in and out: tumbling 1-minute count, {args.rows:,} rows, 4 partitions, local[2], "
        f"median of {args.repeat} runs each"
    )
    for column in (
        "keys",
        "native rows/s",
        "floodmark rows/s",
        "ratio",
        "ratio after 1st batch",
        "pane latency (batches)",
        "exactly-once rows/s",
        "exactly-once / at-least-once",
    ):
        table.add_column(column, justify="right")
    with KafkaBroker(heap="1g") as broker:
        spark = local_session("floodmark-kafka-bench", cores=2, shuffle_partitions=2)
        per_batch = max(1, args.rows // args.batches)
        for index, keys in enumerate(args.keys):
            data = work / f"data-{keys}"
            shutil.rmtree(data, ignore_errors=True)
            generate(data, args.rows, keys, args.minutes, args.batches)
            topic = f"events-{keys}"
            rows = fill_topic(broker, topic, data)
            if index == 0:  # warm-up, not measured
                native_run(spark, broker, topic, per_batch, work / "native-warm-up")
                floodmark_run(
                    spark, broker, topic, per_batch, work / "fm-warm-up", map_side=args.map_side, host=args.host
                )
                floodmark_run(
                    spark,
                    broker,
                    topic,
                    per_batch,
                    work / "fm-eo-warm-up",
                    exactly_once=True,
                    map_side=args.map_side,
                    host=args.host,
                )
            native_rates, native_steadies, fm_rates, fm_steadies, eo_rates = [], [], [], [], []
            for run in range(args.repeat):
                rate, steady = native_run(spark, broker, topic, per_batch, work / f"native-{keys}-{run}")
                native_rates.append(rate)
                native_steadies.append(steady)
                seconds, counted, handle, panes = floodmark_run(
                    spark, broker, topic, per_batch, work / f"fm-{keys}-{run}", map_side=args.map_side, host=args.host
                )
                assert counted == rows, f"floodmark counted {counted} of {rows} rows"
                fm_rates.append(rows / seconds)
                fm_steadies.append(steady_rate(handle.query.recentProgress))
                seconds, counted, _, _ = floodmark_run(
                    spark,
                    broker,
                    topic,
                    per_batch,
                    work / f"fm-eo-{keys}-{run}",
                    exactly_once=True,
                    map_side=args.map_side,
                    host=args.host,
                )
                assert counted == rows, f"floodmark exactly-once counted {counted} of {rows} rows"
                eo_rates.append(rows / seconds)
            native_rate, fm_rate = statistics.median(native_rates), statistics.median(fm_rates)
            table.add_row(
                f"{keys:,}",
                f"{native_rate:,.0f}",
                f"{fm_rate:,.0f}",
                f"{fm_rate / native_rate:.2f}x",
                f"{statistics.median(fm_steadies) / statistics.median(native_steadies):.2f}x",
                latency_in_batches(handle.reports, panes),
                f"{statistics.median(eo_rates):,.0f}",
                f"{statistics.median(eo_rates) / fm_rate:.2f}x",
            )
        spark.stop()
    console.print(table)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
