"""The window join (Flink's ``DataStream.join(...).where(...).equalTo(...).window(...)``): both inputs assigned to the
same windows; per key and window, every pair of a left and a right row in it, emitted when the window fires.

One window operator (:class:`~floodmark.core.window.WindowOperator`, the general policy) holds both sides' rows
per key and window (a ``collect_list`` of ``(side, seq, event time, row)``, accumulating), so every window rule is
the window operator's and written once: assignment (tumbling, sliding, cumulate, sessions that merge), the default
trigger (an ON_TIME pane when the watermark passes the window's end, a LATE pane for every late row within allowed
lateness), lateness (a row whose window's horizon the watermark has reached goes to the late output, for that
window), holds (a pending window holds the output watermark at its end) and snapshots. This module only turns each
pane into pairs:

* an ON_TIME pane: every pair of a left and a right row of the window;
* a LATE pane: the pairs the late row makes, no pair twice (Flink's window join emits the whole window's pairs again
  at every late firing; here each pair of rows is emitted once, in the first pane that holds both). A session that
  merges keeps the pairs its parts already emitted.

A pair's event time is the window's max timestamp (``end - 1``, Flink's window join timestamp).
"""

from __future__ import annotations

import pickle
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from floodmark.core import aggregates, triggers
from floodmark.core.emitted import Emitted
from floodmark.core.join.interval import IntervalJoinOperator, LateRow, joined_side, restore_interval_join
from floodmark.core.join.spec import IntervalJoinSpec, Side
from floodmark.core.keyed_operator import KeyedRows, OperatorGauges
from floodmark.core.panes import AccumulationMode, Timing
from floodmark.core.records import BadRecord, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP, Duration, non_negative_millis
from floodmark.core.values import object_array
from floodmark.core.window import WindowOperator, restore_operator
from floodmark.core.windows import Window, WindowAssigner

SNAPSHOT_FORMAT = 1
"""The layout of :meth:`WindowJoinOperator.snapshot`; a restore refuses another."""

ROWS = "rows"
"""The window operator's aggregate: both sides' rows of a key and window."""


@dataclass(frozen=True)
class WindowJoinSpec:
    """A window join of two keyed inputs.

    :arg window: the windows both sides are assigned to (any assigner: tumbling, sliding, cumulate, sessions).
    :arg allowed_lateness: how long past its end (ms or timedelta) a window keeps its rows; a row that arrives then
        is joined with the window's rows of the other side in a LATE pane.
    """

    window: WindowAssigner
    allowed_lateness: int = 0

    def __init__(self, window: WindowAssigner, allowed_lateness: Duration = 0) -> None:
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "allowed_lateness", non_negative_millis(allowed_lateness, "the allowed lateness"))

    def window_spec(self) -> WindowSpec:
        """The window operator that holds both sides' rows (see the module docstring)."""
        return WindowSpec(
            self.window,
            {ROWS: aggregates.collect_list()},
            trigger=triggers.Default(),
            allowed_lateness=self.allowed_lateness,
            accumulation=AccumulationMode.ACCUMULATING,
        )


@dataclass(frozen=True)
class WindowJoinedRow:
    """A pair of a left and a right row of one key and window, emitted by the pane ``timing`` / ``pane_index``.

    :ivar timestamp: the pair's event time: the window's max timestamp (ms).
    """

    key: Any
    left: Any
    right: Any
    left_time: int
    right_time: int
    window: Window
    timestamp: int
    timing: Timing
    pane_index: int


@dataclass
class WindowJoinEmitted:
    """What one call emitted: pairs, late rows (one per row and window it was late for), bad rows, and how many
    (row, window) pairs it took."""

    joined: list[WindowJoinedRow] = field(default_factory=list)
    late: list[LateRow] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)
    accepted: int = 0
    """(row, window) pairs added to windows: the reconciliation's count (a row late for one of its windows only
    counts for the others)."""

    def extend(self, other: WindowJoinEmitted) -> None:
        self.joined += other.joined
        self.late += other.late
        self.bad += other.bad
        self.accepted += other.accepted


class WindowJoinOperator:
    """One window join's state: the window operator holding both sides' rows, and per window the last row already
    paired (see the module docstring).

    :arg spec: the join. :arg watermark: the input watermark to start from (ms).
    """

    def __init__(self, spec: WindowJoinSpec, watermark: int = MIN_TIMESTAMP) -> None:
        self.spec = spec
        self.windows = WindowOperator(spec.window_spec(), watermark, policy="general")
        self._seq = 0
        self._paired: dict[tuple[Hashable, int, int], int] = {}
        """Per (key, window start, end): the highest row sequence number its panes have paired."""

    def add(self, rows: KeyedRows) -> WindowJoinEmitted:
        """Rows of ``rows.side`` in arrival order: each goes into its windows (or the late output, for a window
        whose horizon the watermark has reached); the panes they fire (late rows within allowed lateness) pair
        them."""
        side = joined_side(rows)
        pairs = enumerate(zip(rows.timestamps, rows.values, strict=True))
        tagged = object_array((side, self._seq + i, ts, value) for i, (ts, value) in pairs)
        self._seq += len(tagged)
        batch = RecordBatch(object_array(rows.keys), object_array(rows.timestamps), {None: tagged}, payload=tagged)
        return self._pairs(self.windows.add(batch))

    def advance_processing_time(self, processing_time: int) -> WindowJoinEmitted:
        """Nothing: a window join fires on the watermark only (the contract's move, emitting nothing)."""
        return WindowJoinEmitted()

    def advance_watermark(self, watermark: int) -> WindowJoinEmitted:
        """Move the input watermark up to ``watermark``: the windows it passes fire their pairs."""
        return self._pairs(self.windows.advance_watermark(watermark))

    def gauges(self) -> OperatorGauges:
        """The window operator's: the hold (the lowest event time a pair still owed can carry), open windows of
        keys as the open state, the next window to fire; nothing waits on processing time."""
        windows = self.windows.gauges()
        return OperatorGauges(windows.hold, None, windows.open_state, windows.next_firing, None)

    def snapshot(self) -> bytes:
        """The whole state, for :func:`restore_window_join`."""
        state = {
            "format": SNAPSHOT_FORMAT,
            "windows": self.windows.snapshot(),
            "seq": self._seq,
            "paired": list(self._paired.items()),
        }
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    # ------------------------------------------------------------------ rules
    def _pairs(self, emitted: Emitted) -> WindowJoinEmitted:
        out = WindowJoinEmitted(accepted=emitted.accepted)
        for pane in emitted.all_panes():
            rows = pane.value[ROWS]
            if not rows:
                continue
            window_id = (pane.key, pane.window.start, pane.window.end)
            before = self._already_paired(window_id)
            lefts = [r for r in rows if r[0] is Side.LEFT]
            rights = [r for r in rows if r[0] is Side.RIGHT]
            for left in lefts:
                for right in rights:
                    if max(left[1], right[1]) > before:
                        out.joined.append(
                            WindowJoinedRow(
                                pane.key,
                                left[3],
                                right[3],
                                int(left[2]),
                                int(right[2]),
                                pane.window,
                                pane.timestamp,
                                pane.timing,
                                pane.pane_index,
                            )
                        )
            self._paired[window_id] = max(r[1] for r in rows)
        for late in emitted.late:
            side, _, _, value = late.value
            out.late.append(LateRow(side, late.key, value, late.timestamp, late.watermark, late.lateness, late.horizon))
        out.bad += [BadRecord(b.key, b.value[3], b.raw_timestamp, b.reason) for b in emitted.bad]
        self._forget(self.windows.time.watermark)
        return out

    def _already_paired(self, window_id: tuple[Hashable, int, int]) -> int:
        """The highest row paired in ``window_id`` so far; for merging windows (sessions), also in the windows it
        merged (they lie within it)."""
        before = self._paired.get(window_id, -1)
        if self.spec.window.is_merging:
            key, start, end = window_id
            inside = (v for (k, s, e), v in self._paired.items() if k == key and start <= s and e <= end)
            before = max(before, max(inside, default=-1))
        return before

    def _forget(self, watermark: int) -> None:
        """Drop what is kept of windows the watermark has closed for good (past their horizon)."""
        lateness = self.spec.allowed_lateness
        gone = [w for w in self._paired if w[2] - 1 + lateness <= watermark]
        for window_id in gone:
            del self._paired[window_id]


def restore_window_join(spec: WindowJoinSpec, snapshot: bytes) -> WindowJoinOperator:
    """The operator :meth:`WindowJoinOperator.snapshot` saved, with ``spec`` (the same join)."""
    state = pickle.loads(snapshot)
    if state.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(
            f"a window join snapshot of format {state.get('format')} (this floodmark reads {SNAPSHOT_FORMAT})"
        )
    operator = WindowJoinOperator(spec)
    operator.windows = restore_operator(spec.window_spec(), state["windows"])
    operator._seq = state["seq"]
    operator._paired = dict(state["paired"])
    return operator


def join_operator(spec: IntervalJoinSpec | WindowJoinSpec, snapshot: bytes | None = None) -> JoinOperator:
    """A new join operator for ``spec``, or the one ``snapshot`` saved."""
    if isinstance(spec, WindowJoinSpec):
        return WindowJoinOperator(spec) if snapshot is None else restore_window_join(spec, snapshot)
    return IntervalJoinOperator(spec) if snapshot is None else restore_interval_join(spec, snapshot)


JoinOperator = IntervalJoinOperator | WindowJoinOperator
"""Either join's operator: a :class:`~floodmark.core.keyed_operator.KeyedOperator` of
:class:`~floodmark.core.keyed_operator.KeyedRows` with their side; what it emits has ``joined``, ``late`` and
``bad``."""
