"""floodmark installed as a user installs it: the wheel, in a virtualenv outside the source tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from uv import find_uv_bin

from readme_blocks import BLOCKS, CHECK_PANES, clicks, run_block, window_counts

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def lowest(names: list[str]) -> dict[str, str]:
    """The versions of ``names`` in the lowest-versions lock (``requirements/lowest.txt``)."""
    pins = dict(
        line.split("==", 1) for line in (ROOT / "requirements" / "lowest.txt").read_text().splitlines() if "==" in line
    )
    return {name: pins[name].strip() for name in names}


def test_the_wheel_keeps_a_users_numpy_pandas_and_pyarrow(wheel, tmp_path):
    """A virtualenv that already holds the lowest declared numpy, pandas and pyarrow keeps them when pip
    installs the wheel (floodmark declares ranges, not exact versions)."""
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    uv = find_uv_bin()
    subprocess.run([uv, "venv", "--quiet", "--seed", "-p", sys.executable, str(venv)], check=True)
    before = lowest(["numpy", "pandas", "pyarrow"])
    subprocess.run(
        [uv, "pip", "install", "--quiet", "-p", python, *(f"{n}=={v}" for n, v in before.items())], check=True
    )
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], check=True)
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    )
    after = {p["name"]: p["version"] for p in json.loads(listed.stdout)}
    assert {name: after[name] for name in before} == before
    assert "floodmark" in after


def test_the_readme_pipeline_runs_from_the_installed_wheel(wheel_venv, tmp_path):
    """The README's 20-line pipeline with nothing but the wheel (no source tree on the path), on the JVM tick
    source the wheel carries; its counts are exact."""
    python = str(wheel_venv / "bin" / "python")
    where = run_block("import floodmark, json; print(json.dumps(floodmark.__file__))", tmp_path, python=python)
    assert str(wheel_venv) in json.loads(where), "floodmark comes from the wheel's virtualenv"

    rows = clicks()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clicks.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = CHECK_PANES.format(panes="out/panes", keys=("channel", "behavior"), value="count")
    ticks = "from floodmark.spark.ticks import jvm_source_loadable\nassert jvm_source_loadable(spark)\n"
    out = json.loads(run_block(BLOCKS["The pipeline in 20 lines"] + ticks + check, tmp_path, python=python))
    assert out == window_counts(rows, ("channel", "behavior"))
