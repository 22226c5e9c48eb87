"""The control entry of the micro-batch a task runs in (executor side).

Tasks of micro-batch N read control entry N. Spark sets the batch id as the
local property ``streaming.sql.batchId`` on every job of a micro-batch, so the
map-side combiner and the stateful processor find their entry without it
travelling in the data. Entry 0 is written before the query starts and the sink
of batch N writes entry N+1 before batch N+1 can start, so the entry is always
there; entries are immutable, so a batch replayed after a crash decides exactly
as its first attempt did.
"""

from __future__ import annotations

from pyspark import TaskContext

from floodmark.spark.control_log import ControlEntry, ControlLog

BATCH_ID_PROPERTY = "streaming.sql.batchId"


def current_batch_id() -> int:
    """The micro-batch id of the running task (raises outside a streaming micro-batch)."""
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if batch_id is None:
        raise RuntimeError("floodmark's operators run only inside a streaming micro-batch (no batch id)")
    return int(batch_id)


class CurrentBatchEntry:
    """Callable returning the running micro-batch's control entry, read once per batch and task.

    :arg control_dir: the control log directory (readable from the executors).
    """

    def __init__(self, control_dir: str) -> None:
        self.control_dir = control_dir
        self._entry: ControlEntry | None = None

    def __call__(self) -> ControlEntry:
        batch_id = current_batch_id()
        if self._entry is None or self._entry.seq != batch_id:
            entry = ControlLog(self.control_dir).read(batch_id)
            if entry is None:
                raise RuntimeError(f"floodmark control entry {batch_id} is missing from {self.control_dir}")
            self._entry = entry
        return self._entry

    def __getstate__(self) -> dict:
        return {"control_dir": self.control_dir, "_entry": None}
