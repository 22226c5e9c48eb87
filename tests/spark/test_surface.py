"""The surface a user reads, held to a straight computation as the engine is held to Flink and Beam.

One user's pipeline (:mod:`surface_job`: two sources read with ``read_json_lines``, a DISCARDING window stage, an
ACCUMULATING one, a stage over its panes, an interval join and a process function with a timer) over input with
bad lines, late records and a silent city, stopped and started again from its checkpoint; then every figure is
read back only through what the docs tell a user to call (``read_panes``, ``read_late``, ``read_dead_letters``, the
reconciliation) and compared with pandas over the same lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import surface_job as job
from surface_job import MINUTE

from floodmark import WindowSpec, aggregates, windows
from floodmark.spark import read_dead_letters, read_late, read_panes

pytestmark = pytest.mark.spark

FIRST_RUN = 14
"""Files written before the first run (the rest come while it is stopped)."""


def pandas_of(frame) -> pd.DataFrame:
    return frame.toPandas()


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    """The pipeline run as a user runs it: started, caught up, stopped; more files; started again to the end."""
    root = tmp_path_factory.mktemp("surface")
    files = job.input_files(root / "in")
    files.write(0, FIRST_RUN)
    checkpoint, out = str(root / "ckpt"), str(root / "out")
    first = job.pipeline(spark, root / "in").start(checkpoint, out, trigger_interval="1 second")
    try:
        first.processAllAvailable()  # returns: nothing can fire without input, so no batch is asked for
    finally:
        first.stop()
    files.write(FIRST_RUN)
    query = job.pipeline(spark, root / "in").run_to_completion(checkpoint, out, timeout_s=600)
    return root, files, query


def late_rides(spark, out: Path, stage: str, schema: str) -> set[str]:
    try:
        late = pandas_of(read_late(spark, str(out / stage), schema))
    except FileNotFoundError:
        return set()
    return {fields["ride"] for fields in late["record_fields"]}


def test_the_window_results_are_the_straight_computations_under_discarding_panes(spark, run):
    root, files, _ = run
    out = root / "out"
    late = late_rides(spark, out, "fares", job.COMPLETION_SCHEMA)
    assert late == {"late0", "late1", "late2"}, "past the allowed lateness: the late output, nothing else"
    every_pane = pandas_of(read_panes(spark, str(out / "fares"), latest=False))
    windows_fired_twice = every_pane.groupby(["city", "window_start"]).size().gt(1).sum()
    assert windows_fired_twice, "some windows took late records within the lateness: LATE panes to combine"
    assert set(every_pane.loc[every_pane["timing"] == "LATE", "city"]) >= {"a"}

    panes = pandas_of(read_panes(spark, str(out / "fares")))
    good = job.good_rows(files, "completions")
    expected = job.window_totals(good[~good["ride"].isin(late)])
    merged = expected.merge(panes, on=["city", "window_start"], how="outer", suffixes=("_expected", ""))
    assert len(merged) == len(expected) == len(panes), "one row per window, no window missing or extra"
    for column in ("rides", "total", "mean_fare", "low", "high"):
        assert merged[column].to_numpy() == pytest.approx(merged[f"{column}_expected"].to_numpy()), column

    asked = pandas_of(read_panes(spark, str(out / "asked")))  # ACCUMULATING: the latest pane is the result
    requests = job.good_rows(files, "requests").assign(window_start=lambda f: f["ms"] - f["ms"] % MINUTE)
    straight = requests.groupby(["city", "window_start"]).size().rename("expected").reset_index()
    both = straight.merge(asked, on=["city", "window_start"], how="outer")
    assert (both["requests"] == both["expected"]).all()

    busiest = pandas_of(read_panes(spark, str(out / "busiest")))  # a stage over the panes of another
    five = straight.assign(window_start=lambda f: f["window_start"] - f["window_start"] % (5 * MINUTE))
    most = five.groupby("window_start")["expected"].max().rename("expected").reset_index()
    both = most.merge(busiest, on="window_start", how="outer")
    assert (both["most"] == both["expected"]).all()


def test_the_join_and_the_process_stage_are_the_straight_computations(spark, run):
    root, files, _ = run
    out = root / "out"
    late = pandas_of(read_late(spark, str(out / "completed"), job.COMPLETION_SCHEMA))
    late_sides = {(row["side"], json.loads(row["record"])["ride"]) for _, row in late.iterrows()}
    assert ("RIGHT", "late0") in late_sides
    requests = job.good_rows(files, "requests")
    completions = job.good_rows(files, "completions")
    requests = requests[~requests["ride"].map(lambda r: ("LEFT", r) in late_sides)]
    completions = completions[~completions["ride"].map(lambda r: ("RIGHT", r) in late_sides)]
    pairs = requests.merge(completions, on="ride", how="left", suffixes=("_l", "_r"))
    gap = pairs["ms_r"] - pairs["ms_l"]
    matched = pairs[(gap >= 0) & (gap <= 10 * MINUTE)]
    unmatched = requests[~requests["ride"].isin(matched["ride"])]
    expected = sorted([(r, True) for r in matched["ride"]] + [(r, False) for r in unmatched["ride"]])

    rows = pandas_of(read_panes(spark, str(out / "completed")))  # a join's rows are each a result
    got = sorted(zip(rows["ride"], rows["right_ts"].notna(), strict=True))
    assert got == expected

    tally = pandas_of(read_panes(spark, str(out / "tally")))
    assert (
        dict(zip(tally["city"], tally["requests"], strict=True))
        == job.good_rows(files, "requests").groupby("city").size().to_dict()
    )


def test_every_line_is_counted_once_and_every_dead_letter_keeps_its_text(spark, run):
    root, files, query = run
    lines = {source: files.lines(source) for source in ("requests", "completions")}
    run_totals = query.reconciliation  # the whole checkpoint: the first run and this one
    assert run_totals.rows_in == sum(len(each) for each in lines.values()), run_totals.describe()
    assert run_totals.dead_letters == sum(len(each) for each in files.dead_letters.values()), run_totals.describe()
    assert run_totals.stage_dead_letters == len(files.without_fare) > 0, run_totals.describe()
    said = f"{len(files.without_fare)} more dead letters of stages that could not use records"
    assert said in run_totals.describe()
    fares = query.stage_reconciliation("fares")
    assert fares.input_rows == len(lines["completions"])
    assert fares.dead_letters == len(files.dead_letters["completions"]) + len(files.without_fare)

    texts = pandas_of(read_dead_letters(spark, str(root / "out" / "fares")))["record"]
    assert sorted(texts) == sorted(files.dead_letters["completions"] + files.without_fare), "each line as it came"
    for stage in ("asked", "tally", "completed"):  # every stage reading a source has its dead letters
        texts = pandas_of(read_dead_letters(spark, str(root / "out" / stage)))["record"]
        expected = files.dead_letters["requests"] + (files.dead_letters["completions"] if stage == "completed" else [])
        assert sorted(texts) == sorted(expected), stage


def test_a_changed_definition_on_the_checkpoint_is_refused_by_name(spark, run):
    root, _, _ = run
    changed = job.pipeline(spark, root / "in", fares_window="2 minutes")
    with pytest.raises(ValueError, match=r"stage 'fares': window .*60000.* -> .*120000"):
        changed.start(str(root / "ckpt"), str(root / "out"))
    assert not spark.streams.active


def test_explain_reaches_a_window_stage_beside_a_process_function_that_does_not_import(run):
    """``floodmark explain`` runs where the job's module is not importable (here: another process)."""
    root, _, _ = run
    explained = subprocess.run(
        [
            sys.executable,
            "-m",
            "floodmark.apps.cli",
            "explain",
            str(root / "ckpt"),
            "--stage",
            "fares",
            "--key",
            "a",
            "--window-start",
            job.iso(job.T0_MS + 3 * MINUTE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert explained.returncode == 0, explained.stderr
    assert "fired" in explained.stdout or "ON_TIME" in explained.stdout, explained.stdout


def test_a_failing_python_worker_says_what_it_raised(spark, tmp_path):
    """A process function whose module the executors cannot import: the query's line has Python's own line."""
    module = tmp_path / "mine" / "user_functions.py"
    module.parent.mkdir()
    module.write_text(
        textwrap.dedent("""
        class Counter:
            def process(self, record, ctx):
                ctx.emit({"n": 1})

            def on_timer(self, timer, ctx):
                pass
    """)
    )
    sys.path.insert(0, str(module.parent))
    try:
        import user_functions

        from floodmark import WatermarkStrategy
        from floodmark.spark import Pipeline, SourceTime, read_json_lines

        folder = tmp_path / "in"
        folder.mkdir()
        (folder / "part-0.jsonl").write_text('{"ts": 1000, "k": "a"}\n')
        pipeline = Pipeline()
        pipeline.source(
            "events",
            read_json_lines(spark, str(folder), "ts LONG, k STRING"),
            "ts",
            SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0)),
        )
        pipeline.process("counts", "events", user_functions.Counter(), {"n": "long"}, key_by="k")
        pipeline.stage("per_key", "events", WindowSpec(windows.Tumbling(60_000), {"n": aggregates.count()}), "k")
        with pytest.raises(RuntimeError) as failed:
            pipeline.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    finally:
        sys.path.remove(str(module.parent))
        sys.modules.pop("user_functions", None)
    line = str(failed.value)
    assert "ModuleNotFoundError: No module named 'user_functions' (raised in a Python worker)" in line, line
    assert "failed while computing the batch (the job that writes" in line, line
