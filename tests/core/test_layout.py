"""The tree's promises: the engine-free packages and ``floodmark explain`` run without pyspark."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_PYSPARK = """
import sys

class BlockPySpark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark.") or name == "py4j" or name.startswith("py4j."):
            raise ImportError(f"{name} is blocked: this import path must not need Spark")

sys.meta_path.insert(0, BlockPySpark())
"""


def run_without_pyspark(code: str) -> subprocess.CompletedProcess:
    script = BLOCK_PYSPARK + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_core_driver_testing_and_apps_import_without_pyspark():
    result = run_without_pyspark(
        """
        import floodmark, floodmark.core.explain, floodmark.core.step, floodmark.core.pipeline
        import floodmark.core.watermarks.projection, floodmark.testing
        import floodmark.driver.controller, floodmark.driver.control_log, floodmark.driver.checkpoint_files
        import floodmark.apps.cli, floodmark.apps.inspection, floodmark.apps.config, floodmark.apps.advisor
        assert not [m for m in sys.modules if m.startswith("pyspark")]
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_floodmark_explain_reads_a_run_without_pyspark(tmp_path):
    """A run's files (pipeline.json, the control log) explained by the CLI with pyspark unimportable."""
    result = run_without_pyspark(
        f"""
        from pathlib import Path
        from typer.testing import CliRunner
        from floodmark.apps.cli import app
        from floodmark.apps.config import PipelineConfig
        from floodmark.core.clock import ManualClock
        from floodmark.driver.control_log import ControlLog
        from floodmark.driver.controller import BatchController

        run = Path({str(tmp_path)!r})
        config = PipelineConfig(
            key_by=["k"], split="p", window={{"kind": "tumbling", "size": 60_000}}, out_of_orderness=1_000,
            idleness=5_000,
        )
        (run / "pipeline.json").write_text(config.model_dump_json())
        clock = ManualClock(1_000)
        controller = BatchController(ControlLog(run / "checkpoint" / "floodmark" / "control"), config.strategy(),
                                     splits=["0", "1"], clock=clock)
        controller.ensure_initial_entry()
        clock.advance_to(2_000)
        stats = [{{"fm_split": "0", "fm_count": 2, "fm_min_ts": 10_000, "fm_max_ts": 70_000}}]
        controller.on_batch(0, stats, [], {{}})
        result = CliRunner().invoke(app, ["explain", str(run), "--key", "a", "--window-start", "0"])
        print(result.output)
        assert result.exit_code == 0, result.output
        assert not [m for m in sys.modules if m.startswith("pyspark")]
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "WAITING_FOR_WATERMARK" in result.stdout
    assert "'1'" in result.stdout and "never seen a record" in result.stdout


def test_the_tick_source_imports_without_the_engine():
    """Spark unpickles the tick source in its data-source planner processes, on the first batch's critical path:
    importing its module must not load pandas, pyarrow or the engine (the packages export names lazily)."""
    code = """
        import sys
        import floodmark.spark.ticks
        heavy = ("pandas", "pyarrow", "numpy", "floodmark.core", "floodmark.spark.pipeline")
        heavy = [m for m in heavy if m in sys.modules]
        assert not heavy, heavy
        from floodmark import *
        from floodmark.spark import EventTimeAggregation, local_session
        import floodmark, floodmark.spark
        assert set(floodmark.__all__) <= set(dir(floodmark)) and WindowSpec is floodmark.WindowSpec
        assert all(getattr(floodmark.spark, name) is not None for name in floodmark.spark.__all__)
        print("ok")
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
