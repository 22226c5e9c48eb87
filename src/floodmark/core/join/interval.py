"""The interval join operator: two keyed inputs, one watermark, rows buffered until no partner can come.

The rules (which rows are late, when a buffered row goes, the pair's event time) are :class:`IntervalJoinSpec`'s;
this module keeps the buffers and says what each call emits. Per key and side, the buffered rows are kept in
event-time order; a row's cleanup time is its event time plus a constant per side, so the rows a watermark move
drops are at the front of their key's buffer, found through one heap per side.

The output watermark hold (:meth:`IntervalJoinOperator.output_hold`): a buffered row holds the stage's output
watermark at its event time (the stage keeps its output watermark one below a hold:
``StageWatermark.update_output``) while it can still be part of an output timed at its own event time:

* a row whose side gives the pair's time (``LEFT``, ``RIGHT``; both sides for ``EARLIEST``) while its last
  match time is ahead of the watermark (an on-time partner can still come); ``LATEST`` pairs are timed at the
  on-time partner or later, so pairs never hold;
* an unmatched row of a side the join keeps unmatched rows of, until it is emitted at its cleanup.

Rows that arrived behind the watermark (within allowed lateness) do not hold, as late records do not hold a
window (Beam's rule).
"""

from __future__ import annotations

import bisect
import heapq
import pickle
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from floodmark.core.assign import validate_timestamps
from floodmark.core.join.spec import IntervalJoinSpec, Side
from floodmark.core.keyed_operator import KeyedRows, OperatorGauges
from floodmark.core.records import BadRecord
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.values import object_array

SNAPSHOT_FORMAT = 1
"""The layout of :meth:`IntervalJoinOperator.snapshot`; a restore refuses another."""


@dataclass(frozen=True)
class JoinedRow:
    """One output row: a pair, or a row of an outer side that found no partner (the other side None).

    :ivar timestamp: the row's event time (the spec's :class:`~floodmark.core.join.spec.JoinTime` for a pair,
        the row's own for an unmatched one), in ms.
    """

    key: Any
    left: Any
    right: Any
    left_time: int | None
    right_time: int | None
    timestamp: int


@dataclass(frozen=True)
class LateRow:
    """A row that arrived too late to join (``watermark >= timestamp + allowed_lateness``): never joined.

    :ivar lateness: ``watermark - timestamp`` (ms) at arrival. :ivar horizon: ``timestamp + allowed_lateness``,
        the watermark from which the row was late.
    """

    side: Side
    key: Any
    value: Any
    timestamp: int
    watermark: int
    lateness: int
    horizon: int


@dataclass
class JoinEmitted:
    """What one call emitted: joined rows, late rows and bad rows, in the order they were decided."""

    joined: list[JoinedRow] = field(default_factory=list)
    late: list[LateRow] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)
    accepted: int = 0
    """Rows taken (not late, not bad): the reconciliation's count."""

    def extend(self, other: JoinEmitted) -> None:
        self.joined += other.joined
        self.late += other.late
        self.bad += other.bad
        self.accepted += other.accepted


@dataclass
class _Buffered:
    ts: int
    seq: int
    value: Any
    matched: bool
    holds: bool
    """Arrived ahead of the watermark: may hold the output watermark (late-but-allowed rows do not)."""


class IntervalJoinOperator:
    """One interval join's state: the buffered rows of both sides, per key, and the input watermark.

    :arg spec: the join. :arg watermark: the input watermark to start from (ms).
    """

    def __init__(self, spec: IntervalJoinSpec, watermark: int = MIN_TIMESTAMP) -> None:
        self.spec = spec
        self.watermark = watermark
        self._seq = 0
        self._buffers: dict[Side, dict[Hashable, list[_Buffered]]] = {Side.LEFT: {}, Side.RIGHT: {}}
        self._cleanups: dict[Side, list[tuple[int, int, Hashable]]] = {Side.LEFT: [], Side.RIGHT: []}

    # ------------------------------------------------------------------ input
    def add(self, rows: KeyedRows) -> JoinEmitted:
        """Rows of ``rows.side`` in arrival order: each is late, or joins every buffered partner of its key (then
        waits for the partners still to come, unless the watermark is past its cleanup already)."""
        side = joined_side(rows)
        out = JoinEmitted()
        checked, bad, reasons = validate_timestamps(object_array(rows.timestamps))
        problems = iter(reasons)
        columns = (rows.keys, rows.timestamps, rows.values, checked.tolist(), bad.tolist())
        for key, raw, value, ts, is_bad in zip(*columns, strict=True):
            if is_bad:
                out.bad.append(BadRecord(key, value, raw, next(problems)))
                continue
            if self.spec.is_late(ts, self.watermark):
                horizon = ts + self.spec.allowed_lateness
                out.late.append(LateRow(side, key, value, ts, self.watermark, self.watermark - ts, horizon))
                continue
            row = _Buffered(ts, self._seq, value, False, ts > self.watermark)
            self._seq += 1
            out.accepted += 1
            self._probe(side, key, row, out)
            if self.spec.cleanup_time(side, ts) <= self.watermark:
                self._drop(side, key, row, out)  # every partner it can have was buffered already
                continue
            rows = self._buffers[side].setdefault(key, [])
            bisect.insort(rows, row, key=_order)
            heapq.heappush(self._cleanups[side], (self.spec.cleanup_time(side, ts), row.seq, key))
        return out

    def advance_processing_time(self, processing_time: int) -> JoinEmitted:
        """Nothing: an interval join is timed by event time only (the contract's move, emitting nothing)."""
        return JoinEmitted()

    def advance_watermark(self, watermark: int) -> JoinEmitted:
        """Move the input watermark up to ``watermark`` (a lower one is ignored) and drop the rows no partner can
        reach any more (emitting the unmatched rows of outer sides)."""
        out = JoinEmitted()
        if watermark <= self.watermark:
            return out
        self.watermark = watermark
        for side in (Side.LEFT, Side.RIGHT):
            cleanups, buffers = self._cleanups[side], self._buffers[side]
            while cleanups and cleanups[0][0] <= watermark:
                _, seq, key = heapq.heappop(cleanups)
                rows = buffers[key]
                row = rows.pop(0)
                assert row.seq == seq, "a side's rows leave in event-time order"
                if not rows:
                    del buffers[key]
                self._drop(side, key, row, out)
        return out

    # ------------------------------------------------------------------ gauges
    def gauges(self) -> OperatorGauges:
        """The hold (see the module docstring), the rows buffered on both sides as the open state, and the lowest
        watermark at which a buffered row leaves as the next firing; nothing waits on processing time."""
        holds = [
            row.ts
            for side, buffers in self._buffers.items()
            for rows in buffers.values()
            for row in rows
            if row.holds and self._holds(side, row)
        ]
        buffered = sum(len(rows) for buffers in self._buffers.values() for rows in buffers.values())
        next_cleanup = min((c[0][0] for c in self._cleanups.values() if c), default=None)
        return OperatorGauges(min(holds, default=None), None, buffered, next_cleanup, None)

    # ------------------------------------------------------------------ state
    def snapshot(self) -> bytes:
        """The operator's whole state, for :func:`restore_interval_join`."""
        state = {
            "format": SNAPSHOT_FORMAT,
            "watermark": self.watermark,
            "seq": self._seq,
            "buffers": {
                side.value: [
                    (key, [(r.ts, r.seq, r.value, r.matched, r.holds) for r in rows]) for key, rows in b.items()
                ]
                for side, b in self._buffers.items()
            },
        }
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    # ------------------------------------------------------------------ rules
    def _probe(self, side: Side, key: Hashable, row: _Buffered, out: JoinEmitted) -> None:
        other = self._buffers[Side.RIGHT if side is Side.LEFT else Side.LEFT].get(key)
        if not other:
            return
        low, high = self.spec.partners(side, row.ts)
        start = bisect.bisect_left(other, (low, -1), key=_order)
        for partner in other[start:]:
            if partner.ts > high:
                break
            partner.matched = row.matched = True
            left, right = (row, partner) if side is Side.LEFT else (partner, row)
            at = self.spec.output_time.of(left.ts, right.ts)
            out.joined.append(JoinedRow(key, left.value, right.value, left.ts, right.ts, at))

    def _drop(self, side: Side, key: Hashable, row: _Buffered, out: JoinEmitted) -> None:
        if row.matched or not self.spec.how.keeps_unmatched(side):
            return
        left, right = (row, None) if side is Side.LEFT else (None, row)
        out.joined.append(
            JoinedRow(
                key,
                None if left is None else left.value,
                None if right is None else right.value,
                None if left is None else left.ts,
                None if right is None else right.ts,
                row.ts,
            )
        )

    def _holds(self, side: Side, row: _Buffered) -> bool:
        if not row.matched and self.spec.how.keeps_unmatched(side):
            return True
        return self.spec.output_time.timed_by(side) and self.spec.last_match(side, row.ts) > self.watermark


def joined_side(rows: KeyedRows) -> Side:
    """The side ``rows`` are of.

    :raises ValueError: rows without a side (a join has two inputs).
    """
    if rows.side is None:
        raise ValueError("a join's rows say their side (KeyedRows(..., side=Side.LEFT))")
    return rows.side


def restore_interval_join(spec: IntervalJoinSpec, snapshot: bytes) -> IntervalJoinOperator:
    """The operator :meth:`IntervalJoinOperator.snapshot` saved, with ``spec`` (the same join)."""
    state = pickle.loads(snapshot)
    if state.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(
            f"an interval join snapshot of format {state.get('format')} (this floodmark reads {SNAPSHOT_FORMAT})"
        )
    operator = IntervalJoinOperator(spec, state["watermark"])
    operator._seq = state["seq"]
    for side_name, entries in state["buffers"].items():
        side = Side(side_name)
        for key, rows in entries:
            buffered = [_Buffered(*r) for r in rows]
            operator._buffers[side][key] = buffered
            for row in buffered:
                operator._cleanups[side].append((spec.cleanup_time(side, row.ts), row.seq, key))
        heapq.heapify(operator._cleanups[side])
    return operator


def _order(row: _Buffered) -> tuple[int, int]:
    return row.ts, row.seq
