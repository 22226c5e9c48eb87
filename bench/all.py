"""Every workload against native Spark, in one run, one table.

    .venv/bin/python bench/all.py                  # the full run (~40 min on 2 cores)
    .venv/bin/python bench/all.py --quick          # smaller inputs, one run each (~10 min)
    .venv/bin/python bench/all.py --only sessions idle

Every row reads the same Parquet files with both engines in the same Spark session (local[2]): native Spark
(``withWatermark(5 s)`` + the closest aggregation, append mode, ``noop`` sink, ``availableNow``) and floodmark
(``EventTimeAggregation`` with 4 splits, bounded out-of-orderness 5 s, panes written to Parquet,
``run_to_completion``, whose batch after the input fires the last windows: native also runs a batch after
its input and never fires them). The input is ``--files`` files of ``--rows`` rows in all, one file per batch,
timestamps over 10 minutes of event time (``bench/throughput.py``'s generator). Before measuring, each engine
runs once on the first workload (a cold JVM makes the first native run 2-3x slower); then the engines alternate
``--repeat`` times on fresh checkpoints and the table shows medians (shared machines are noisy).

Columns: rows/s over the whole run and the ratio (floodmark / native); the first batch's seconds (Spark's
``triggerExecution``: it pays for Python worker start-up); floodmark's end-of-input flush batch (it fires every
window still open); pane latency in batches (from the batch after which the watermark passed a window's end
to the batch that emitted its pane: 1 = the next trigger); the driver's state (the newest control entry:
per split, not per key); the peak resident memory of the Python worker processes during floodmark's run.

The ``tumbling-100-jvm`` row is the 100-key row with floodmark's JVM map side (``map_side="jvm"``); a
``<row>-jvm-host`` row (``stages-jvm-host``, ``nexmark-jvm-host`` too) is ``<row>`` with floodmark's stages on the JVM
host (``host="jvm"``; ``tumbling-100-jvm-host`` with the JVM map side as well, ``tumbling-100-arrow-jvm-host`` with
the Arrow map side: floodmark's defaults).
``Nexmark`` rows are ``bench/nexmark.py``'s event-time queries on Nexmark-shaped bids (``--rows`` bids; that script
adds events/s per core and Flink's published figures). ``two stages`` is the game-session pipeline
(``bench/stages_throughput.py``: per-user sessions, then a global mean per 2 minutes) against native chained
aggregations. ``early firings`` is ``AfterWatermark(early=AfterProcessingTime(1 s))``; native has no early firings, so
its runs in that row are its tumbling count, alternating with floodmark's as in every row. ``idle`` runs each engine's
tumbling query on an empty directory with a 1-second trigger for ``--idle-seconds`` and reports the CPU used by this
process, the JVM and its Python workers, as a % of one core, and the batches each ran.
``growth`` is ``bench/state_growth.py``'s table (one 60-minute window per key, keys from 20M, ``--growth-rows``
sizes, one run each): per-batch seconds as the state grows, state bytes, floodmark's Python memory.
``cold`` runs the tumbling 100k-key workload on 2 files in a fresh process per run (a new JVM and new Python workers:
what a job's first batch pays), the engines alternating, and reports the session's start-up, the first batch's
``triggerExecution`` and the wall time from the call that starts the query to the first batch's end (floodmark builds
its query then: its tick source's start-up).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from math import nan
from pathlib import Path

import psutil
from nexmark import QUERIES as NEXMARK_QUERIES
from nexmark import floodmark_run as nexmark_floodmark_run
from nexmark import generate as generate_bids
from nexmark import native_run as nexmark_native_run
from pyspark.sql import Column
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table
from stages_throughput import floodmark_run as stages_floodmark_run
from stages_throughput import generate as generate_games
from stages_throughput import native_run as stages_native_run
from state_growth import growth_table
from throughput import SCHEMA, PythonMemory, control_entry_bytes, generate, latency_in_batches, native_counts
from throughput import aggregation as throughput_aggregation

from floodmark import WindowSpec, aggregates, triggers, windows
from floodmark.spark import EventTimeAggregation, local_session
from floodmark.spark.sources.inputs import MapSide
from floodmark.spark.stateful.jvm_level import Host

SPLITS = ["0", "1", "2", "3"]


@dataclass(frozen=True)
class Workload:
    """One row of the table: a native aggregation and floodmark's spec for the same result."""

    name: str
    keys: int
    native_window: Callable[[Column], Column]
    spec: WindowSpec
    map_side: MapSide = "arrow"
    host: Host = "python"
    native_ends: Callable[[Column], Column] | None = None
    """Window ends per record (ms) that native Spark groups on besides ``native_window`` (see ``native_counts``)."""


def workloads(quick: bool) -> dict[str, Workload]:
    """Every row's workload by name; ``<name>-jvm-host`` rows run ``<name>``'s spec on the JVM host."""
    count = {"n": aggregates.count()}
    big = 200_000 if quick else 1_000_000
    tumbling_100 = Workload(
        "tumbling 1 min, 100 keys", 100, lambda t: F.window(t, "1 minute"), WindowSpec(windows.Tumbling(60_000), count)
    )
    rows = {
        "tumbling-100": tumbling_100,
        "tumbling-100-jvm": replace(tumbling_100, name="tumbling 1 min, 100 keys, JVM map side", map_side="jvm"),
        "tumbling-100-jvm-host": replace(
            tumbling_100, name="tumbling 1 min, 100 keys, JVM map side and host", map_side="jvm", host="jvm"
        ),
        "tumbling-100-arrow-jvm-host": replace(
            tumbling_100, name="tumbling 1 min, 100 keys, JVM host (Arrow map side: the defaults)", host="jvm"
        ),
        "tumbling-100k": Workload(
            "tumbling 1 min, 100k keys",
            100_000,
            lambda t: F.window(t, "1 minute"),
            WindowSpec(windows.Tumbling(60_000), count),
        ),
        "tumbling-1m": Workload(
            f"tumbling 60 min, {big // 1000}k keys",
            big,
            lambda t: F.window(t, "60 minutes"),
            WindowSpec(windows.Tumbling(3_600_000), count),
        ),
        "sliding": Workload(
            "sliding 10 min / 1 min, 100k keys",
            100_000,
            lambda t: F.window(t, "10 minutes", "1 minute"),
            WindowSpec(windows.Sliding(600_000, 60_000), count),
        ),
        "cumulate": Workload(
            "cumulate 1 min steps in 10 min, 100k keys",
            100_000,
            lambda t: F.window(t, "10 minutes"),
            WindowSpec(windows.Cumulate(60_000, 600_000), count),
            # The epoch's windows that end after ts; native fires them all at the epoch's end (no per-step firing).
            native_ends=lambda ts: F.sequence(
                ts - F.pmod(ts, F.lit(60_000)) + F.lit(60_000),
                ts - F.pmod(ts, F.lit(600_000)) + F.lit(600_000),
                F.lit(60_000),
            ),
        ),
        "sessions": Workload(
            "sessions gap 1 min, 100k users",
            100_000,
            lambda t: F.session_window(t, "1 minute"),
            WindowSpec(windows.Sessions(60_000), count),
        ),
        "early": Workload(
            "early firings every 1 s, 100k keys",
            100_000,
            lambda t: F.window(t, "1 minute"),
            WindowSpec(
                windows.Tumbling(60_000),
                count,
                triggers.AfterWatermark(early=triggers.AfterProcessingTime(1_000)),
            ),
        ),
    }
    with_jvm_host = {}
    for name, workload in rows.items():
        with_jvm_host[name] = workload
        if name in ("tumbling-100k", "tumbling-1m", "sliding", "cumulate", "sessions", "early"):
            with_jvm_host[f"{name}-jvm-host"] = replace(workload, name=f"{workload.name}, JVM host", host="jvm")
    return with_jvm_host


@dataclass
class Run:
    seconds: float
    rows: int
    first_batch_s: float
    flush_s: float | None = None
    to_first_batch_s: float | None = None
    """From the call that starts the query (floodmark: its build, tick source included) to the first batch's end."""
    latency: str = ""
    state_bytes: int | None = None
    python_mb: float | None = None


@dataclass
class Row:
    name: str
    rows: int
    native: list[Run] = field(default_factory=list)
    floodmark: list[Run] = field(default_factory=list)


def nexmark_rows(spark, work: Path, events: int, files: int, repeat: int, host: str = "python") -> list[Row]:
    """``bench/nexmark.py``'s queries on the same bids, one row each (per-core figures and Flink's: that script), with
    floodmark's stages on ``host``."""
    data = work / "bids"
    if not data.exists():
        generate_bids(data, events, 10, files)
    events = events // files * files
    suffix = ", JVM host" if host == "jvm" else ""
    rows = []
    for name, query in NEXMARK_QUERIES.items():
        row = Row(f"Nexmark {query.name}{suffix}", events)
        nexmark_native_run(spark, query, data, work / f"{name}-native-warm-up-{host}")
        nexmark_floodmark_run(spark, query, data, work / f"{name}-fm-warm-up-{host}", host)
        for run in range(repeat):
            native = nexmark_native_run(spark, query, data, work / f"{name}-native-{host}-{run}")
            row.native.append(Run(native, events, nan))
            seconds = nexmark_floodmark_run(spark, query, data, work / f"{name}-fm-{host}-{run}", host)
            row.floodmark.append(Run(seconds, events, nan))
        rows.append(row)
    return rows


def trigger_seconds(progress: list, batch_id: int) -> float:
    for entry in progress:
        if entry.batchId == batch_id:
            return entry.durationMs.get("triggerExecution", 0) / 1000
    return float("nan")


def first_batch_end_s(progress: list, started_wall: float) -> float:
    """Seconds from ``started_wall`` (``time.time()``) to the end of batch 0 (its progress event: start + duration)."""
    for entry in progress:
        if entry.batchId == 0:
            begun = datetime.fromisoformat(entry.timestamp.replace("Z", "+00:00")).timestamp()
            return begun + entry.durationMs.get("triggerExecution", 0) / 1000 - started_wall
    return float("nan")


def native_run(spark, workload: Workload, data: Path, checkpoint: Path) -> Run:
    started, started_wall = time.perf_counter(), time.time()
    query = native_counts(spark, data, checkpoint, workload.native_window, ends=workload.native_ends)
    elapsed = time.perf_counter() - started
    progress = query.recentProgress
    return Run(
        elapsed,
        sum(p.numInputRows for p in progress),
        trigger_seconds(progress, 0),
        to_first_batch_s=first_batch_end_s(progress, started_wall),
    )


def aggregation(spark, workload: Workload, data: Path) -> EventTimeAggregation:
    return throughput_aggregation(spark, data, spec=workload.spec, map_side=workload.map_side, host=workload.host)


def floodmark_run(spark, workload: Workload, data: Path, work: Path) -> Run:
    agg = aggregation(spark, workload, data)
    with PythonMemory() as memory:
        started, started_wall = time.perf_counter(), time.time()
        handle = agg.run_to_completion(str(work / "ckpt"), str(work / "out"), timeout_s=3_600)
        elapsed = time.perf_counter() - started
    panes = spark.read.parquet(str(work / "out" / "panes")).select("window_end", "n", "batch_id").toPandas()
    progress = handle.query.recentProgress
    rows = sum(r.records for r in handle.reports)
    return Run(
        elapsed,
        rows,
        trigger_seconds(progress, 0),
        # The end-of-input batch, from its control entry's processing time to its sink's end (Spark's own
        # progress event for it may not arrive before the bounded run stops the query).
        flush_s=(handle.reports[-1].next_processing_time - handle.reports[-1].processing_time) / 1000,
        to_first_batch_s=first_batch_end_s(progress, started_wall),
        latency=latency_in_batches(handle.reports, panes),
        state_bytes=control_entry_bytes(work),
        python_mb=memory.peak,
    )


def stages_row(spark, work: Path, users: int, repeat: int, host: str = "python") -> Row:
    data = work / "games"
    if not data.exists():
        generate_games(data, users, 10)
    rows = int(spark.read.parquet(str(data)).count())
    suffix = ", JVM host" if host == "jvm" else ""
    row = Row(f"two stages: sessions -> mean, {2 * users:,} players{suffix}", rows)
    stages_native_run(spark, data, work / f"games-native-warm-up-{host}")
    stages_floodmark_run(spark, data, work / f"games-fm-warm-up-{host}", host=host)
    for run in range(repeat):
        native = stages_native_run(spark, data, work / f"games-native-{host}-{run}")
        row.native.append(Run(native, rows, float("nan")))
        with PythonMemory() as memory:
            seconds = stages_floodmark_run(spark, data, work / f"games-fm-{host}-{run}", host=host)
        row.floodmark.append(Run(seconds, rows, float("nan"), python_mb=memory.peak))
    return row


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and every process under it (the JVM, Python workers)."""
    total = 0.0
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            continue
    return total


def idle_cpu(spark, work: Path, seconds: float) -> dict[str, tuple[float, int]]:
    """``{engine: (CPU % of one core, batches run)}`` for a tumbling query on an empty directory, 1-second trigger."""
    empty = work / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    workload = workloads(quick=True)["tumbling-100"]
    results = {}
    native_stream = spark.readStream.schema(SCHEMA).parquet(str(empty))
    native = (
        native_stream.withColumn("t", F.timestamp_millis("ts"))
        .withWatermark("t", "5 seconds")
        .groupBy(F.window("t", "1 minute"), "k")
        .count()
        .writeStream.outputMode("append")
        .format("noop")
        .option("checkpointLocation", str(work / "idle-native"))
        .trigger(processingTime="1 second")
        .start()
    )
    time.sleep(5)  # start-up is not idleness
    before, started = cpu_seconds(), time.perf_counter()
    batches_before = len(native.recentProgress)
    time.sleep(seconds)
    used, wall = cpu_seconds() - before, time.perf_counter() - started
    # A Python worker that exits during the window takes its CPU time with it: never below 0.
    results["native"] = (max(0.0, 100 * used / wall), len(native.recentProgress) - batches_before)
    native.stop()
    handle = aggregation(spark, workload, empty).start(
        str(work / "idle-fm"), str(work / "idle-fm-out"), trigger_interval="1 second"
    )
    try:
        time.sleep(5)
        before, started = cpu_seconds(), time.perf_counter()
        batches_before = len(handle.reports)
        time.sleep(seconds)
        used, wall = cpu_seconds() - before, time.perf_counter() - started
        results["floodmark"] = (max(0.0, 100 * used / wall), len(handle.reports) - batches_before)
    finally:
        handle.stop()
    return results


def cold_run(engine: str, data: Path, work: Path) -> None:
    """One engine's run in this fresh process (``--cold-engine``): prints its start-up and first batch as JSON."""
    started = time.perf_counter()
    spark = local_session("floodmark-bench-cold", cores=2, shuffle_partitions=2)
    session_s = time.perf_counter() - started
    workload = workloads(quick=True)["tumbling-100k"]
    run = (
        native_run(spark, workload, data, work / "ckpt")
        if engine == "native"
        else floodmark_run(spark, workload, data, work)
    )
    print(json.dumps({"session_s": session_s, "first_batch_s": run.first_batch_s, "to_first_s": run.to_first_batch_s}))
    spark.stop()


def cold_first_batches(data: Path, work: Path, repeat: int) -> dict[str, list[dict[str, float]]]:
    """``{engine: [{session_s, first_batch_s}, ...]}``, each run in a new process, the engines alternating."""
    results: dict[str, list[dict[str, float]]] = {"native": [], "floodmark": []}
    for run in range(repeat):
        for engine in results:
            command = [sys.executable, __file__, "--cold-engine", engine, "--cold-data", str(data)]
            command += ["--work", str(work / f"cold-{engine}-{run}")]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            results[engine].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def progress_line(row: Row) -> str:
    """The row's rates so far, printed as each workload ends (a long run shows where it is)."""
    native = [round(r.rows / r.seconds) for r in row.native]
    ours = [round(r.rows / r.seconds) for r in row.floodmark]
    return f"native rows/s {native}, floodmark rows/s {ours}"


def median(runs: list[Run], attribute: str) -> float | None:
    values = [getattr(r, attribute) for r in runs if getattr(r, attribute) is not None]
    return statistics.median(values) if values else None


def cell(value: float | None, fmt: str) -> str:
    return "n/a" if value is None or value != value else format(value, fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows per workload (8 files)")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="runs per engine (the table shows medians)")
    parser.add_argument("--players", type=int, default=5_000, help="players per source in the two-stage row")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument(
        "--growth-rows", type=int, nargs="+", default=[3_000_000, 6_000_000], help="sizes of the growth row"
    )
    parser.add_argument("--quick", action="store_true", help="400k rows, one run each, 20 s of idleness")
    parser.add_argument("--only", nargs="+", default=None, help="rows to run: workload names, 'stages', 'idle'")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--cold-engine", choices=["native", "floodmark"], help=argparse.SUPPRESS)
    parser.add_argument("--cold-data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_engine:
        cold_run(args.cold_engine, args.cold_data, args.work)
        return
    if args.quick:
        args.rows, args.repeat, args.idle_seconds, args.players = 400_000, 1, 20.0, 1_000
        args.growth_rows = [400_000, 800_000]
    chosen = workloads(args.quick)
    extra = ["stages", "stages-jvm-host", "nexmark", "nexmark-jvm-host", "idle", "growth", "cold"]
    wanted = args.only or [*chosen, *extra]
    unknown = set(wanted) - {*chosen, *extra}
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}: choose from {[*chosen, *extra]}")

    work = args.work or Path(tempfile.mkdtemp(prefix="floodmark-bench-all-"))
    spark = local_session("floodmark-bench-all", cores=2, shuffle_partitions=2)
    console = Console(width=220)
    rows: list[Row] = []
    warmed = False
    for name in (n for n in chosen if n in wanted):
        workload = chosen[name]
        data = work / f"data-{name}"
        total = args.rows
        shutil.rmtree(data, ignore_errors=True)
        generate(data, total, workload.keys, 10, args.files)
        if not warmed:  # JIT, codegen and Python workers: not measured
            native_run(spark, workload, data, work / "native-warm-up")
            floodmark_run(spark, workload, data, work / "fm-warm-up")
            warmed = True
        row = Row(workload.name, total)
        for run in range(args.repeat):
            row.native.append(native_run(spark, workload, data, work / f"native-{name}-{run}"))
            row.floodmark.append(floodmark_run(spark, workload, data, work / f"fm-{name}-{run}"))
        console.print(f"[dim]{workload.name}: {progress_line(row)}[/dim]")
        rows.append(row)
        shutil.rmtree(data, ignore_errors=True)
    for name, host in (("stages", "python"), ("stages-jvm-host", "jvm")):
        if name in wanted:
            rows.append(stages_row(spark, work, args.players, args.repeat, host))
            console.print(f"[dim]{rows[-1].name}: {progress_line(rows[-1])}[/dim]")
    for name, host in (("nexmark", "python"), ("nexmark-jvm-host", "jvm")):
        if name in wanted:
            rows.extend(nexmark_rows(spark, work, args.rows, args.files, args.repeat, host))

    table = Table(
        title=f"floodmark vs native Spark 4.3, local[2], {date.today().isoformat()}, median of {args.repeat} run(s)"
    )
    columns = (
        "workload",
        "rows",
        "native rows/s",
        "floodmark rows/s",
        "ratio",
        "native 1st batch s",
        "floodmark 1st batch s",
        "floodmark flush s",
        "pane latency (batches)",
        "driver state bytes",
        "peak Python MB",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "workload" else "right")
    for row in rows:
        native_rate = statistics.median(r.rows / r.seconds for r in row.native)
        fm_rate = statistics.median(r.rows / r.seconds for r in row.floodmark)
        table.add_row(
            row.name,
            f"{row.rows:,}",
            f"{native_rate:,.0f}",
            f"{fm_rate:,.0f}",
            f"{fm_rate / native_rate:.2f}x",
            cell(median(row.native, "first_batch_s"), ".1f"),
            cell(median(row.floodmark, "first_batch_s"), ".1f"),
            cell(median(row.floodmark, "flush_s"), ".1f"),
            row.floodmark[-1].latency or "n/a",
            cell(median(row.floodmark, "state_bytes"), ",.0f"),
            cell(median(row.floodmark, "python_mb"), ",.0f"),
        )
    if rows:
        console.print(table)
    if "idle" in wanted:
        idle = idle_cpu(spark, work, args.idle_seconds)
        idle_table = Table(title=f"idle query: empty input, 1-second trigger, {args.idle_seconds:.0f} s")
        for column in ("engine", "CPU % of one core", "batches run"):
            idle_table.add_column(column, justify="right")
        for engine, (cpu, batches) in idle.items():
            idle_table.add_row(engine, f"{cpu:.0f}%", str(batches))
        console.print(idle_table)
    if "growth" in wanted:
        # One run per size: the largest takes minutes per engine (bench/state_growth.py --repeat for more).
        console.print(growth_table(spark, work, args.growth_rows, 20_000_000, repeat=1))
    spark.stop()
    if "cold" in wanted:
        data = work / "data-cold"
        generate(data, args.rows // 4, chosen["tumbling-100k"].keys, 10, 2)
        cold = cold_first_batches(data, work, args.repeat)
        cold_table = Table(title=f"cold session (a new process per run), tumbling 100k keys, median of {args.repeat}")
        for column in ("engine", "session start s", "first batch s", "query start to first batch end s"):
            cold_table.add_column(column, justify="right")
        for engine, runs in cold.items():
            cold_table.add_row(
                engine,
                f"{statistics.median(r['session_s'] for r in runs):.1f}",
                f"{statistics.median(r['first_batch_s'] for r in runs):.1f}",
                f"{statistics.median(r['to_first_s'] for r in runs):.1f}",
            )
        console.print(cold_table)
        console.print(f"[dim]cold runs: {json.dumps(cold)}[/dim]")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
