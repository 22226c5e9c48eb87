"""The tree's promises: the engine-free packages and ``floodmark explain`` run without pyspark; the package never
needs the development tools (``devtools/floodmark_dev``, not in the wheel)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "floodmark"
DEV_PACKAGE = "floodmark_dev"
LAZY_DEV_IMPORTERS = {"apps/kafka_demo.py"}
"""The modules that may import the development tools, and then only where importing the module does not run the
import (in a function, or under ``if TYPE_CHECKING:``): ``floodmark demo --kafka`` and its broker."""

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
        import floodmark, floodmark.explain.window, floodmark.core.window, floodmark.core.pipeline
        import floodmark.core.watermarks.projection, floodmark.testing
        import floodmark.driver.controller, floodmark.driver.control_log, floodmark.driver.checkpoint_files
        import floodmark.protocol.wire, floodmark.protocol.output, floodmark.protocol.control
        import floodmark.apps.cli, floodmark.apps.inspection, floodmark.apps.config, floodmark.apps.advisor
        assert not [m for m in sys.modules if m.startswith("pyspark")]
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_protocol_imports_alone():
    """The declarations executors and the driver share import nothing else of floodmark, no engine and no
    dataframe library; the control entry and the bucket gauges stay importable from the driver, where they were."""
    result = run_without_pyspark(
        """
        import floodmark.protocol.wire, floodmark.protocol.output, floodmark.protocol.control
        loaded = [m for m in sys.modules if m.split(".")[0] in ("pandas", "pyarrow", "numpy")]
        loaded += [m for m in sys.modules if m.startswith("floodmark.") and not m.startswith("floodmark.protocol")]
        assert loaded == ["floodmark.lazy"], loaded
        from floodmark.protocol.control import BucketGauges, ControlEntry
        from floodmark.driver import control_log, next_batch
        assert control_log.ControlEntry is ControlEntry and next_batch.BucketGauges is BucketGauges
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_executors_import_nothing_of_the_driver():
    """What Spark's Python workers run (the map-side combiner, the stateful levels and their processor, the
    batch's control entry) reads the protocol, not ``floodmark.driver``."""
    code = """
        import sys
        import floodmark.spark.map_side.combiner
        import floodmark.spark.batch_entry, floodmark.spark.stateful.levels, floodmark.spark.stateful.window_bucket
        driver = [m for m in sys.modules if m.startswith("floodmark.driver")]
        assert not driver, driver
        print("ok")
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
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
        from floodmark.driver.controller import Controller, SourceSettings

        run = Path({str(tmp_path)!r})
        config = PipelineConfig(
            key_by=["k"], split="p", window={{"kind": "tumbling", "size": 60_000}}, out_of_orderness=1_000,
            idleness=5_000,
        )
        (run / "pipeline.json").write_text(config.model_dump_json())
        clock = ManualClock(1_000)
        controller = Controller.of_aggregation(ControlLog(run / "checkpoint" / "floodmark" / "control"),
                                               SourceSettings(config.strategy(), splits=("0", "1")), clock=clock)
        controller.ensure_initial_entry()
        clock.advance_to(2_000)
        stats = [{{"fm_split": "0", "fm_count": 2, "fm_min_ts": 10_000, "fm_max_ts": 70_000}}]
        controller.on_batch(0, stats, {{}}, {{}})
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
        import floodmark.spark.sources.ticks
        heavy = ("pandas", "pyarrow", "numpy", "floodmark.core", "floodmark.spark.driver.aggregation")
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


def _is_dev_package(name: str) -> bool:
    return name == DEV_PACKAGE or name.startswith(DEV_PACKAGE + ".")


def dev_imports(tree: ast.AST) -> list[tuple[int, bool]]:
    """``(line, deferred)`` of every import of the development tools in ``tree``: ``import``/``from`` statements
    and ``importlib.import_module``/``__import__`` calls with a literal name; ``deferred`` when importing the
    module does not run it (inside a function or a lambda, or under ``if TYPE_CHECKING:``)."""
    found: list[tuple[int, bool]] = []

    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if isinstance(node, ast.ImportFrom):
            return [node.module or ""] if node.level == 0 else []
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                return [node.args[0].value]
        return []

    def visit(node: ast.AST, deferred: bool) -> None:
        if any(_is_dev_package(name) for name in names(node)):
            found.append((node.lineno, deferred))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            deferred = True
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            visit(node.test, deferred)
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, deferred)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, deferred)

    visit(tree, False)
    return found


def test_the_scan_finds_every_kind_of_dev_import():
    code = textwrap.dedent(
        """
        import floodmark_dev.kafka
        from floodmark_dev import processes
        import importlib
        importlib.import_module("floodmark_dev.spark_cluster")
        if TYPE_CHECKING:
            from floodmark_dev.kafka import KafkaBroker
        def later():
            from floodmark_dev.kafka import KafkaBroker
        import floodmark_developer, floodmark.testing
        """
    )
    assert dev_imports(ast.parse(code)) == [(2, False), (3, False), (5, False), (7, True), (9, True)]


def test_the_package_never_imports_the_development_tools():
    """No module of ``src/floodmark`` imports ``floodmark_dev`` (the test broker and cluster, which the wheel does
    not carry), but ``floodmark demo --kafka``'s module, and there only when the demo starts."""
    modules = sorted(SOURCE.rglob("*.py"))
    assert len(modules) > 30 and SOURCE / "apps" / "kafka_demo.py" in modules
    eager, deferred = [], []
    for module in modules:
        relative = module.relative_to(SOURCE).as_posix()
        for line, is_deferred in dev_imports(ast.parse(module.read_text(), str(module))):
            if is_deferred and relative in LAZY_DEV_IMPORTERS:
                deferred.append(f"{relative}:{line}")
            else:
                eager.append(f"{relative}:{line}")
    assert not eager, f"src/floodmark must not import {DEV_PACKAGE} (devtools/, not in the wheel): {eager}"
    assert deferred, "the scan no longer sees the Kafka demo's deferred import of its broker"


BLOCK_DEV_PACKAGE = """
import sys

class BlockDevPackage:
    def find_spec(self, name, path=None, target=None):
        if name == "floodmark_dev" or name.startswith("floodmark_dev."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, BlockDevPackage())
"""


def test_without_the_development_tools_the_kafka_demo_says_it_needs_a_checkout(tmp_path):
    """As installed from the wheel (no ``floodmark_dev``, and here no pyspark either): every module imports, and
    ``floodmark demo --kafka`` stops in one line that says what to do, before it touches its output folder."""
    output = tmp_path / "demo"
    code = f"""
        import floodmark.apps.kafka_demo, floodmark.apps.cli, floodmark.testing
        from typer.testing import CliRunner
        from floodmark.apps.cli import app

        result = CliRunner(env={{"COLUMNS": "300"}}).invoke(app, ["demo", "--kafka", "--output", {str(output)!r}])
        print(result.exit_code)
        print(result.output)
        assert not [m for m in sys.modules if m.startswith("floodmark_dev")]
        """
    result = run_without_pyspark(BLOCK_DEV_PACKAGE + textwrap.dedent(code))
    assert result.returncode == 0, result.stderr
    code, *output_lines = result.stdout.splitlines()
    assert code == "2", result.stdout
    errors = [line for line in output_lines if line.startswith("error: ")]
    assert len(errors) == 1, result.stdout
    assert "runs only from a development checkout" in errors[0] and "scripts/setup.sh" in errors[0], errors[0]
    assert "Traceback" not in result.stdout
    assert not output.exists()


def test_the_command_without_its_extra_says_which_to_install():
    """``pip install floodmark`` without ``[cli]``: one line naming the extra, not a traceback."""
    code = """
import sys

class NoTyper:  # as if typer were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "typer" or name.startswith("typer."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTyper())
sys.argv = ["floodmark", "--help"]
from floodmark.apps.entry import main
main()
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: this floodmark command needs the 'cli' extra (no module 'typer'): pip install 'floodmark[cli]'"
    ]
