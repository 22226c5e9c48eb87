"""How the tasks of micro-batch N get control entry N: a Spark job property set by the driver.

Spark copies the local properties of the thread that submits a job into every
task (``TaskContext.getLocalProperty``), and a streaming query submits all of a
micro-batch's jobs from its own thread; the ``foreachBatch`` sink of batch N
runs on that thread too. So the driver publishes entry N+1 there at the end of
batch N (:func:`publish`), and before ``start()`` on the caller's thread, which
the query's thread inherits, for the first batch it runs. The tasks read it
with :class:`CurrentBatchEntry` and check it against the batch id Spark sets
(``streaming.sql.batchId``): a mismatch is an error, never a silent use of the
wrong watermark. No file system is shared between driver and executors, so a
checkpoint on HDFS or an object store works on a cluster.

Entries are immutable and written to the control log before they are published,
so a batch replayed after a crash gets exactly the entry of its first attempt.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from py4j.clientserver import ClientServer
from pyspark import SparkContext, TaskContext

from floodmark.protocol.control import ControlEntry

BATCH_ID_PROPERTY = "streaming.sql.batchId"
ENTRY_PROPERTY = "floodmark.control.entry"


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
    """Why control entries cannot travel as job properties in ``session`` (None: they can).

    They need a classic session (local properties live in the driver's SparkContext; Spark Connect has none)
    whose Python threads are pinned to JVM threads (py4j's ClientServer, PySpark's default): then the
    ``foreachBatch`` callback's calls run on the query's own thread.
    """
    context = getattr(session, "_sc", None)
    if context is None:
        return "floodmark needs a classic SparkSession (Spark Connect sessions have no job properties)"
    if not isinstance(context._gateway, ClientServer):
        return (
            "floodmark needs PySpark's pinned-thread mode (the default): unset PYSPARK_PIN_THREAD=false, so that "
            "the sink's calls run on the streaming query's thread"
        )
    return None


def publish(context: SparkContext, entry: ControlEntry | None) -> None:
    """Make ``entry`` the one that jobs submitted from the calling thread carry (None removes it)."""
    context.setLocalProperty(ENTRY_PROPERTY, None if entry is None else encode(entry))  # type: ignore[arg-type]


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
