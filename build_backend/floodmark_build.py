"""floodmark's build backend: setuptools' (``setuptools.build_meta``), and a wheel that always has floodmark's jar.

floodmark's own JVM code, the Maven module ``jvm/floodmark``, goes into the package as
``src/floodmark/jars/floodmark.jar`` (package data), which the wheel carries. Before a wheel or an sdist is
built, :func:`prepare_jar` makes sure that jar is there and current:

* in a source tree, it is rebuilt with Maven when the module's sources changed since it was built (the stamp beside
  it, :func:`source_stamp`, which ``scripts/setup.sh`` writes the same way, holds their hash), and the build fails,
  naming what is missing, when that needs Maven (``mvn``) or a JDK the machine lacks;
* in an sdist (no ``jvm/``), the jar it carries is used, and the build fails without one;
* with ``FLOODMARK_WHEEL_WITHOUT_JAR=1`` (:data:`WITHOUT_JAR_ENV`) nothing is built or required, a warning line
  says so, and the wheel leaves the jar out even when the tree or the sdist has one (:class:`BuildPy`, setuptools'
  ``build_py`` command as ``[tool.setuptools.cmdclass]`` names it; an sdist built so carries what the tree has).

An editable install (``pip install -e .``, what ``scripts/setup.sh`` does) is setuptools' alone: it builds nothing
here and needs no jar (``scripts/setup.sh`` builds it into the tree after, when it finds Maven and a JDK).

setuptools is imported only where a build runs, so the tests import :func:`prepare_jar` without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

WITHOUT_JAR_ENV = "FLOODMARK_WHEEL_WITHOUT_JAR"
"""Set to ``1`` to build a wheel without floodmark's jar (its JVM code)."""
MODULE = Path("jvm", "floodmark")
"""floodmark's Maven module, relative to the source root."""
JAR = Path("src", "floodmark", "jars", "floodmark.jar")
"""Where the jar goes in the source tree (package data), relative to the source root."""
JARS_FOLDER = "jars"
"""The jar's folder inside the ``floodmark`` package."""

NEEDS_TOOLS = (
    "building floodmark's wheel needs Maven (mvn) and a JDK to build jvm/floodmark, and this machine has no {missing}: "
    f"install them, or set {WITHOUT_JAR_ENV}=1 to build a wheel without floodmark's JVM code"
)


class JarError(SystemExit):
    """The wheel cannot have its jar. A ``SystemExit``: the build frontend shows its message, without a traceback,
    as the build's last line."""


def without_jar() -> bool:
    """Whether the build was asked to leave the jar out (:data:`WITHOUT_JAR_ENV` is ``1``)."""
    return os.environ.get(WITHOUT_JAR_ENV) == "1"


def source_stamp(root: Path) -> str:
    """The SHA-256 of the Maven module's ``pom.xml`` and every file under its ``src/``, concatenated in the byte
    order of their paths: ``scripts/setup.sh``'s ``find jvm/floodmark/pom.xml jvm/floodmark/src -type f | LC_ALL=C
    sort | xargs cat | sha256sum``."""
    module = root / MODULE
    files = [module / "pom.xml", *(path for path in (module / "src").rglob("*") if path.is_file())]
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda path: os.fsencode(path.relative_to(root))):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def missing_tools() -> list[str]:
    """What building the module needs and ``PATH`` (and ``JAVA_HOME``, which Maven uses) lacks: ``mvn`` and a
    JDK's ``javac``."""
    missing = []
    if shutil.which("mvn") is None:
        missing.append("mvn on PATH")
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and Path(java_home, "bin", "javac").is_file()) and shutil.which("javac") is None:
        missing.append("JDK (no javac on PATH or in $JAVA_HOME/bin)")
    return missing


def prepare_jar(root: Path) -> Path | None:
    """floodmark's jar under ``root`` (a source tree or an unpacked sdist), current with ``jvm/floodmark``'s
    sources, built with Maven when needed; ``None`` when the build leaves it out (:data:`WITHOUT_JAR_ENV`).

    :raises JarError: the jar is needed and cannot be had (no Maven or JDK, Maven failed, an sdist without it).
    """
    if without_jar():
        print(
            f"floodmark build: warning: {WITHOUT_JAR_ENV}=1: this wheel leaves out floodmark's jar (its JVM code): "
            "an installation from it runs the Python forms of the tick source and output reader (slower) and "
            "has no Kafka alignment or exactly-once Kafka sink",
            file=sys.stderr,
        )
        return None
    jar = root / JAR
    stamp_file = jar.with_name(jar.name + ".stamp")
    if not (root / MODULE / "pom.xml").is_file():
        if jar.is_file():
            return jar  # an sdist: the jar was built with it
        raise JarError(
            f"floodmark's jar ({JAR}) is missing and this source has no {MODULE} to build it from: build from a "
            f"floodmark checkout with Maven (mvn) and a JDK, or set {WITHOUT_JAR_ENV}=1 to build a wheel without "
            "floodmark's JVM code"
        )
    stamp = source_stamp(root)
    if jar.is_file() and stamp_file.is_file() and stamp_file.read_text().strip() == stamp:
        return jar
    missing = missing_tools()
    if missing:
        raise JarError(NEEDS_TOOLS.format(missing=" and no ".join(missing)))
    print(f"floodmark build: building floodmark's jar with Maven ({MODULE / 'pom.xml'})", file=sys.stderr)
    built = subprocess.run(
        ["mvn", "-B", "-q", "-f", str(root / MODULE / "pom.xml"), "package"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        tail = "\n".join(built.stdout.splitlines()[-15:])
        raise JarError(f"{tail}\nMaven could not build {MODULE} (its output above): floodmark's wheel needs its jar")
    jar.parent.mkdir(parents=True, exist_ok=True)
    for old in [*jar.parent.glob("*.jar"), *jar.parent.glob("*.stamp")]:  # a jar of an older name too
        old.unlink()
    shutil.copyfile(root / MODULE / "target" / "floodmark.jar", jar)
    stamp_file.write_text(stamp + "\n")
    return jar


# The PEP 517 hooks: setuptools', with the jar prepared before a wheel or an sdist.


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None) -> str:
    prepare_jar(Path.cwd())  # first: a missing tool is said before anything else is needed
    from setuptools import build_meta

    return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    prepare_jar(Path.cwd())  # first: a missing tool is said before anything else is needed
    from setuptools import build_meta

    return build_meta.build_sdist(sdist_directory, config_settings)


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None) -> str:
    from setuptools import build_meta

    return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    from setuptools import build_meta

    return build_meta.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings: Any = None) -> list[str]:
    from setuptools import build_meta

    return build_meta.get_requires_for_build_sdist(config_settings)


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    from setuptools import build_meta

    return build_meta.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Any = None) -> str:
    from setuptools import build_meta

    return build_meta.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: Any = None) -> str:
    from setuptools import build_meta

    return build_meta.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def __getattr__(name: str) -> Any:
    """:class:`BuildPy`, made on first use (it subclasses setuptools' command: setuptools only where it builds)."""
    if name != "BuildPy":
        raise AttributeError(name)
    from setuptools.command.build_py import build_py

    class BuildPy(build_py):
        """setuptools' ``build_py``, leaving floodmark's jar out of a wheel under :data:`WITHOUT_JAR_ENV` (an
        editable install has no copies to leave out)."""

        def run(self) -> None:
            super().run()
            if not self.editable_mode and without_jar():
                # A jar an earlier build left in build/lib (setuptools builds a wheel from the tree there).
                for jar in Path(self.build_lib, "floodmark", JARS_FOLDER).glob("*.jar"):
                    jar.unlink()

        def exclude_data_files(self, package: str, src_dir: str, files: Any) -> list[str]:
            kept = super().exclude_data_files(package, src_dir, files)
            if self.editable_mode or not without_jar():
                return kept
            # Under floodmark's data (a glob) or floodmark.jars' (the sdist's manifest: a folder without
            # __init__.py is a namespace package of its own).
            jars = Path(self.get_package_dir("floodmark"), JARS_FOLDER).resolve()
            return [file for file in kept if not (file.endswith(".jar") and Path(file).resolve().parent == jars)]

    globals()["BuildPy"] = BuildPy
    return BuildPy
