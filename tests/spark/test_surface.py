"""The surface a user reads, held to a straight computation as the engine is held to Flink and Beam.

One user's pipeline (:mod:`surface_job`: two sources read with ``read_json_lines``, a DISCARDING window stage, an
ACCUMULATING one, a stage over its panes, an interval join and a process function with a timer) over input with
bad lines, late records and a silent city, stopped and started again from its checkpoint; then every figure is
read back only through what the docs tell a user to call (``read_panes``, ``read_late``, ``read_dead_letters``, the
reconciliation) and compared with pandas over the same lines. The checks are :mod:`surface_checks`' (the same
run over Spark Connect: ``test_connect.py``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import surface_checks as checks
import surface_job as job
from surface_job import MINUTE

from floodmark import WindowSpec, aggregates, windows

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory) -> job.Run:
    """The pipeline run as a user runs it: started, caught up, stopped; more files; started again to the end."""
    return job.run(spark, tmp_path_factory.mktemp("surface"))


def test_the_window_results_are_the_straight_computations_under_discarding_panes(spark, run):
    checks.window_results(spark, run)


def test_the_join_and_the_process_stage_are_the_straight_computations(spark, run):
    checks.join_and_process(spark, run)


def test_every_line_is_counted_once_and_every_dead_letter_keeps_its_text(spark, run):
    checks.lines_and_dead_letters(spark, run)


def test_a_changed_definition_on_the_checkpoint_is_refused_by_name(spark, run):
    checks.changed_definition_refused(spark, run)


def test_explain_reaches_a_window_stage_beside_a_process_function_that_does_not_import(run):
    """``floodmark explain`` runs where the job's module is not importable (here: another process)."""
    explained = subprocess.run(
        [
            sys.executable,
            "-m",
            "floodmark.apps.cli",
            "explain",
            str(run.root / "ckpt"),
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
