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

Over Spark Connect the tasks do not see ``streaming.sql.batchId`` (measured on 4.3: the sink's jobs run on the
server's Connect thread, which does not inherit the stream thread's local properties; no other property names
the batch). There the entry is taken as the batch's own because of where it comes from: the sink publishes it in
the batch's session right before its own actions compute the batch, and the controller refuses to hand out an
entry whose number is not the batch id ``foreachBatch`` gave it.

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
from floodmark.spark.connect import is_connect

BATCH_ID_PROPERTY = "streaming.sql.batchId"
ENTRY_PROPERTY = "spark.floodmark.control.entry"
"""The SQL conf (and so the job property) that carries the entry; ``spark.`` makes Spark propagate it."""


def current_batch_id() -> int | None:
    """The micro-batch id Spark gave the running task, None when it gave none (a Spark Connect session's
    ``foreachBatch`` jobs, or a task outside a streaming micro-batch: then the entry is all there is)."""
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    return None if batch_id is None else int(batch_id)


def encode(entry: ControlEntry) -> str:
    """What the tasks need of ``entry`` (not the coordinator's snapshot, which only the driver reads)."""
    fields = asdict(entry)
    fields.pop("coordinator")
    return json.dumps(fields, separators=(",", ":"))


def session_problem(session: Any) -> str | None:
    """Why floodmark cannot run its queries in ``session`` (None: it can).

    A Spark Connect session can (see the module). A classic one needs its Python threads pinned to JVM threads
    (py4j's ClientServer, PySpark's default): then the ``foreachBatch`` callback's calls run on the query's own
    thread.
    """
    if is_connect(session):
        return None
    if not isinstance(session._sc._gateway, ClientServer):
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
        self._text: str | None = None

    def __call__(self) -> ControlEntry:
        context = TaskContext.get()
        text = context.getLocalProperty(ENTRY_PROPERTY) if context is not None else None
        if self._entry is None or text != self._text:
            self._entry = entry_for_batch(text, current_batch_id())
            self._text = text
        return self._entry

    def __getstate__(self) -> dict:
        return {"_entry": None, "_text": None}


def entry_for_batch(text: str | None, batch_id: int | None) -> ControlEntry:
    """Parse the published entry and check it is batch ``batch_id``'s (None: Spark gave the task no batch id, see
    the module)."""
    if text is None:
        where = "this task" if batch_id is None else f"micro-batch {batch_id}"
        raise RuntimeError(
            f"{where} carries no floodmark control entry: floodmark's operators run only in the micro-batches of a "
            "query started with EventTimeAggregation.start() or Pipeline.start()"
        )
    entry = ControlEntry.of(json.loads(text))
    if batch_id is not None and entry.seq != batch_id:
        raise RuntimeError(f"micro-batch {batch_id} carries floodmark control entry {entry.seq}, not its own")
    return entry
