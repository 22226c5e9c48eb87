"""The end-of-input flush of many open windows on Spark, in a fresh process (cold JVM and Python workers).

    .venv/bin/python bench/flush.py                    # 1M keys, 2M rows in 8 files, 4 files per batch
    .venv/bin/python bench/flush.py --event-log DIR    # also Spark's event log (task metrics per stage)
    .venv/bin/python bench/flush.py --runs 3           # 3 runs in one session: the later ones are warm
    .venv/bin/python bench/flush.py --host jvm         # the stateful step on the JVM host

One-hour tumbling windows over 10 minutes of event time, so no window fires before the end of input: the
last batch fires every window (865k panes for 1M keys) and writes them to Parquet. Prints each batch's
seconds (from its control entry's processing time to the next one) and Spark's ``durationMs``.
``bench/all.py``'s ``tumbling-1m`` row measures the same flush in a warm session (3.2-3.7 s when first measured;
this cold one took 5.3-6.8 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from throughput import SCHEMA, generate

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime
from floodmark.spark.driver.session import cluster_session, local_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--event-log", type=Path, default=None, help="write Spark's event log there")
    parser.add_argument("--runs", type=int, default=1, help="runs in one session, each on a fresh checkpoint")
    parser.add_argument("--host", choices=["python", "jvm"], default="python", help="floodmark's stateful host")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="floodmark-bench-flush-"))
    generate(work / "data", args.rows, args.keys, 10, 8)
    if args.event_log:
        args.event_log.mkdir(parents=True, exist_ok=True)
        conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(args.event_log)}
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, as local_session
        spark = cluster_session("local[2]", "floodmark-bench-flush", shuffle_partitions=2, conf=conf)
    else:
        spark = local_session("floodmark-bench-flush", cores=2, shuffle_partitions=2)
    for run in range(args.runs):
        stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 4).parquet(str(work / "data"))
        aggregation = EventTimeAggregation(
            stream,
            event_time="ts",
            key_by=["k"],
            spec=WindowSpec(windows.Tumbling(3_600_000), {"n": aggregates.count()}),
            time=SourceTime(
                WatermarkStrategy.for_bounded_out_of_orderness(5_000), split="p", known_splits=list("0123")
            ),
            host=args.host,
        )
        started = time.perf_counter()
        handle = aggregation.run_to_completion(str(work / f"ckpt{run}"), str(work / f"out{run}"), timeout_s=3_600)
        print(f"run {run}: {time.perf_counter() - started:.1f} s")
        progress = {p.batchId: p.durationMs for p in handle.query.recentProgress}
        for report in handle.reports:
            seconds = (report.next_processing_time - report.processing_time) / 1000
            took = progress.get(report.batch_id)
            print(f"  batch {report.batch_id}: {report.records:,} records, {seconds:.1f} s, {took}")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
