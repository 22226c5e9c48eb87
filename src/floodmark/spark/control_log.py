"""The control log: what the driver decided for each micro-batch, as files.

The driver-side coordinator runs after batch N (in the ``foreachBatch`` sink)
and writes entry N+1: the watermark and processing time batch N+1 must use,
plus the coordinator's snapshot. The tasks of batch N+1 on the executors (the
map-side combiner and the stateful processor) read entry N+1 by their batch id
(:mod:`floodmark.spark.batch_entry`). Files are the only channel between the
driver's Python and the executors' Python workers (SPARK_FACTS.md).

Entries are written atomically (temp file + rename) and never overwritten:
when Spark replays batch N after a crash, the sink computes entry N+1 again
and the first write wins, so the replay sees exactly the values of the
original run. This plus Spark's offset log makes the watermark sequence
exactly-once across restarts.

Pure Python, no Spark import: it is unit-tested on its own.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_ENTRY = re.compile(r"^(\d{12})\.json$")


@dataclass(frozen=True)
class ControlEntry:
    """What one micro-batch is told.

    :ivar seq: the control offset (entry N is for the batch that reads offset N).
    :ivar watermark: the stage's input watermark for the batch (ms).
    :ivar processing_time: the batch's processing time (ms), fixed here so replays agree.
    :ivar end_of_input: the input is bounded and exhausted: the watermark is MAX.
    :ivar coordinator: the coordinator's snapshot after the previous batch.
    """

    seq: int
    watermark: int
    processing_time: int
    end_of_input: bool = False
    coordinator: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


class ControlLog:
    """A directory of ``<seq>.json`` control entries."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path(self, seq: int) -> Path:
        return self.directory / f"{seq:012d}.json"

    def write(self, entry: ControlEntry) -> bool:
        """Write ``entry`` unless one with its ``seq`` exists; True if written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.path(entry.seq)
        if target.exists():
            return False
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            json.dump(asdict(entry), handle)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, target)  # atomic and fails if the target exists: first write wins
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)
        return True

    def read(self, seq: int) -> ControlEntry | None:
        try:
            data = json.loads(self.path(seq).read_text())
        except FileNotFoundError:
            return None
        return ControlEntry(**data)

    def latest_seq(self) -> int | None:
        if not self.directory.exists():
            return None
        seqs = [int(m.group(1)) for name in os.listdir(self.directory) if (m := _ENTRY.match(name))]
        return max(seqs) if seqs else None

    def prune(self, keep_from: int) -> None:
        """Delete entries older than ``keep_from`` (already committed batches)."""
        if not self.directory.exists():
            return
        for name in os.listdir(self.directory):
            m = _ENTRY.match(name)
            if m and int(m.group(1)) < keep_from:
                (self.directory / name).unlink(missing_ok=True)
