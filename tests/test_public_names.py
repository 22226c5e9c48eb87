"""Every public name imports alone, in a fresh interpreter, in any order.

The test process itself has imported most of floodmark by the time a test runs (conftest, other tests), which
hides an import that works only as a side effect of another one: each name is imported here in its own
subprocess. The engine-free packages must also import with pyspark unimportable.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "floodmark"

BLOCK_PYSPARK = """
import sys

class BlockPySpark:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j"):
            raise ImportError(f"{name} is blocked: this import must not need Spark")

sys.meta_path.insert(0, BlockPySpark())
"""

NEEDS_SPARK = ("floodmark.spark",)
"""Packages whose names may import pyspark; every other public package must import without it."""


def public_names() -> list[tuple[str, str]]:
    """``(package, name)`` for every name in the ``__all__`` of every package under ``src/floodmark``, read from
    the source (importing the packages here would defeat the test)."""
    found = []
    for init in sorted(SOURCE.rglob("__init__.py")):
        package = ".".join(init.relative_to(SOURCE.parent).parent.parts)
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
            ):
                found.extend((package, name) for name in ast.literal_eval(node.value))
    return found


NAMES = public_names()


def test_the_public_packages_are_found():
    packages = {package for package, _ in NAMES}
    assert {"floodmark", "floodmark.spark", "floodmark.testing", "floodmark.core.watermarks"} <= packages


@pytest.mark.parametrize(("package", "name"), NAMES, ids=[f"{p}:{n}" for p, n in NAMES])
def test_a_public_name_imports_alone_in_a_fresh_interpreter(package, name):
    code = f"from {package} import {name}\nassert {name} is not None\n"
    if not package.startswith(NEEDS_SPARK):
        code = BLOCK_PYSPARK + code
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_every_public_name_of_the_top_package_in_reverse_order():
    """``from floodmark import ...`` with the names in the order that imports no core module first."""
    names = [name for package, name in NAMES if package == "floodmark"]
    code = BLOCK_PYSPARK + f"from floodmark import {', '.join(sorted(names, reverse=True))}\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
