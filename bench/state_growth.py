"""State that grows: one 60-minute window per key over a key space much larger than the rows (all.py's growth row).

    .venv/bin/python bench/state_growth.py                       # 3M and 6M rows, 8 batches each, one run each
    .venv/bin/python bench/state_growth.py --rows 1000000 --repeat 2

Every batch adds windows that stay open (no window ends in the 10 minutes of event time), so what a batch costs
as the state grows shows batch by batch: native Spark (``withWatermark(5 s)``, ``groupBy(window(t, 60 min),
k).count()``, ``noop`` sink) against floodmark (``EventTimeAggregation``, panes to Parquet, ``run_to_completion``:
its last batch is the flush that fires every window, which native never does). Keys are drawn from
``--key-space`` (20M), so nearly every row opens a window. Both engines read the same 8 Parquet files, one per
batch, in one session, alternating.

Columns: each engine's total seconds, its first and last data batches' seconds (Spark's ``triggerExecution``;
floodmark's flush apart), its checkpoint's state bytes on disk (Spark's ``state/`` folder: RocksDB files), and the
peak resident memory of floodmark's Python workers. ``bench/all.py --only growth`` runs the same rows.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table
from throughput import PythonMemory, aggregation, generate, native_counts

from floodmark import WindowSpec, aggregates, windows
from floodmark.spark import local_session

HOUR = 3_600_000
FILES = 8


@dataclass
class GrowthRun:
    seconds: float
    batches: list[float]
    """Seconds of each data batch, in order (floodmark's flush not included)."""
    flush_s: float | None
    state_bytes: int
    python_mb: float | None = None


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def native_growth(spark, data: Path, checkpoint: Path) -> GrowthRun:
    started = time.perf_counter()
    query = native_counts(spark, data, checkpoint, lambda t: F.window(t, "60 minutes"))
    seconds = time.perf_counter() - started
    batches = [p.durationMs.get("triggerExecution", 0) / 1000 for p in query.recentProgress if p.numInputRows > 0]
    return GrowthRun(seconds, batches, None, directory_bytes(checkpoint / "state"))


def floodmark_growth(spark, data: Path, work: Path) -> GrowthRun:
    agg = aggregation(spark, data, spec=WindowSpec(windows.Tumbling(HOUR), {"n": aggregates.count()}))
    with PythonMemory() as memory:
        started = time.perf_counter()
        handle = agg.run_to_completion(str(work / "ckpt"), str(work / "out"), timeout_s=7_200)
        seconds = time.perf_counter() - started
    # Each batch from its control entry's processing time to the next one's (the sink's end).
    batches = [(r.next_processing_time - r.processing_time) / 1000 for r in handle.reports if r.records]
    last = handle.reports[-1]
    return GrowthRun(
        seconds,
        batches,
        (last.next_processing_time - last.processing_time) / 1000,
        directory_bytes(work / "ckpt" / "spark" / "state"),
        memory.peak,
    )


def growth_table(spark, work: Path, sizes: list[int], key_space: int, repeat: int) -> Table:
    """Both engines at each size (``repeat`` alternating runs each; medians), as one table."""
    table = Table(title=f"state growth: one 60-min window per key, keys from {key_space:,}, {FILES} batches")
    for column in (
        "rows",
        "native s",
        "native batch 1 / 2 / last s",
        "native state MB",
        "floodmark s",
        "floodmark batch 1 / 2 / last s",
        "floodmark flush s",
        "floodmark state MB",
        "peak Python MB",
        "ratio",
    ):
        table.add_column(column, justify="right")
    for rows in sizes:
        data = work / f"growth-{rows}"
        shutil.rmtree(data, ignore_errors=True)
        generate(data, rows, key_space, 10, FILES)
        native: list[GrowthRun] = []
        ours: list[GrowthRun] = []
        for run in range(repeat):
            native.append(native_growth(spark, data, work / f"growth-native-{rows}-{run}"))
            ours.append(floodmark_growth(spark, data, work / f"growth-fm-{rows}-{run}"))
        shutil.rmtree(data, ignore_errors=True)

        def med(runs: list[GrowthRun], pick) -> float:
            return statistics.median(pick(r) for r in runs)

        def shape(runs: list[GrowthRun]) -> str:
            return " / ".join(f"{med(runs, lambda r, i=i: r.batches[i]):.1f}" for i in (0, 1, -1))

        native_s, ours_s = med(native, lambda r: r.seconds), med(ours, lambda r: r.seconds)
        table.add_row(
            f"{rows:,}",
            f"{native_s:.1f}",
            shape(native),
            f"{med(native, lambda r: r.state_bytes) / 1e6:,.0f}",
            f"{ours_s:.1f}",
            shape(ours),
            f"{med(ours, lambda r: r.flush_s or 0.0):.1f}",
            f"{med(ours, lambda r: r.state_bytes) / 1e6:,.0f}",
            f"{med(ours, lambda r: r.python_mb or 0.0):,.0f}",
            f"{native_s / ours_s:.2f}x",
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[3_000_000, 6_000_000], help="rows per size")
    parser.add_argument("--key-space", type=int, default=20_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="floodmark-bench-growth-"))
    spark = local_session("floodmark-bench-growth", cores=2, shuffle_partitions=2)
    try:
        # JIT, codegen and Python workers: a small run of each engine first, not measured.
        generate(work / "warm-up", 200_000, args.key_space, 10, FILES)
        native_growth(spark, work / "warm-up", work / "warm-up-native")
        floodmark_growth(spark, work / "warm-up", work / "warm-up-fm")
        Console(width=220).print(growth_table(spark, work, args.rows, args.key_space, args.repeat))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
