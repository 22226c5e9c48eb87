"""Seed 003's two-stage pipeline: floodmark's ``Pipeline`` vs native Spark's chained aggregations, rows/second.

    .venv/bin/python bench/stages_throughput.py --users 2000 --minutes 30 --repeat 2

The same files (the game simulator's events, mobile and console in one directory, one file per 20 s of
arrival time) through

* native Spark 4.3: ``withWatermark(60 s)`` + ``groupBy(user, session_window(1 min)).count()`` in append
  mode, then ``groupBy(window(window_time(session), 2 min)).avg(length)``: the closest native query (Spark
  4.x chains stateful aggregations in append mode under one global watermark), into the ``noop`` sink;
* floodmark: a ``Pipeline`` with one source (bounded out-of-orderness 60 s per split) and the same two
  stages (sessions per user, then the global mean per 2-minute window), panes to Parquet.

Each engine runs once unmeasured (warm-up), then ``--repeat`` times alternating; the table shows medians.
Native runs with ``availableNow``; floodmark with ``run_to_completion``, which adds the end-of-input batches
(one per stage) that fire the last windows, which native never fires.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table
from throughput import run_to_noop

from floodmark import WatermarkStrategy
from floodmark.apps.games import GAP_MS, SCHEMA, WINDOW_MS, game_stages
from floodmark.core.timestamps import TimestampCombiner
from floodmark.simulator import games
from floodmark.spark import Outputs, Pipeline, SourceTime, local_session


def generate(directory: Path, users: int, minutes: int) -> tuple[int, int]:
    """Both sources' events in one directory, one file per batch; returns (rows, files)."""
    config = games.GamesConfig(
        sources={
            "mobile": games.GameSource(users=users, splits=2, max_delay_ms=5_000),
            "console": games.GameSource(users=users, splits=2, min_delay_ms=20_000, max_delay_ms=40_000),
        },
        duration_ms=minutes * 60_000,
        batch_ms=20_000,
    )
    records = games.generate(config)
    frame = pd.concat([f.assign(split=f["split"] + 2 * i) for i, f in enumerate(records.values())])
    count = games.batch_count(records)
    directory.mkdir(parents=True)
    base = time.time() - 10 * count
    for b in range(count):
        path = directory / f"part-{b:05d}.parquet"
        frame[frame["batch"] == b][list(games.COLUMNS)].to_parquet(path, index=False)
        os.utime(path, (base + b, base + b))
    return len(frame), count


def native_run(spark, data: Path, checkpoint: Path) -> float:
    """Seconds to run native's chained aggregations to the end of ``data``."""
    return native_query(spark, data, checkpoint)[0]


def native_query(spark, data: Path, checkpoint: Path):
    """(seconds, the finished query) of native's chained aggregations over ``data`` into ``noop``."""
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(data))
    sessions = (
        source.withColumn("t", F.timestamp_millis("ts"))
        .withWatermark("t", "60 seconds")
        .groupBy("user", F.session_window("t", f"{GAP_MS // 1000} seconds").alias("session"))
        .agg(F.count("*").alias("events"))
        .select(
            F.window_time("session").alias("t"),
            (F.unix_millis(F.col("session.end")) - F.unix_millis(F.col("session.start"))).alias("length"),
        )
    )
    means = sessions.groupBy(F.window("t", f"{WINDOW_MS // 1000} seconds")).agg(F.avg("length").alias("mean"))
    return run_to_noop(means, checkpoint)


def floodmark_run(spark, data: Path, work: Path, intermediate_panes: bool = False, host: str = "python") -> float:
    """Seconds to run the pipeline to the end on ``host`` (both stages); the sessions stage's panes are not written
    unless ``intermediate_panes`` (native's chained aggregation writes only its last result either)."""
    return floodmark_query(spark, data, work, intermediate_panes, host)[0]


def floodmark_query(spark, data: Path, work: Path, intermediate_panes: bool = False, host: str = "python"):
    """(seconds, the finished ``FloodmarkQuery``) of :func:`floodmark_run`."""
    pipeline = Pipeline(buckets=4, host=host)  # type: ignore[arg-type]
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(data))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(60_000)
    pipeline.source("scores", source, "ts", SourceTime(strategy, split="split"))
    sessions, means = game_stages(TimestampCombiner.END_OF_WINDOW)[1:]
    pipeline.stage("sessions", "scores", sessions.spec, sessions.key_by)
    pipeline.stage("means", "sessions", means.spec, means.key_by, means.columns)
    start = time.perf_counter()
    outputs = {
        "sessions": Outputs.files(str(work / "out" / "sessions"), panes=intermediate_panes),
        "means": str(work / "out" / "means"),
    }
    query = pipeline.run_to_completion(str(work / "ckpt"), outputs, trigger_interval="0 seconds")
    return time.perf_counter() - start, query


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, nargs="+", default=[2000], help="players per source")
    parser.add_argument("--minutes", type=int, default=30, help="event time covered")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spark = local_session("floodmark-bench-stages", cores=2, shuffle_partitions=2)
    table = Table(title=f"sessions (gap 1 min) -> mean per 2 min, local[2], median of {args.repeat} runs each")
    columns = ("users", "rows", "batches", "native s", "floodmark s", "native rows/s", "floodmark rows/s", "ratio")
    for column in (*columns, "floodmark s, sessions' panes written", "ratio then"):
        table.add_column(column, justify="right")
    root = Path(tempfile.mkdtemp(prefix="fm-bench-stages-"))
    try:
        for users in args.users:
            data = root / f"in-{users}"
            rows, files = generate(data, users, args.minutes)
            native_run(spark, data, root / f"warm-native-{users}")
            floodmark_run(spark, data, root / f"warm-fm-{users}")
            native, ours, written = [], [], []
            for i in range(args.repeat):
                native.append(native_run(spark, data, root / f"native-{users}-{i}"))
                ours.append(floodmark_run(spark, data, root / f"fm-{users}-{i}"))
                written.append(floodmark_run(spark, data, root / f"fm-written-{users}-{i}", intermediate_panes=True))
            n, f, w = statistics.median(native), statistics.median(ours), statistics.median(written)
            cells = [f"{2 * users:,}", f"{rows:,}", str(files), f"{n:.1f}", f"{f:.1f}"]
            table.add_row(*cells, f"{rows / n:,.0f}", f"{rows / f:,.0f}", f"{n / f:.2f}x", f"{w:.1f}", f"{n / w:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    Console(width=160).print(table)
    spark.stop()


if __name__ == "__main__":
    main()
