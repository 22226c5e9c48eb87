"""A few-key batch stage by stage, from Spark's event log: native Spark against floodmark.

    FLOODMARK_QUIET=1 .venv/bin/python bench/batch_stages.py --keys 100 --repeat 2

Both engines read the same Parquet input in one session (local[2], ``bench/throughput.py``'s generator: ``--rows``
rows in ``--files`` files, one per batch, ``--keys`` keys): native Spark's 1-minute tumbling count to Parquet, and
floodmark's (``bench/all.py``'s pipeline, panes to Parquet) on the JVM map side and host, or ``--host python``. One
warm-up run each, then ``--repeat`` runs alternating, every run with Spark's event log on.

``--workload stages``: the game-session pipeline's two stages instead (``bench/stages_throughput.py``: sessions per
player, then a global mean per 2 minutes; ``--keys`` players per source, ``--minutes`` of event time), native's
chained aggregations into ``noop`` against floodmark's ``Pipeline`` with the means' panes to Parquet.

For the batches with input after the first, per engine, medians over batches and runs (ms): each Spark job of the
batch (its wall time), each stage of those jobs (wall, tasks' run time, CPU, GC; stages named by their last RDD
operation) and the SQL metrics whose name says time (summed over the stage's tasks, "time to commit changes" and
the like). What ``bench/batches.py`` shows as one ``addBatch`` number, split.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table
from stages_throughput import floodmark_query as stages_floodmark_query
from stages_throughput import generate as generate_games
from stages_throughput import native_query as stages_native_query
from throughput import aggregation, generate, native_counts

from floodmark.spark.driver.session import cluster_session


def batches_of(log: Path) -> dict[int, dict[str, dict]]:
    """The event log's jobs per streaming batch: ``{batch: {"jobs": [(wall ms, [stage ids])], "stages": {id:
    {"name", "wall", "run", "cpu", "gc", "metrics": {name: ms}}}}}``."""
    jobs: dict[int, dict] = {}
    stage_batch: dict[int, int] = {}
    out: dict[int, dict] = defaultdict(lambda: {"jobs": [], "stages": {}})
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            batch = (event.get("Properties") or {}).get("streaming.sql.batchId")
            if batch is None:
                continue
            jobs[event["Job ID"]] = {
                "batch": int(batch),
                "start": event["Submission Time"],
                "stages": event["Stage IDs"],
            }
            for stage in event["Stage IDs"]:
                stage_batch[stage] = int(batch)
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            job = jobs[event["Job ID"]]
            out[job["batch"]]["jobs"].append((event["Completion Time"] - job["start"], job["stages"]))
        elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_batch:
            stage = _stage(out[stage_batch[event["Stage ID"]]], event["Stage ID"])
            metrics = event.get("Task Metrics") or {}
            stage["run"] += metrics.get("Executor Run Time", 0)
            stage["cpu"] += metrics.get("Executor CPU Time", 0) / 1e6
            stage["gc"] += metrics.get("JVM GC Time", 0)
            info = event["Task Info"]
            task = {
                "deserialize": metrics.get("Executor Deserialize Time", 0),
                "fetch wait": (metrics.get("Shuffle Read Metrics") or {}).get("Fetch Wait Time", 0),
                "shuffle write": (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Write Time", 0) / 1e6,
                "task": info["Finish Time"] - info["Launch Time"],
            }
            task["overhead"] = task["task"] - metrics.get("Executor Run Time", 0) - task["deserialize"]
            for name, value in task.items():
                stage["metrics"][name] = stage["metrics"].get(name, 0) + value
            for accumulable in info.get("Accumulables", []):
                name = accumulable.get("Name") or ""
                if "time" in name and "internal." not in name and "shuffle" not in name and accumulable.get("Update"):
                    stage["metrics"][name] = stage["metrics"].get(name, 0) + _ms(name, accumulable["Update"])
        elif kind == "SparkListenerStageCompleted" and event["Stage Info"]["Stage ID"] in stage_batch:
            info = event["Stage Info"]
            stage = _stage(out[stage_batch[info["Stage ID"]]], info["Stage ID"])
            stage["name"] = info["Stage Name"].split(" at ")[0]
            stage["wall"] = info.get("Completion Time", 0) - info.get("Submission Time", 0)
            stage["tasks"] = info["Number of Tasks"]
            stage["skipped"] = "Submission Time" not in info
    return dict(out)


def _stage(batch: dict, stage_id: int) -> dict:
    return batch["stages"].setdefault(
        stage_id, {"name": "?", "wall": 0, "run": 0, "cpu": 0.0, "gc": 0, "metrics": {}, "tasks": 0, "skipped": False}
    )


def _ms(name: str, update) -> float:
    """An accumulator update as ms: Spark's timing metrics are ns ("... time" in SQL metrics of the nsTiming kind) or
    ms; those over 10^6 per task are taken as ns."""
    value = float(update)
    return value / 1e6 if value > 1e6 else value


def run_engine(spark, engine: str, data: Path, work: Path, host: str, workload: str) -> dict[int, dict[str, int]]:
    """One run; Spark's progress durations per batch (ms)."""
    if workload == "stages":
        if engine == "native":
            query = stages_native_query(spark, data, work / "native-ckpt")[1]
        else:
            query = stages_floodmark_query(spark, data, work, host=host)[1].query
    elif engine == "native":
        query = native_counts(spark, data, work / "native-ckpt", sink="parquet")
    else:
        agg = aggregation(spark, data, map_side=engine.partition(":")[2] or "jvm", host=host)  # type: ignore[arg-type]
        query = agg.run_to_completion(str(work / "fm-ckpt"), str(work / "fm-out"), timeout_s=3_600).query
    return {p.batchId: dict(p.durationMs) for p in query.recentProgress}


def summary(batches: list[dict]) -> list[tuple[str, dict[str, float]]]:
    """Medians over ``batches`` per job position and stage position (a batch's jobs and stages in id order)."""
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for batch in batches:
        for j, (wall, stage_ids) in enumerate(sorted(batch["jobs"], key=lambda job: min(job[1]))):
            rows[f"job {j}"]["wall"].append(wall)
            for s, stage_id in enumerate(sorted(stage_ids)):
                stage = batch["stages"].get(stage_id)
                if stage is None or stage["skipped"]:
                    continue
                label = f"  job {j} stage {s}: {stage['name']} ({stage['tasks']} tasks)"
                for name in ("wall", "run", "cpu", "gc"):
                    rows[label][name].append(stage[name])
                for name, value in stage["metrics"].items():
                    rows[label][name].append(value)
    return [(label, {k: statistics.median(v) for k, v in values.items()}) for label, values in rows.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--host", choices=["python", "jvm"], default="jvm")
    parser.add_argument("--workload", choices=["tumbling", "stages"], default="tumbling")
    parser.add_argument("--minutes", type=int, default=30, help="event time covered (--workload stages)")
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["native", "floodmark:jvm"],
        help="native, floodmark or floodmark:MAP_SIDE (jvm, the default, or arrow)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="floodmark-bench-stages-"))
    if args.workload == "stages":
        generate_games(work / "data", args.keys, args.minutes)
    else:
        generate(work / "data", args.rows, args.keys, 10, args.files)
    logs = work / "logs"
    logs.mkdir()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, as local_session
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(logs),
        "spark.eventLog.rolling.enabled": "false",  # one file, read as it grows
        "spark.eventLog.compress": "false",
    }
    spark = cluster_session("local[2]", "floodmark-bench-stages", shuffle_partitions=2, conf=conf)
    engines = args.engines
    marks: dict[str, list[tuple[int, int, dict]]] = {e: [] for e in engines}
    for run in range(args.repeat + 1):
        for engine in engines if run % 2 == 0 else engines[::-1]:
            run_dir = work / f"{engine.replace(':', '-')}-{run}"
            run_dir.mkdir()
            log = next(logs.iterdir())
            before = len(log.read_text().splitlines()) if log.exists() else 0
            progress = run_engine(spark, engine, work / "data", run_dir, args.host, args.workload)
            if run > 0:  # the first run of each engine warms up
                marks[engine].append((before, len(log.read_text().splitlines()), progress))
    log = next(logs.iterdir())
    lines = log.read_text().splitlines()
    console = Console()
    for engine in engines:
        picked = []
        durations: dict[str, list[float]] = defaultdict(list)
        for start, end, progress in marks[engine]:
            part = work / f"{engine.replace(':', '-')}-part.json"
            part.write_text("\n".join(lines[start:end]))
            by_batch = batches_of(part)
            with_input = sorted(by_batch)[1:-1]  # after the first; the last is the end of input (or no data)
            picked += [by_batch[b] for b in with_input]
            for b in with_input:
                for name, ms in progress.get(b, {}).items():
                    durations[name].append(ms)
        if args.workload == "stages":
            title = f"{engine} ({args.host + ' host' if engine != 'native' else 'noop'})"
        else:
            title = f"{engine} ({args.host + ' host' if engine != 'native' else 'Parquet'})"
        table = Table(title=title)
        for column in ("job / stage", "wall", "run", "cpu", "gc", "timing metrics (ms, summed over tasks)"):
            table.add_column(column)
        for label, values in summary(picked):
            metrics = ", ".join(
                f"{k} {v:.0f}" for k, v in sorted(values.items()) if k not in ("wall", "run", "cpu", "gc") and v >= 1
            )
            table.add_row(
                label,
                *(f"{values.get(k, 0):.0f}" if k in values else "" for k in ("wall", "run", "cpu", "gc")),
                metrics,
            )
        console.print(table)
        console.print(
            "Spark's progress (ms): " + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in durations.items())
        )
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
