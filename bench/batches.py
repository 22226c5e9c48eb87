"""Where a bounded run's time goes, batch by batch: native Spark against floodmark.

    FLOODMARK_QUIET=1 .venv/bin/python bench/batches.py --keys 100 --repeat 3

Both engines read the same Parquet input (``--files`` files of 2M rows in all, one file per batch, ``--keys`` keys,
10 minutes of event time; ``bench/throughput.py``'s generator) in one session (local[2]): native Spark is
``bench/all.py``'s (``withWatermark(5 s)``, a 1-minute tumbling count, ``availableNow``), to ``noop`` and to Parquet;
floodmark is ``bench/all.py``'s ``EventTimeAggregation`` (``run_to_completion``, panes to Parquet) with each map
side, on each host; with the defaults (the Arrow map side, the JVM host) once more with the panes not written
(against native's ``noop``); and with the JVM map side twice more: the end of input as it was decided before (a batch
that reads nothing, then the flush) and, with ``--other-buckets N``, N state buckets. One warm-up run per engine,
then the engines alternate ``--repeat`` times; every cell is a median over the runs.

Columns: the run's wall seconds and batches (of which without input); Spark's progress per batch with input after
the first (``triggerExecution``, ``addBatch``: the sink's call, ``queryPlanning``, the offset and commit logs' writes);
the first batch; the batches after the last input (floodmark's end of input); and, for floodmark, the time its
``foreachBatch`` call spends outside Spark's jobs (the driver's Python: the control entry, the controller, the
reports), measured around ``BatchSink._write`` and its one job (``_run_observed``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table
from throughput import aggregation, generate, native_counts

from floodmark.driver.controller import Controller
from floodmark.spark import Outputs, local_session
from floodmark.spark.outputs.batch_sink import BatchSink


@dataclass
class Sample:
    """One run: its wall time and Spark's progress events, and floodmark's driver time per batch (ms)."""

    seconds: float
    progress: list
    driver_ms: list[float] = field(default_factory=list)
    started_wall: float = 0.0

    def to_last_batch_s(self) -> float:
        """From the run's start to the end of its last batch (Spark's progress): the run without the time a bounded
        run takes to see that it is over and stop."""
        ends = [
            datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
            + p.durationMs.get("triggerExecution", 0) / 1000
            for p in self.progress
        ]
        return max(ends) - self.started_wall


class DriverClock:
    """Times each ``BatchSink._write`` and the job inside it; the difference is the driver's own work."""

    def __init__(self) -> None:
        self.driver_ms: list[float] = []
        self._job = 0.0

    def install(self) -> None:
        write, run = BatchSink._write, BatchSink._run_observed

        def timed_write(sink, frame, batch_id):
            self._job = 0.0
            started = time.perf_counter()
            write(sink, frame, batch_id)
            self.driver_ms.append((time.perf_counter() - started - self._job) * 1000)

        def timed_run(sink, frame, writer):
            started = time.perf_counter()
            try:
                return run(sink, frame, writer)
            finally:
                self._job += time.perf_counter() - started

        BatchSink._write = timed_write  # type: ignore[method-assign]
        BatchSink._run_observed = timed_run  # type: ignore[method-assign]


def native(spark, data: Path, work: Path, sink: str) -> Sample:
    started, wall = time.perf_counter(), time.time()
    query = native_counts(spark, data, work / "ckpt", lambda t: F.window(t, "1 minute"), sink=sink)
    return Sample(time.perf_counter() - started, query.recentProgress, started_wall=wall)


def floodmark(
    spark,
    data: Path,
    work: Path,
    map_side: str,
    clock: DriverClock,
    buckets: int | None = None,
    fold: bool = True,
    host: str = "python",
    panes: bool = True,
) -> Sample:
    """``fold=False``: the end of input as it was decided before, decided after a batch that read nothing, the flush
    in the batch after it (``Controller.begin_batch`` told that no batch is the end of input as it begins).
    ``panes=False``: the panes are not written (``Outputs.files(root, panes=False)``), so that the row is
    floodmark's engine against native's ``noop``."""
    agg = aggregation(spark, data, map_side=map_side, host=host)  # type: ignore[arg-type]
    agg.pipeline.buckets = buckets
    clock.driver_ms = []
    folds = Controller._input_exhausted_before
    if not fold:
        Controller._input_exhausted_before = lambda self, entry, batch_id: False  # type: ignore[method-assign]
    try:
        started, wall = time.perf_counter(), time.time()
        output = Outputs.files(str(work / "out"), panes=panes)
        handle = agg.run_to_completion(str(work / "ckpt"), output, timeout_s=3_600)
        seconds = time.perf_counter() - started
    finally:
        Controller._input_exhausted_before = folds  # type: ignore[method-assign]
    return Sample(seconds, handle.query.recentProgress, clock.driver_ms, started_wall=wall)


def _ms(progress, key: str) -> int:
    return int(progress.durationMs.get(key, 0))


def _input_rows(progress) -> int:
    """Rows the batch read from the Parquet input (not floodmark's tick rows)."""
    return sum(int(s.numInputRows) for s in progress.sources if "FileStream" in s.description)


def summary(name: str, samples: list[Sample]) -> list[str]:
    def med(values: list[float]) -> str:
        return f"{statistics.median(values):,.0f}" if values else "-"

    def per_run(measure: Callable[[Sample], float]) -> str:
        return med([measure(s) for s in samples])

    def with_input(s: Sample) -> list:
        return [p for p in s.progress if _input_rows(p) > 0 and p.batchId > 0]

    def after_input(s: Sample) -> list:
        last = max((p.batchId for p in s.progress if _input_rows(p) > 0), default=-1)
        return [p for p in s.progress if p.batchId > last]

    return [
        name,
        f"{statistics.median(s.seconds for s in samples):.2f}",
        per_run(lambda s: len(s.progress)),
        per_run(lambda s: sum(1 for p in s.progress if _input_rows(p) == 0)),
        per_run(lambda s: statistics.median(_ms(p, "triggerExecution") for p in with_input(s))),
        per_run(lambda s: statistics.median(_ms(p, "addBatch") for p in with_input(s))),
        per_run(lambda s: statistics.median(_ms(p, "queryPlanning") for p in with_input(s))),
        per_run(lambda s: statistics.median(_ms(p, "walCommit") + _ms(p, "commitOffsets") for p in with_input(s))),
        per_run(lambda s: _ms(s.progress[0], "triggerExecution")),
        per_run(lambda s: sum(_ms(p, "triggerExecution") for p in after_input(s))),
        per_run(lambda s: statistics.median(s.driver_ms)) if samples[0].driver_ms else "-",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--buckets", type=int, default=None, help="floodmark's state buckets (default: its own)")
    parser.add_argument("--other-buckets", type=int, default=None, help="a row with this many buckets as well")
    parser.add_argument("--only", nargs="+", default=None, help="rows whose engine names contain one of these")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="floodmark-bench-batches-"))
    data = work / "in"
    generate(data, args.rows, args.keys, 10, args.files)
    spark = local_session("floodmark-bench-batches", cores=2, shuffle_partitions=2)
    clock = DriverClock()
    clock.install()
    engines: dict[str, Callable[[Path], Sample]] = {
        "native (noop)": lambda w: native(spark, data, w, "noop"),
        "native (Parquet)": lambda w: native(spark, data, w, "parquet"),
        "floodmark, Arrow map side": lambda w: floodmark(spark, data, w, "arrow", clock, args.buckets),
        "floodmark, JVM map side": lambda w: floodmark(spark, data, w, "jvm", clock, args.buckets),
    }
    engines["floodmark, JVM map side, JVM host"] = lambda w: floodmark(
        spark, data, w, "jvm", clock, args.buckets, host="jvm"
    )
    engines["floodmark, Arrow map side, JVM host"] = lambda w: floodmark(
        spark, data, w, "arrow", clock, args.buckets, host="jvm"
    )
    engines["floodmark, Arrow map side, JVM host, panes not written"] = lambda w: floodmark(
        spark, data, w, "arrow", clock, args.buckets, host="jvm", panes=False
    )
    engines["floodmark, JVM map side, flush after an empty batch"] = lambda w: floodmark(
        spark, data, w, "jvm", clock, args.buckets, fold=False
    )
    if args.other_buckets:
        engines[f"floodmark, JVM map side, {args.other_buckets} buckets"] = lambda w: floodmark(
            spark, data, w, "jvm", clock, args.other_buckets
        )
    if args.only:
        engines = {name: run for name, run in engines.items() if any(part in name for part in args.only)}
    for index, run in enumerate(engines.values()):
        run(work / f"warm-up-{index}")
    samples: dict[str, list[Sample]] = {name: [] for name in engines}
    for attempt in range(args.repeat):
        for index, (name, run) in enumerate(engines.items()):
            samples[name].append(run(work / f"run-{attempt}-{index}"))
    table = Table(
        title=f"{args.rows:,} rows, {args.keys:,} keys, {args.files} files: ms per batch, medians of {args.repeat} runs"
    )
    for column in (
        "engine",
        "run s",
        "batches",
        "empty",
        "trigger",
        "addBatch",
        "planning",
        "wal+commit",
        "1st batch",
        "after input",
        "driver",
    ):
        table.add_column(column, justify="right")
    for name, runs in samples.items():
        table.add_row(*summary(name, runs))
    Console(width=200).print(table)
    baseline = samples.get("native (Parquet)")
    if baseline:  # each round's runs are adjacent: the ratio per round, then its median and range
        paired = Table(
            title=(
                "against native (Parquet), per round: ratios of run s, of the time to the last batch's end and "
                "of the per-batch trigger"
            )
        )
        for column in (
            "engine",
            "run s: median",
            "min",
            "max",
            "to last batch: median",
            "min",
            "max",
            "per batch: median",
            "min",
            "max",
        ):
            paired.add_column(column, justify="right")

        def batch_ms(sample: Sample) -> float:
            return statistics.median(
                _ms(p, "triggerExecution") for p in sample.progress if _input_rows(p) > 0 and p.batchId > 0
            )

        for name, runs in samples.items():
            whole = [b.seconds / r.seconds for b, r in zip(baseline, runs, strict=True)]
            last = [b.to_last_batch_s() / r.to_last_batch_s() for b, r in zip(baseline, runs, strict=True)]
            each = [batch_ms(b) / batch_ms(r) for b, r in zip(baseline, runs, strict=True)]
            paired.add_row(name, *(f"{f(v):.2f}x" for v in (whole, last, each) for f in (statistics.median, min, max)))
        Console(width=200).print(paired)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
