"""floodmark over Spark Connect (issue 43): the same jobs, started from a ``SparkSession.builder.remote`` session
against a real Connect server on loopback (``floodmark_dev.connect_server``), give the outputs, reports and
reconciliation of a classic session's run. The Connect client runs in a process of its own (``connect_driver.py``):
a Connect session switches the whole process's PySpark into Connect mode, and the suite's classic session is here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from connect_jobs import STAGES, produce, produce_skewed, records_read_back, run, run_kafka, summary, write_input
from spark_helpers import read_output, recorded_hosts
from surface_checks import CHECKS

from floodmark.spark.connect import client_path, connect_path_problem
from floodmark.spark.driver.restarts import BUSY_MACHINE_RESTARTS, start_again_when_busy
from readme_blocks import page_blocks

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("connect_driver.py")
SLOW = pytest.mark.skipif(os.environ.get("FLOODMARK_SLOW_TESTS") != "1", reason="slow variant: FLOODMARK_SLOW_TESTS=1")


SLOW_START = """#!/bin/sh
case "$*" in
  *foreach_batch_worker*)
    if [ -e "{armed}" ]; then rm -f "{armed}"; sleep 14; fi ;;
esac
exec "{python}" "$@"
"""
"""The server's Python: this interpreter, except that the query's ``foreachBatch`` process, which the server starts
inside ``start()``, waits 14 s before it starts when the file ``{armed}`` exists (once: it removes the file), as on a
server too busy for it to connect back within Spark's fixed 10 s."""


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    from floodmark_dev.connect_server import ConnectServer

    work_dir = tmp_path_factory.mktemp("connect-server")
    python = work_dir / "python"
    python.write_text(SLOW_START.format(armed=work_dir / "slow-start", python=sys.executable))
    python.chmod(0o755)
    with ConnectServer(cores=2, kafka=True, work_dir=work_dir, python=str(python)) as server:
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


@pytest.mark.parametrize("job", ["aggregation", "pipeline", "jvm"])
def test_a_job_over_spark_connect_equals_the_classic_run(spark, connect_server, tmp_path, job):
    """A job run over Connect equals its classic run: one stage, two stages, and one stage on the JVM map side and
    the JVM host (``jvm``: reached through floodmark's plan hints, no py4j, on both sessions). ``read_late`` and
    ``read_dead_letters`` without a schema infer the records' schema over Connect as on a classic session (no RDD)."""
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
    host = "jvm" if job == "jvm" else "python"
    for root in (classic, remote):
        hosts = recorded_hosts(root / "ckpt")
        assert set(hosts.values()) == {host}, hosts
    if job == "aggregation":
        read_back, _ = run_connect(connect_server, "read", remote)
        assert read_back == records_read_back(spark, classic / "out")
        assert "ts:bigint" in read_back["late"]["schema"] and read_back["late"]["rows"], read_back
        assert len(read_back["dead_letter"]["rows"]) == 2, read_back
    if job == "jvm":
        # Neither the map side nor the host fell back (each would say why in a warning).
        assert "not in the JVM" not in output and "runs on the Python host" not in output, output


def test_the_surface_job_over_spark_connect_reads_back_the_straight_computation(connect_server, tmp_path):
    """``test_surface.py``'s run over Connect: the client builds :mod:`surface_job`'s pipeline (its process function
    pickled by value: the server's Python cannot import the test's module) on its remote session, starts it,
    catches up and stops it, writes more files and runs it to the end on the same checkpoint; then reads everything
    back through the same readers over Connect and holds it to the same checks (:mod:`surface_checks`)."""
    got, output = run_connect(connect_server, "surface", tmp_path)
    assert list(got) == list(CHECKS), got
    failed = {name: said for name, said in got.items() if said != "ok"}
    assert not failed, "\n".join(f"{name}:\n{said}" for name, said in failed.items())
    assert "Traceback" not in output, output[-4000:]


def test_a_query_start_that_a_busy_server_fails_is_made_again(connect_server, tmp_path):
    """Over Connect the server starts the query's ``foreachBatch`` process inside ``start()``: on a busy server that
    process misses Spark's 10 s to connect back and ``start()`` itself fails ("Python worker failed to connect
    back"), before the query exists. The start is made again, said in one line, and the run goes to its end (here
    the server's Python is made that slow for one start: :data:`SLOW_START`)."""
    write_input(tmp_path / "in", files=1, rows=100)
    armed = connect_server.work_dir / "slow-start"
    armed.touch()
    got, output = run_connect(connect_server, "aggregation", tmp_path)
    assert not armed.exists(), "the slow start happened"
    said = [line for line in output.splitlines() if "starting it again" in line]
    assert said == [
        "floodmark: Python worker failed to connect back at the query's start (a busy machine?): starting it again "
        "(1 of 3)"
    ]
    assert got["last_watermark"] == 2**63 - 1 and got["reconciliation"]["rows_in"] == 100
    assert "Traceback" not in output, output[-4000:]


def test_a_start_is_made_again_for_a_busy_machine_only_and_at_most_three_times_in_a_row():
    calls = []

    def start(error: str | None) -> str:
        calls.append(error)
        if error is not None and len(calls) <= BUSY_MACHINE_RESTARTS + 1:
            raise RuntimeError(error)
        return "started"

    busy = "org.apache.spark.SparkException: Python worker failed to connect back."
    assert start_again_when_busy(lambda: start(busy if len(calls) < 2 else None)) == "started" and len(calls) == 3
    calls.clear()
    with pytest.raises(RuntimeError, match="connect back"):
        start_again_when_busy(lambda: start(busy))
    assert len(calls) == 1 + BUSY_MACHINE_RESTARTS
    calls.clear()
    with pytest.raises(RuntimeError, match="PATH_NOT_FOUND"):
        start_again_when_busy(lambda: start("[PATH_NOT_FOUND] Path does not exist"))
    assert len(calls) == 1


def test_under_connect_floodmark_files_are_absolute_plain_paths():
    assert connect_path_problem("/data/ckpt") is None
    assert "relative path" in (connect_path_problem("ckpt") or "")
    assert "not a URI" in (connect_path_problem("s3a://bucket/ckpt") or "")


class _ConnectSession:
    """Stands for a Spark Connect session: :func:`~floodmark.spark.connect.is_connect` goes by the class's module."""


_ConnectSession.__module__ = "pyspark.sql.connect.session"


def test_under_connect_a_relative_path_is_the_clients(tmp_path, monkeypatch):
    """The paths a user gives are made absolute against the client's working directory over Connect (the server's
    is another), a trailing slash kept; an absolute path, a URI, and any path on a classic session are unchanged."""
    monkeypatch.chdir(tmp_path)
    connect = _ConnectSession()
    assert client_path(connect, "out") == str(tmp_path / "out")
    assert client_path(connect, "readings/") == f"{tmp_path / 'readings'}/"
    assert client_path(connect, Path("out", "panes")) == str(tmp_path / "out" / "panes")
    assert client_path(connect, "/data/ckpt/") == "/data/ckpt/"
    assert client_path(connect, "s3a://bucket/ckpt") == "s3a://bucket/ckpt"
    assert client_path(object(), "readings/") == "readings/"
    assert connect_path_problem(client_path(connect, "ckpt/")) is None


def test_getting_started_runs_as_written_over_spark_connect(connect_server, tmp_path):
    """The docs site's Getting started, its blocks in order (the sample input, the job, reading the results, running
    it continuously), with only ``spark = local_session()`` made a remote session, in a client process of its own
    whose working directory holds its relative paths ("readings/", "ckpt/", "out/", ...): the output the page shows,
    as the classic run gives it (``test_install.py``), and nothing in the server's working directory."""
    data, job, results, live = page_blocks("getting-started.md")[:4]
    assert job.count("spark = local_session()") == 1
    session = f'SparkSession.builder.remote("{connect_server.url}").getOrCreate()'
    remote = f"from pyspark.sql import SparkSession; spark = {session}"
    code = data + job.replace("spark = local_session()", remote) + results + live
    client = tmp_path / "client"
    client.mkdir()
    done = subprocess.run([sys.executable, "-c", code], cwd=client, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}\nserver log: {connect_server.log}"
    out = done.stdout
    assert "rows in 6 = 5 records + 1 dead letters; (record, window) pairs 5 = 5 in windows + 0 late" in out, out
    assert "|    d3|2026-01-01 09:00:00|       2|        18.2|ON_TIME|" in out, "g2's zone-less times in Berlin time"
    assert "unparsable timestamp: 'yesterday'" in out
    assert "|    d1|2026-01-01 09:01:00|       1|ON_TIME|" in out, "the continuous query fired once both gateways moved"
    for name in ("ckpt", "out", "ckpt-live", "out-live"):
        assert (client / name).is_dir(), f"{name}/ is the client's"
    server_side = {p.name for p in connect_server.work_dir.iterdir()}
    assert not server_side & {"readings", "ckpt", "out", "ckpt-live", "out-live"}, server_side


def start_and_kill(server, job: str, root: Path, *args: str, after: int = 3) -> list[int]:
    """Start ``job`` over Connect (``--start``: a bounded run), ``kill -9`` the client once its listener has had
    ``after`` batches' reports; the batches seen. The server's run goes on until a new start stops it."""
    client = subprocess.Popen(
        [sys.executable, str(DRIVER), server.url, job, str(root), *args, "--start"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    try:
        assert client.stdout is not None
        for line in client.stdout:
            if line.startswith("BATCH "):
                seen.append(int(line.split()[1]))
            if len(seen) == after:
                break
    finally:
        client.kill()
        client.wait()
    assert len(seen) == after, "the client's listener got the server's reports"
    return seen


@SLOW  # the Kafka test below kills its client too (and checks exactly-once output after the restart)
def test_a_client_killed_mid_stream_and_started_again_loses_nothing(spark, connect_server, tmp_path):
    """``kill -9`` of the Connect client while its bounded run goes on in the server (:func:`start_and_kill`), then
    the same run from the same checkpoint: the new run stops the old one (Spark's stopActiveRunOnRestart: the
    server's query had outlived its client) and resumes from the checkpoint; the outputs equal an uninterrupted
    classic run's, whether the old run had read all the input, or flushed, before the new one stopped it."""
    classic, remote = tmp_path / "classic", tmp_path / "connect"
    write_input(classic / "in", files=6)
    write_input(remote / "in", files=6)
    run(spark, "aggregation", classic)
    start_and_kill(connect_server, "aggregation", remote)
    got, _ = run_connect(connect_server, "aggregation", remote)
    assert got["last_watermark"] == 2**63 - 1
    mine, theirs = outputs(spark, remote, "aggregation"), outputs(spark, classic, "aggregation")
    for name, frame in theirs.items():
        pd.testing.assert_frame_equal(mine[name], frame, obj=name)


def test_kafka_in_and_out_over_spark_connect_exactly_once_through_a_client_kill(
    spark, connect_server, kafka_broker, tmp_path
):
    """Kafka in, and out through floodmark's transactional data source (panes and late records exactly-once,
    written by the server's driver; dead letters at-least-once), the client killed with ``kill -9`` mid-run and
    the run started again: a ``read_committed`` consumer sees every pane and late record once, the same as an
    uninterrupted classic run's; the dead letters are the classic run's (at-least-once: perhaps repeated)."""
    servers = kafka_broker.bootstrap_servers
    write_input(tmp_path / "in")
    produced = {prefix: produce(kafka_broker, f"{prefix}-clicks", tmp_path / "in") for prefix in ("classic", "remote")}
    assert produced["remote"] == produced["classic"]
    for prefix in produced:
        for kind in ("panes", "late", "dead"):
            kafka_broker.create_topic(f"{prefix}-{kind}")
    expected = summary(run_kafka(spark, servers, "classic", tmp_path / "classic"), "kafka")
    assert expected["reconciliation"]["rows_in"] == produced["classic"]
    start_and_kill(connect_server, "kafka", tmp_path / "remote", servers, "remote", after=2)
    got, output = run_connect(connect_server, "kafka", tmp_path / "remote", servers, "remote")
    assert got["last_watermark"] == expected["last_watermark"] == 2**63 - 1

    def topics(prefix: str) -> tuple[list, list, list]:
        # is_last depends on where the new start lands: when it stops the old run between its last input batch
        # and the flush, the new run's first batch (planned without new input) is not taken as the end of input
        # (finish_when_input_exhausted: it may replay offsets planned before the restart) and fires the windows
        # the watermark passed as an ordinary batch, within their allowed lateness (is_last false), before the
        # flush; the uninterrupted run fires them in its flush (is_last true). Each pane is still there once, with
        # the same counts, timing and indexes.
        panes = sorted(
            json.dumps({k: v for k, v in record.json().items() if k not in ("batch_id", "is_last")}, sort_keys=True)
            for record in kafka_broker.consume(f"{prefix}-panes")
        )
        late = []
        for record in kafka_broker.consume(f"{prefix}-late"):
            fields = record.json()
            fields.pop("batch_id", None)
            original = json.loads(fields.pop("record"))
            original.pop("kafka_timestamp")  # when the test produced it: each topic's own
            late.append(json.dumps({**fields, "record": original}, sort_keys=True))
        late.sort()
        dead = sorted({r.json()["record"] for r in kafka_broker.consume(f"{prefix}-dead")})
        return panes, late, dead

    mine, theirs = topics("remote"), topics("classic")
    assert mine == theirs
    pane_id = ("channel", "window_start", "window_end", "pane_index")
    pane_ids = [tuple(json.loads(pane)[c] for c in pane_id) for pane in mine[0]]
    assert len(pane_ids) == len(set(pane_ids)) > 0, "each pane once"
    assert len(mine[2]) == 2 and len(mine[1]) > 0 and "Traceback" not in output


# A slow variant (~50 s): alignment's pauses run classic in tests/spark/test_kafka.py, and a data source by name over
# Connect in the exactly-once Kafka test above.
@SLOW
def test_watermark_alignment_pauses_kafka_partitions_over_spark_connect(spark, connect_server, kafka_broker, tmp_path):
    """The replay of ``test_kafka.py``'s alignment test, over Connect: the server's controller pauses the partitions
    that run ahead (through floodmark's data source on the server's driver), the fast partitions' windows no longer
    wait open, and every record is counted once."""
    produced = produce_skewed(kafka_broker, "skewed")
    got, output = run_connect(connect_server, "aligned", tmp_path, kafka_broker.bootstrap_servers, "skewed")
    assert got["paused"] == ["1", "2", "3"], "the partitions ahead, never the slowest nor the silent one"
    # Unaligned, the peak is above 150 (test_kafka.py); aligned on a classic session below 80. Idleness is a matter of
    # processing time, and Connect's batches take longer: a few windows more or less than the classic run's.
    assert got["peak"] < 100 and got["late"] == 0, got
    assert got["behind"] > 0 and got["idle_behind"] == 0, "the server's controller knows the partitions' backlog"
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert int(panes["count"].sum()) == produced and "Traceback" not in output
