"""Where a bucket's operator lives between batches: Spark's state store, in the checkpoint's state format.

A checkpoint's state format is fixed when the checkpoint is created
(:func:`floodmark.spark.driver.checkpoint_records.check_state_format`;
the formats: :mod:`floodmark.spark.stateful.state_codec`), because it decides which Spark operator hosts the first
level:

* **Format 2, parts** (:class:`PartsState`, new checkpoints): every level on ``transformWithStateInPandas``. A
  bucket's operator is stored as a *head* (its time, its window table, what it knows of its segments) and one
  value per segment of deferred partials (:mod:`floodmark.core.segments`). A ``ValueState`` holds the manifest
  (the parts and their chunk counts) and the head's first chunk; a ``MapState`` keyed by ``(part, id, chunk)``
  holds the rest. A batch reads the value state and the segments its operator asks for, writes its new segments
  and the value state, and deletes the merged segments (one state-server round trip each): its cost follows what
  it touches, not every open window. Each part is compressed and cut into
  chunks of at most :data:`floodmark.spark.plan.STATE_VALUE_BYTES`, so no value grows towards the JVM's 1 GiB
  limit however large a bucket's state gets.
* **Formats 0 and 1, one value** (:class:`BlobState`, checkpoints created before format 2): the whole snapshot in
  one value (level 1 on ``applyInPandasWithState``, later levels a ``ValueState``), read and rewritten whole in
  every batch that runs the bucket.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from floodmark.core.spec import WindowSpec
from floodmark.core.window import WindowOperator, restore_operator
from floodmark.spark.stateful import state_codec

HEAD, SEGMENT = "head", "segment"


class BucketState(Protocol):
    """One bucket's stored operator, as a batch sees it."""

    def exists(self) -> bool:
        """Whether anything is stored for the bucket."""
        ...

    def restore(self, spec: WindowSpec) -> WindowOperator:
        """The stored operator, or a new one when nothing is stored."""
        ...

    def save(self, operator: WindowOperator) -> None:
        """Store ``operator`` (after the batch) in place of what was stored."""
        ...

    def load(self) -> bytes | None:
        """The stored snapshot of an operator kept in one part (a join's), None when nothing is stored."""
        ...

    def store(self, snapshot: bytes) -> None:
        """Store ``snapshot`` (an operator kept in one part) in place of what was stored."""
        ...


class BlobState:
    """Formats 0 and 1: the snapshot in one value; the caller writes :attr:`new_value` back when set."""

    def __init__(self, stored: bytes | None) -> None:
        self.stored = stored
        self.new_value: bytes | None = None

    def exists(self) -> bool:
        return self.stored is not None

    def restore(self, spec: WindowSpec) -> WindowOperator:
        return WindowOperator(spec) if self.stored is None else restore_operator(spec, state_codec.decode(self.stored))

    def save(self, operator: WindowOperator) -> None:
        if operator.gauges().open_state or self.stored is not None:
            self.store(operator.snapshot())

    def load(self) -> bytes | None:
        return None if self.stored is None else state_codec.decode(self.stored)

    def store(self, snapshot: bytes) -> None:
        self.new_value = state_codec.encode(snapshot, state_format=1)


class PartsState:
    """Format 2 (see the module docstring) over a ``transformWithStateInPandas`` handle's states of the current
    grouping key.

    :arg head: a ``ValueState`` of ``level_processor.HEAD_SCHEMA``. :arg parts: a ``MapState`` of
        ``level_processor.PART_KEY_SCHEMA`` -> ``level_processor.BLOB_SCHEMA``. :arg value_bytes: the largest chunk
        stored.
    """

    def __init__(self, head: Any, parts: Any, value_bytes: int) -> None:
        self.head_state = head
        self.parts = parts
        self.value_bytes = value_bytes
        self._stored: tuple[dict[str, Any], bytes] | None = None
        self._read_head = False

    def exists(self) -> bool:
        return self._head() is not None

    def restore(self, spec: WindowSpec) -> WindowOperator:
        stored = self._head()
        if stored is None:
            return WindowOperator(spec, deferred=True)
        manifest, first = stored
        head = self._read(HEAD, 0, manifest["head"], first)
        segments = manifest["segments"]
        return restore_operator(spec, head, lambda i: self._read(SEGMENT, i, segments[str(i)]))

    def save(self, operator: WindowOperator) -> None:
        stored = self._head()
        if stored is None and not operator.gauges().open_state:
            return  # a bucket that never had a window stores nothing
        manifest = stored[0] if stored is not None else {"head": 1, "segments": {}}
        head, added, dropped = operator.snapshot_parts()
        for segment_id in sorted(dropped):
            self._delete(SEGMENT, segment_id, 0, manifest["segments"].pop(str(segment_id)))
        for segment_id, body in added.items():
            chunks = self._chunks(body)
            self._put(SEGMENT, segment_id, chunks)
            manifest["segments"][str(segment_id)] = len(chunks)
        self._store_head(manifest, head)

    def load(self) -> bytes | None:
        stored = self._head()
        if stored is None:
            return None
        manifest, first = stored
        return self._read(HEAD, 0, manifest["head"], first)

    def store(self, snapshot: bytes) -> None:
        stored = self._head()
        self._store_head(stored[0] if stored is not None else {"head": 1, "segments": {}}, snapshot)

    # ------------------------------------------------------------ inside
    def _store_head(self, manifest: dict[str, Any], head: bytes) -> None:
        """``head`` as the head part, the value state updated with ``manifest`` (its segments already written)."""
        chunks = self._chunks(head)
        self._put(HEAD, 0, chunks, first=1)
        self._delete(HEAD, 0, max(1, len(chunks)), manifest["head"])  # a head that shrank leaves no chunk behind
        manifest["head"] = len(chunks)
        self.head_state.update((json.dumps(manifest), chunks[0]))
        self._stored = (manifest, chunks[0])

    def _head(self) -> tuple[dict[str, Any], bytes] | None:
        if not self._read_head:
            value = self.head_state.get()
            self._stored = None if value is None else (json.loads(value[0]), value[1])
            self._read_head = True
        return self._stored

    def _read(self, part: str, part_id: int, chunks: int, first: bytes | None = None) -> bytes:
        pieces = [] if first is None else [first]
        for chunk in range(len(pieces), chunks):
            value = self.parts.getValue((part, part_id, chunk))
            if value is None:
                raise state_codec.StateFormatError(f"a bucket's {part} {part_id} lacks chunk {chunk} of {chunks}")
            pieces.append(value[0])
        return state_codec.decode(b"".join(pieces))

    def _chunks(self, snapshot: bytes) -> list[bytes]:
        """``snapshot`` compressed, in chunks of at most ``value_bytes``."""
        blob, step = state_codec.encode(snapshot), self.value_bytes
        return [blob[i : i + step] for i in range(0, len(blob), step)]

    def _put(self, part: str, part_id: int, chunks: list[bytes], first: int = 0) -> None:
        for chunk in range(first, len(chunks)):
            self.parts.updateValue((part, part_id, chunk), (chunks[chunk],))

    def _delete(self, part: str, part_id: int, first: int, end: int) -> None:
        for chunk in range(first, end):
            self.parts.removeKey((part, part_id, chunk))
