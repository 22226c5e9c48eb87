"""Nexmark's event-time queries on bids, floodmark against native Spark, beside Flink's published figures.

    .venv/bin/python bench/nexmark.py --events 2000000 --repeat 2

Bids shaped like Nexmark's generator (``nexmark-flink``'s ``BidGenerator``: auctions and bidders created as the
stream goes, a bid goes to one of the 100 newest auctions, half of them to a "hot" auction, and to one of the
1,000 newest bidders, three in four of them to a hot bidder; prices 10^(0..6) cents), ``--events`` bids over
``--minutes`` of event time in ``--files`` Parquet files (one per batch, in order per split with 2 s of jitter,
4 splits). Only bids: Nexmark's persons and auctions are not read by these queries. The queries:

* **q5** (hot items): bids per auction in sliding windows of 10 s every 2 s, then the highest count per window
  (native: a chained aggregation over ``window_time``; floodmark: a second, global stage of 2 s tumbling windows
  over the first stage's panes, whose panes are not written: ``Outputs.files(..., panes=False)``). Nexmark's q5
  also joins back to name the auctions with that count; that join is left out.
* **q11** (user sessions): bids per bidder in session windows with a 10 s gap.
* **q12** (processing-time windows): bids per bidder in 10 s windows of processing time. floodmark: a global
  window with ``Repeatedly(AfterProcessingTime(10 s))``, discarding (Beam's q12); native: tumbling windows over
  ``current_timestamp()`` (the batch's time) with a zero watermark.

Both engines read the same files in one session (local[2]): native ``withWatermark(5 s)`` into ``noop`` with
``availableNow``; floodmark ``run_to_completion`` with panes to Parquet (bound 5 s). Each query runs once per
engine unmeasured, then ``--repeat`` times alternating; medians. "events/s per core" divides by the 2 cores.
Flink's figures: the nexmark repository's README (Flink 1.13, events/s per core: q5 22.1k, q11 39.7k,
q12 75.7k), measured on other machines with Nexmark's own source: an anchor, not a race.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table
from throughput import run_to_noop

from floodmark import AccumulationMode, WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.spark import EventTimeAggregation, Outputs, Pipeline, SourceTime, local_session

SCHEMA = "ts LONG, auction LONG, bidder LONG, price LONG, p INT"
CORES = 2
SECOND = 1_000


@dataclass(frozen=True)
class Query:
    name: str
    key: str
    native: Callable[[DataFrame], DataFrame]
    """The native aggregation of the bids (with ``t``, their event time as a timestamp)."""
    spec: WindowSpec
    flink_per_core: int | None
    then: WindowSpec | None = None
    """A second, global stage over the first one's panes (its panes are the query's result)."""


QUERIES = {
    "q5": Query(
        "q5: most bids per auction, sliding 10 s / 2 s",
        "auction",
        lambda bids: (
            bids.withWatermark("t", "5 seconds")
            .groupBy(F.window("t", "10 seconds", "2 seconds"), "auction")
            .count()
            .groupBy(F.window(F.window_time("window"), "2 seconds"))
            .agg(F.max("count"))
        ),
        WindowSpec(windows.Sliding(10 * SECOND, 2 * SECOND), {"n": aggregates.count()}),
        22_100,
        then=WindowSpec(windows.Tumbling(2 * SECOND), {"most": aggregates.max("n")}),
    ),
    "q11": Query(
        "q11: bids per bidder, sessions gap 10 s",
        "bidder",
        lambda bids: (
            bids.withWatermark("t", "5 seconds").groupBy(F.session_window("t", "10 seconds"), "bidder").count()
        ),
        WindowSpec(windows.Sessions(10 * SECOND), {"n": aggregates.count()}),
        39_700,
    ),
    "q12": Query(
        "q12: bids per bidder, 10 s of processing time",
        "bidder",
        lambda bids: (
            bids.withColumn("pt", F.current_timestamp())
            .withWatermark("pt", "0 seconds")
            .groupBy(F.window("pt", "10 seconds"), "bidder")
            .count()
        ),
        WindowSpec(
            windows.Global(),
            {"n": aggregates.count()},
            trigger=triggers.Repeatedly(triggers.AfterProcessingTime(10 * SECOND)),
            accumulation=AccumulationMode.DISCARDING,
        ),
        75_700,
    ),
}


def generate(directory: Path, events: int, minutes: int, files: int, seed: int = 5) -> None:
    """``events`` bids in ``files`` Parquet files (see the module docstring for their shape)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    per_file, span = events // files, minutes * 60_000
    for f in range(files):
        first = f * per_file
        number = np.arange(first, first + per_file)
        # Nexmark's proportions: of every 50 events 1 is a person, 3 are auctions, 46 are bids.
        newest_auction, newest_person = number * 3 // 46, number // 46
        auction = np.maximum(newest_auction - rng.integers(0, 100, per_file), 0)
        auction = np.where(rng.integers(0, 2, per_file) > 0, auction // 100 * 100, auction)
        bidder = np.maximum(newest_person - rng.integers(0, 1_000, per_file), 0)
        bidder = np.where(rng.integers(0, 4, per_file) > 0, bidder // 100 * 100, bidder)
        start = f * span // files
        ts = start + np.sort(rng.integers(0, span // files, per_file)) + rng.integers(-2_000, 2_000, per_file)
        frame = pd.DataFrame(
            {
                "ts": ts.clip(0).astype(np.int64),
                "auction": auction.astype(np.int64),
                "bidder": bidder.astype(np.int64),
                "price": np.round(10.0 ** (rng.random(per_file) * 6.0) * 100.0).astype(np.int64),
                "p": rng.integers(0, 4, per_file).astype(np.int32),
            }
        )
        frame.to_parquet(directory / f"part-{f:03d}.parquet", index=False)


def bids(spark, directory: Path) -> DataFrame:
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(directory))


def native_run(spark, query: Query, data: Path, work: Path) -> float:
    frame = query.native(bids(spark, data).withColumn("t", F.timestamp_millis("ts")))
    return run_to_noop(frame, work / "ckpt")[0]


def floodmark_run(spark, query: Query, data: Path, work: Path, host: str = "python", map_side: str = "arrow") -> float:
    time_of_bids = SourceTime(
        WatermarkStrategy.for_bounded_out_of_orderness(5 * SECOND), split="p", known_splits=["0", "1", "2", "3"]
    )
    if query.then is None:
        run = EventTimeAggregation(
            bids(spark, data),
            "ts",
            [query.key],
            query.spec,
            time_of_bids,
            host=host,  # type: ignore[arg-type]
            map_side=map_side,  # type: ignore[arg-type]
        )
        output: str | dict[str, str | Outputs] = str(work / "out")
    else:
        run = Pipeline(host=host, map_side=map_side)  # type: ignore[arg-type]
        run.source("bids", bids(spark, data), "ts", time_of_bids)
        run.stage("counts", "bids", query.spec, [query.key])
        run.stage("result", "counts", query.then)
        output = {"counts": Outputs.files(str(work / "counts"), panes=False), "result": str(work / "out")}
    started = time.perf_counter()
    handle = run.run_to_completion(str(work / "ckpt"), output, timeout_s=3_600)
    elapsed = time.perf_counter() - started
    rows = spark.read.parquet(str(data)).count()
    # Every bid in exactly one pane per window it belongs to (size / slide of them for sliding windows).
    per_bid = query.spec.window.size // query.spec.window.slide if isinstance(query.spec.window, windows.Sliding) else 1
    if query.then is None:
        counted = spark.read.parquet(str(work / "out" / "panes")).agg(F.sum("n")).first()[0]
    else:
        counted = handle.stage_reconciliation("counts").window_pairs
    assert counted == rows * per_bid, f"{query.name}: floodmark counted {counted} of {rows * per_bid}"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", nargs="+", choices=sorted(QUERIES), default=sorted(QUERIES))
    parser.add_argument("--host", choices=["python", "jvm"], default="python", help="floodmark's stateful host")
    parser.add_argument("--map-side", choices=["arrow", "jvm"], default="arrow", help="floodmark's map side")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="floodmark-nexmark-"))
    data = work / "bids"
    generate(data, args.events, args.minutes, args.files)
    events = args.events // args.files * args.files
    spark = local_session("floodmark-nexmark", cores=CORES, shuffle_partitions=CORES)
    table = Table(
        title=f"Nexmark bids: {events:,} events over {args.minutes} min, {args.files} batches, local[{CORES}], "
        f"median of {args.repeat}"
    )
    for column in ("query", "native events/s/core", "floodmark events/s/core", "ratio", "Flink 1.13 events/s/core"):
        table.add_column(column, justify="right")
    for name in args.only:
        query = QUERIES[name]
        native_run(spark, query, data, work / f"{name}-native-warm-up")
        floodmark_run(spark, query, data, work / f"{name}-fm-warm-up", args.host, args.map_side)
        native_s, floodmark_s = [], []
        for run in range(args.repeat):
            native_s.append(native_run(spark, query, data, work / f"{name}-native-{run}"))
            floodmark_s.append(floodmark_run(spark, query, data, work / f"{name}-fm-{run}", args.host, args.map_side))
        native_rate = events / statistics.median(native_s) / CORES
        floodmark_rate = events / statistics.median(floodmark_s) / CORES
        flink = f"{query.flink_per_core:,}" if query.flink_per_core else "-"
        table.add_row(
            query.name, f"{native_rate:,.0f}", f"{floodmark_rate:,.0f}", f"{floodmark_rate / native_rate:.2f}x", flink
        )
    spark.stop()
    Console(width=200).print(table)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
