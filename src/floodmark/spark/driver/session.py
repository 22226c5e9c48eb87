"""SparkSessions configured the way floodmark's runtime needs them: local (embedded) or on a cluster."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from floodmark.jvm import SPARK_KAFKA, ensure_java, jars, packaged_jars, spark_jars
from floodmark.jvm.settings import (
    EXTENSIONS,
    PATIENT_CONF,
    ROCKSDB_PROVIDER,
    STATUS_RETENTION,
    required_conf,
)
from floodmark.spark.batch_entry import session_problem

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""floodmark's log4j2 configuration for the local session (warnings, minus Hadoop's native-library notice)."""


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
            f"state store provider is {provider!r}: build the session through "
            "floodmark.spark.configure_spark_with_floodmark(SparkSession.builder) (local_session() does)"
        )


def kafka_connector_jars() -> str:
    """Spark's Kafka connector as a ``spark.jars`` value (comma-separated paths), ``""`` when not installed.

    A checkout's ``scripts/setup.sh`` fetches it (``jars/spark-kafka/``; the wheel does not carry it). For your own
    session or cluster, give the same value to ``spark.jars``
    (``SparkSession.builder.config("spark.jars", kafka_connector_jars())`` or ``spark-submit --jars``), or use
    ``spark.jars.packages`` with ``spark-sql-kafka-0-10_2.13`` for your Spark version: the driver and every
    executor need it.
    """
    return ",".join(str(jar) for jar in jars(SPARK_KAFKA))


def floodmark_jars() -> str:
    """floodmark's own JVM code (the tick source, :mod:`floodmark.spark.sources.ticks`) as a ``spark.jars`` value:
    the jar
    the package carries, ``""`` when it was installed without it (floodmark then uses its Python tick source).

    Sessions made here have it; for your own session use :func:`configure_spark_with_floodmark`, or add it to
    ``spark.jars`` (``spark-submit --jars``) yourself.
    """
    return spark_jars()


def with_floodmark_extensions(extensions: str | None) -> str:
    """A ``spark.sql.extensions`` value (comma-separated classes, Spark applies each) with :data:`EXTENSIONS` added
    to ``extensions``, yours (Delta Lake's, say) kept first."""
    classes = [name.strip() for name in (extensions or "").split(",") if name.strip()]
    return ",".join(classes if EXTENSIONS in classes else [*classes, EXTENSIONS])


def configure_spark_with_floodmark(builder: SparkSession.Builder, kafka: bool = False) -> SparkSession.Builder:
    """``builder`` with what floodmark needs, for a session of your own (as delta-spark's
    ``configure_spark_with_delta_pip``): :func:`required_conf`, :data:`PATIENT_CONF`, UTC as the session time
    zone, and floodmark's jar
    (:func:`floodmark_jars`; with ``kafka``, also :func:`kafka_connector_jars`) added to any ``spark.jars`` the
    builder already has, with its session extensions (:data:`EXTENSIONS`) added to any ``spark.sql.extensions``
    (not under ``spark-submit``: give ``--conf spark.sql.extensions=floodmark.Extensions`` there).
    Call it before ``getOrCreate()``::

        spark = configure_spark_with_floodmark(SparkSession.builder.appName("clicks")).getOrCreate()

    Settings made on the builder before the call win, except ``spark.jars`` and ``spark.sql.extensions``, which
    are extended.

    Under ``spark-submit`` the driver's JVM is already running when the builder runs: its ``spark.jars``
    reaches the executors but not the driver, so also give ``spark-submit --jars "$(python -m floodmark.jvm)"``
    (``--kafka`` adds the connector); otherwise the log says the Python tick source runs.

    :raises ValueError: ``kafka`` and no Kafka connector jars installed (use ``spark.jars.packages`` with
        ``org.apache.spark:spark-sql-kafka-0-10_2.13:<your Spark version>`` instead).
    """
    options = builder._options  # PySpark keeps the builder's settings here; there is no public getter
    if kafka and not kafka_connector_jars():
        raise ValueError(
            "no Kafka connector jars installed here: give the session spark.jars.packages="
            "org.apache.spark:spark-sql-kafka-0-10_2.13:<your Spark version> instead of kafka=True"
        )
    for key, value in {**required_conf(), **PATIENT_CONF, "spark.sql.session.timeZone": "UTC"}.items():
        if key not in options:
            builder = builder.config(key, value)
    # Under spark-submit the driver's JVM runs already (PySpark connects to it): a jar the builder adds never
    # reaches it, and Spark would warn, with a stack trace, about an extension class it cannot load. There
    # `--conf spark.sql.extensions=floodmark.Extensions` beside `--jars` sets it; without it floodmark registers
    # its functions itself.
    if packaged_jars() and "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.config("spark.sql.extensions", with_floodmark_extensions(options.get("spark.sql.extensions")))
    on_classpath = ",".join(filter(None, [options.get("spark.jars", ""), spark_jars(kafka)]))
    return builder.config("spark.jars", on_classpath) if on_classpath else builder


def local_session(
    app_name: str = "floodmark",
    cores: int = 2,
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A ``local[cores]`` session with RocksDB state, no UI and small shuffles (the embedded default).

    Spark's Kafka connector is on its classpath when a checkout's ``scripts/setup.sh`` has fetched it
    (:func:`kafka_connector_jars`; the wheel does not carry it: give ``spark.jars.packages`` in ``conf``), and
    floodmark's session extensions (:data:`EXTENSIONS`) are added to any ``spark.sql.extensions`` of ``conf``.
    The driver listens on loopback only (``SPARK_LOCAL_IP``, default ``127.0.0.1``).

    :arg conf: more Spark settings, applied last (they win over floodmark's); read when the session's
        SparkContext starts, so they apply only when no SparkContext runs in this process yet.
    """
    # The embedded default serves nothing to the network: the driver and its block manager listen on loopback.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return _session(f"local[{cores}]", app_name, shuffle_partitions or cores, dict(conf or {}))


def cluster_session(
    master: str,
    app_name: str = "floodmark",
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session whose executors run on a cluster (``spark://host:7077``, ``yarn``, ``k8s://...``).

    The same settings as :func:`local_session` (:func:`required_conf`; the Kafka connector jars when
    installed, which ``spark.jars`` ships to the executors; UTC, no UI, Arrow; floodmark's log4j
    configuration for the driver, while executors log as the cluster is configured to), plus what a cluster
    needs:

    * The executors' Python workers run ``spark.pyspark.python`` from ``conf``, else ``$PYSPARK_PYTHON``,
      else this interpreter (``sys.executable``: right when every node has the same environment at the same
      path, as on one machine). That Python must import floodmark, pyspark, pandas and pyarrow of the
      driver's versions: install floodmark into it on every node.
    * The driver must be reachable by the executors: with ``SPARK_LOCAL_IP`` set, the driver binds to and
      advertises that address (``spark.driver.bindAddress`` / ``spark.driver.host``); otherwise Spark's
      default (the host's name) is used. Use ``conf`` to set them for your network.
    * ``shuffle_partitions``: ``spark.sql.shuffle.partitions`` (also floodmark's default bucket count,
      at least 8); ``None`` keeps the cluster's setting (Spark's default is 200: size it to the executors'
      cores, since every shuffle partition runs a task and commits a state store in every batch).

    The checkpoint (and file outputs) must be on a file system the driver and every executor see (HDFS,
    S3, ABFS, a shared mount): executors load and commit the state stores there.

    :arg conf: more settings, applied last (they win over floodmark's).
    :raises RuntimeError: when a SparkSession with another master already runs in this process (there is
        one SparkContext per process: stop it first).
    """
    active = SparkContext._active_spark_context
    if active is not None and active.master != master:
        raise RuntimeError(
            f"a SparkSession with master {active.master!r} already runs in this process and there is one "
            f"SparkContext per process: stop it before building one for {master!r} (or use another process)"
        )
    return _session(master, app_name, shuffle_partitions, dict(conf or {}))


def _session(master: str, app_name: str, shuffle_partitions: int | None, conf: dict[str, str]) -> SparkSession:
    """The one builder behind :func:`local_session` and :func:`cluster_session`."""
    ensure_java()
    # Python workers must run this interpreter (the one that has floodmark), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The JVM's temporary files (Spark's local dirs, the native libraries RocksDB, lz4 and snappy unpack) go where
    # Python's go: $TMPDIR when set (Java ignores it), else the system's.
    java_options = " ".join(
        shlex.quote(option)  # Spark splits the options as a shell would
        for option in (f"-Dlog4j2.configurationFile={LOG_CONFIG}", f"-Djava.io.tmpdir={tempfile.gettempdir()}")
    )
    settings = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # progress bars would tear the live view
        "spark.driver.extraJavaOptions": java_options,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": os.environ.get("FLOODMARK_DRIVER_MEMORY", "2g"),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        **required_conf(),
        **PATIENT_CONF,
        **STATUS_RETENTION,
    }
    if not master.startswith("local"):
        # PySpark hands $PYSPARK_PYTHON to the executors when the SparkContext starts: one value for both.
        python = conf.get("spark.pyspark.python") or os.environ["PYSPARK_PYTHON"]
        os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"] = python
    local_ip = os.environ.get("SPARK_LOCAL_IP")
    if local_ip:
        settings["spark.driver.bindAddress"] = local_ip
        settings["spark.driver.host"] = local_ip
    if shuffle_partitions:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    on_classpath = spark_jars(kafka=True)  # the connector when setup fetched it
    if on_classpath:
        settings["spark.jars"] = on_classpath
    extensions = conf.get("spark.sql.extensions")
    settings.update(conf)
    if packaged_jars():
        settings["spark.sql.extensions"] = with_floodmark_extensions(extensions)
    if SparkContext._gateway is None:
        SparkContext._gateway = _launch_jvm(settings)
        SparkContext._jvm = SparkContext._gateway.jvm
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


TWS_DRIVER_WORKER_LINES = (
    b"Streaming TransformWithStateInPandas Python worker ",
    b"Starting Streaming TransformWithStateInPandas Python worker",
)
"""How the lines start that Spark 4.3's driver-side Python worker of ``transformWithStateInPandas`` prints at
every query start (pyspark/sql/streaming/transform_with_state_driver_worker.py, plain ``print`` to its stdout,
which the JVM copies to its stderr): five lines, most of several hundred characters, with a blank line after
each. They are not log records (log4j cannot silence them) and say nothing a user needs."""


def _launch_jvm(settings: dict[str, str]):
    """Start the JVM as PySpark does, with its stderr forwarded to ours minus the lines of
    :data:`TWS_DRIVER_WORKER_LINES`."""
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    stream = gateway.proc.stderr
    threading.Thread(target=_forward_stderr, args=(stream,), name="floodmark-jvm-stderr", daemon=True).start()
    return gateway


JVM_NOTICES = (b"WARNING: Using incubator modules: jdk.incubator.vector",)
"""Lines the JVM prints at every start that say nothing a user needs (Spark 4 runs Java 17 with the incubating
Vector API module; the JVM announces it)."""


def _forward_stderr(stream) -> None:
    skip_blank = False
    for line in iter(stream.readline, b""):
        if line.startswith(TWS_DRIVER_WORKER_LINES):
            skip_blank = True
            continue
        if line.rstrip().startswith(JVM_NOTICES):
            continue
        if skip_blank and not line.strip():
            skip_blank = False
            continue
        skip_blank = False
        # If our stderr is gone, keep draining so that the JVM never blocks on a full pipe.
        with contextlib.suppress(OSError):
            os.write(2, line)
