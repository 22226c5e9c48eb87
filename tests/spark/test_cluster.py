"""Issue 14, cluster: seed 001's job on a Spark standalone cluster survives a worker's kill -9.

A master and two workers (1 core, 1g each) on loopback run the job (driver in a subprocess, the checkpoint on
local disk, which every process of this one machine sees), started in one of two ways:

* ``cluster_session``: ``cluster_driver.py`` run by this test's Python, whose environment the workers share;
* ``spark-submit``: ``submit_job.py`` submitted as users do, from a virtualenv holding only floodmark's wheel,
  with the executors' Python environment shipped to them as a packed archive (``--archives``,
  ``spark.pyspark.python=./environment/bin/python``), not the driver's site-packages.

Once a few batches have completed and worker 0's executor runs a task, worker 0 and its executor get SIGKILL.
The query must go on on the other worker (Spark reruns the lost tasks and the stages whose shuffle files died
with the executor; the state stores are loaded from the checkpoint) and finish with the panes of a
local-mode run of the same input.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from cluster_driver import CONFIG, aggregation, event_log_conf, kafka_aggregation, kafka_outputs

from floodmark.apps.demo import check_counts
from floodmark.apps.outputs import read_output
from floodmark.core.time import MAX_TIMESTAMP
from floodmark_dev.spark_cluster import StandaloneCluster

SLOW = pytest.mark.skipif(os.environ.get("FLOODMARK_SLOW_TESTS") != "1", reason="slow variant: FLOODMARK_SLOW_TESTS=1")

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("cluster_driver.py")
SUBMIT_JOB = Path(__file__).with_name("submit_job.py")
ROOT = Path(__file__).resolve().parents[2]
KILL_AFTER_BATCHES = 3
PANE_KEY = ["window_start", "channel", "behavior", "pane_index"]
TASK_ENDED = (
    r"(?:Finished task|Exception in task|Executor killed task|Executor interrupted and killed task) .*\(TID (\d+)\)"
)


def reports(checkpoint: Path) -> list[dict]:
    """The batches the driver has completed (its ``metrics.jsonl``: one line per batch)."""
    metrics = checkpoint / "floodmark" / "metrics.jsonl"
    return [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []


def running_tasks(worker_dir: Path) -> set[int]:
    """Task ids the worker's executors have started and not finished (from their INFO logs)."""
    started: set[int] = set()
    finished: set[int] = set()
    for log in worker_dir.glob("app-*/*/stderr"):
        text = log.read_text(errors="replace")
        started.update(int(t) for t in re.findall(r"Running task .* \(TID (\d+)\)", text))
        finished.update(int(t) for t in re.findall(TASK_ENDED, text))
    return started - finished


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent's reaping does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def failures(event_log_dir: Path) -> dict[str, object]:
    """What Spark's event log says went wrong: failed task attempts by reason, retried tasks and stages."""
    reasons: Counter[str] = Counter()
    retried_tasks = resubmitted_stages = 0
    removed: list[str] = []
    for path in event_log_dir.iterdir():
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerTaskEnd":
                reason = event["Task End Reason"]["Reason"]
                if reason != "Success":
                    reasons[reason] += 1
                retried_tasks += event["Task Info"]["Attempt"] > 0
            elif kind == "SparkListenerStageSubmitted":
                resubmitted_stages += event["Stage Info"]["Stage Attempt ID"] > 0
            elif kind == "SparkListenerExecutorRemoved":
                removed.append(f"executor {event['Executor ID']}: {event['Removed Reason']}")
    return {
        "failed attempts": dict(reasons),
        "retried tasks": retried_tasks,
        "resubmitted stages": resubmitted_stages,
        "executors removed": removed,
    }


def panes(output: Path) -> dict[tuple, int]:
    frame = read_output(output, "panes")
    return {tuple(row[:-1]): int(row[-1]) for row in frame[[*PANE_KEY, "count"]].itertuples(index=False)}


def late_ids(output: Path) -> list[int]:
    late = read_output(output, "late")
    return sorted(json.loads(record)["id"] for record in late["record"]) if len(late) else []


def start_driver(master: str, run: Path) -> subprocess.Popen:
    """``cluster_driver.py`` in this test's Python (``cluster_session``)."""
    (run / "events").mkdir(parents=True)
    command = [sys.executable, str(DRIVER), master, *(str(run / name) for name in ("ckpt", "out", "events"))]
    return launch(command, run, dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))


def submit_driver(master: str, run: Path, venv: Path, archive: Path) -> subprocess.Popen:
    """``submit_job.py`` through ``venv``'s ``spark-submit`` (``venv`` activated), the executors' Python from
    ``archive``; nothing of this test's environment (its ``PYSPARK_*`` settings, its virtualenv) reaches the job.

    In client mode Spark also starts ``spark.pyspark.python`` on the driver, relative to its working directory,
    to plan a Python data source (the simulator): there ``./environment`` is the driver's own virtualenv.
    """
    (run / "events").mkdir(parents=True)
    (run / "environment").symlink_to(venv, target_is_directory=True)
    conf = {
        "spark.pyspark.python": "./environment/bin/python",
        "spark.pyspark.driver.python": str(venv / "bin" / "python"),
        **event_log_conf(run / "events"),
    }
    jars = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "floodmark.jvm"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert jars.endswith("floodmark.jar")
    command = [
        *(str(venv / "bin" / "spark-submit"), "--master", master, "--archives", f"{archive}#environment"),
        *("--jars", jars),
        *(item for key, value in conf.items() for item in ("--conf", f"{key}={value}")),
        *("--py-files", str(DRIVER), str(SUBMIT_JOB), str(run / "ckpt"), str(run / "out")),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "VIRTUAL_ENV"))}
    # As after `source venv/bin/activate` (spark-submit finds Spark through the first python3 on PATH).
    path = [str(venv / "bin"), *(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))]
    env.update(PATH=os.pathsep.join(path), VIRTUAL_ENV=str(venv), SPARK_LOCAL_IP="127.0.0.1")
    return launch(command, run, env)


def launch(command: list[str], run: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(run / "driver.log", "wb") as log:
        return subprocess.Popen(
            command,
            env=env,
            cwd=run,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: its JVM goes with it if the test fails
        )


@dataclass
class WorkerKill:
    """What was running when worker 0 was killed."""

    batches_before: int
    tasks_in_flight: set[int]
    processes_before: list[int]
    lost_node: list[int]


def kill_worker_mid_stream(cluster: StandaloneCluster, run: Path, driver: subprocess.Popen) -> WorkerKill:
    """Once :data:`KILL_AFTER_BATCHES` batches have completed, kill -9 worker 0 and its executor while that
    executor runs a task (batches follow each other at once), so that a task dies with it; after a few seconds
    without one, kill anyway."""
    deadline = time.monotonic() + 300
    while len(reports(run / "ckpt")) < KILL_AFTER_BATCHES:
        assert driver.poll() is None, f"the driver ended early; see {run / 'driver.log'}"
        assert time.monotonic() < deadline, "the first batches did not complete in time"
        time.sleep(0.05)
    wait_for_task = time.monotonic() + 10
    while not running_tasks(cluster.work_dir / "worker-0") and time.monotonic() < wait_for_task:
        time.sleep(0.02)
    kill = WorkerKill(
        len(reports(run / "ckpt")),
        running_tasks(cluster.work_dir / "worker-0"),
        cluster.processes(),
        cluster.processes(worker=0),
    )
    cluster.kill_worker(0)
    print(
        f"kill -9 of worker 0 and its executor after {kill.batches_before} batches, tasks running there: "
        f"{kill.tasks_in_flight}"
    )
    return kill


def the_query_went_on(cluster: StandaloneCluster, run: Path, driver: subprocess.Popen, kill: WorkerKill) -> None:
    """The driver ends well, the lost node's processes are gone, more batches completed after the kill."""
    try:
        assert driver.wait(timeout=300) == 0, f"the query failed; see {run / 'driver.log'}"
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert not [pid for pid in kill.lost_node if alive(pid)], "the lost node's processes are gone"
    assert cluster.alive_workers() == 1, "the master noticed the dead worker"
    assert len(kill.processes_before) >= 5, "master, 2 workers and 2 executors were running before the kill"
    assert len(kill.lost_node) >= 2, "worker 0 ran an executor"
    done = reports(run / "ckpt")
    print(f"batches after the kill: {len(done) - kill.batches_before} more, {len(done)} in all")
    print(f"Spark's event log: {failures(run / 'events')}")
    assert len(done) > kill.batches_before + 1, "more batches completed after the kill"
    assert done[-1]["watermark"] == MAX_TIMESTAMP, "the run ended with its final flush"
    assert [r["batch_id"] for r in done] == list(range(len(done)))


def kill_a_worker_beside_a_local_run(
    cluster: StandaloneCluster, run: Path, driver: subprocess.Popen, reference: Callable[[], object]
) -> WorkerKill:
    """Run ``reference`` (the local-mode run, in this process's session) while the cluster's driver starts (it
    spends its first tens of seconds starting executors and their Python workers), kill worker 0 mid-stream, and
    check that the query went on."""
    with ThreadPoolExecutor(1) as pool:
        local_run = pool.submit(reference)
        try:
            kill = kill_worker_mid_stream(cluster, run, driver)
        except BaseException:
            os.killpg(driver.pid, signal.SIGKILL)
            raise
        the_query_went_on(cluster, run, driver, kill)
        local_run.result()
    return kill


@pytest.mark.parametrize(
    "launcher",
    # A cluster session's worker kill (~100 s) is a slow variant: spark-submit's covers it (and so does, with
    # FLOODMARK_SLOW_TESTS=1 too, test_kafka_to_kafka_exactly_once_goes_on_when_a_worker_is_killed).
    [pytest.param("cluster_session", marks=SLOW), "spark-submit"],
)
def test_the_query_goes_on_when_a_worker_is_killed(spark, tmp_path, request, launcher):
    started = time.monotonic()
    local, run = tmp_path / "local", tmp_path / "cluster-run"
    if launcher == "spark-submit":
        venv, archive = request.getfixturevalue("wheel_venv"), request.getfixturevalue("packed_wheel_venv")
    with StandaloneCluster(workers=2, cores=1, memory="1g", work_dir=tmp_path / "cluster") as cluster:
        print(f"\ncluster up: {cluster.master_url} with 2 workers after {time.monotonic() - started:.1f} s")
        if launcher == "spark-submit":
            driver = submit_driver(cluster.master_url, run, venv, archive)
        else:
            driver = start_driver(cluster.master_url, run)
        reference = partial(
            aggregation(spark).run_to_completion, str(local / "ckpt"), str(local / "out"), timeout_s=300
        )
        kill = kill_a_worker_beside_a_local_run(cluster, run, driver, reference)
        print(f"local[2] reference: {len(reports(local / 'ckpt'))} batches")
    leftovers = [pid for pid in kill.processes_before if alive(pid)]
    assert not leftovers, f"processes of the cluster left behind: {leftovers}"

    summary = json.loads((run / "out" / "run.json").read_text())
    print(f"the cluster run took {summary['seconds']:.1f} s (driver) and the test {time.monotonic() - started:.1f} s")

    # The same panes as the local run, whatever Spark re-ran on the way.
    expected, got = panes(local / "out"), panes(run / "out")
    assert len(expected) > 100
    assert got == expected
    assert late_ids(run / "out") == late_ids(local / "out")
    assert len(late_ids(local / "out")) > 0, "the burst is late in both runs"
    assert len(read_output(run / "out", "dead_letter")) == len(read_output(local / "out", "dead_letter")) > 0
    frame = read_output(run / "out", "panes")
    assert check_counts(CONFIG, frame, read_output(run / "out", "late"), 60_000) == []
    if launcher == "spark-submit":
        assert summary["driver"].startswith(str(venv)), "the driver imports floodmark from the wheel's virtualenv"
        assert summary["executors"], "the executors ran Python"
        for path in summary["executors"]:
            assert "/environment/" in path and not path.startswith((str(venv), str(ROOT / "src"))), (
                f"an executor imported floodmark from {path}, not from the shipped archive"
            )
        assert summary["jvm_ticks"], "spark-submit --jars gave the driver the wheel's jar"


# A slow variant (~130 s): the spark-submit worker kill above loses an executor mid-stream by default; this one's
# own part is Kafka's reads on the lost executor.
@SLOW
def test_kafka_to_kafka_exactly_once_goes_on_when_a_worker_is_killed(spark, kafka_broker, tmp_path):
    """Seed 001's job from a Kafka topic (a partition per split) to Kafka topics, exactly-once, on the cluster:
    Spark's Kafka reads run on the executors (one dies with worker 0), the transactional writer on the driver.
    A read_committed consumer sees the panes, late records and dead letters of a local run, once each."""
    from floodmark.apps.kafka_demo import PacedProducer
    from floodmark.spark.outputs.sinks import PANE_ID_HEADER

    broker = kafka_broker
    broker.create_topic("cluster-clicks", partitions=CONFIG.splits)
    for prefix in ("cluster-ref", "cluster-run"):
        for kind in ("panes", "late", "dead"):
            broker.create_topic(f"{prefix}-{kind}")
    producer = PacedProducer(broker, "cluster-clicks", CONFIG, ticks_per_second=float("inf"))
    producer.run()  # here, all at once: every record is in the topic before either query starts
    assert producer.error is None and producer.produced > 10_000
    run = tmp_path / "cluster-run"
    with StandaloneCluster(workers=2, cores=1, memory="1g", work_dir=tmp_path / "cluster") as cluster:
        (run / "events").mkdir(parents=True)
        command = [
            sys.executable,
            str(DRIVER),
            cluster.master_url,
            *(str(run / name) for name in ("ckpt", "out", "events")),
            "--kafka",
            broker.bootstrap_servers,
            "cluster-clicks",
            "cluster-run",
        ]
        driver = launch(command, run, dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
        reference = partial(
            kafka_aggregation(spark, broker.bootstrap_servers, "cluster-clicks").run_to_completion,
            str(tmp_path / "local" / "ckpt"),
            kafka_outputs(broker.bootstrap_servers, "cluster-ref"),
            timeout_s=300,
        )
        kill_a_worker_beside_a_local_run(cluster, run, driver, reference)

    def pane_values(prefix: str) -> dict[bytes, tuple]:
        messages = broker.consume(f"{prefix}-panes")
        values = {dict(m.headers)[PANE_ID_HEADER]: tuple(m.json()[f] for f in (*PANE_KEY, "count")) for m in messages}
        assert len(values) == len(messages), f"{prefix}: no pane twice (read_committed)"
        return values

    expected, got = pane_values("cluster-ref"), pane_values("cluster-run")
    assert len(expected) > 100
    assert got == expected
    for kind in ("late", "dead"):
        reference_texts = sorted(m.text() for m in broker.consume(f"cluster-ref-{kind}"))
        assert reference_texts, f"the local run has {kind} records"
        assert sorted(m.text() for m in broker.consume(f"cluster-run-{kind}")) == reference_texts


def test_cluster_session_refuses_a_process_that_runs_another_master(spark):
    from floodmark.spark.driver.session import cluster_session

    with pytest.raises(RuntimeError, match="one SparkContext per process"):
        cluster_session("spark://127.0.0.1:7077")
