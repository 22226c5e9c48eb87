"""Deferred partials: what batches add to windows the watermark has not reached, kept apart from the table.

A stage with many windows the watermark has not reached (hour-long windows over millions of keys) would read and
rewrite every one of them in every batch if they all lived in the operator's window table. For specs whose
windows only accumulate until the watermark reaches them (:attr:`~floodmark.core.spec.WindowSpec.defers_partials`)
the columnar policy keeps each batch's partial aggregates as a *segment* instead, once its table is large
(:data:`DEFER_ABOVE`): one row per (key, window) with
its count, accumulators and the processing time its records arrived at, written once and stored on its own (a
runtime stores each segment as one value: :meth:`PartialSegments.take_added`). A segment is read again only when

* the watermark reaches its earliest window's max timestamp: its rows of the windows the watermark reached are
  merged into the table before those windows fire, and the rest is split by window end into at most
  :data:`FANOUT` *pieces* in its place (every segment that holds a window the watermark reached is read then: its
  earliest window is reached too; the rows merged at once are first reduced into one segment, vectorised). A
  piece holds whole window ends, the earliest piece the earliest ends; it is read again when the watermark reaches
  its own first end, so a sliding window's partials are read and written about twice, not once per window end
  the watermark passes;
* a record arrives as a record for a window the watermark has not reached (every segment is merged first);
* more than :data:`FANOUT` segments of one level follow each other: they merge into one segment of the next level,
  so a batch's partials are rewritten about ``log_FANOUT(batches)`` times while their windows stay open, and a
  (key, window) that several batches touched becomes one row. Pieces (level :data:`PIECE`) never merge so: they
  stop a run of segments of one level, and their windows are due before the segment's whole span has passed.

Segments merge into the table in arrival order, as the operator would have merged each batch's partials when it
arrived: a window's accumulators see the same sequence of partials and its pane is the same.

What is known without reading a segment (:class:`SegmentInfo`): its rows, its earliest window end and its oldest
arrival: enough for the operator's gauges (output hold, next deadline, oldest pending record). Its rows count a
(key, window) once per segment that holds it, so ``window_count`` is an upper bound while segments are apart.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from floodmark.core.combine import Partials, group_order, reduce_partials
from floodmark.core.spec import WindowSpec
from floodmark.core.windows import window_reached

FANOUT = 8
"""Consecutive segments of one level that stay apart; one more and they merge into one of the next level."""
PIECE = -1
"""The level of a piece of a segment split when the watermark reached its earliest window (never compacted)."""
DEFER_ABOVE = 50_000
"""Partials are merged into the table at once while there is no segment and the table would hold at most this
many windows with them: a small table costs little to store every batch, and a segment per batch would cost a
write, a read and a delete."""


@dataclass(frozen=True)
class SegmentInfo:
    """What the operator knows of a segment without reading it.

    :ivar segment_id: unique within the operator. :ivar level: 0 for a batch's partials, ``n + 1`` for a merge of
        segments of level ``n``, :data:`PIECE` for a piece of a split segment. :ivar rows: its (key, window) rows.
    :ivar first_end: the earliest end (ms, exclusive) of its windows. :ivar oldest_arrival: the earliest processing
        time (ms) at which its records arrived.
    """

    segment_id: int
    level: int
    rows: int
    first_end: int
    oldest_arrival: int


@dataclass(frozen=True)
class Segment:
    """Partial aggregates of several batches, one row per (key, window), with when each row's first record
    arrived (``arrivals``, processing time in ms)."""

    partials: Partials
    arrivals: np.ndarray

    def subset(self, rows: np.ndarray) -> Segment:
        """The segment of the selected rows (a boolean mask)."""
        p = self.partials
        partials = Partials(
            p.keys[rows],
            p.starts[rows],
            p.ends[rows],
            p.counts[rows],
            p.hold[rows],
            {name: column[rows] for name, column in p.accumulators.items()},
        )
        return Segment(partials, self.arrivals[rows])

    def to_bytes(self) -> bytes:
        p = self.partials
        data = {
            "keys": list(p.keys),
            "starts": p.starts,
            "ends": p.ends,
            "counts": p.counts,
            "hold": p.hold,
            "accumulators": p.accumulators,
            "arrivals": self.arrivals,
        }
        return pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_bytes(cls, blob: bytes) -> Segment:
        data = pickle.loads(blob)
        keys = np.empty(len(data["keys"]), dtype=object)
        keys[:] = data["keys"]
        partials = Partials(keys, data["starts"], data["ends"], data["counts"], data["hold"], data["accumulators"])
        return cls(partials, data["arrivals"])


SegmentLoader = Callable[[int], bytes]
"""Reads a stored segment's bytes (:meth:`Segment.to_bytes`) by its id."""


class PartialSegments:
    """The segments of one operator, oldest first (see the module docstring).

    :arg load: reads a segment that is not in memory (restored from a runtime's storage); ``None`` when every
        segment is in memory.
    """

    def __init__(self, spec: WindowSpec, load: SegmentLoader | None = None) -> None:
        self.spec = spec
        self.load = load
        self.infos: list[SegmentInfo] = []
        self.next_id = 0
        self.in_memory: dict[int, Segment] = {}
        self.added: set[int] = set()
        """Segments made since the last :meth:`take_added` (not stored yet)."""
        self.dropped: set[int] = set()
        """Stored segments merged since the last :meth:`take_added` (to delete)."""

    def __len__(self) -> int:
        return len(self.infos)

    def defers(self, table_windows: int, rows: int) -> bool:
        """Whether ``rows`` new partials become a segment, with ``table_windows`` windows in the table (see
        :data:`DEFER_ABOVE`). Once a segment exists, every batch's partials do until the segments are merged: a
        window's partials then reach the table in arrival order."""
        return bool(self.infos) or table_windows + rows > DEFER_ABOVE

    # ------------------------------------------------------------- changes
    def add(self, partials: Partials, processing_time: int) -> None:
        """Keep one batch's reduced partials (one row per (key, window)) as a new level-0 segment."""
        arrivals = np.full(len(partials), processing_time, dtype=np.int64)
        self._append(Segment(partials, arrivals), level=0)
        self._compact()

    def take(self, watermark: int | None = None) -> list[Segment]:
        """Remove and return, oldest first, the rows of the windows ``watermark`` has reached, as segments (every
        segment when ``watermark`` is None).

        Only segments whose earliest window ``watermark`` has reached are read; the rows of such a segment that
        it has not reached stay in its place as at most :data:`FANOUT` pieces of whole window ends (:meth:`split`:
        a sliding window's partials are not all due at once).
        """
        taken: list[Segment] = []
        kept: list[SegmentInfo] = []
        for info in self.infos:
            if watermark is not None and not bool(window_reached(np.int64(info.first_end), watermark)):
                kept.append(info)
                continue
            segment = self._read(info.segment_id)
            self._forget(info.segment_id)
            reached = None if watermark is None else window_reached(segment.partials.ends, watermark)
            if reached is None or reached.all():
                taken.append(segment)
            else:
                taken.append(segment.subset(reached))
                kept.extend(self._new(piece, PIECE) for piece in self.split(segment.subset(~reached)))
        self.infos = kept
        return taken

    @staticmethod
    def split(segment: Segment) -> list[Segment]:
        """``segment``'s rows in ``k = min(n, FANOUT)`` pieces by window end, earliest ends first, each row in its
        order: of its ``n`` distinct ends (ascending, indexed from 0), piece ``g`` holds those of index
        ``floor(g * n / k)`` to ``floor((g + 1) * n / k)``, exclusive (at least one each)."""
        ends = segment.partials.ends
        distinct = np.unique(ends)
        n = len(distinct)
        k = min(n, FANOUT)
        if k <= 1:
            return [segment]
        firsts = distinct[np.arange(1, k) * n // k]  # each later piece's first end
        piece = np.searchsorted(firsts, ends, side="right")
        return [segment.subset(piece == g) for g in range(k)]

    def take_added(self) -> tuple[dict[int, bytes], set[int]]:
        """The segments to store (id -> bytes) and the stored ones to delete since the last call."""
        added = {i: self.in_memory[i].to_bytes() for i in sorted(self.added)}
        dropped = self.dropped
        self.added, self.dropped = set(), set()
        return added, dropped

    # ------------------------------------------------------------- gauges
    @property
    def rows(self) -> int:
        return sum(info.rows for info in self.infos)

    def first_end(self) -> int | None:
        return min((info.first_end for info in self.infos), default=None)

    def oldest_arrival(self) -> int | None:
        return min((info.oldest_arrival for info in self.infos), default=None)

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> dict:
        """The segments' infos and ids (what a runtime stores beside the table; bodies are stored apart)."""
        return {"infos": [asdict(info) for info in self.infos], "next_id": self.next_id}

    def snapshot_all(self) -> dict:
        """:meth:`snapshot` with every segment's bytes (a self-contained snapshot)."""
        bodies = {info.segment_id: self._read(info.segment_id).to_bytes() for info in self.infos}
        return {**self.snapshot(), "bodies": bodies}

    def restore(self, data: dict) -> None:
        self.infos = [SegmentInfo(**info) for info in data["infos"]]
        self.next_id = data["next_id"]
        self.in_memory = {int(i): Segment.from_bytes(b) for i, b in data.get("bodies", {}).items()}
        if self.in_memory:
            self.added = set(self.in_memory)  # a runtime that stores segments apart has not stored these yet

    # ------------------------------------------------------------ inside
    def _new(self, segment: Segment, level: int) -> SegmentInfo:
        """Register ``segment`` under a new id (to be stored); the caller places its info."""
        p = segment.partials
        info = SegmentInfo(self.next_id, level, len(p), int(p.ends.min()), int(segment.arrivals.min()))
        self.next_id += 1
        self.in_memory[info.segment_id] = segment
        self.added.add(info.segment_id)
        return info

    def _append(self, segment: Segment, level: int) -> None:
        self.infos.append(self._new(segment, level))

    def _compact(self) -> None:
        """Merge the newest segments while more than :data:`FANOUT` of one level other than :data:`PIECE` follow
        each other at the end (between two pieces, levels never rise towards the end: merged segments are older
        than the level-0 ones after them)."""
        while True:
            level = self.infos[-1].level
            if level == PIECE:
                return
            run = 0
            while run < len(self.infos) and self.infos[-1 - run].level == level:
                run += 1
            if run <= FANOUT:
                return
            merging, self.infos = self.infos[-run:], self.infos[:-run]
            segments = [self._read(info.segment_id) for info in merging]
            for info in merging:
                self._forget(info.segment_id)
            self._append(self.merge(segments), level + 1)

    def merge(self, segments: list[Segment]) -> Segment:
        """One segment of ``segments`` (oldest first): rows of one (key, window) reduced in that order."""
        if len(segments) == 1:
            return segments[0]
        parts = [s.partials for s in segments]
        names = list(parts[0].accumulators)
        keys = np.empty(sum(len(p) for p in parts), dtype=object)
        keys[:] = [k for p in parts for k in p.keys]
        joined = Partials(
            keys,
            np.concatenate([p.starts for p in parts]),
            np.concatenate([p.ends for p in parts]),
            np.concatenate([p.counts for p in parts]),
            np.concatenate([p.hold for p in parts]),
            {n: np.concatenate([p.accumulators[n] for p in parts]) for n in names},
        )
        arrivals = np.concatenate([s.arrivals for s in segments])
        order, first, _ = group_order(joined.keys, self.spec.window.window_ids(joined.starts, joined.ends))
        if first.all():
            return Segment(joined, arrivals)
        reduced = reduce_partials(self.spec, joined, (order, first))
        return Segment(reduced, np.minimum.reduceat(arrivals[order], np.flatnonzero(first)))

    def _read(self, segment_id: int) -> Segment:
        segment = self.in_memory.get(segment_id)
        if segment is None:
            if self.load is None:
                raise LookupError(f"segment {segment_id} is neither in memory nor stored")
            segment = Segment.from_bytes(self.load(segment_id))
        return segment

    def _forget(self, segment_id: int) -> None:
        self.in_memory.pop(segment_id, None)
        if segment_id in self.added:
            self.added.discard(segment_id)  # never stored
        else:
            self.dropped.add(segment_id)
