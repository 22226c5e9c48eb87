"""Watermark alignment on a Kafka replay: one partition starts hours behind the others.

    .venv/bin/python bench/alignment.py --rows 400000 --behind-hours 3

A 4-partition topic of a real broker on loopback: partition 0 holds ``--behind-hours`` + 1 hours of events,
partitions 1-3 only the last hour (``--keys`` keys, one event per partition every few seconds, in order per
partition). Every engine reads it with Spark's Kafka source, ``maxOffsetsPerTrigger`` = rows / ``--batches``,
and counts 1-minute tumbling windows per key:

* native Spark: ``withWatermark("5 seconds")`` (one global watermark: MAX event time - 5 s) into the ``noop``
  sink; the rows it drops as too late are Spark's ``numRowsDroppedByWatermark``;
* floodmark without alignment: per-partition watermarks (bound 5 s), MIN-combined: nothing is late, but the
  windows partitions 1-3 open wait for partition 0;
* floodmark aligned: the same with ``with_watermark_alignment("replay", --drift-minutes)``: partitions 1-3 are
  paused while they are more than the drift ahead of partition 0.

The table shows rows/s, batches, the peak of open windows (floodmark's gauge; native's state rows), and the late
records (floodmark's late output; native's dropped rows). Each engine runs ``--repeat`` times alternating (the
first floodmark and native runs are a warm-up); medians of the rates, the other columns are the same each run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
from kafka_throughput import minute_counts, native_minute_counts
from rich.console import Console
from rich.table import Table
from throughput import run_to_noop

from floodmark import WatermarkStrategy
from floodmark.spark import local_session
from floodmark_dev.kafka import KafkaBroker

HOUR = 3_600_000


def fill_topic(broker: KafkaBroker, topic: str, rows: int, keys: int, behind_hours: int) -> int:
    """Partition 0: ``behind_hours`` + 1 hours of events; partitions 1-3: the last hour; ``rows`` in all, spread
    so that every partition sends at the same rate per hour of event time."""
    broker.create_topic(topic, partitions=4)
    rng = np.random.default_rng(7)
    spans = {
        0: (0, (behind_hours + 1) * HOUR),
        **{p: (behind_hours * HOUR, (behind_hours + 1) * HOUR) for p in (1, 2, 3)},
    }
    hours = sum((end - start) / HOUR for start, end in spans.values())
    total = 0
    for partition, (start, end) in spans.items():
        count = int(rows * (end - start) / HOUR / hours)
        stamps = np.linspace(start, end - 1, count).astype(np.int64)
        chosen = rng.integers(0, keys, count)
        values = [json.dumps({"ts": int(ts), "k": f"k{key}"}) for ts, key in zip(stamps, chosen, strict=True)]
        total += broker.produce(topic, values, partition=partition)
    return total


def native_run(spark, broker: KafkaBroker, topic: str, per_batch: int, work: Path) -> dict[str, float]:
    elapsed, query = run_to_noop(native_minute_counts(spark, broker, topic, per_batch), work / "ckpt")
    progress = [p for p in query.recentProgress if p["stateOperators"]]
    return {
        "seconds": elapsed,
        "batches": len(progress),
        "peak": max(p["stateOperators"][0]["numRowsTotal"] for p in progress),
        "late": sum(p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in progress),
    }


def floodmark_run(
    spark, broker: KafkaBroker, topic: str, per_batch: int, work: Path, drift_minutes: int | None
) -> dict[str, float]:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
    if drift_minutes is not None:
        strategy = strategy.with_watermark_alignment("replay", timedelta(minutes=drift_minutes))
    aggregation = minute_counts(spark, broker, topic, per_batch, strategy)
    started = time.perf_counter()
    query = aggregation.run_to_completion(str(work / "ckpt"), str(work / "out"), timeout_s=3_600)
    elapsed = time.perf_counter() - started
    return {
        "seconds": elapsed,
        "batches": len(query.reports),
        "peak": max(r.open_windows for r in query.reports),
        "late": sum(r.late for r in query.reports),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--behind-hours", type=int, default=3)
    parser.add_argument("--drift-minutes", type=int, default=10)
    parser.add_argument("--batches", type=int, default=40, help="maxOffsetsPerTrigger = rows / batches")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="floodmark-alignment-bench-"))
    engines = {
        "native Spark (global watermark)": lambda w: native_run(spark, broker, "replay", per_batch, w),
        "floodmark, no alignment": lambda w: floodmark_run(spark, broker, "replay", per_batch, w, None),
        f"floodmark, aligned ({args.drift_minutes} min drift)": lambda w: floodmark_run(
            spark, broker, "replay", per_batch, w, args.drift_minutes
        ),
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in engines}
    with KafkaBroker(heap="1g") as broker:
        spark = local_session("floodmark-alignment-bench", cores=2, shuffle_partitions=2)
        rows = fill_topic(broker, "replay", args.rows, args.keys, args.behind_hours)
        per_batch = max(1, args.rows // args.batches)
        for run in range(args.repeat + 1):  # run 0 warms the JVM up and is not shown
            for index, (name, engine) in enumerate(engines.items()):
                outcome = engine(work / f"{index}-{run}")
                if run:
                    results[name].append(outcome)
        spark.stop()
    table = Table(
        title=f"Kafka replay, partition 0 {args.behind_hours} h behind partitions 1-3: {rows:,} rows, "
        f"{args.keys} keys, 1-minute counts, maxOffsetsPerTrigger {per_batch:,}, local[2], median of {args.repeat}"
    )
    for column in ("engine", "rows/s", "batches", "peak open windows", "late records"):
        table.add_column(column, justify="right")
    for name, outcomes in results.items():
        rate = statistics.median(rows / o["seconds"] for o in outcomes)
        last = outcomes[-1]
        table.add_row(name, f"{rate:,.0f}", f"{last['batches']:.0f}", f"{last['peak']:,.0f}", f"{last['late']:,.0f}")
    Console(width=200).print(table)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
