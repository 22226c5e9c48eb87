"""Where the JVM artifacts ``scripts/setup.sh`` fetches live (engine-free: the broker helper needs no Spark).

``scripts/setup.sh`` runs Maven on the pinned poms under ``jvm/`` and copies the jars to one folder per group
under the jars root: ``spark-kafka/`` (Spark's Kafka connector, put on a local session's classpath) and
``kafka-broker/`` (an Apache Kafka broker for tests, demos and benchmarks). The root is ``$FLOODMARK_JARS``
when set, else the ``jars/`` folder of the source tree floodmark is installed from (an editable install).
"""

from __future__ import annotations

import os
from pathlib import Path

JARS_ENV = "FLOODMARK_JARS"
SPARK_KAFKA = "spark-kafka"
KAFKA_BROKER = "kafka-broker"


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
