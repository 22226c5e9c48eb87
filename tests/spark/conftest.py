"""One local SparkSession for every Spark test (start-up is the expensive part); floodmark's wheel and a
virtualenv that holds only it, for the tests that install floodmark as a user does."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from uv import find_uv_bin

pyspark = pytest.importorskip("pyspark")

from floodmark.spark import local_session  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark():
    session = local_session("floodmark-tests", cores=2, shuffle_partitions=2)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """floodmark's wheel, built from this tree as a release would be (``uv build``, isolated), jar included."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([find_uv_bin(), "build", "--wheel", "--quiet", "-o", str(out), str(ROOT)], check=True)
    (built,) = out.glob("floodmark-*.whl")
    with zipfile.ZipFile(built) as archive:
        assert "floodmark/jars/floodmark-ticks.jar" in archive.namelist(), "the wheel carries floodmark's jar"
    return built


@pytest.fixture(scope="session")
def wheel_venv(wheel, tmp_path_factory) -> Path:
    """A virtualenv outside the source tree with only ``floodmark[spark]`` from :func:`wheel` (and what it
    requires, at the lock's versions); returns its root."""
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    uv = find_uv_bin()
    subprocess.run([uv, "venv", "--quiet", "--seed", "-p", sys.executable, str(venv)], check=True)
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "-p",
            str(venv / "bin" / "python"),
            f"{wheel}[spark]",
            "-c",
            str(ROOT / "requirements" / "lock.txt"),
        ],
        check=True,
    )
    return venv
