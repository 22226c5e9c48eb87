"""The interval join: floodmark's join stage vs native Spark's stream-stream join, rows/second and pairs found.

    .venv/bin/python bench/join_throughput.py --queries-per-s 500 --minutes 10 --repeat 3

The searches simulator's queries and clicks (``floodmark.simulator.searches``: users over 4 splits, a click 0-15 s
after 70% of the queries, records up to 3 s out of order within a split; no late clicks, no quiet split), one
Parquet file per source and 20 s of arrival time, both joined on the user with the click 0 to 10 s after the query,
through

* native Spark 4.3: both sources ``withWatermark(3 s)`` on their event time, an inner join on
  ``q.user = c.user AND c.t BETWEEN q.t AND q.t + 10 s`` (Spark's time-range join condition, which bounds both
  sides' state), ``availableNow``;
* floodmark: a ``Pipeline`` with the two sources (bounded out-of-orderness 3 s per split, the four splits known
  from the start as Kafka partitions are: ``known_splits``) and ``join(between=(0, 10 s))``, ``run_to_completion``;

both writing the pairs to Parquet. Each engine runs once unmeasured (warm-up), then ``--repeat`` times alternating;
the table shows medians, and the pairs each engine found against the pairs computed straight from the records.

The ``lagging`` row moves the clicks of split 3 60 s later in arrival (a partition that lags: a consumer that fell
behind, a slow producer). Native Spark's watermark is the MAX of a source's event times minus the delay, one for
the whole source, so the lagging partition's clicks arrive behind it and are dropped without a trace; floodmark's
per-split watermarks wait for the slow split (its pairs come later, none is lost).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from floodmark import WatermarkStrategy
from floodmark.apps import searches as app
from floodmark.simulator import searches
from floodmark.spark import Pipeline, SourceTime, local_session

LAG_MS = 60_000
SPLITS = ["0", "1", "2", "3"]


def generate(directory: Path, queries_per_s: float, minutes: int, lagging: bool) -> tuple[int, int, int]:
    """Both sources' files under ``directory``; returns (rows, batches, pairs computed straight)."""
    config = searches.SearchConfig(
        users=2_000,
        splits=4,
        duration_ms=minutes * 60_000,
        queries_per_s=queries_per_s,
        late_fraction=0.0,
        quiet_split=None,
        batch_ms=20_000,
    )
    records = searches.generate(config)
    if lagging:
        clicks = records["clicks"]
        lag = (clicks["split"] == 3).to_numpy() * LAG_MS
        arrival = clicks["arrival"] + lag
        records["clicks"] = clicks.assign(arrival=arrival, batch=(arrival - config.start_ms) // config.batch_ms)
    batches = app.write_input(records, directory)
    rows = sum(len(f) for f in records.values())
    return rows, batches, len(app.straight_pairs(records))


def native_run(spark, data: Path, work: Path) -> tuple[float, int]:
    """Seconds and pairs of native Spark's stream-stream join."""

    def side(name: str, alias: str):
        frame = spark.readStream.schema(app.SCHEMAS[name]).option("maxFilesPerTrigger", 1).parquet(str(data / name))
        return frame.withColumn("t", F.timestamp_millis("ts")).withWatermark("t", "3 seconds").alias(alias)

    joined = side("queries", "q").join(
        side("clicks", "c"),
        F.expr("q.user = c.user AND c.t >= q.t AND c.t <= q.t + INTERVAL 10 SECONDS"),
    )
    out = joined.select(
        F.col("q.user").alias("user"),
        F.col("q.ts").alias("left_ts"),
        F.col("q.query").alias("left_query"),
        F.col("c.ts").alias("right_ts"),
        F.col("c.url").alias("right_url"),
    )
    started = time.perf_counter()
    query = (
        out.writeStream.format("parquet")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    return seconds, spark.read.parquet(str(work / "out")).count()


def floodmark_run(spark, data: Path, work: Path) -> tuple[float, int]:
    """Seconds and pairs of floodmark's join stage."""
    pipeline = Pipeline(buckets=4)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(app.BOUND_MS)
    for name in app.SOURCES:
        frame = spark.readStream.schema(app.SCHEMAS[name]).option("maxFilesPerTrigger", 1).parquet(str(data / name))
        time_of = SourceTime(strategy, split="split", periodic_interval=1, known_splits=SPLITS)
        pipeline.source(name, frame, "ts", time_of)
    pipeline.join("clicked", "queries", "clicks", "user", (0, app.CLICK_WITHIN_MS))
    started = time.perf_counter()
    pipeline.run_to_completion(str(work / "ckpt"), str(work / "out"), trigger_interval="0 seconds")
    seconds = time.perf_counter() - started
    return seconds, spark.read.parquet(str(work / "out" / "clicked" / "panes")).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries-per-s", type=float, default=500.0, help="queries per second of event time")
    parser.add_argument("--minutes", type=int, default=10, help="event time covered")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="+", default=["in step", "lagging"], help="rows: 'in step', 'lagging'")
    args = parser.parse_args()
    spark = local_session("floodmark-bench-join", cores=2, shuffle_partitions=2)
    table = Table(title=f"interval join (0..10 s) of queries and clicks, local[2], median of {args.repeat} runs each")
    columns = ("row", "rows", "batches", "native s", "floodmark s", "native rows/s", "floodmark rows/s", "ratio")
    for column in (*columns, "pairs", "native pairs", "floodmark pairs"):
        table.add_column(column, justify="right")
    root = Path(tempfile.mkdtemp(prefix="fm-bench-join-"))
    try:
        for name in args.only:
            data = root / name.replace(" ", "-")
            rows, batches, pairs = generate(data / "in", args.queries_per_s, args.minutes, name == "lagging")
            native_run(spark, data / "in", data / "warm-native")
            floodmark_run(spark, data / "in", data / "warm-fm")
            native, ours = [], []
            for i in range(args.repeat):
                native.append(native_run(spark, data / "in", data / f"native-{i}"))
                ours.append(floodmark_run(spark, data / "in", data / f"fm-{i}"))
            n = statistics.median(s for s, _ in native)
            f = statistics.median(s for s, _ in ours)
            found = {count for _, count in native}, {count for _, count in ours}
            cells = [name, f"{rows:,}", str(batches), f"{n:.1f}", f"{f:.1f}", f"{rows / n:,.0f}", f"{rows / f:,.0f}"]
            described = [", ".join(f"{c:,}" for c in sorted(counts)) for counts in found]
            table.add_row(*cells, f"{n / f:.2f}x", f"{pairs:,}", *described)
            Console(width=180).print(table)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
