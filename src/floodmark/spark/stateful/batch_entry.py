"""How the tasks of micro-batch N get control entry N: a SQL conf of the query's session, which Spark hands to
every task of the batch as a job property.

Spark copies a session's SQL confs whose names start with ``spark.`` into the local properties of every job a
SQL execution of that session submits (``SQLExecution.withSQLConfPropagated``), and every job of micro-batch N
is a SQL execution of the ``foreachBatch`` frame's session (the query's own copy of the session it started from)
run by floodmark's sink. So the sink sets entry N there (:func:`publish`) before it computes the batch, and the
tasks read it with :class:`CurrentBatchEntry` as the local property of the same name, checking it against the
batch id Spark sets (``streaming.sql.batchId``): a mismatch is an error, never a silent use of the wrong
watermark. This holds on a classic session and over Spark Connect alike (where the sink runs in the server's
Python), and needs no file system shared by driver and executors, so a checkpoint on HDFS or an object store
works on a cluster.

Entries are immutable and written to the control log before they are published,
so a batch replayed after a crash gets exactly the entry of its first attempt.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from py4j.clientserver import ClientServer
from pyspark import TaskContext
from pyspark.sql import SparkSession

from floodmark.protocol.control import ControlEntry

BATCH_ID_PROPERTY = "streaming.sql.batchId"
ENTRY_PROPERTY = "spark.floodmark.control.entry"
"""The SQL conf (and so the job property) that carries the entry; ``spark.`` makes Spark propagate it."""


def current_batch_id() -> int:
    """The micro-batch id of the running task (raises outside a streaming micro-batch)."""
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if batch_id is None:
        raise RuntimeError("floodmark's operators run only inside a streaming micro-batch (no batch id)")
    return int(batch_id)


def encode(entry: ControlEntry) -> str:
    """What the tasks need of ``entry`` (not the coordinator's snapshot, which only the driver reads)."""
    fields = asdict(entry)
    fields.pop("coordinator")
    return json.dumps(fields, separators=(",", ":"))


def session_problem(session: Any) -> str | None:
    """Why floodmark cannot run its queries in ``session`` (None: it can).

    It needs a classic session (parts of floodmark reach its JVM code through py4j, which Spark Connect has not)
    whose Python threads are pinned to JVM threads (py4j's ClientServer, PySpark's default): then the
    ``foreachBatch`` callback's calls run on the query's own thread.
    """
    context = getattr(session, "_sc", None)
    if context is None:
        return (
            "floodmark needs a classic SparkSession: Spark Connect sessions are not supported yet (parts of "
            "floodmark reach its JVM code through py4j)"
        )
    if not isinstance(context._gateway, ClientServer):
        return (
            "floodmark needs PySpark's pinned-thread mode (the default): unset PYSPARK_PIN_THREAD=false, so that "
            "the sink's calls run on the streaming query's thread"
        )
    return None


def publish(session: SparkSession, entry: ControlEntry | None) -> None:
    """Make ``entry`` the one that the jobs of ``session``'s SQL executions carry from now on (None removes it)."""
    if entry is None:
        session.conf.unset(ENTRY_PROPERTY)
    else:
        session.conf.set(ENTRY_PROPERTY, encode(entry))


class CurrentBatchEntry:
    """Callable returning the running micro-batch's control entry, parsed once per batch and task."""

    def __init__(self) -> None:
        self._entry: ControlEntry | None = None

    def __call__(self) -> ControlEntry:
        batch_id = current_batch_id()
        if self._entry is None or self._entry.seq != batch_id:
            context = TaskContext.get()
            text = context.getLocalProperty(ENTRY_PROPERTY) if context is not None else None
            self._entry = entry_for_batch(text, batch_id)
        return self._entry

    def __getstate__(self) -> dict:
        return {"_entry": None}


def entry_for_batch(text: str | None, batch_id: int) -> ControlEntry:
    """Parse the published entry and check it is batch ``batch_id``'s."""
    if text is None:
        raise RuntimeError(
            f"micro-batch {batch_id} carries no floodmark control entry: the query must be started with "
            f"EventTimeAggregation.start() (classic PySpark, pinned threads: the default)"
        )
    entry = ControlEntry.of(json.loads(text))
    if entry.seq != batch_id:
        raise RuntimeError(f"micro-batch {batch_id} carries floodmark control entry {entry.seq}, not its own")
    return entry
