"""The JVM host (``host="jvm"``: ``floodmark.host.WindowLevel`` on Spark's own ``transformWithState``) against the
Python host, on the same input in real Spark: the same panes, late records (their ``record`` JSON to the character)
and dead letters, and the same reconciliation.

One query per host with four stages on one source (a tumbling aggregation with late firings, one with early count
firings, sessions with the earliest output time, a global window fired by processing time), over columns of every
type whose values a late record's JSON holds: text outside ASCII, integers with nulls, doubles at Python's exponent
bounds, NaN, -0.0, floats, booleans, timestamps with microseconds, dates; the event time is ISO text, and bad records
are of every kind the combiner names (missing or unparsable event time, too far ahead, missing or infinite values).
The JVM host's query runs its first three batches after the Arrow map side (the host reads the combiner's blocks),
then is restarted from its checkpoint (its state across a restart) after the JVM map side: the stage that map side
combines for is read from its rows by the JVM host itself (the combiner's record rules in
``floodmark.host.RecordRules``), the stages that ship records from the Arrow map side's blocks. OUTPUT blocks hold
three rows at most in both runs, so a bucket's output is many blocks on either host, and the levels after the JVM's
read a bucket's panes from several. The window operator's rules themselves are held equal to the core's by
``tests/core/test_jvm_window_operator.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from pathlib import Path

import pandas as pd
import pytest
from plain_session_job import counts
from spark_helpers import read_output, recorded_hosts

from floodmark import AccumulationMode, TimestampCombiner, WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.protocol import wire
from floodmark.spark import Pipeline, SourceTime
from floodmark.spark.stateful.jvm_level import HOST_ENV
from readme_blocks import run_block

pytestmark = pytest.mark.spark

SECOND = 1_000
SCHEMA = "ts LONG, k STRING, n INT, v DOUBLE, f FLOAT, b BOOLEAN, t TIMESTAMP, d DATE, p INT, at STRING"
STAGES = ("counts", "early", "sessions", "session_means", "every_ms", "hourly")
JVM_STAGES = STAGES[:5]  # "hourly" has a composite trigger: the Python host, reading a JVM stage's panes
AHEAD = 4_102_444_800_000
"""2100-01-01: a record more than a year ahead of processing time (a dead letter)."""
ODD_DOUBLES = [1e16, 1.5e-05, 0.1, -0.0, math.nan, None, 123456789.125, 1e300, 9999999999999998.0, 0.0001, -2.5e-7]
KEYS = ["a", 'é\n"x', "日本", "b"]


def rows(batch: int) -> list[tuple]:
    """Batch ``batch``'s records: on-time ones moving the watermark on, late ones behind it, a bad one."""
    base = batch * 20 * SECOND
    out = []
    for i in range(12):
        key = KEYS[i % len(KEYS)]
        value = ODD_DOUBLES[(i + batch) % len(ODD_DOUBLES)]
        stamp = dt.datetime(2026, 11, 27, 12, 0, i, 250 * i + batch)
        out.append(
            (
                base + i * 700,
                key,
                None if i % 5 == 0 else i - 3,
                value,
                0.1 * i,
                i % 3 == 0 or None,
                stamp,
                dt.date(2026, 1, 1 + i),
                i % 2,
            )
        )
    if batch >= 2:  # behind the watermark: late panes within the lateness, late records beyond it
        out += [(base - 21 * SECOND + j * 400, KEYS[j], j, ODD_DOUBLES[j], 1.5, False, None, None, 0) for j in range(4)]
        finite = [v for v in ODD_DOUBLES if v is not None and not math.isnan(v)]
        out += [
            (
                base - 60 * SECOND + j * 100,
                KEYS[j % 3],
                j,
                v,
                2.5e-8 * j,
                True,
                dt.datetime(1999, 12, 31, 0, 0, j),
                None,
                1,
            )
            for j, v in enumerate(finite)
        ]
    out.append((None, "bad", 1, 1.0, 1.0, True, None, None, 0))
    out.append((base, "inf", 1, math.inf, 1.0, True, None, None, 0))
    out.append((AHEAD, "ahead", 1, 1.0, 1.0, True, None, None, 0))
    events = [(*row, iso(row[0])) for row in out]
    events.append((base, "text", 1, 1.0, 1.0, True, None, None, 0, "not a 'time'"))
    return events


def iso(ms: int | None) -> str | None:
    """``ms`` since the epoch as ISO-8601 text in UTC (the source's event time)."""
    if ms is None:
        return None
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds") + "Z"


def run(
    spark,
    tmp_path,
    host: str,
    map_side: str = "arrow",
    restart_after: int | None = None,
    first_map_side: str | None = None,
):
    """The query on ``host`` after ``map_side``, to the end of input; with ``restart_after``, stopped once it has read
    that many batches (after ``first_map_side``, if given) and started again from its checkpoint for the rest."""
    name = f"{host}-{map_side}"
    directory = tmp_path / f"in-{name}"
    directory.mkdir()

    def write(batches: range) -> None:
        for batch in batches:  # a folder of one file per batch: the file source's maxFilesPerTrigger=1 reads it alone
            spark.createDataFrame(rows(batch), SCHEMA).coalesce(1).write.parquet(str(directory / f"b{batch}"))

    write(range(restart_after or 5))
    handles = []
    if restart_after is not None:
        first = pipeline(spark, directory, host, first_map_side or map_side).start(
            str(tmp_path / f"ckpt-{name}"), outputs(tmp_path, name)
        )
        first.processAllAvailable()
        first.stop()
        handles.append(first)
        write(range(restart_after, 5))
    query = pipeline(spark, directory, host, map_side).run_to_completion(
        str(tmp_path / f"ckpt-{name}"), outputs(tmp_path, name), timeout_s=600
    )
    return [*handles, query], tmp_path / name


def outputs(tmp_path, name: str) -> dict[str, str]:
    return {stage: str(tmp_path / name / stage) for stage in STAGES}


def pipeline(spark, directory, host: str | None, map_side: str) -> Pipeline:
    frame = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .option("recursiveFileLookup", "true")
        .parquet(str(directory))
    )
    pipeline = Pipeline(host=host, map_side=map_side)  # type: ignore[arg-type]
    pipeline.source(
        "events",
        frame,
        "at",
        SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(2 * SECOND), split="p"),
        max_future_skew=365 * 24 * 3600 * SECOND,  # of processing time: only AHEAD is too far ahead
    )
    parts = {
        "c": aggregates.count(),
        "total": aggregates.sum("v"),
        "avg": aggregates.mean("n"),
        "low": aggregates.min("f"),
        "high": aggregates.max("v"),
    }
    late_firings = triggers.AfterWatermark(late=triggers.AfterCount(1))  # combined on the JVM map side
    pipeline.stage(
        "counts",
        "events",
        WindowSpec(windows.Tumbling(10 * SECOND), parts, trigger=late_firings, allowed_lateness=5 * SECOND),
        key_by="k",
    )
    pipeline.stage(
        "early",
        "events",
        WindowSpec(
            windows.Sliding(10 * SECOND, 5 * SECOND),
            parts,
            trigger=triggers.AfterWatermark(early=triggers.AfterCount(2), late=triggers.AfterCount(1)),
            allowed_lateness=5 * SECOND,
            accumulation=AccumulationMode.ACCUMULATING,
        ),
        key_by="k",
    )
    pipeline.stage(
        "sessions",
        "events",
        WindowSpec(
            windows.Sessions(3 * SECOND),
            {"c": aggregates.count(), "s": aggregates.sum("n")},
            timestamp_combiner=TimestampCombiner.EARLIEST,
        ),
        key_by=["k", "b"],
    )
    pipeline.stage(  # level 2: reads the JVM-hosted sessions' panes (forwarded after the JVM level), on the JVM too
        "session_means",
        "sessions",
        WindowSpec(
            windows.Tumbling(20 * SECOND),
            {"m": aggregates.mean("s"), "n": aggregates.count(), "top": aggregates.max("twice")},
        ),
        key_by="k",
        columns={"twice": "c * 2"},
    )
    pipeline.stage(  # Beam's processing-time windows (Nexmark q12): a batch's records fire in the next batch
        "every_ms",
        "events",
        WindowSpec(
            windows.Global(),
            {"c": aggregates.count(), "total": aggregates.sum("v")},
            trigger=triggers.Repeatedly(triggers.AfterProcessingTime(1)),
            accumulation=AccumulationMode.DISCARDING,
        ),
        key_by="k",
    )
    pipeline.stage(  # level 3: not built into the JVM operator, so on the Python host, reading a JVM stage's panes
        "hourly",
        "session_means",
        WindowSpec(
            windows.Tumbling(60 * SECOND),
            {"n": aggregates.count(), "total": aggregates.sum("n")},
            trigger=triggers.AfterWatermark(late=triggers.AfterAny(triggers.AfterCount(1), triggers.AfterCount(2))),
        ),
    )
    return pipeline


def totals(handles, stage: str) -> tuple[int, ...]:
    """``stage``'s reconciliation over the runs of ``handles`` on one checkpoint (the last handle's covers every
    run before it)."""
    last = handles[-1].stage_reconciliation(stage)
    return tuple(getattr(last, name) for name in ("input_rows", "dead_letters", "in_windows", "late", "panes"))


def sorted_output(spark, path) -> pd.DataFrame:
    """An output, in a fixed order; a reason's processing time (the run's wall clock) as ``T``."""
    frame = read_output(spark, path).drop(columns=["batch_id"], errors="ignore")
    if "reason" in frame.columns:
        frame["reason"] = frame["reason"].str.replace(r"processing time \d+ \([^)]*\)", "processing time T", regex=True)
    return frame.sort_values(list(frame.columns), ignore_index=True) if len(frame) else frame


def test_the_jvm_host_emits_what_the_python_host_emits(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(wire, "OUTPUT_BLOCK_ROWS", 3)
    python, python_out = run(spark, tmp_path, "python")
    # The JVM run restarted after three batches (its operators' state across a restart), on the Arrow map side's
    # blocks before; after, its counts stage reads the JVM map side's rows itself, the others (which ship records)
    # the Arrow map side's blocks.
    jvm, jvm_out = run(spark, tmp_path, "jvm", "jvm", restart_after=3, first_map_side="arrow")
    assert totals(jvm[:1], "counts")[0] > 0, "the JVM run's first query read input before its restart"
    hosts = recorded_hosts(tmp_path / "ckpt-jvm-jvm")
    assert hosts == {stage: "jvm" if stage in JVM_STAGES else "python" for stage in STAGES}
    for stage in ("session_means", "hourly"):  # the levels after the JVM's are fed through ForwardedPanes
        assert len(sorted_output(spark, jvm_out / stage / "panes")) > 0, stage
    for stage in STAGES:
        for kind in ("panes", "late", "dead_letter"):
            expected = sorted_output(spark, python_out / stage / kind)
            actual = sorted_output(spark, jvm_out / stage / kind)
            pd.testing.assert_frame_equal(actual, expected, obj=f"{stage} {kind}")
        assert totals(jvm, stage) == totals(python, stage), stage
    late = sorted_output(spark, jvm_out / "counts" / "late")
    for text in (r"\u00e9", r"\u65e5", "1e+16", "1.5e-05", "-0.0", "0.0001", "-2.5e-07", "1999-12-31 00:00:03"):
        assert late["record"].str.contains(text, regex=False).any(), text
    reasons = " | ".join(sorted_output(spark, jvm_out / "counts" / "dead_letter")["reason"])
    for reason in ("missing timestamp", "unparsable timestamp: \"not a 'time'\""):
        assert reason in reasons, reason
    ahead = f"timestamp {AHEAD} (2100-01-01T00:00:00.000Z) is more than 365 d (31536000000 ms) ahead of processing time"
    assert ahead in reasons, reasons  # the times in ms and ISO-8601 UTC, the skew as a duration (and in ms)
    for reason in ("field 'v' is missing", "field 'v' is not a finite number: inf", "field 'n' is missing"):
        assert reason in reasons, reason


def test_a_pipeline_that_names_no_host_runs_where_floodmark_host_says(monkeypatch):
    monkeypatch.delenv(HOST_ENV, raising=False)
    assert (Pipeline().host, Pipeline().host_named) == ("jvm", False)
    assert (Pipeline(host="jvm").host, Pipeline(host="jvm").host_named) == ("jvm", True)
    monkeypatch.setenv(HOST_ENV, "python")
    assert (Pipeline().host, Pipeline().host_named) == ("python", True)
    assert Pipeline(host="jvm").host == "jvm"
    monkeypatch.setenv(HOST_ENV, "rust")
    with pytest.raises(ValueError, match="FLOODMARK_HOST must be 'python' or 'jvm', not 'rust'"):
        Pipeline()


def test_a_stage_left_on_python_is_a_warning_only_where_the_jvm_host_was_named(spark, tmp_path, monkeypatch, caplog):
    monkeypatch.delenv(HOST_ENV, raising=False)
    (tmp_path / "in").mkdir()
    for host, level in (("jvm", logging.WARNING), (None, logging.INFO)):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="floodmark"):
            *_, hosts = pipeline(spark, tmp_path / "in", host, "arrow").build(str(tmp_path / f"ckpt-{host}"), spark)
        assert hosts == {stage: "jvm" if stage in JVM_STAGES else "python" for stage in STAGES}
        said = [(r.levelno, r.getMessage()) for r in caplog.records if "runs on the Python host" in r.getMessage()]
        assert said == [
            (
                level,
                "floodmark: stage hourly runs on the Python host, not the JVM: its spec is not built "
                "into the JVM operator (a composite trigger, collect_list or your own aggregate)",
            )
        ], said


@pytest.mark.parametrize("host, map_side", [("python", "arrow"), ("jvm", "arrow"), ("jvm", "jvm")])
def test_a_stage_reading_two_sources_keeps_each_sources_splits(spark, tmp_path, host, map_side):
    """One stage over two sources of one schema, ``app`` 30 s ahead of ``web``, on either host and map side (on the
    JVM's, the JVM host reads the map side's rows itself where it can): each source's splits are its own, so ``web``
    holds the stage's watermark back and nothing is late; every pane counts both sources' records."""
    sources = {"web": -30 * SECOND, "app": 0}
    pipeline = Pipeline(host=host, map_side=map_side)  # type: ignore[arg-type]
    for name, behind in sources.items():
        for batch in range(4):
            base = 60 * SECOND + batch * 10 * SECOND + behind
            rows = pd.DataFrame({"ts": [base + i * 500 for i in range(20)], "k": ["a", "b"] * 10, "p": [0, 1] * 10})
            spark.createDataFrame(rows).coalesce(1).write.parquet(str(tmp_path / name / f"b{batch}"))
        frame = (
            spark.readStream.schema("ts LONG, k STRING, p LONG")
            .option("maxFilesPerTrigger", 1)
            .option("recursiveFileLookup", "true")
            .parquet(str(tmp_path / name))
        )
        pipeline.source(
            name, frame, "ts", SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(SECOND), split="p")
        )
    spec = WindowSpec(windows.Tumbling(10 * SECOND), {"n": aggregates.count()})
    pipeline.stage("counts", list(sources), spec, key_by="k")
    query = pipeline.run_to_completion(str(tmp_path / "ckpt"), {"counts": str(tmp_path / "out")}, timeout_s=600)
    assert query.hosts == {"counts": host}
    splits = {label for report in query.reports for label in report.splits}
    assert splits == {"web/0", "web/1", "app/0", "app/1"}
    assert read_output(spark, tmp_path / "out" / "late").empty
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert panes["n"].sum() == 160 and set(panes["window_start"]) == {s * 1_000 for s in range(30, 100, 10)}


def test_a_session_without_floodmarks_settings_warns_and_refuses_a_checkpoint_of_the_jvm_host(spark, tmp_path):
    """A session with floodmark's settings and jar but not its ``spark.sql.extensions`` (``spark-submit --jars``
    without the ``--conf``) cannot reach the JVM host: a new checkpoint's stages run on Python with one warning that
    says why, whether or not a host was named; a checkpoint whose stages were fixed on the JVM host is refused (its
    stages would not run, their input lost)."""
    spark.createDataFrame([(1_000, "a")], "ts LONG, k STRING").write.parquet(str(tmp_path / "in"))
    *_, hosts = counts(spark, str(tmp_path / "in")).build(str(tmp_path / "jvm"), spark)
    assert hosts == {"counts": "jvm"}
    job = Path(__file__).with_name("plain_session_job.py")
    out = json.loads(
        run_block(
            f"import runpy, sys; sys.argv = ['job', {str(tmp_path / 'in')!r}, {str(tmp_path / 'new')!r}, "
            f"{str(tmp_path / 'jvm')!r}]; runpy.run_path({str(job)!r}, run_name='__main__')",
            tmp_path,
        )
    )
    assert out["hosts"] == {"counts": "python"}
    host_lines = [line for line in out["said"] if "host" in line[1]]
    reach = (
        "this session was started without spark.sql.extensions=floodmark.Extensions (floodmark's sessions and "
        "configure_spark_with_floodmark set it; spark-submit and Spark Connect servers need it given)"
    )
    assert host_lines == [
        ["WARNING", f"floodmark: stages counts run on the Python host (slower), not the JVM host: {reach}"]
    ]
    assert out["refused"] == (
        f"the checkpoint {tmp_path / 'jvm'} runs stages counts on the JVM host (fixed when it was created), which "
        f"this session cannot reach: {reach}"
    )
