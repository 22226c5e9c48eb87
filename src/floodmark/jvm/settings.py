"""The Spark settings floodmark's queries need, as plain strings (no pyspark here: ``python -m floodmark.jvm
--connect-server`` prints a Spark Connect server's): :func:`required_conf` for every session,
:func:`connect_server_conf` for a Connect server; the sessions floodmark builds
(:mod:`floodmark.spark.driver.session`) take them too."""

from __future__ import annotations

import os

from floodmark.jvm import spark_jars

EXTENSIONS = "floodmark.Extensions"
"""floodmark's ``spark.sql.extensions`` class (in its jar): its SQL functions (``fm_unpack``, ``fm_try_value``, ...),
the rule that resolves its plan hints (:mod:`floodmark.spark.plan_hints`) and the JVM map side's planner strategy, in
every session, without py4j."""

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


PATIENT_CONF = {"spark.python.authenticate.socketTimeout": "180s"}
"""Settings that let a busy machine delay a query rather than fail it: Spark waits 15 s by default for a Python
process it started (a worker's daemon, a Python data source's planner, a Connect server's ``foreachBatch``) to
authenticate on its socket; at a load of 14 to 30 on 2 cores that was not enough here. The wait Spark 4.3 gives
a new Python worker to connect back is a fixed 10 s that no setting reaches: the query handle starts a query
that failed so again (``floodmark.spark.driver.restarts.BUSY_MACHINE``)."""


STATUS_RETENTION = {
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
    "spark.sql.ui.retainedExecutions": "100",
}
"""How much of finished jobs, stages, tasks and SQL executions the driver keeps in memory for Spark's UI and
status API, in floodmark's sessions (which have no UI): Spark keeps 1,000 jobs, 1,000 stages, 100,000 tasks and
1,000 executions by default. A micro-batch is an execution of one to three jobs, and an execution keeps the
metrics of every node of its plan, so a long-running query fills the driver's heap with them until those
limits: ``bench/soak.py --spark-retention`` grew ~150 MB per hour for its first 12 minutes (Spark's limits not
reached yet), ``bench/soak.py`` stays flat. Give other values in ``conf`` to keep more."""


def connect_server_conf(kafka: bool = False, shuffle_partitions: int | None = None) -> dict[str, str]:
    """The Spark settings of a Spark Connect server whose clients run floodmark's queries
    (``SparkSession.builder.remote("sc://...")``): :func:`required_conf`, :data:`PATIENT_CONF`, UTC as the session
    time zone, floodmark's session extensions (:data:`EXTENSIONS`: its SQL functions, without py4j) and its jar
    (with ``kafka``, Spark's Kafka connector too) as ``spark.jars``, and the server-wide settings
    :func:`~floodmark.spark.driver.session.local_session` makes: small shuffles, no UI, :data:`STATUS_RETENTION` and
    its driver memory. Give them to the server at its start, e.g. ``$SPARK_HOME/sbin/start-connect-server.sh
    $(python -m floodmark.jvm --connect-server)``; a ``--conf`` given after them wins (spark-submit keeps a
    setting's last value).

    :arg shuffle_partitions: ``spark.sql.shuffle.partitions``, what a new checkpoint's stateful operators get (and
        floodmark's default bucket count, at least 8); default: this machine's cores, which is what the server's
        default master (``local[*]``) runs tasks on, as :func:`~floodmark.spark.driver.session.local_session` takes
        its ``local[cores]``. Spark's own default, 200, makes every stateful operator of every micro-batch run 200
        tasks, each committing a state store: the README's job took several times as long as with 2 on 2 cores. For
        a server whose executors are elsewhere (a cluster master), give their total cores.

    The server's Python (``PYSPARK_PYTHON`` or ``spark.pyspark.python``) must have floodmark installed, with the
    client's versions of floodmark, pyspark, pandas and pyarrow: the query's ``foreachBatch`` step, floodmark's
    controller, runs there. docs/how-to/spark-connect.md has the whole setup.
    """
    conf = {
        **required_conf(),
        **PATIENT_CONF,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.extensions": EXTENSIONS,
        "spark.sql.shuffle.partitions": str(shuffle_partitions or _machine_cores()),
        "spark.ui.enabled": "false",
        "spark.driver.memory": os.environ.get("FLOODMARK_DRIVER_MEMORY", "2g"),
        **STATUS_RETENTION,
    }
    on_classpath = spark_jars(kafka)
    return {**conf, "spark.jars": on_classpath} if on_classpath else conf


def _machine_cores() -> int:
    """The cores this process may run on (what the JVM's ``local[*]`` counts, affinity included)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 2
