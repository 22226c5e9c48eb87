"""floodmark's jar in an installation: the wheel's build makes it or fails saying what is missing
(``build_backend/floodmark_build.py``), with ``FLOODMARK_WHEEL_WITHOUT_JAR=1`` as the way to build one without it;
``python -m floodmark.jvm`` in an installation without it says so and fails instead of printing an empty value.
The whole build from this tree, jar included, is ``tests/spark/test_install.py``'s wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from uv import find_uv_bin

import floodmark_build
from floodmark import jvm
from floodmark.jvm import cli

ROOT = Path(__file__).resolve().parents[2]


def source_tree(root: Path, jar: bool = False, stamp: str | None = None) -> Path:
    """A source tree with a Maven module (one pom, one source file) and, with ``jar``, a built jar (``stamp`` beside
    it, when given)."""
    module = root / "jvm" / "floodmark"
    (module / "src" / "main" / "java").mkdir(parents=True)
    (module / "pom.xml").write_text("<project/>\n")
    (module / "src" / "main" / "java" / "A.java").write_text("class A {}\n")
    if jar:
        (root / "src" / "floodmark" / "jars").mkdir(parents=True)
        (root / floodmark_build.JAR).write_bytes(b"PK")
        if stamp is not None:
            (root / "src" / "floodmark" / "jars" / "floodmark.jar.stamp").write_text(stamp + "\n")
    return root


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """A PATH without Maven or a JDK, and no JAVA_HOME."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv(floodmark_build.WITHOUT_JAR_ENV, raising=False)


def test_without_maven_the_wheels_build_fails_naming_mvn_and_the_opt_out(no_tools, tmp_path, monkeypatch):
    tree = source_tree(tmp_path / "tree")
    monkeypatch.chdir(tree)
    with pytest.raises(SystemExit) as failed:
        floodmark_build.build_wheel(str(tmp_path / "dist"))  # before setuptools: the jar is the first step
    message = str(failed.value)
    assert "needs Maven (mvn) and a JDK" in message and "no mvn on PATH" in message, message
    assert "FLOODMARK_WHEEL_WITHOUT_JAR=1" in message, message
    assert not (tmp_path / "dist").exists()


def test_a_jar_older_than_its_sources_is_rebuilt_so_without_maven_the_build_fails(no_tools, tmp_path):
    tree = source_tree(tmp_path / "tree", jar=True, stamp="0" * 64)
    with pytest.raises(SystemExit, match="no mvn on PATH"):
        floodmark_build.prepare_jar(tree)


def test_a_jar_current_with_its_sources_needs_no_maven(no_tools, tmp_path):
    tree = tmp_path / "tree"
    source_tree(tree)
    tree = source_tree(tmp_path / "other", jar=True, stamp=floodmark_build.source_stamp(tree))
    assert floodmark_build.prepare_jar(tree) == tree / floodmark_build.JAR


def test_an_sdist_without_the_jar_fails_and_with_it_needs_no_maven(no_tools, tmp_path):
    sdist = tmp_path / "sdist"
    (sdist / "src" / "floodmark" / "jars").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no jvm/floodmark to build it from"):
        floodmark_build.prepare_jar(sdist)
    (sdist / floodmark_build.JAR).write_bytes(b"PK")
    assert floodmark_build.prepare_jar(sdist) == sdist / floodmark_build.JAR


def test_the_stamp_is_setup_shs(tmp_path):
    """``scripts/setup.sh`` and the wheel's build agree on when the jar is current: a jar setup built is the
    wheel's without Maven again."""
    tree = source_tree(tmp_path / "tree")
    (tree / "jvm" / "floodmark" / "src" / "main" / "scala").mkdir()
    (tree / "jvm" / "floodmark" / "src" / "main" / "scala" / "B.scala").write_text("object B\n")
    (tree / "jvm" / "floodmark" / "src" / "main" / "java" / "a_lower.java").write_text("class a_lower {}\n")
    module = "jvm/floodmark"
    shell = f'find "{module}/pom.xml" "{module}/src" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum'
    assert (
        'find "$module/pom.xml" "$module/src" -type f -print0 | LC_ALL=C sort -z'
        in (ROOT / "scripts" / "setup.sh").read_text()
    )
    by_shell = subprocess.run(["bash", "-c", shell], cwd=tree, check=True, capture_output=True, text=True)
    assert by_shell.stdout.split()[0] == floodmark_build.source_stamp(tree)


def test_the_opt_out_builds_a_wheel_without_the_jar_and_says_so(tmp_path):
    """With ``FLOODMARK_WHEEL_WITHOUT_JAR=1`` the wheel leaves the jar out even when the tree has one, and a
    warning line says what that costs (``uv build --wheel``, isolated, of a copy of the tree with a jar, in its
    sources and in ``build/lib`` from an earlier build)."""
    tree = tmp_path / "tree"
    for folder in ("src/floodmark", "build_backend"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, tree / name)
    (tree / "src" / "floodmark" / "jars").mkdir(exist_ok=True)
    (tree / floodmark_build.JAR).write_bytes(b"PK")
    earlier = tree / "build" / "lib" / "floodmark" / "jars"  # what an earlier build of the tree left there
    earlier.mkdir(parents=True)
    (earlier / "floodmark.jar").write_bytes(b"PK")
    env = {**os.environ, floodmark_build.WITHOUT_JAR_ENV: "1"}
    command = [find_uv_bin(), "build", "--wheel", "-o", str(tmp_path / "dist"), str(tree)]
    built = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-4000:]
    warnings = [line for line in built.stderr.splitlines() if "floodmark build: warning:" in line]
    assert len(warnings) == 1 and "leaves out floodmark's jar" in warnings[0], built.stderr[-4000:]
    (wheel,) = (tmp_path / "dist").glob("floodmark-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "floodmark/jvm/__init__.py" in names
    assert not [name for name in names if name.endswith(".jar")], names


@pytest.fixture
def no_jar_in(monkeypatch, tmp_path):
    """Where the jar is looked for: an empty ``floodmark/jars`` in a source tree, or in an installed wheel."""

    def place(where: str) -> Path:
        jars = tmp_path / where / "src" / "floodmark" / "jars"
        jars.mkdir(parents=True)
        if where == "tree":
            source_tree(tmp_path / where)
        monkeypatch.setattr(jvm, "PACKAGED_JARS", jars)
        return jars

    return place


@pytest.mark.parametrize("flags", [[], ["--kafka"], ["--connect-server"]])
def test_python_m_floodmark_jvm_without_the_jar_says_why_and_fails(no_jar_in, capsys, flags):
    no_jar_in("wheel")
    assert cli.main(flags) == 1
    out, err = capsys.readouterr()
    assert out == "", "nothing for --jars to take"
    assert len(err.splitlines()) == 1, err
    assert "this floodmark installation has no jar" in err and "its wheel was built without" in err, err


def test_python_m_floodmark_jvm_in_a_source_tree_without_the_jar_names_setup(no_jar_in, capsys):
    no_jar_in("tree")
    assert cli.main([]) == 1
    err = capsys.readouterr().err
    assert "source tree" in err and "scripts/setup.sh" in err, err


def test_python_m_floodmark_jvm_prints_the_jar(no_jar_in, capsys):
    jars = no_jar_in("wheel")
    (jars / "floodmark.jar").write_bytes(b"PK")
    assert cli.main([]) == 0
    assert capsys.readouterr() == (f"{jars / 'floodmark.jar'}\n", "")
    assert jvm.missing_jar() is None
