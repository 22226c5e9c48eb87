"""The control log: what the driver decided for each micro-batch, as files in the checkpoint.

The driver-side coordinator runs after batch N (in the ``foreachBatch`` sink)
and writes entry N+1: the watermark and processing time batch N+1 must use,
plus the coordinator's snapshot. The tasks of batch N+1 on the executors (the
map-side combiner and the stateful processor) receive entry N+1 through the
batch's job properties (:mod:`floodmark.spark.batch_entry`); the files are the
driver's record, read back after a restart and by ``floodmark explain``.

Entries are written atomically and never overwritten: when Spark replays batch N
after a crash, the sink computes entry N+1 again and the first write wins, so
the replay sees exactly the values of the original run. This plus Spark's
offset log makes the watermark sequence exactly-once across restarts.

A bounded run can find its input exhausted as batch N begins (Spark planned it
to read nothing new): batch N then runs as the end-of-input flush, written as a
marker beside entry N (``<seq>.end``, also first write wins) before any task of
the batch reads the entry, so a replay flushes in the same batch
(:meth:`~floodmark.driver.controller.Controller.begin_batch`). A running query reads
a marker only in its first batch (the one a restart replays) and ``explain`` for
every entry it reads; markers older than the kept entries
are deleted when a query starts.

The directory may be local or on any Hadoop file system
(:mod:`floodmark.driver.checkpoint_files`); with the default local files this
module needs no Spark and is unit-tested on its own. The entries themselves are
:class:`~floodmark.protocol.control.ControlEntry` (importable from here too).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from typing import Any

from floodmark.driver.checkpoint_files import CheckpointFiles, LocalFiles, join
from floodmark.protocol.control import ControlEntry

_ENTRY = re.compile(r"^(\d{12})\.json$")

KEPT_TOTALS = 3
"""The run's reconciliation is kept for this many latest batches (a restart resumes from its last committed one)."""


class ControlLog:
    """A directory of ``<seq>.json`` control entries.

    :arg directory: a local path, or a URI when ``files`` is a
        :class:`~floodmark.spark.hadoop_files.HadoopFiles`.
    """

    def __init__(self, directory: str | os.PathLike[str], files: CheckpointFiles | None = None) -> None:
        self.directory = os.fspath(directory)
        self.files = files or LocalFiles()

    def path(self, seq: int) -> str:
        return join(self.directory, f"{seq:012d}.json")

    def write(self, entry: ControlEntry) -> bool:
        """Write ``entry`` unless one with its ``seq`` exists; True if written."""
        return self.files.write_once(self.path(entry.seq), json.dumps(asdict(entry)))

    def mark_end_of_input(self, seq: int) -> None:
        """Record that batch ``seq`` runs as the end of input (kept if already recorded)."""
        self.files.write_once(self._end_path(seq), "{}")

    def ends_input(self, seq: int) -> bool:
        """Whether batch ``seq`` was recorded to run as the end of input (:meth:`mark_end_of_input`)."""
        return self.files.read_text(self._end_path(seq)) is not None

    def _end_path(self, seq: int) -> str:
        return join(self.directory, f"{seq:012d}.end")

    def read(self, seq: int) -> ControlEntry | None:
        text = self.files.read_text(self.path(seq))
        return None if text is None else ControlEntry.of(json.loads(text))

    def write_totals(self, batch_id: int, totals: dict[str, Any]) -> None:
        """Keep the run's reconciliation through batch ``batch_id`` (replacing what an earlier attempt of that batch
        kept), and drop the one :data:`KEPT_TOTALS` batches older."""
        path = self._totals_path(batch_id)
        self.files.delete(path)
        self.files.write_once(path, json.dumps(totals))
        if batch_id - KEPT_TOTALS >= 0:
            self.files.delete(self._totals_path(batch_id - KEPT_TOTALS))

    def read_totals(self, batch_id: int) -> dict[str, Any] | None:
        """The run's reconciliation through batch ``batch_id`` (None: not kept)."""
        text = self.files.read_text(self._totals_path(batch_id)) if batch_id >= 0 else None
        return None if text is None else json.loads(text)

    def _totals_path(self, batch_id: int) -> str:
        return join(self.directory, f"{batch_id:012d}.totals")

    def seqs(self) -> list[int]:
        """The sequence numbers present, ascending."""
        return sorted(int(m.group(1)) for name in self.files.list_names(self.directory) if (m := _ENTRY.match(name)))

    def latest_seq(self) -> int | None:
        seqs = self.seqs()
        return seqs[-1] if seqs else None

    def prune_one(self, seq: int) -> None:
        """Delete entry ``seq`` if present: one call per batch instead of a listing (slow on object stores)."""
        if seq >= 0:
            self.files.delete(self.path(seq))

    def prune_end_markers(self, below: int) -> None:
        """Delete the end-of-input records of batches below ``below`` (one listing: called once per query start,
        since a record is written once per bounded run and a delete per batch would cost every batch a call)."""
        for name in self.files.list_names(self.directory):
            if name.endswith(".end") and name[:-4].isdigit() and int(name[:-4]) < below:
                self.files.delete(join(self.directory, name))
