"""A long run: one floodmark query for ``--minutes`` of micro-batches, its driver's memory sampled.

    .venv/bin/python bench/soak.py                        # 30 minutes, floodmark's session settings
    .venv/bin/python bench/soak.py --minutes 10 --spark-retention   # Spark's own status retention, to compare

The query reads Spark's ``rate`` source (``--rows-per-second``, event time = the row's timestamp, ``--keys`` keys,
4 splits), counts and sums per key in 10-second tumbling windows (bound 1 s) and writes its panes to Parquet
files, a batch every ``--trigger`` (Spark's processing-time trigger), as a production query runs: unbounded,
started with ``start()``. Every ``--sample-s`` seconds it samples, after a full garbage collection of the driver's
JVM (``System.gc()`` through py4j), the JVM's heap in use; the resident memory of this Python process (the
driver's: floodmark's controller, reports, listeners); and the resident memory of the Python processes under the
JVM (Spark's Python workers: the executors' side in local mode); the heap is the least of three readings 2 s apart
(a batch running at a reading holds rows that do not stay). At the end it prints the samples, the growth
per hour of each over the second half of the run (a Theil-Sen slope: the first half holds the warm-up), and
the classes whose instance bytes grew most between the first sample and the last (``jcmd GC.class_histogram``).

Memory is what this measures, not speed: other work on the machine slows the batches, not the figures.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session

SPARK_RETENTION = {  # floodmark's are floodmark.jvm.settings.STATUS_RETENTION
    "spark.ui.retainedJobs": "1000",
    "spark.ui.retainedStages": "1000",
    "spark.ui.retainedTasks": "100000",
    "spark.sql.ui.retainedExecutions": "1000",
    "spark.sql.streaming.ui.retainedProgressUpdates": "100",
    "spark.sql.streaming.ui.retainedQueries": "100",
}
"""Spark's defaults for the status it keeps in the driver's memory (what ``--spark-retention`` restores)."""


@dataclass
class Sample:
    seconds: float
    batches: int
    heap_mb: float
    """The driver JVM's heap in use right after a full collection."""
    driver_python_mb: float
    workers_python_mb: float


def rss_mb(process: psutil.Process) -> float:
    return process.memory_info().rss / 1e6


def workers_mb(me: psutil.Process) -> float:
    total = 0.0
    for child in me.children(recursive=True):
        try:
            if "python" in child.name().lower():
                total += rss_mb(child)
        except psutil.Error:
            continue
    return total


def heap_after_gc_mb(spark, tries: int = 3) -> float:
    """The least of ``tries`` readings 2 s apart, each right after a full collection: a batch running at a reading
    holds its own rows and buffers, which are not what stays."""
    jvm = spark.sparkContext._jvm
    readings = []
    for attempt in range(tries):
        if attempt:
            time.sleep(2)
        jvm.java.lang.System.gc()
        readings.append(jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed())
    return min(readings) / 1e6


def class_histogram(pid: int) -> dict[str, int]:
    """Bytes per class in the JVM's heap (``jcmd GC.class_histogram``, which collects first)."""
    out = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in out.splitlines():
        match = re.match(r"\s*\d+:\s+(\d+)\s+(\d+)\s+(\S+)", line)
        if match:
            sizes[match.group(3)] = int(match.group(2))
    return sizes


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Theil-Sen slope of (seconds, MB) points (the median of the slopes between every two points: a reading
    taken while a batch held memory does not tilt it), in MB per hour."""
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :] if x2 != x1]
    return statistics.median(slopes) * 3600 if slopes else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rows-per-second", type=int, default=2_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--sample-s", type=float, default=60.0)
    parser.add_argument(
        "--spark-retention", action="store_true", help="keep Spark's default status retention (see SPARK_RETENTION)"
    )
    args = parser.parse_args()
    console = Console()

    work = Path(tempfile.mkdtemp(prefix="floodmark-soak-"))
    spark = local_session("floodmark-soak", 2, 2, conf=SPARK_RETENTION if args.spark_retention else None)
    rows = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .option("numPartitions", 2)
        .load()
        .select(
            F.col("timestamp").alias("ts"),
            (F.col("value") % args.keys).cast("string").alias("k"),
            (F.col("value") % 4).cast("int").alias("p"),
            F.col("value").cast("double").alias("v"),
        )
    )
    aggregation = EventTimeAggregation(
        rows,
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(10_000), {"n": aggregates.count(), "total": aggregates.sum("v")}),
        time=SourceTime(
            WatermarkStrategy.for_bounded_out_of_orderness(1_000), split="p", known_splits=["0", "1", "2", "3"]
        ),
    )
    me = psutil.Process()
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    handle = aggregation.start(str(work / "ckpt"), str(work / "out"), trigger_interval=args.trigger)
    samples: list[Sample] = []
    first_histogram: dict[str, int] = {}
    started = time.monotonic()
    try:
        handle.await_batches(1, timeout_s=300)
        first_histogram = class_histogram(pid)
        while True:
            elapsed = time.monotonic() - started
            samples.append(
                Sample(elapsed, handle.batches_completed, heap_after_gc_mb(spark), rss_mb(me), workers_mb(me))
            )
            s = samples[-1]
            console.print(
                f"{elapsed / 60:5.1f} min  {s.batches:6d} batches  heap {s.heap_mb:7.1f} MB  "
                f"driver Python {s.driver_python_mb:6.1f} MB  workers' Python {s.workers_python_mb:6.1f} MB"
            )
            if elapsed >= args.minutes * 60 or not handle.isActive:
                break
            time.sleep(max(0.0, min(args.sample_s, args.minutes * 60 - elapsed)))
        last_histogram = class_histogram(pid)
    finally:
        handle.stop()
    if handle.exception() is not None:
        raise SystemExit(f"the query failed: {handle.exception()}")

    table = Table(title=f"floodmark soak: {args.minutes:g} min, {args.rows_per_second} rows/s, {args.keys} keys")
    for column in ("minute", "batches", "heap after GC (MB)", "driver Python (MB)", "workers' Python (MB)"):
        table.add_column(column, justify="right")
    for s in samples:
        table.add_row(
            f"{s.seconds / 60:.1f}",
            str(s.batches),
            f"{s.heap_mb:.1f}",
            f"{s.driver_python_mb:.1f}",
            f"{s.workers_python_mb:.1f}",
        )
    console.print(table)
    second_half = [s for s in samples if s.seconds >= samples[-1].seconds / 2]
    for label, value in (
        ("heap after GC", lambda s: s.heap_mb),
        ("driver Python", lambda s: s.driver_python_mb),
        ("workers' Python", lambda s: s.workers_python_mb),
    ):
        slope = slope_per_hour([(s.seconds, value(s)) for s in second_half])
        console.print(f"{label}: {slope:+.1f} MB per hour over the second half ({len(second_half)} samples)")
    grown = sorted(
        ((last_histogram.get(c, 0) - first_histogram.get(c, 0), c) for c in set(first_histogram) | set(last_histogram)),
        reverse=True,
    )[:12]
    console.print("classes whose instances grew most in the JVM's heap (first sample -> last):")
    for delta, name in grown:
        console.print(f"  {delta / 1e6:+8.2f} MB  {name}")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
