"""What floodmark reads from Spark's own checkpoint of a query (``<checkpoint>/spark``): the one place.

Spark writes ``metadata`` when a query first starts on the checkpoint (``{"id": "<query id>"}``: the id every run
of the query keeps), ``offsets/N`` when it plans batch N (line 1 the log's version, line 2 the batch's metadata with
``batchTimestampMs``, then one line per source with the offsets the batch reads up to) and ``commits/N`` once
batch N's sink returned. On a restart it re-runs the batch after the last commit, with the offsets it logged.
"""

from __future__ import annotations

import json

from floodmark.driver.checkpoint_files import CheckpointFiles, join


class SparkCheckpoint:
    """Spark's checkpoint directory of a query, on ``files`` (local or any Hadoop file system)."""

    def __init__(self, directory: str, files: CheckpointFiles) -> None:
        self.directory = directory
        self.files = files
        self._query_id: str | None = None

    def query_id(self) -> str:
        """Spark's id of the query (``StreamingQuery.id``, the same in every run from this checkpoint; read once),
        or "" before Spark wrote it (the query has not started). Read from the checkpoint, not from the stream
        thread's properties, so that a Spark Connect server's ``foreachBatch`` process has it too."""
        if self._query_id is None:
            text = self.files.read_text(join(self.directory, "metadata"))
            if text is None:
                return ""
            self._query_id = str(json.loads(text.splitlines()[0])["id"])
        return self._query_id

    def _batches(self, log: str) -> list[int]:
        return sorted(int(name) for name in self.files.list_names(join(self.directory, log)) if name.isdigit())

    def first_batch_id(self) -> int:
        """The micro-batch a query started on this checkpoint runs first: the one after the last commit (a new
        query starts at batch 0)."""
        committed = self._batches("commits")
        return committed[-1] + 1 if committed else 0

    def planned_at(self, batch_id: int) -> int | None:
        """When Spark planned batch ``batch_id`` (ms, ``batchTimestampMs`` of its offsets), or None."""
        text = self.files.read_text(join(self.directory, "offsets", str(batch_id)))
        lines = text.splitlines() if text else []
        if len(lines) < 2:
            return None
        return int(json.loads(lines[1]).get("batchTimestampMs", 0)) or None

    def offsets(self, batch_id: int) -> list[object]:
        """The offsets batch ``batch_id`` reads up to, one per source in the log's order (parsed JSON; None for a
        line that is not JSON), or [] when the batch is not in the log."""
        text = self.files.read_text(join(self.directory, "offsets", str(batch_id)))
        return [_parsed(line) for line in text.splitlines()[2:]] if text else []

    def planned_no_new_input(self, moving_sources: int = 1) -> bool:
        """Whether the newest batch planned no new input (:meth:`reads_no_new_input`). True when there are fewer
        than two batches.

        Called from batch N's sink, when ``offsets/N`` is the newest entry of the log.
        """
        batches = self._batches("offsets")
        if len(batches) < 2:
            return True
        return self._same_input(batches[-1], batches[-2], moving_sources, missing=True)

    def reads_no_new_input(self, batch_id: int, moving_sources: int = 1) -> bool:
        """Whether Spark planned batch ``batch_id`` to read no new input: its offsets and the previous batch's
        differ in at most ``moving_sources`` sources, each a tick source (offset ``{"seq": n}``, floodmark's
        Python and JVM tick sources alike), whatever moved in the others. An empty file in the middle of a file
        input still moves that source. False when either batch is not in the log."""
        return batch_id > 0 and self._same_input(batch_id, batch_id - 1, moving_sources, missing=False)

    def _same_input(self, batch: int, previous: int, moving_sources: int, missing: bool) -> bool:
        texts = [self.files.read_text(join(self.directory, "offsets", str(b))) for b in (batch, previous)]
        if texts[0] is None or texts[1] is None:
            return missing
        changed = [a for a, b in zip(texts[0].splitlines()[2:], texts[1].splitlines()[2:], strict=False) if a != b]
        return len(changed) <= moving_sources and all(_is_tick_offset(line) for line in changed)


def _is_tick_offset(line: str) -> bool:
    """Whether an offset log line is a tick source's (``{"seq": n}``)."""
    try:
        offset = json.loads(line)
    except ValueError:
        return False
    return isinstance(offset, dict) and set(offset) == {"seq"}


def _parsed(line: str) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None
