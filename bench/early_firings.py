"""What speculative (EARLY) panes cost: floodmark with and without early firings, same files, rows/second.

    .venv/bin/python bench/early_firings.py --rows 2000000 --keys 100000

Native Spark has no early firings, so the baseline is floodmark's own Default
trigger on the same input (the table also shows native's noop-sink rate for
scale). ``AfterWatermark(early=AfterProcessingTime(delay))`` runs on the
columnar operator with map-side partials; ``early=AfterCount(n)`` on the columnar
operator with raw records (a pane after exactly n records needs the records);
``late=AfterCount(2)`` only on the general operator (one Python object per
window), which shows what that path costs.
Input, warm-up and medians as in ``bench/throughput.py``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from throughput import aggregation, generate, native_run

from floodmark import triggers
from floodmark.spark import local_session
from floodmark.spark.plan import RuntimePlan


def floodmark_rate(spark, data: Path, work: Path, trigger: triggers.Trigger, rows: int) -> tuple[float, str]:
    agg = aggregation(spark, data, trigger)
    plan: RuntimePlan = agg.plan
    operator = "columnar" if plan.stage.spec.is_columnar else "general"
    shipped = "partials" if plan.stage.combines else "raw records"
    started = time.perf_counter()
    agg.run_to_completion(str(work / "ckpt"), str(work / "out"), timeout_s=3_600)
    return rows / (time.perf_counter() - started), f"{operator}, {shipped}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[100_000])
    parser.add_argument("--delay-ms", type=int, default=1_000, help="early firing delay (processing time)")
    parser.add_argument("--count", type=int, default=100, help="early firing every N records (AfterCount)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="floodmark-early-"))
    spark = local_session("floodmark-bench-early", cores=2, shuffle_partitions=2)
    variants = {
        "Default()": triggers.Default(),
        f"AfterWatermark(early=AfterProcessingTime({args.delay_ms}))": triggers.AfterWatermark(
            early=triggers.AfterProcessingTime(args.delay_ms)
        ),
        f"AfterWatermark(early=AfterCount({args.count}))": triggers.AfterWatermark(
            early=triggers.AfterCount(args.count)
        ),
        "AfterWatermark(late=AfterCount(2))": triggers.AfterWatermark(late=triggers.AfterCount(2)),
    }
    table = Table(title=f"tumbling 1-minute count, {args.rows:,} rows, 4 splits, local[2], median of {args.repeat}")
    for column in ("keys", "trigger", "operator", "floodmark rows/s", "vs Default()", "native noop rows/s"):
        table.add_column(column, justify="right")
    for index, keys in enumerate(args.keys):
        data = work / f"data-{keys}"
        shutil.rmtree(data, ignore_errors=True)
        generate(data, args.rows, keys, 10, 8)
        if index == 0:  # warm-up, not measured
            native_run(spark, data, work / "native-warm-up")
            floodmark_rate(spark, data, work / "fm-warm-up", triggers.Default(), args.rows)
        native_rates = []
        for run in range(args.repeat):
            elapsed, rows, _ = native_run(spark, data, work / f"native-{keys}-{run}")
            native_rates.append(rows / elapsed)
        native = statistics.median(native_rates)
        baseline = None
        for name, trigger in variants.items():
            rates, operator = [], ""
            for run in range(args.repeat):
                rate, operator = floodmark_rate(spark, data, work / f"{name}-{keys}-{run}", trigger, args.rows)
                rates.append(rate)
            rate = statistics.median(rates)
            baseline = baseline or rate
            table.add_row(f"{keys:,}", name, operator, f"{rate:,.0f}", f"{rate / baseline:.2f}x", f"{native:,.0f}")
    Console(width=200).print(table)
    spark.stop()


if __name__ == "__main__":
    main()
