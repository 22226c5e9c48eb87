"""floodmark and native Spark over Spark Connect beside a classic session, in one run.

The workloads of ``bench/all.py``'s few-key and many-key rows (a 1-minute tumbling count per key, one Parquet file
per batch, run to the end of the input), four engines alternating run by run:

* native Spark and floodmark on a classic ``local[2]`` session in this process;
* native Spark and floodmark from a Spark Connect client (a process per run) against a Connect server on
  loopback (``floodmark_dev.connect_server``, ``local[2]``, floodmark's settings), started once.

With ``--host jvm`` floodmark combines on the JVM map side and runs its stateful step on the JVM host (reached
through floodmark's plan hints on both kinds of session); the default is the Python host with Arrow's map side.

Each Spark runs alone while the other idles. The table gives rows/s, floodmark's ratio against native Spark on
the same kind of session, and what Connect adds per batch to each (the difference of the medians over the
batches of a run). A warm-up run of every engine comes first and is not counted.

    cd bench && ../.venv/bin/python connect.py --repeat 2 [--host jvm]
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
from datetime import date
from pathlib import Path

from rich.console import Console
from rich.table import Table
from throughput import aggregation, generate, native_counts

ENGINES = ("classic native", "classic floodmark", "Connect native", "Connect floodmark")


def run(spark, engine: str, data: Path, checkpoint: Path, host: str = "python") -> dict[str, float]:
    """One run of ``engine`` (``native`` or ``floodmark``, on ``host``) on ``spark``: seconds, batches."""
    started = time.perf_counter()
    if engine == "native":
        query = native_counts(spark, data, checkpoint)
        return {"seconds": time.perf_counter() - started, "batches": len(query.recentProgress)}
    sides = {"map_side": "jvm", "host": "jvm"} if host == "jvm" else {}
    built = aggregation(spark, data, **sides)  # type: ignore[arg-type]
    handle = built.run_to_completion(str(checkpoint), f"{checkpoint}-out", timeout_s=3_600)
    return {"seconds": time.perf_counter() - started, "batches": len(handle.reports)}


def remote_run(url: str, engine: str, data: Path, checkpoint: Path, host: str) -> dict[str, float]:
    """:func:`run` in a Connect client of its own (a Connect session switches its whole process to Connect)."""
    done = subprocess.run(
        [
            *(sys.executable, __file__, "--client", url, "--engine", engine, "--data", str(data)),
            *("--work", str(checkpoint), "--host", host),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the Connect client failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows per workload (in --files files)")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--keys", type=int, nargs="+", default=[100, 100_000])
    parser.add_argument("--repeat", type=int, default=2, help="runs per engine (the table shows medians)")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--host", choices=("python", "jvm"), default="python", help="floodmark's host and map side")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(args.client).getOrCreate()
        print(json.dumps(run(spark, args.engine, args.data, args.work, args.host)))
        return

    from floodmark.spark import local_session
    from floodmark_dev.connect_server import ConnectServer

    work = args.work or Path(tempfile.mkdtemp(prefix="floodmark-bench-connect-"))
    spark = local_session("floodmark-bench-connect", cores=2, shuffle_partitions=2)
    console = Console(width=200)
    results: dict[int, dict[str, list[dict[str, float]]]] = {}
    with ConnectServer(cores=2, work_dir=work / "server") as server:
        for keys in args.keys:
            data = work / f"data-{keys}"
            shutil.rmtree(data, ignore_errors=True)
            generate(data, args.rows, keys, 10, args.files)
            runs: dict[str, list[dict[str, float]]] = {engine: [] for engine in ENGINES}
            for attempt in range(args.repeat + 1):  # the first is the warm-up
                for engine in ENGINES:
                    checkpoint = work / f"run-{keys}-{attempt}-{engine.replace(' ', '-')}"
                    kind = engine.split()[1]
                    if engine.startswith("classic"):
                        result = run(spark, kind, data, checkpoint, args.host)
                    else:
                        result = remote_run(server.url, kind, data, checkpoint, args.host)
                    if attempt:
                        runs[engine].append(result)
                    console.print(f"[dim]{keys:,} keys, {engine}, run {attempt}: {result['seconds']:.1f} s[/dim]")
            results[keys] = runs
            shutil.rmtree(data, ignore_errors=True)
    spark.stop()

    table = Table(
        title=f"classic and Spark Connect sessions, floodmark on the {args.host} host, local[2], "
        f"{date.today().isoformat()}, median of "
        f"{args.repeat} run(s), {args.rows:,} rows in {args.files} batches"
    )
    for column in ("workload", "session", "native rows/s", "floodmark rows/s", "ratio", "batches (native/floodmark)"):
        table.add_column(column, justify="left" if column in ("workload", "session") else "right")
    for keys, runs in results.items():
        for session in ("classic", "Connect"):
            native = statistics.median(args.rows / r["seconds"] for r in runs[f"{session} native"])
            floodmark = statistics.median(args.rows / r["seconds"] for r in runs[f"{session} floodmark"])
            batches = "/".join(
                f"{statistics.median(r['batches'] for r in runs[f'{session} {kind}']):.0f}"
                for kind in ("native", "floodmark")
            )
            table.add_row(
                f"tumbling 1 min, {keys:,} keys",
                session,
                f"{native:,.0f}",
                f"{floodmark:,.0f}",
                f"{floodmark / native:.2f}x",
                batches,
            )
    console.print(table)
    per_batch = Table(title="what Spark Connect adds per batch (medians of seconds / batches, Connect minus classic)")
    for column in ("workload", "native ms per batch", "floodmark ms per batch"):
        per_batch.add_column(column, justify="right")
    for keys, runs in results.items():
        added = []
        for kind in ("native", "floodmark"):
            per = {
                session: statistics.median(r["seconds"] / r["batches"] for r in runs[f"{session} {kind}"])
                for session in ("classic", "Connect")
            }
            added.append(f"{1000 * (per['Connect'] - per['classic']):+.0f}")
        per_batch.add_row(f"{keys:,} keys", *added)
    console.print(per_batch)


if __name__ == "__main__":
    main()
