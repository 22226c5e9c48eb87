"""Checkpoints and outputs given as URIs (Hadoop file systems), and the control entry travelling with the job."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from spark_helpers import read_output, write_batches

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.driver.checkpoint_files import LocalFiles, directory_problem, has_scheme, join
from floodmark.driver.control_log import ControlEntry
from floodmark.spark import EventTimeAggregation, SourceTime
from floodmark.spark.batch_entry import encode, entry_for_batch, session_problem
from floodmark.spark.driver.spark_checkpoint import SparkCheckpoint
from floodmark.spark.hadoop_files import HadoopFiles, files_for

SCHEMA = "ts LONG, k STRING, p INT"


def test_join_keeps_scheme_and_authority():
    assert join("s3a://bucket/ckpt", "floodmark", "control") == "s3a://bucket/ckpt/floodmark/control"
    assert join("s3a://bucket/ckpt/", "spark") == "s3a://bucket/ckpt/spark"
    assert join("file:///tmp/x", "spark") == "file:///tmp/x/spark"
    assert join("/tmp/x", "spark") == "/tmp/x/spark"
    assert has_scheme("hdfs://nn:8020/a") and has_scheme("file:/a")
    assert not has_scheme("/tmp/a") and not has_scheme("relative/dir") and not has_scheme("C:\\runs")


def test_a_location_that_cannot_be_a_directory_says_why(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert directory_problem(tmp_path / "new" / "dir") is None, "missing directories are created"
    assert directory_problem(tmp_path) is None
    assert directory_problem(blocker) == "it is a regular file, not a directory"
    assert directory_problem(blocker / "ckpt" / "x") == f"{blocker} is a regular file"
    assert directory_problem(f"file://{blocker}/ckpt") == f"{blocker} is a regular file"
    assert directory_problem("s3a://bucket/ckpt") is None, "left to the URI's file system"


def test_a_checkpoint_or_output_under_a_file_is_refused_at_start(spark, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    (tmp_path / "in").mkdir()
    aggregation = EventTimeAggregation(
        spark.readStream.schema(SCHEMA).parquet(str(tmp_path / "in")),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(1_000), {"n": aggregates.count()}),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0), split="p"),
    )
    with pytest.raises(ValueError) as refused:
        aggregation.start(str(blocker / "ckpt"), str(tmp_path / "out"))
    assert str(refused.value) == (
        f"the checkpoint {blocker}/ckpt cannot be used: {blocker} is a regular file; choose another location"
    )
    with pytest.raises(
        ValueError, match=f"the panes output {blocker}/panes cannot be used: {blocker} is a regular file"
    ):
        aggregation.start(str(tmp_path / "ckpt"), str(blocker))
    assert not (tmp_path / "ckpt").exists(), "refused before anything was written"


def test_a_uri_needs_a_session_and_a_path_does_not():
    assert isinstance(files_for("/tmp/a"), LocalFiles)
    with pytest.raises(ValueError, match="needs a Spark session"):
        files_for("s3a://bucket/a")


@pytest.mark.parametrize("make_files", [lambda spark: LocalFiles(), HadoopFiles], ids=["local", "hadoop"])
def test_files_first_write_wins_and_list_and_delete(spark, tmp_path, make_files):
    files = make_files(spark)
    directory = f"file://{tmp_path}/d" if isinstance(files, HadoopFiles) else str(tmp_path / "d")
    target = join(directory, "000000000001.json")
    assert files.read_text(target) is None and files.list_names(directory) == []
    assert files.write_once(target, '{"a": "é"}')
    assert not files.write_once(target, '{"a": 2}'), "an existing entry is never replaced"
    assert json.loads(files.read_text(target)) == {"a": "é"}
    assert [n for n in files.list_names(directory) if not n.startswith(".")] == ["000000000001.json"]
    files.delete(target)
    files.delete(target)  # deleting what is gone is not an error
    assert files.read_text(target) is None


def test_the_published_entry_must_be_the_batch_s_own():
    entry = ControlEntry(7, 1_000, 2_000, False, coordinator={"splits": {"0": [1, 2, 3]}})
    text = encode(entry)
    assert "coordinator" not in text, "the executors do not need the coordinator's snapshot"
    assert entry_for_batch(text, 7) == ControlEntry(7, 1_000, 2_000)
    assert entry_for_batch(text, None) == ControlEntry(7, 1_000, 2_000), "no batch id from Spark: Connect's tasks"
    with pytest.raises(RuntimeError, match="micro-batch 8 carries floodmark control entry 7"):
        entry_for_batch(text, 8)
    with pytest.raises(RuntimeError, match="carries no floodmark control entry"):
        entry_for_batch(None, 7)


def test_sessions_where_job_properties_cannot_carry_the_entry_are_refused(spark):
    class Session:  # what the check reads of a session
        def __init__(self, context):
            self._sc = context

    class Context:
        def __init__(self, gateway):
            self._gateway = gateway

    assert session_problem(spark) is None  # a Spark Connect session is accepted too (tests/spark/test_connect.py)
    assert "pinned-thread mode" in session_problem(Session(Context(gateway=object())))


def test_first_batch_is_the_one_after_the_last_commit(tmp_path):
    commits = tmp_path / "spark" / "commits"
    assert SparkCheckpoint(str(tmp_path / "spark"), LocalFiles()).first_batch_id() == 0, "a new query"
    commits.mkdir(parents=True)
    for name in ("0", "1", "2", ".2.crc"):
        (commits / name).write_text("v1")
    assert SparkCheckpoint(str(tmp_path / "spark"), LocalFiles()).first_batch_id() == 3


def test_a_batch_reads_no_new_input_when_only_the_ticks_moved(tmp_path):
    """What ends a bounded run's input as its batch begins (``Controller.begin_batch``): Spark's offset log."""
    offsets = tmp_path / "spark" / "offsets"
    offsets.mkdir(parents=True)
    header = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":5,"conf":{}}\n'
    for batch, (ticks, files) in enumerate([(1, 0), (2, 1), (3, 1), (3, 2), (3, 2)]):
        (offsets / str(batch)).write_text(f'{header}{{"seq": {ticks}}}\n{{"logOffset":{files}}}')
    checkpoint = SparkCheckpoint(str(tmp_path / "spark"), LocalFiles())
    assert [checkpoint.reads_no_new_input(b) for b in range(6)] == [False, False, True, False, True, False]
    assert checkpoint.planned_no_new_input(), "the newest batch, 4, moved nothing"


def test_checkpoint_and_output_as_uris_across_a_restart(spark, tmp_path, monkeypatch):
    """A file:// checkpoint goes through Hadoop's FileSystem, like hdfs:// or s3a:// on a cluster. The first run
    has the Python tick source and the restart the JVM one (spark/sources/ticks.py): a checkpoint made before the JVM
    source existed resumes with it."""

    def batch(*stamps):
        return pd.DataFrame({"ts": list(stamps), "k": ["a"] * len(stamps), "p": [0] * len(stamps)}).astype(
            {"p": "int32"}
        )

    write_batches(tmp_path / "in", [batch(100, 1_100), batch(2_100, 2_200)])
    checkpoint, output = f"file://{tmp_path}/ckpt", f"file://{tmp_path}/out"

    def aggregation():
        return EventTimeAggregation(
            spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in")),
            event_time="ts",
            key_by=["k"],
            spec=WindowSpec(windows.Tumbling(1_000), {"n": aggregates.count()}),
            time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0), split="p"),
        )

    monkeypatch.setenv("FLOODMARK_PYTHON_TICKS", "1")
    first = aggregation().start(checkpoint, output, trigger_interval="0 seconds")
    first.await_batches(3, timeout_s=300)
    first.stop()
    monkeypatch.delenv("FLOODMARK_PYTHON_TICKS")
    stopped_after = first.reports[-1].batch_id
    batch(3_500, 3_600, 900).to_parquet(tmp_path / "in" / "part-00002.parquet", index=False)  # newest file
    second = aggregation().run_to_completion(checkpoint, output, timeout_s=300)
    # It goes on from the checkpoint: with the batch after the last one reported, or that one again when the
    # stop came between its sink and its commit (a replay, with the same control entry).
    assert second.reports[0].batch_id in (stopped_after, stopped_after + 1)
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert sorted(zip(panes["window_start"], panes["n"], strict=True)) == [(0, 1), (1_000, 1), (2_000, 2), (3_000, 2)]
    late = read_output(spark, tmp_path / "out" / "late")
    assert late["event_time"].tolist() == [900]
    control = tmp_path / "ckpt" / "floodmark" / "control"
    # Written through Hadoop's FileSystem at the URI (a trigger after the flush may have added one more).
    assert (control / f"{second.reports[-1].batch_id + 1:012d}.json").exists()
    assert not (tmp_path / "ckpt" / "floodmark" / "metrics.jsonl").exists(), "no appending on remote checkpoints"


def test_a_batch_interrupted_by_stop_reports_a_short_interruption_spark_recognises():
    import re

    from py4j.protocol import Py4JJavaError

    from floodmark.spark.outputs.batch_sink import BatchFailed, BatchInterrupted, BatchSink

    class JavaError(Py4JJavaError):  # str() of a real one asks the JVM for the whole stack trace
        def __init__(self, text):
            Exception.__init__(self, text)
            self.text = text

        def __str__(self):
            return self.text

    def sink_raising(error):
        sink = BatchSink.__new__(BatchSink)

        def write(frame, batch_id):
            raise error

        sink._write = write
        return sink

    stack = "\n".join(f"\tat org.example.Frame{i}.call(Frame.java:{i})" for i in range(300))
    interrupted = JavaError(
        f"An error occurred while calling o481.collectToPython.\n: java.lang.InterruptedException\n{stack}"
    )
    with pytest.raises(BatchInterrupted) as raised:
        sink_raising(interrupted)(None, 3)
    text = str(raised.value)
    assert len(text) < 200 and raised.value.__suppress_context__, "short, without the Java stack trace"
    # The pattern Spark 4.3's StreamExecution matches a Python foreachBatch error with to recognise a stop.
    names = "java.lang.InterruptedException|java.io.InterruptedIOException|java.nio.channels.ClosedByInterruptException"
    spark_pattern = r"py4j.protocol.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)(" + names + ")"
    assert re.search(spark_pattern, text)
    failure = JavaError(f"An error occurred while calling o12.parquet.\n: java.io.IOException: disk full\n{stack}")
    with pytest.raises(BatchFailed) as failed:
        sink_raising(failure)(None, 3)
    # A real failure says which batch and what it was doing, and keeps the whole Java error as its cause.
    assert str(failed.value).startswith("floodmark batch 3 failed while computing the batch: ")
    assert "start the query again from its checkpoint" in str(failed.value)
    assert failed.value.__cause__ is failure
    # Python's own error (your function sink's): its type and first line.
    broken = ValueError("the sink is down\nand a second line")
    with pytest.raises(BatchFailed) as failed:
        sink_raising(broken)(None, 4)
    cause = "ValueError: the sink is down. "
    assert str(failed.value).startswith(f"floodmark batch 4 failed while computing the batch: {cause}")
    assert failed.value.__cause__ is broken
