"""The CLI's help and option validation (no Spark: every failure here happens before a session starts)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from floodmark.apps.cli import app

runner = CliRunner(env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"})


@pytest.mark.parametrize("command", ["demo", "replay", "explain", "advise"])
def test_every_command_has_help(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--ticks-per-second", "0"], "ticks-per-second"),
        (["demo", "chess"], "unknown scenario"),
        (["demo", "games", "--kafka"], "clickstream scenario only"),
        (["replay", "/nonexistent/input", "--key-by", "k"], "does not exist"),
        (["replay", ".", "--key-by", "k", "--bound", "soon"], "not a duration"),
        (["replay", ".", "--key-by", "k", "--aggregate", "median"], "name=count"),
        (["replay", ".", "--key-by", "k", "--format", "csv"], "csv"),
        (["explain", "/nonexistent/run", "--key", "a", "--window-start", "2026-01-01T00:00"], "pipeline.json"),
        (["explain", ".", "--key", "a", "--window-start", "yesterday"], "ISO date-time"),
        (["advise", "/nonexistent/records.jsonl"], "does not exist"),
        (["advise", ".", "--join", "."], "--join needs --on"),
        (["advise", ".", "--join", ".", "--on", "k", "--per", "both"], "--per is left or right"),
        (["explain", ".", "--changes", "/nonexistent/job.json"], "holds no job definition"),
    ],
)
def test_bad_options_exit_non_zero_with_a_clear_message(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    assert message in result.output


def test_advise_prints_the_tradeoff(tmp_path):
    path = tmp_path / "records.jsonl"
    rows = [{"ts": t, "p": t % 2} for t in [0, 10, 5, 20, 30, 2, 40, 50, 45]]
    path.write_text("".join(f'{{"ts": {r["ts"]}, "p": {r["p"]}}}\n' for r in rows))
    result = runner.invoke(app, ["advise", str(path), "--split", "p", "--target", "0.2"])
    assert result.exit_code == 0, result.output
    assert "bound" in result.output and "allowed lateness" in result.output


# ------------------------------------------------------------------------------------------------ issue 26
# Every command on good, empty and broken input: a clear one-line error (exit code != 0, no traceback) or
# the right output. ``explain`` runs on a run directory made without Spark: the driver's own control log
# and a pane output as a query leaves them.


def one_line_error(result, *parts: str) -> str:
    """The error line of a failed command, after checking it failed cleanly and says each of ``parts``."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    for part in parts:
        assert part in errors[0], errors[0]
    return errors[0]


def write_jsonl(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_advise_skips_and_counts_lines_that_are_not_records(tmp_path):
    path = write_jsonl(
        tmp_path / "records.jsonl",
        ['{"ts": 0, "p": 0}', '{"ts": 10, "p": 1}', "true", '{"ts": 5, "p": 1}', '{"ts": tru', "", '{"p": 1}'],
    )
    result = runner.invoke(app, ["advise", str(path), "--split", "p"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "3 records; largest out-of-orderness 5 ms" in result.output
    warning = next(line for line in result.output.splitlines() if line.startswith("warning: "))
    assert "skipped 3 of 6 input lines/rows" in warning, "the blank line is neither a record nor skipped"
    assert "first: records.jsonl line 3: not a JSON object: 'true'" in warning


@pytest.mark.parametrize(
    ("make", "parts"),
    [
        (lambda d: d, ["holds no .jsonl/.json/.parquet files"]),
        (lambda d: write_jsonl(d / "e.jsonl", []), ["holds no input records", "its files are empty"]),
        (lambda d: write_jsonl(d / "bad.jsonl", ["garbage", "{"]), ["holds no input records", "2 lines/rows skipped"]),
        (lambda d: write_jsonl(d / "r.jsonl", ['{"time": 1}']), ["no record in", "['ts']", "columns: ['time']"]),
        (lambda d: write_jsonl(d / "notes.txt", ["x"]), ["is not a .jsonl/.json/.parquet file"]),
        (lambda d: d / "missing.jsonl", ["does not exist"]),
    ],
    ids=["empty-directory", "empty-file", "all-broken", "no-event-time", "other-file", "missing"],
)
def test_advise_refuses_input_without_records_in_one_line(tmp_path, make, parts):
    one_line_error(runner.invoke(app, ["advise", str(make(tmp_path))]), *parts)


def test_advise_refuses_a_run_s_output_directory(tmp_path):
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "pipeline.json").write_text('{\n  "event_time": "ts"\n}\n')  # pretty JSON: not JSON lines
    one_line_error(runner.invoke(app, ["advise", str(tmp_path)]), "output directory of floodmark demo or replay")


def test_advise_reads_parquet_with_null_and_timestamp_event_times(tmp_path):
    import pandas as pd

    pd.DataFrame({"ts": pd.array([1_000, None, 3_000], dtype="Int64")}).to_parquet(tmp_path / "a.parquet")
    stamps = pd.to_datetime([2_000, 4_000], unit="ms", utc=True)
    pd.DataFrame({"ts": stamps}).to_parquet(tmp_path / "b.parquet")
    result = runner.invoke(app, ["advise", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "4 records; largest out-of-orderness 1,000 ms" in result.output  # 1000, 3000, then 2000 and 4000
    assert "first: a.parquet row 2" in result.output


@pytest.fixture
def run_dir(tmp_path):
    return finished_run(tmp_path, {"kind": "tumbling", "size": 60_000})


def finished_run(tmp_path, window: dict):
    """A finished run: 1-minute counts per k, bound 0; batch 1 moves the source past window [0, 60 s), batch 2
    fires it, batch 3 is the end-of-input flush (watermark MAX) that fires [60 s, 120 s)."""
    import pandas as pd

    from floodmark.apps.config import PipelineConfig, WindowConfig
    from floodmark.core.clock import ManualClock
    from floodmark.driver.control_log import ControlLog
    from floodmark.driver.controller import Controller, SourceSettings

    run = tmp_path / "run"
    pipeline = PipelineConfig(
        event_time="ts",
        key_by=["k"],
        window=WindowConfig(**window),
        out_of_orderness=0,
        aggregations={"count": "count"},
    )
    run.mkdir()
    (run / "pipeline.json").write_text(pipeline.model_dump_json())
    clock = ManualClock(1_000_000)
    log = ControlLog(run / "checkpoint" / "floodmark" / "control")
    controller = Controller.of_aggregation(log, SourceSettings(pipeline.strategy()), clock=clock)
    controller.ensure_initial_entry()
    controller.end_input_when(lambda: True)
    fields = ("fm_count", "fm_min_ts", "fm_max_ts")
    for batch, stats in enumerate([(2, 1_000, 30_000), (1, 70_000, 70_000), None, None]):
        rows = [] if stats is None else [{**dict(zip(fields, stats, strict=True)), "fm_split": "0"}]
        clock.advance_by(1_000)
        controller.on_batch(batch, rows, {}, {})
    windows = pipeline.window.assigner()
    for batch, start, count in [(2, 0, 2), (3, 60_000, 1)]:
        folder = run / "panes" / f"batch_id={batch}"
        folder.mkdir(parents=True)
        ends = sorted({w.end for w in windows.assign_one(start) if w.start == start})  # cumulate: the epoch's
        panes = [
            {"k": "a", "window_start": start, "window_end": end, "timing": "ON_TIME", "pane_index": 0}
            | {"count": count + i}
            for i, end in enumerate(ends)
        ]
        pd.DataFrame(panes).to_parquet(folder / "part-0.parquet")
    return run


def explain(run, *args):
    return runner.invoke(app, ["explain", str(run), *args])


def test_explain_agrees_with_the_panes_emitted_up_to_the_batch(run_dir):
    due = explain(run_dir, "--key", "a", "--window-start", "0", "--batch", "1")
    assert due.exit_code == 0, due.output
    assert "as of the end of batch 1:" in due.output and "): DUE" in due.output
    assert "no pane in the output for this key and window up to batch 1." in due.output
    fired = explain(run_dir, "--key", "a", "--window-start", "0", "--batch", "2")
    assert "): EXPIRED" in fired.output and "batch 2: ON_TIME pane #0, values value:count=2" in fired.output
    # The end-of-input flush: batch 3 ran with watermark MAX, so its pane is not "waiting for the watermark".
    flushed = explain(run_dir, "--key", "a", "--window-start", "60000")
    assert flushed.exit_code == 0, flushed.output
    assert "as of the end of batch 3:" in flushed.output and "WAITING" not in flushed.output
    assert "the input ended" in flushed.output and "batch 3: ON_TIME pane #0" in flushed.output


def test_explain_names_a_cumulate_window_by_its_start_and_end(tmp_path):
    run = finished_run(tmp_path, {"kind": "cumulate", "step": "30s", "max_size": "1m"})
    half = explain(run, "--key", "a", "--window-start", "0", "--window-end", "1970-01-01T00:00:30", "--batch", "2")
    assert half.exit_code == 0, half.output
    assert "batch 2: ON_TIME pane #0, values value:count=2" in half.output and "count=3" not in half.output
    whole = explain(run, "--key", "a", "--window-start", "0", "--window-end", "60000", "--batch", "2")
    assert "batch 2: ON_TIME pane #0, values value:count=3" in whole.output and "count=2" not in whole.output
    one_line_error(explain(run, "--key", "a", "--window-start", "0"), "cumulate windows share their start")


def test_explain_a_key_without_panes_explains_the_window_from_the_watermark(run_dir):
    result = explain(run_dir, "--key", "zzz", "--window-start", "0", "--batch", "1")
    assert result.exit_code == 0, result.output
    assert "Key 'zzz'" in result.output and "): DUE" in result.output
    assert "no pane in the output for this key and window up to batch 1." in result.output


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (["--batch", "45"], ["the run has batches 0..3; --batch 45 is past its end"]),
        (["--key", "a,CLICK"], ["key a,CLICK has 2 value(s) but the run is keyed by 1 column(s), k", "(e.g. a)"]),
        (["--window-start", "1000"], ["is not the start of a 60000 ms tumbling window"]),
    ],
)
def test_explain_refuses_what_the_run_does_not_have_in_one_line(run_dir, args, parts):
    given = {"--key": "a", "--window-start": "0", **dict(zip(args[::2], args[1::2], strict=True))}
    one_line_error(explain(run_dir, *[x for pair in given.items() for x in pair]), *parts)


def test_explain_of_a_run_that_never_ran(tmp_path):
    (tmp_path / "pipeline.json").write_text('{"event_time": "ts", "key_by": ["k"], "window": {"size": 60000}}')
    one_line_error(explain(tmp_path, "--key", "a", "--window-start", "0"), "has no control log")


def test_output_under_a_regular_file_is_refused_before_spark_starts(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_line_error(runner.invoke(app, ["demo", "--output", str(blocker / "out")]), f"{blocker} is a regular file")
    one_line_error(runner.invoke(app, ["demo", "games", "--output", str(blocker)]), "it is a regular file")
    records = write_jsonl(tmp_path / "in.jsonl", ['{"ts": 1, "k": "a"}'])
    replay = runner.invoke(app, ["replay", str(records), "--key-by", "k", "--output", str(blocker / "out")])
    one_line_error(replay, f"the output directory {blocker / 'out'} cannot be used", "choose another location")


def test_the_demo_summary_never_says_windows_fired_without_a_split_never_marked_idle():
    from floodmark.apps.demo import _idle_line
    from floodmark.simulator.clickstream import ClickstreamConfig

    simulator = ClickstreamConfig.demo()
    detected = _idle_line(simulator, 5_000, [11, 12])
    assert "marked idle from batch 11" in detected and "kept firing without it" in detected
    missed = _idle_line(simulator, 5_000, [])
    assert "never marked idle before the input ended" in missed and "kept firing" not in missed


def test_advise_reads_iso_text_in_partition_folders(tmp_path):
    """Issue 39: ISO text with and without an offset (``--time-zone``), a split that is a partition folder, files
    found below the folders; what the runtime takes, advise takes."""
    for gateway, texts in {
        "g1": ["2026-01-01T10:00:00+01:00", "2026-01-01T10:00:05+01:00", "2026-01-01T10:00:02+01:00"],
        "g2": ["2026-01-01 10:00:00", "2026-01-01 10:00:09", "yesterday"],
    }.items():
        folder = tmp_path / f"gateway={gateway}"
        folder.mkdir()
        write_jsonl(folder / "part-0.jsonl", [f'{{"ts": "{t}"}}' for t in texts])
    result = runner.invoke(app, ["advise", str(tmp_path), "--split", "gateway", "--time-zone", "Europe/Berlin"])
    assert result.exit_code == 0, result.output
    assert "5 records; largest out-of-orderness 3,000 ms" in result.output
    warning = next(line for line in result.output.splitlines() if line.startswith("warning: "))
    assert "skipped 1 of 6" in warning and "'yesterday', not a time" in warning


def test_event_times_are_read_by_the_runtime_s_rules():
    from floodmark.core.time import event_time_of

    eight = 1767254400000  # 2026-01-01T08:00:00Z
    forms = [
        eight,
        float(eight),
        str(eight),
        "2026-01-01T10:00:00+02:00",
        "2026-01-01T08:00:00Z",
        "2026-01-01 09:00:00",
        "2026-01-01T10:00:00 UTC+2",
        "2026-01-01T09:00:00 Europe/Berlin",
    ]
    assert [event_time_of(f, "Europe/Berlin") for f in forms] == [eight] * len(forms)
    assert [event_time_of(v) for v in ["yesterday", 1.5, True, None, {"ms": 1}, "2026-13-01"]] == [None] * 6


@pytest.mark.parametrize("args", [["replay", "--key-by", "k"], ["advise"]], ids=["replay", "advise"])
def test_a_missing_input_folder_is_one_error_line_naming_it(tmp_path, args):
    missing = tmp_path / "readings"
    result = runner.invoke(app, [args[0], f"{missing}/", *args[1:]])
    one_line_error(result, str(missing), "does not exist")
    assert result.exit_code == 2 and "Usage" not in result.output


@pytest.mark.parametrize("value", ["30", "30000"])
def test_a_duration_option_without_a_unit_is_refused(value):
    result = runner.invoke(app, ["replay", ".", "--key-by", "k", "--bound", value])
    assert result.exit_code == 2
    assert "without a unit" in result.output and "'30s'" in result.output


def test_replay_s_time_zone_wins_over_the_pipeline_file_s_and_the_like_job_s(tmp_path):
    """One rule: ``--time-zone`` given wins over the pipeline's (a file's ``time_zone``, a checkpoint's job's);
    without it the pipeline's holds; without either, UTC."""
    from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
    from floodmark.apps.cli import _in_zone, _job_of, _pipeline
    from floodmark.driver.checkpoint_files import LocalFiles
    from floodmark.driver.controller import SourceSettings
    from floodmark.driver.definition import JobDefinition, SourceDefinition, WindowedStage

    config = tmp_path / "job.toml"
    config.write_text('key_by = ["device"]\nwindow = {size = "1m"}\ntime_zone = "Asia/Tokyo"\n')
    assert _pipeline(config, *[None] * 8).time_zone == "Asia/Tokyo"
    assert _pipeline(config, *[None] * 8, "Europe/Berlin").time_zone == "Europe/Berlin"
    assert _pipeline(None, None, "device", *[None] * 6).time_zone == "UTC"

    strategy = WatermarkStrategy.for_monotonous_timestamps()
    stage = WindowedStage("a", ("s",), WindowSpec(windows.Tumbling(10), {"n": aggregates.count()}), ("k",))
    source = SourceDefinition(SourceSettings(strategy), {"column": "ts"}, time_zone="Asia/Tokyo")
    JobDefinition({"s": source}, {"a": stage}).write(LocalFiles(), str(tmp_path / "ckpt"))
    job = _job_of(tmp_path / "ckpt")
    assert job.sources["s"].time_zone == "Asia/Tokyo"
    assert _in_zone(job, "Europe/Berlin").sources["s"].time_zone == "Europe/Berlin"
    assert (
        "wins over the pipeline file's time_zone and the --like job's"
        in runner.invoke(app, ["replay", "--help"]).output
    )


def test_advise_s_table_is_not_wrapped_when_its_output_is_not_a_terminal(tmp_path):
    """Into a log or a pipe rich would wrap at 80 columns; the table's rows stay whole (one line each)."""
    import os
    import subprocess
    import sys

    path = write_jsonl(tmp_path / "r.jsonl", [f'{{"ts": {t * 1000 - (t * 7919) % 200_000}}}' for t in range(2000)])
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "LINES")}
    command = [sys.executable, "-m", "floodmark.apps.cli", "advise", str(path), "--window", "1m"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("late <="))
    assert len(header) > 80 and header.endswith("dropped (observed)"), lines
    assert len(lines) == 3 + 6, lines  # two sentences, the header, six rows
    assert all(line.endswith("%") for line in lines[3:]), lines
