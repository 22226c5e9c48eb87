"""floodmark over Spark Connect (issue 43): the same jobs, started from a ``SparkSession.builder.remote`` session
against a real Connect server on loopback (``floodmark_dev.connect_server``), give the outputs, reports and
reconciliation of a classic session's run. The Connect client runs in a process of its own (``connect_driver.py``):
a Connect session switches the whole process's PySpark into Connect mode, and the suite's classic session is here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from connect_jobs import STAGES, produce, run, run_kafka, summary, write_input
from spark_helpers import read_output

from floodmark.spark.connect import connect_path_problem

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("connect_driver.py")


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    from floodmark_dev.connect_server import ConnectServer

    with ConnectServer(cores=2, kafka=True, work_dir=tmp_path_factory.mktemp("connect-server")) as server:
        yield server


def run_connect(server, job: str, root: Path, *args: str) -> tuple[dict, str]:
    """The driver's summary of ``job`` run over Connect, and its whole output."""
    done = subprocess.run(
        [sys.executable, str(DRIVER), server.url, job, str(root), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"the Connect client failed:\n{output[-6000:]}\nserver log: {server.log}"
    line = next(line for line in done.stdout.splitlines() if line.startswith("SUMMARY "))
    return json.loads(line.removeprefix("SUMMARY ")), output


def outputs(spark, root: Path, job: str) -> dict[str, pd.DataFrame]:
    """Every stage's panes, late records and dead letters, without the batch that wrote them, in one order."""
    found = {}
    for stage in STAGES[job]:
        base = root / "out" / stage if len(STAGES[job]) > 1 else root / "out"
        for kind in ("panes", "late", "dead_letter"):
            frame = read_output(spark, base / kind)
            frame = frame.drop(columns=[c for c in ("batch_id",) if c in frame.columns])
            frame = frame.astype(str).sort_values(list(frame.columns)).reset_index(drop=True) if len(frame) else frame
            found[f"{stage}/{kind}"] = frame
    return found


@pytest.mark.parametrize("job", ["aggregation", "pipeline"])
def test_a_job_over_spark_connect_equals_the_classic_run(spark, connect_server, tmp_path, job):
    classic, remote = tmp_path / "classic", tmp_path / "connect"
    write_input(classic / "in")
    write_input(remote / "in")
    expected = summary(run(spark, job, classic), job)
    got, output = run_connect(connect_server, job, remote)
    assert {k: v for k, v in got.items() if k not in ("batches", "reports")} == {
        k: v for k, v in expected.items() if k not in ("batches", "reports")
    }
    assert got["reports"] == got["batches"] > 0  # the handle followed every batch of the server's controller
    assert expected["reconciliation"]["dead_letters"] == 2 and expected["reconciliation"]["late"] > 0
    mine, theirs = outputs(spark, remote, job), outputs(spark, classic, job)
    for name, frame in theirs.items():
        pd.testing.assert_frame_equal(mine[name], frame, obj=name)
    assert len(theirs[f"{STAGES[job][0]}/dead_letter"]) == 2
    assert "Traceback" not in output, output[-4000:]


def test_under_connect_floodmark_files_are_absolute_plain_paths():
    assert connect_path_problem("/data/ckpt") is None
    assert "relative path" in (connect_path_problem("ckpt") or "")
    assert "not a URI" in (connect_path_problem("s3a://bucket/ckpt") or "")


def test_a_client_killed_mid_stream_and_started_again_loses_nothing(spark, connect_server, tmp_path):
    """``kill -9`` of the Connect client while its bounded run goes on in the server, then the same run from the
    same checkpoint: the new run stops the old one (Spark's stopActiveRunOnRestart: the server's query had
    outlived its client) and resumes from the checkpoint; the outputs equal an uninterrupted classic run's,
    whether the old run had read all the input, or flushed, before the new one stopped it."""
    classic, remote = tmp_path / "classic", tmp_path / "connect"
    write_input(classic / "in", files=6)
    write_input(remote / "in", files=6)
    run(spark, "aggregation", classic)
    client = subprocess.Popen(
        [sys.executable, str(DRIVER), connect_server.url, "aggregation", str(remote), "--start"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        seen = []
        assert client.stdout is not None
        for line in client.stdout:
            if line.startswith("BATCH "):
                seen.append(int(line.split()[1]))
            if len(seen) == 3:
                break
        assert len(seen) == 3, "the client's listener got the server's reports"
    finally:
        client.kill()
        client.wait()
    got, _ = run_connect(connect_server, "aggregation", remote)
    assert got["last_watermark"] == 2**63 - 1
    mine, theirs = outputs(spark, remote, "aggregation"), outputs(spark, classic, "aggregation")
    for name, frame in theirs.items():
        pd.testing.assert_frame_equal(mine[name], frame, obj=name)


def test_kafka_in_and_out_over_spark_connect_equals_the_classic_run(spark, connect_server, kafka_broker, tmp_path):
    """At-least-once Kafka output (the exactly-once writer needs py4j): the latest pane of every key and window,
    the late records and the dead letters equal the classic run's; every produced record is accounted for."""
    servers = kafka_broker.bootstrap_servers
    write_input(tmp_path / "in")
    produced = {prefix: produce(kafka_broker, f"{prefix}-clicks", tmp_path / "in") for prefix in ("classic", "remote")}
    for prefix in produced:
        for kind in ("panes", "late", "dead"):
            kafka_broker.create_topic(f"{prefix}-{kind}")
    expected = summary(run_kafka(spark, servers, "classic", tmp_path / "classic"), "kafka")
    got, output = run_connect(connect_server, "kafka", tmp_path / "remote", servers, "remote")
    assert {k: v for k, v in got.items() if k not in ("batches", "reports")} == {
        k: v for k, v in expected.items() if k not in ("batches", "reports")
    }
    assert got["reconciliation"]["rows_in"] == produced["remote"] == produced["classic"]

    def topics(prefix: str) -> tuple[dict, list, list]:
        latest = {}
        for record in kafka_broker.consume(f"{prefix}-panes"):
            pane = record.json()
            latest[(pane["channel"], pane["window_start"])] = (pane["pane_index"], pane["clicks"])
        late = []
        for record in kafka_broker.consume(f"{prefix}-late"):
            fields = record.json()
            original = json.loads(fields.pop("record"))
            original.pop("kafka_timestamp")  # when the test produced it: each topic's own
            late.append(json.dumps({**fields, "record": original}, sort_keys=True))
        late.sort()
        dead = sorted(r.json()["record"] for r in kafka_broker.consume(f"{prefix}-dead"))
        return latest, late, dead

    assert topics("remote") == topics("classic")
    assert len(topics("remote")[2]) == 2 and "Traceback" not in output
