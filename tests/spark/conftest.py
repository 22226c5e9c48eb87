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
    """floodmark's wheel, built from this tree as a release would be (``uv build``, isolated), jar included.

    Built from the sdist (``uv build``'s default), not from the tree (``--wheel``): setuptools builds a wheel from
    the tree in its ``build/lib``, which keeps the modules an earlier build saw, moved or deleted since."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([find_uv_bin(), "build", "--quiet", "--no-cache", "-o", str(out), str(ROOT)], check=True)
    (built,) = out.glob("floodmark-*.whl")
    with zipfile.ZipFile(built) as archive:
        assert "floodmark/jars/floodmark.jar" in archive.namelist(), "the wheel carries floodmark's jar"
    return built


@pytest.fixture(scope="session")
def wheel_venv(wheel, tmp_path_factory) -> Path:
    """A virtualenv outside the source tree with only ``floodmark[spark,cli]`` from :func:`wheel` (and what it
    requires, at the lock's versions); returns its root."""
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    uv = find_uv_bin()
    subprocess.run([uv, "venv", "--quiet", "--no-cache", "--seed", "-p", sys.executable, str(venv)], check=True)
    # No cache: pyspark comes as an sdist, and uv kept every build of it (~1.4 GB a run) in ~/.cache/uv, which
    # filled the shared disk of a machine that runs the suite again and again.
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--no-cache",
            "-p",
            str(venv / "bin" / "python"),
            f"{wheel}[spark,cli]",
            "-c",
            str(ROOT / "requirements" / "lock.txt"),
        ],
        check=True,
    )
    return venv


@pytest.fixture(scope="session")
def packed_wheel_venv(wheel_venv, tmp_path_factory) -> Path:
    """:func:`wheel_venv` packed with ``venv-pack`` (``.tar.gz``), as Spark's docs ship the executors' Python
    environment (``--archives env.tar.gz#environment``). Not packed: the interpreter (the archive's
    ``bin/python`` points at the base Python, which every worker of this one machine has at the same path) and
    pyspark, which the cluster's Spark puts on its Python workers' path (and which is most of the size)."""
    archive = tmp_path_factory.mktemp("packed") / "floodmark-env.tar.gz"
    venv_pack = str(Path(sys.executable).with_name("venv-pack"))
    exclude = "lib/python3.11/site-packages/pyspark/*"
    command = [venv_pack, "--quiet", "-p", str(wheel_venv), "-o", str(archive), "--exclude", exclude]
    subprocess.run([*command, "--compress-level", "1"], check=True)
    return archive
