"""floodmark installed as a user installs it: the wheel, in a virtualenv outside the source tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from uv import find_uv_bin

from readme_blocks import BLOCKS, CHECK_PANES, clicks, page_blocks, run_block, window_counts

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def lowest(names: list[str]) -> dict[str, str]:
    """The versions of ``names`` in the lowest-versions lock (``requirements/lowest.txt``)."""
    pins = dict(
        line.split("==", 1) for line in (ROOT / "requirements" / "lowest.txt").read_text().splitlines() if "==" in line
    )
    return {name: pins[name].strip() for name in names}


def test_the_wheel_holds_the_package_and_not_the_development_tools(wheel):
    """The wheel carries ``floodmark`` (the demo's data source in ``floodmark.apps``) and its metadata only: not
    the development tools (``devtools/floodmark_dev``: the test broker and cluster), not the tests."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    outside = sorted({name.split("/")[0] for name in names} - {"floodmark"})
    assert len(outside) == 1 and outside[0].endswith(".dist-info"), outside
    assert not [name for name in names if "floodmark_dev" in name or "devtools" in name]
    assert "floodmark/apps/clickstream_source.py" in names
    assert "floodmark/testing/harness.py" in names
    moved = ("floodmark/testing/kafka", "floodmark/testing/spark_cluster", "floodmark/testing/processes")
    assert not [name for name in names if name.startswith((*moved, "floodmark/spark/clickstream_source"))]


def test_the_kafka_demo_from_the_wheel_says_it_needs_a_checkout(wheel_venv, tmp_path):
    """Installed from the wheel, ``floodmark demo --kafka`` (whose broker is a development tool) stops in one
    line that says what to do, before it starts anything or touches its output folder."""
    command = [str(wheel_venv / "bin" / "floodmark"), "demo", "--kafka", "--output", str(tmp_path / "demo")]
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"} | {"COLUMNS": "300"}
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "runs only from a development checkout" in errors[0], result.stdout + result.stderr
    assert not (tmp_path / "demo").exists()


def test_the_wheel_keeps_a_users_numpy_pandas_and_pyarrow(wheel, tmp_path):
    """A virtualenv that already holds the lowest declared numpy, pandas and pyarrow keeps them when pip
    installs the wheel (floodmark declares ranges, not exact versions)."""
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    uv = find_uv_bin()
    subprocess.run([uv, "venv", "--quiet", "--no-cache", "--seed", "-p", sys.executable, str(venv)], check=True)
    before = lowest(["numpy", "pandas", "pyarrow"])
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--no-cache", "-p", python, *(f"{n}=={v}" for n, v in before.items())],
        check=True,
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
    ticks = "from floodmark.spark.sources.ticks import jvm_source_loadable\nassert jvm_source_loadable(spark)\n"
    out = json.loads(run_block(BLOCKS["The pipeline in 20 lines"] + ticks + check, tmp_path, python=python))
    assert out == window_counts(rows, ("channel", "behavior"))


def test_getting_started_works_as_written_from_the_installed_wheel(wheel_venv, tmp_path):
    """The docs site's Getting started, its blocks in order (the sample input, the job, reading the results, running
    it continuously), in a virtualenv with only the wheel: the output the page shows, and quietly (no JVM notice,
    no warning)."""
    data, job, results, live = page_blocks("getting-started.md")[:4]
    python = wheel_venv / "bin" / "python"
    result = subprocess.run(
        [str(python), "-c", data + job + results + live], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = result.stdout
    assert "rows in 6 = 5 records + 1 dead letters; (record, window) pairs 5 = 5 in windows + 0 late" in out
    assert "|    d3|2026-01-01 09:00:00|       2|        18.2|ON_TIME|" in out, "g2's zone-less times in Berlin time"
    assert "unparsable timestamp: 'yesterday'" in out
    assert "|    d1|2026-01-01 09:01:00|       1|ON_TIME|" in out, "the continuous query fired once both gateways moved"
    assert result.stderr.strip() == "", result.stderr[-4000:]
