"""A user's own job on Spark (issue 39): inputs laid out as users lay them out, bad values however event time is
given, the handle used as PySpark's StreamingQuery. Each test failed on the main of 2026-11-26."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from spark_helpers import read_output

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, read_json_lines

pytestmark = pytest.mark.spark

MINUTE = 60_000


def write_lines(path: Path, lines: list[str], mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (mtime, mtime))


def gateway_folders(root: Path) -> None:
    """``gateway=g1/`` is ahead (records up to minute 10), then ``gateway=g2/`` lags (minute 1): one watermark
    over both makes g2's records late; a watermark per gateway does not. Read g1 first (older file time)."""
    write_lines(
        root / "gateway=g1" / "part-0.jsonl",
        [f'{{"ts": {m * MINUTE}, "device": "d{m % 2}", "t": 20.5}}' for m in range(11)],
        1_700_000_000,
    )
    write_lines(
        root / "gateway=g2" / "part-0.jsonl",
        [f'{{"ts": {MINUTE + s * 1000}, "device": "d9", "t": 19.0}}' for s in range(5)],
        1_700_000_100,
    )


def gateway_job(spark, root: Path, split: str, known: tuple[str, ...] = ()) -> EventTimeAggregation:
    events = read_json_lines(spark, str(root), "ts LONG, device STRING, t DOUBLE", {"maxFilesPerTrigger": "1"})
    return EventTimeAggregation(
        events,
        event_time="ts",
        key_by="device",
        spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count()}),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(1_000), split=split, known_splits=known),
    )


def test_read_json_lines_keeps_partition_folders_and_each_is_a_split(spark, tmp_path, caplog):
    root = tmp_path / "in"
    gateway_folders(root)
    events = read_json_lines(spark, str(root), "ts LONG, device STRING, t DOUBLE")
    assert "gateway" in events.columns
    agg = gateway_job(spark, root, "gateway", known=("g1", "g2"))
    with caplog.at_level(logging.WARNING, logger="floodmark"):
        query = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    assert not [r for r in caplog.records if "null split column" in r.getMessage()], "the column is filled"
    assert {label for r in query.reports for label in r.split_records} == {"g1", "g2"}
    assert query.reconciliation.late == 0, "g2 holds the watermark back: its records are on time"
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert int(panes.loc[panes["device"] == "d9", "n"].sum()) == 5


def test_a_split_column_that_is_null_is_said_once(spark, tmp_path, caplog):
    """A split column the records do not fill (a typo here) makes one split of everything: the driver says so."""
    root = tmp_path / "in"
    gateway_folders(root)
    events = read_json_lines(spark, str(root), "ts LONG, device STRING, t DOUBLE, gw STRING")
    agg = EventTimeAggregation(
        events,
        event_time="ts",
        key_by=["device"],
        spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count()}),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(1_000), split="gw"),
    )
    with caplog.at_level(logging.WARNING, logger="floodmark"):
        query = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    warned = [r.getMessage() for r in caplog.records if "null split column" in r.getMessage()]
    assert len(warned) == 1 and "'gw'" in warned[0] and "every one" in warned[0], warned
    assert query.reconciliation.rows_in == 16


def test_replay_descends_into_partition_folders_in_path_order(spark, tmp_path):
    """``date=`` folders in path order, whatever their files' modification times (newest day written first),
    Parquet detected below the folders, the folder a column (a split here)."""
    import pandas as pd

    from floodmark.apps.config import PipelineConfig
    from floodmark.apps.replay import run_replay

    root = tmp_path / "history"
    for day in range(3):
        folder = root / f"date=2026-01-0{day + 1}" / "site=s1"
        folder.mkdir(parents=True)
        frame = pd.DataFrame({"ts": [day * 86_400_000 + m * MINUTE for m in range(0, 1440, 60)], "k": "a"})
        frame.to_parquet(folder / "part-0.parquet")
        os.utime(folder / "part-0.parquet", (1_700_000_000 - day * 3600, 1_700_000_000 - day * 3600))
    config = PipelineConfig(event_time="ts", key_by=["k", "date"], split="site", window={"size": 3_600_000})
    result = run_replay(root, config, tmp_path / "out")
    assert result.records == 72
    assert result.late.empty, "every day after the one before it"
    assert len(result.panes) == 72 and int(result.panes["count"].sum()) == 72
    assert sorted(set(result.panes["date"].astype(str))) == ["2026-01-01", "2026-01-02", "2026-01-03"]


def test_a_value_the_event_time_expression_fails_on_is_a_dead_letter(spark, tmp_path):
    """``F.to_timestamp`` fails on 'yesterday' under ANSI mode (Spark's default): one dead letter with Spark's
    reason, not a failed query."""
    from pyspark.sql import functions as F

    root = tmp_path / "in"
    lines = [f'{{"ts": "2026-01-01T00:0{m}:00+01:00", "device": "d1"}}' for m in range(5)]
    write_lines(root / "part-0.jsonl", [*lines[:2], '{"ts": "yesterday", "device": "d1"}', *lines[2:]], 1_700_000_000)
    agg = EventTimeAggregation(
        read_json_lines(spark, str(root), "ts STRING, device STRING"),
        event_time=F.to_timestamp("ts"),
        key_by="device",
        spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count()}),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0)),
    )
    query = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    dead = read_output(spark, tmp_path / "out" / "dead_letter")
    assert dead["record"].tolist() == ['{"ts": "yesterday", "device": "d1"}']
    (reason,) = dead["reason"]
    assert reason.startswith("the event-time expression failed: [CAST_INVALID_INPUT]") and "'yesterday'" in reason
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert sorted(panes["window_start"].astype("int64") // 1000) == [1767222000 + 60 * m for m in range(5)], (
        "the offset is kept: 00:0m+01:00 is 23:0m UTC"
    )
    assert query.reconciliation.rows_in == 6


def test_the_handle_is_a_streaming_query(spark, tmp_path, capsys):
    """PySpark's names on the handle; a failed batch raised from awaitTermination as floodmark's one line."""
    from floodmark.spark import FileSink, FunctionSink, Outputs

    root = tmp_path / "in"
    gateway_folders(root)
    agg = gateway_job(spark, root, "gateway")
    query = agg.start(str(tmp_path / "ckpt"), str(tmp_path / "out"), query_name="readings")
    try:
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
        assert query.name == "readings" and query.id == query.query.id and query.runId == query.query.runId
        assert query.lastProgress is not None and query.lastProgress["name"] == "readings"
        assert query.recentProgress and set(query.status) >= {"message", "isDataAvailable", "isTriggerActive"}
        assert query.explain() is None and "== Physical Plan ==" in capsys.readouterr().out
        assert query.awaitTermination(0.1) is False
    finally:
        query.stop()
    assert not query.isActive and query.awaitTermination(1) is True

    def refuse(frame, batch_id):
        raise ValueError("the sink is down")

    failing = gateway_job(spark, root, "gateway").start(
        str(tmp_path / "ckpt2"),
        Outputs(FunctionSink(refuse), FileSink(str(tmp_path / "late")), FileSink(str(tmp_path / "dead"))),
    )
    failed = r"^the floodmark query failed: floodmark batch \d+ failed while .*the sink is down"
    with pytest.raises(RuntimeError, match=failed):
        failing.awaitTermination(120)
    assert failing.exception() is not None


def test_text_event_times_keep_their_offset_and_zone_less_ones_take_the_sources_zone(spark, tmp_path):
    """ISO text with an offset, with a zone name, without either (``time_zone``: Europe/Berlin, UTC+1 in winter);
    the session's own time zone (set to another one here) changes nothing."""
    root = tmp_path / "in"
    texts = ["2026-01-01T10:00:00+02:00", "2026-01-01T08:00:00Z", "2026-01-01 09:00:00", "2026-01-01T10:00:00 UTC+2"]
    write_lines(root / "part-0.jsonl", [f'{{"ts": "{t}", "device": "d1"}}' for t in texts], 1_700_000_000)
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        agg = EventTimeAggregation(
            read_json_lines(spark, str(root), "ts STRING, device STRING"),
            event_time="ts",
            key_by="device",
            spec=WindowSpec(windows.Tumbling("1 minute"), {"n": aggregates.count()}),
            time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness("1 second")),
            time_zone="Europe/Berlin",
        )
        agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert panes["n"].tolist() == [4], "every text is 08:00 UTC"
    assert int(panes["window_start"].astype("int64").iloc[0] // 1000) == 1767254400


EVENT_TIME_TEXTS = [
    "1767254400000",
    "-5",
    "2026-01-01T10:00:00+02:00",
    "2026-01-01T08:00:00Z",
    "2026-01-01 09:00:00",
    "2026-01-01T09:00:00.123",
    "2026-01-01T09:00:00.5",
    "2026-01-01",
    "2026-01-01T10:00:00 UTC+2",
    "2026-01-01T10:00:00+0200",
    "2026-01-01T08:00:00 UTC",
    "2026-01-01T08:00:00 GMT",
    "2026-01-01T09:00:00 Europe/Berlin",
    "2026-07-01T09:00:00",
    "2026-03-29 02:30:00",
    "2026-10-25 02:30:00",
    "yesterday",
    "",
    "2026-13-01",
    "10:00",
    " 2026-01-01T09:00:00 ",
    "2026-01-01T09:00",
    "2026-01-01T09:00:00.123456",
    "1e3",
    "12.0",
]


def test_event_time_text_reads_the_same_in_spark_and_in_python(spark):
    """The runtime's rule (Spark SQL, ``event_time_ms``) and the tools' (``event_time_of``): one rule, two
    implementations, the same ms for every form, in a zone with daylight saving time."""
    from floodmark.core.time import event_time_of
    from floodmark.spark.sources.inputs import event_time_ms

    frame = spark.createDataFrame([(t,) for t in EVENT_TIME_TEXTS], "ts STRING")
    ms, _, _ = event_time_ms(frame, "ts", "Europe/Berlin")
    spark_ms = dict(frame.select("ts", ms.alias("ms")).collect())
    python_ms = {t: event_time_of(t, "Europe/Berlin") for t in EVENT_TIME_TEXTS}
    assert {t: (spark_ms[t], python_ms[t]) for t in EVENT_TIME_TEXTS if spark_ms[t] != python_ms[t]} == {}


def test_results_read_back_latest_pane_per_window_and_parsed_records(spark, tmp_path):
    """Early firings (ACCUMULATING: the latest pane is the window's result), a late record, a dead letter."""
    from floodmark import AccumulationMode, triggers
    from floodmark.spark import read_dead_letters, read_late, read_panes

    root = tmp_path / "in"
    lines = [f'{{"ts": {s * 1000}, "device": "d1", "t": {s}.5}}' for s in (1, 2, 3, 4, 61, 62)]
    write_lines(root / "part-0.jsonl", lines, 1_700_000_000)
    write_lines(root / "part-1.jsonl", ['{"ts": 5000, "device": "d1", "t": 9}', '{"ts": "soon"}'], 1_700_000_100)
    agg = EventTimeAggregation(
        read_json_lines(spark, str(root), "ts LONG, device STRING, t DOUBLE", {"maxFilesPerTrigger": "1"}),
        event_time="ts",
        key_by="device",
        spec=WindowSpec(
            windows.Tumbling("1 minute"),
            {"n": aggregates.count()},
            trigger=triggers.AfterWatermark(early=triggers.AfterCount(2)),
            accumulation=AccumulationMode.ACCUMULATING,
        ),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0), split="device"),
    )
    agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    every = read_panes(spark, tmp_path / "out", latest=False)
    assert every.count() > 2, "early panes"
    latest = read_panes(spark, tmp_path / "out").orderBy("window_start").toPandas()
    assert latest[["device", "window_start", "n"]].values.tolist() == [["d1", 0, 4], ["d1", 60_000, 2]]
    late = read_late(spark, tmp_path / "out").toPandas()
    assert [(r["ts"], r["t"]) for r in late["record_fields"]] == [(5000, 9)]
    dead = read_dead_letters(spark, str(tmp_path / "out" / "dead_letter"), "ts STRING").toPandas()
    assert dead["record"].tolist() == ['{"ts": "soon"}'] and dead["record_fields"][0]["ts"] == "soon"
    with pytest.raises(FileNotFoundError, match="no panes output"):
        read_panes(spark, tmp_path / "nowhere")


def gateway_watermarks():
    """A watermark generator of the user's own, named by its import path in the job's definition."""
    from floodmark.core.watermarks.bounded import BoundedOutOfOrderness

    return BoundedOutOfOrderness(1_000)


def test_explain_and_replay_reach_a_job_defined_in_python(spark, tmp_path):
    """The checkpoint records the job (two stages, an early trigger, the user's own generator, a partition folder
    as split): ``floodmark explain <checkpoint>`` explains one of its windows, and ``floodmark replay --like
    <checkpoint>`` runs the same files through the same job to the same panes."""
    from typer.testing import CliRunner

    from floodmark import triggers
    from floodmark.apps.cli import app
    from floodmark.driver.checkpoint_files import LocalFiles
    from floodmark.driver.definition import JobDefinition
    from floodmark.spark import Pipeline, read_panes

    root = tmp_path / "in"
    gateway_folders(root)
    pipeline = Pipeline()
    strategy = WatermarkStrategy.for_generator(gateway_watermarks).with_idleness("1 minute")
    pipeline.source(
        "readings",
        read_json_lines(spark, str(root), "ts LONG, device STRING, t DOUBLE"),
        event_time="ts",
        time=SourceTime(strategy, split="gateway", known_splits=("g1", "g2"), percentile=100),
    )
    spec = WindowSpec(
        windows.Tumbling("1 minute"),
        {"n": aggregates.count(), "devices": aggregates.collect_list("t")},
        trigger=triggers.AfterWatermark(early=triggers.AfterCount(2)),
        allowed_lateness="1 minute",
    )
    pipeline.stage("per_device", "readings", spec, key_by="device")
    pipeline.stage("totals", "per_device", WindowSpec(windows.Tumbling("5 minutes"), {"n": aggregates.sum("n")}))
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    pipeline.run_to_completion(str(ckpt), str(out), timeout_s=300)

    job = JobDefinition.read(LocalFiles(), str(ckpt))
    written, defined = job.to_dict(), pipeline.definition().to_dict()
    assert {k: v for k, v in written.items() if k != "outputs"} == {k: v for k, v in defined.items() if k != "outputs"}
    assert written["sources"]["readings"]["watermarks"]["factory"] == "test_users_job:gateway_watermarks"
    assert job.outputs["per_device"]["panes"] == str(out / "per_device" / "panes")
    runner = CliRunner(env={"COLUMNS": "200"})
    explained = runner.invoke(
        app, ["explain", str(ckpt), "--stage", "per_device", "--key", "d9", "--window-start", "60000"]
    )
    assert explained.exit_code == 0, explained.output
    assert "g2" in explained.output and "panes in the output for this key and window" in explained.output

    replayed = runner.invoke(app, ["replay", str(root), "--like", str(ckpt), "--output", str(tmp_path / "again")])
    assert replayed.exit_code == 0, replayed.output
    for stage in ("per_device", "totals"):
        columns = ["window_start", "pane_index", "n"] + (["device"] if stage == "per_device" else [])
        first = read_panes(spark, out / stage, latest=False).select(*columns).orderBy(*columns).collect()
        again = read_panes(spark, tmp_path / "again" / stage, latest=False).select(*columns).orderBy(*columns).collect()
        assert first == again and first, stage
