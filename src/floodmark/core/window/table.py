"""The open windows of one operator as a table, and the pane rules both window operators share.

One row per open (key, window). Both firing policies of the window operator keep their
windows here and fire them through :meth:`WindowTable.fire`, so what a pane *is*
is decided once, vectorised, whichever operator runs the spec (Beam's
``ReduceFnRunner`` rules, Flink's boundary convention; ``docs/semantics.md``):

* **timing**: EARLY while the watermark has not reached the window's max
  timestamp; then the first pane is ON_TIME if a record arrived before that
  (``held``), LATE otherwise; every pane after an ON_TIME or LATE pane is LATE;
* **emission**: an empty pane is emitted only when it is the ON_TIME pane (Beam's
  ``OnTimeBehavior.FIRE_ALWAYS``); other empty firings only reset the window;
* **indices**: ``index`` counts a window's emitted panes from 0;
  ``nonspeculative_index`` counts its ON_TIME and LATE panes from 0 (-1 for EARLY);
* **timestamp**: the timestamp combiner's, from the holds of records that arrived
  before the watermark reached the max timestamp (:meth:`add_arrivals`; late
  records do not hold), capped at the max timestamp;
* **after a pane** the window starts over: no record pending, no hold; in
  DISCARDING mode its accumulator restarts too (:meth:`emit`);
* **garbage collection** at the horizon (``max timestamp + allowed lateness``,
  :func:`~floodmark.core.windows.horizon`): a window whose trigger has not
  finished and which still has unemitted records fires a last pane first
  (:meth:`needs_final_pane`), then its row is released.

Columns (numpy arrays, one entry per row; released rows are reused), with the :class:`PaneBook` field each one
is (the names are the snapshot's, so checkpoints keep them):

* ``start``, ``end``: the window ``[start, end)`` in ms; ``live``: the row is in use;
* ``new_count`` (``records_since_last_pane``): records since the last pane; ``pending`` (``pending_since``):
  processing time (ms) of the oldest of them (:data:`NO_TIME`: none);
* ``hold`` (``output_hold``): their combined output time (the combiner's ``empty_hold``: none);
  ``held`` (``holds_output_watermark``): a record arrived before the watermark reached the max timestamp and no
  ON_TIME/LATE pane fired since, so the window holds the stage's output watermark;
* ``pane_index`` (``panes_emitted``), ``nonspec`` (``nonspeculative_emitted``): the next pane's index and
  non-speculative index; ``had_nonearly`` (``nonearly_fired``): an ON_TIME or LATE pane was emitted;
* ``closed`` (``finished``): the trigger finished; records for the window go to the late output
  (WINDOW_CLOSED) until it is garbage collected.

Operators add columns of their own (accumulators, trigger state) with
``extra_columns``; the accumulator store (:class:`Accumulators`) says how pane
values come from them and how they restart.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from floodmark.core.emitted import SINGLE_RESULT, pane_frame
from floodmark.core.panes import AccumulationMode, Timing
from floodmark.core.time import MIN_TIMESTAMP, format_instant
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.windows import Window, horizon, max_timestamp, window_expired, window_reached
from floodmark.protocol import output

NO_TIME = np.iinfo(np.int64).max
"""'No value' in int64 processing-time columns."""

EARLY, ON_TIME, LATE = 0, 1, 2
TIMING_NAMES = np.array([t.value for t in (Timing.EARLY, Timing.ON_TIME, Timing.LATE)], dtype=object)


def pane_timing(had_nonearly: np.ndarray, reached: np.ndarray, held: np.ndarray) -> np.ndarray:
    """The timing code (EARLY, ON_TIME, LATE) of a window's next pane (see the module docstring)."""
    return np.where(had_nonearly, LATE, np.where(reached, np.where(held, ON_TIME, LATE), EARLY))


class Accumulators(Protocol):
    """An operator's accumulator storage, as the table needs it to emit panes."""

    def results(self, rows: np.ndarray) -> Any:
        """Pane values of ``rows`` (a list of values, or ``{part: array}`` for columnar results)."""

    def reset(self, rows: np.ndarray) -> None:
        """Restart the accumulators of ``rows`` (empty)."""

    def fold(self, targets: np.ndarray, others: np.ndarray) -> None:
        """Merge the accumulators of ``others`` into ``targets`` (pairwise; ``targets`` distinct)."""


@dataclass(frozen=True)
class Firing:
    """The panes one :meth:`WindowTable.fire` call decided, one entry per firing (vectorised).

    :ivar rows: table rows. :ivar emitted: the pane is emitted (False: an empty non-ON_TIME firing, which only
        reset the window). :ivar timing: EARLY/ON_TIME/LATE codes. :ivar pane_index, nonspeculative_index: the
        panes' indices (-1 for EARLY panes). :ivar timestamp: output timestamps (ms). :ivar is_last: no pane
        follows for the window.
    """

    rows: np.ndarray
    emitted: np.ndarray
    timing: np.ndarray
    pane_index: np.ndarray
    nonspeculative_index: np.ndarray
    timestamp: np.ndarray
    is_last: np.ndarray


@dataclass(frozen=True)
class PaneBook:
    """One window's bookkeeping, read-only (``explain`` shows it).

    :ivar records_since_last_pane: records added since the previous pane (0: the next pane is empty).
    :ivar panes_emitted: panes emitted so far (the next pane's index).
    :ivar nonspeculative_emitted: ON_TIME and LATE panes emitted so far.
    :ivar nonearly_fired: an ON_TIME or LATE pane has been emitted.
    :ivar finished: the trigger finished (the window is closed until garbage collection).
    :ivar holds_output_watermark: a record arrived before the watermark reached the max timestamp and no
        ON_TIME/LATE pane has fired since (its first non-early pane will be ON_TIME).
    :ivar output_hold: the output timestamp its next pane carries, while it holds the output watermark.
    :ivar pending_since: processing time (ms) of the oldest record not yet emitted in a pane.
    """

    window: Window
    records_since_last_pane: int
    panes_emitted: int
    nonspeculative_emitted: int
    nonearly_fired: bool
    finished: bool
    holds_output_watermark: bool
    output_hold: int | None
    pending_since: int | None


@dataclass(frozen=True)
class WindowView:
    """What an operator holds for one key's window, read-only (``window_view``; ``explain`` shows it).

    :ivar book: the window's bookkeeping. :ivar trigger_state: the trigger's state as the trigger protocol
        defines it (the columnar policy rebuilds it from its columns: ``compiled_trigger.trigger_state``).
    :ivar engine: which operator holds it. :ivar details: the operator's own remarks on the window's state.
    :ivar note: a remark on the lookup, e.g. that a session covering the window asked about stands in for it.
    """

    book: PaneBook
    trigger_state: dict[str, Any]
    engine: str
    details: tuple[str, ...] = ()
    note: str | None = None


class WindowTable:
    """The open windows of one operator (see the module docstring).

    :arg combiner: the spec's timestamp combiner (holds and pane timestamps).
    :arg allowed_lateness: the spec's allowed lateness in ms (horizons).
    :arg accumulation: the spec's accumulation mode (what :meth:`emit` does to accumulators).
    :arg extra_columns: the operator's own columns, ``{name: (dtype, value of a new row)}``.
    :arg track_keys: also index rows by key (merging windows look up a key's windows).
    :arg named_by_end: a key's windows share starts and are told apart by their end
        (:attr:`~floodmark.core.windows.WindowAssigner.named_by_end`).
    """

    def __init__(
        self,
        combiner: TimestampCombiner,
        allowed_lateness: int,
        accumulation: AccumulationMode,
        extra_columns: dict[str, tuple[Any, Any]] | None = None,
        track_keys: bool = False,
        named_by_end: bool = False,
    ) -> None:
        self.combiner = combiner
        self.allowed_lateness = allowed_lateness
        self.accumulation = accumulation
        self.name_column = "end" if named_by_end else "start"
        """The column that tells a key's open windows apart (the index's second part)."""
        self.accumulators: Accumulators | None = None
        self.empty: dict[str, Any] = {
            "start": 0,
            "end": 0,
            "new_count": 0,
            "hold": combiner.empty_hold,
            "pane_index": 0,
            "nonspec": 0,
            "pending": NO_TIME,
            "held": False,
            "had_nonearly": False,
            "closed": False,
            "live": False,
        }
        dtypes = {name: bool if isinstance(value, bool) else np.int64 for name, value in self.empty.items()}
        for name, (dtype, value) in (extra_columns or {}).items():
            dtypes[name], self.empty[name] = dtype, value
        self.cols: dict[str, np.ndarray] = {name: np.zeros(0, dtype=dtype) for name, dtype in dtypes.items()}
        self.keys: list[Any] = []
        self._index: dict[tuple[Any, int], int] | None = {}
        self.free: list[int] = []
        self.key_windows: dict[Any, dict[Window, int]] | None = {} if track_keys else None

    # ------------------------------------------------------------------ rows
    @property
    def index(self) -> dict[tuple[Any, int], int]:
        """``{(key, window name): row}`` of the open rows (the name: :attr:`name_column`'s value, the window's start
        unless windows are named by their end); after :meth:`restore` it is built on first use (merging windows
        find their rows without it, so a restored session table never pays for it)."""
        if self._index is None:
            live = self.live_rows()
            keys = [self.keys[r] for r in live.tolist()]
            names = self.cols[self.name_column][live].tolist()
            self._index = dict(zip(zip(keys, names, strict=True), live.tolist(), strict=True))
        return self._index

    def name(self, window: Window) -> int:
        """What the index knows ``window`` by (its start, or its end when windows are named by their end)."""
        return window.end if self.name_column == "end" else window.start

    def names(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """:meth:`name` of many windows ``[starts[i], ends[i])``."""
        return ends if self.name_column == "end" else starts

    def row_of(self, key: Hashable, name: int) -> int | None:
        """The row of ``key``'s window named ``name`` (:meth:`name`), if open."""
        return self.index.get((key, name))

    def rows_for(self, keys: Sequence[Any], starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The row of each (key, window), opening missing ones; also whether each existed before."""
        names = self.names(starts, ends)
        found = [self.index.get((k, s), -1) for k, s in zip(keys, names.tolist(), strict=True)]
        rows = np.array(found, dtype=np.int64)
        existed = rows >= 0
        missing = np.flatnonzero(~existed)
        if len(missing):
            new_rows = self._allocate(len(missing))
            rows[missing] = new_rows
            self.cols["start"][new_rows] = starts[missing]
            self.cols["end"][new_rows] = ends[missing]
            self._register_many(new_rows.tolist(), [keys[i] for i in missing.tolist()], names[missing].tolist())
        return rows, existed

    def open_many(self, keys: Sequence[Any], starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Open new rows for (key, window)s that are not open (unchecked: the caller knows) and return them."""
        rows = self._allocate(len(keys))
        self.cols["start"][rows] = starts
        self.cols["end"][rows] = ends
        self._register_many(rows.tolist(), list(keys), np.asarray(self.names(starts, ends)).tolist())
        return rows

    def open(self, key: Hashable, window: Window) -> int:
        """Open one new row for ``key``'s ``window`` (which must not be open) and return it."""
        row = int(self._allocate(1)[0])
        self.cols["start"][row], self.cols["end"][row] = window.start, window.end
        self._register(row, key, self.name(window))
        return row

    def reassign(self, row: int, window: Window) -> None:
        """Give ``row`` another window of the same key (a merge); its other columns are the caller's."""
        key, old = self.keys[row], self.window(row)
        self.cols["start"][row], self.cols["end"][row] = window.start, window.end
        if self._index is not None:
            del self._index[(key, self.name(old))]
            self._index[(key, self.name(window))] = row
        if self.key_windows is not None:
            del self.key_windows[key][old]
            self.key_windows[key][window] = row

    def reassign_many(self, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        """:meth:`reassign` for many rows (distinct keys' windows or disjoint ones): only rows whose name changes
        touch the index (a session growing to the right keeps its start)."""
        c, name = self.cols, self.name_column
        names = self.names(starts, ends)
        moved = np.flatnonzero(c[name][rows] != names)
        if self.key_windows is not None:
            moved = np.arange(len(rows))
        index = self._index if self._index is not None else {}
        for i in moved.tolist():
            index.pop((self.keys[rows[i]], int(c[name][rows[i]])), None)
        old = [self.window(int(r)) for r in rows[moved].tolist()] if self.key_windows is not None else []
        c["start"][rows], c["end"][rows] = starts, ends
        if self._index is not None:
            for i in moved.tolist():
                row = int(rows[i])
                self._index[(self.keys[row], int(names[i]))] = row
        if self.key_windows is not None:
            for row, window in zip(rows[moved].tolist(), old, strict=True):
                del self.key_windows[self.keys[row]][window]
                self.key_windows[self.keys[row]][self.window(row)] = row

    def merge_rows(
        self, targets: np.ndarray, starts: np.ndarray, ends: np.ndarray, others: np.ndarray, into: np.ndarray
    ) -> None:
        """Windows of a key merge (sessions): ``targets[j]`` becomes the window ``[starts[j], ends[j])`` and
        absorbs each row ``others[i]`` with ``into[i] == j`` (released here). Java Beam's merge, per column:

        * records since the last pane add up, their holds combine (the combiner), the merged window holds
          the output watermark if any member did, and its oldest pending record is the members' oldest;
        * accumulators merge (:meth:`Accumulators.fold`);
        * pane history starts over: the merged window is a new window, its first pane has index 0 (the
          caller does not merge a window into itself: a record inside an open session just joins it).

        Trigger state is the operator's (``Trigger.on_merge``, or the columnar trigger's columns).
        """
        c = self.cols
        if len(others):
            order = np.argsort(into, kind="stable")
            others, into = others[order], into[order]
            first = np.r_[True, into[1:] != into[:-1]]
            rank = np.arange(len(into)) - np.flatnonzero(first)[np.cumsum(first) - 1]
            for r in range(int(rank.max()) + 1):
                pick = rank == r
                t, o = targets[into[pick]], others[pick]
                c["new_count"][t] += c["new_count"][o]
                c["hold"][t] = self.combiner.fold(c["hold"][t], c["hold"][o])
                c["held"][t] |= c["held"][o]
                c["pending"][t] = np.minimum(c["pending"][t], c["pending"][o])
                assert self.accumulators is not None, "the operator has not attached its accumulators"
                self.accumulators.fold(t, o)
            self.release(others)
        self.reassign_many(targets, starts, ends)
        c["pane_index"][targets] = 0
        c["nonspec"][targets] = 0
        c["had_nonearly"][targets] = False

    def merge_into(self, row: int, window: Window, others: Sequence[int]) -> None:
        """:meth:`merge_rows` for one merge: ``row`` becomes ``window`` and absorbs the rows ``others``."""
        self.merge_rows(
            np.array([row]),
            np.array([window.start]),
            np.array([window.end]),
            np.array(others, dtype=np.int64),
            np.zeros(len(others), dtype=np.int64),
        )

    def close(self, rows: np.ndarray | int) -> None:
        """The trigger of ``rows`` finished: they refuse records (WINDOW_CLOSED) until garbage collection."""
        self.cols["closed"][rows] = True

    def release(self, rows: np.ndarray) -> None:
        """Close ``rows``: forget their windows and reuse the rows."""
        row_list, keys = rows.tolist(), self.keys
        if len(row_list) == self.window_count():
            # Every open window goes (the end of a bounded input, a watermark past everything): forget them all
            # at once instead of one dict entry at a time (~0.5 us per window).
            self._index = {}
            if self.key_windows is not None:
                self.key_windows.clear()
            self.keys = keys = [None] * len(keys)
        else:
            if self._index is not None:
                index = self._index
                for row, name in zip(row_list, self.cols[self.name_column][rows].tolist(), strict=True):
                    del index[(keys[row], name)]
            if self.key_windows is not None:
                for row in row_list:
                    windows = self.key_windows[keys[row]]
                    del windows[self.window(row)]
                    if not windows:
                        del self.key_windows[keys[row]]
            for row in row_list:
                keys[row] = None
        for column in self.cols.values():
            if column.dtype == object:
                column[rows] = None  # drop references: accumulators and trigger states can be large
        self.cols["live"][rows] = False
        self.free.extend(rows.tolist())

    def rows_of_key(self, key: Hashable) -> dict[Window, int]:
        """``{window: row}`` of ``key``'s open windows (needs ``track_keys``; do not modify)."""
        assert self.key_windows is not None, "the table does not track keys"
        return self.key_windows.get(key, {})

    def windows_of(self, key: Hashable) -> set[Window]:
        """The open windows of ``key`` (a scan unless the table tracks keys: for tests and inspection)."""
        if self.key_windows is not None:
            return set(self.key_windows.get(key, {}))
        return {self.window(r) for r in self.live_rows().tolist() if self.keys[r] == key}

    def lookup(self, key: Hashable, window: Window, merging: bool) -> tuple[int | None, str | None]:
        """The row of ``key``'s ``window`` for ``explain``, and a note when another window stands in for it:
        with merging windows, the one open session of the key that overlaps ``window``."""
        row = self.row_of(key, self.name(window))
        if row is not None and self.window(row) == window:
            return row, None
        if not merging:
            return None, None
        covering = [w for w in self.windows_of(key) if w.intersects(window)]
        if len(covering) != 1:
            return None, None
        (session,) = covering
        note = (
            f"the session [{format_instant(session.start)}, {format_instant(session.end)}) of this key "
            f"overlaps the window asked about: explained"
        )
        return self.row_of(key, self.name(session)), note

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.cols["live"])

    def window(self, row: int) -> Window:
        return Window(int(self.cols["start"][row]), int(self.cols["end"][row]))

    def window_count(self) -> int:
        return int(self.cols["live"].sum())

    def _register(self, row: int, key: Any, name: int) -> None:
        self.keys[row] = key
        if self._index is not None:
            self._index[(key, name)] = row
        if self.key_windows is not None:
            self.key_windows.setdefault(key, {})[self.window(row)] = row

    def _register_many(self, rows: list[int], keys: list[Any], names: list[int]) -> None:
        """:meth:`_register` for many rows (the hot path: one dict update, no call per row)."""
        for row, key in zip(rows, keys, strict=True):
            self.keys[row] = key
        if self._index is not None:
            self._index.update(zip(zip(keys, names, strict=True), rows, strict=True))
        if self.key_windows is not None:
            for row, key in zip(rows, keys, strict=True):
                self.key_windows.setdefault(key, {})[self.window(row)] = row

    def _allocate(self, count: int) -> np.ndarray:
        reuse = self.free[-count:] if count <= len(self.free) else list(self.free)
        del self.free[len(self.free) - len(reuse) :]
        fresh = count - len(reuse)
        if fresh:
            size = len(self.cols["live"])
            grow = max(fresh, size // 2)  # amortised growth: allocating a row is O(1) on average
            for name, column in self.cols.items():
                self.cols[name] = np.concatenate([column, np.zeros(grow, dtype=column.dtype)])
            self.free.extend(range(size + fresh, size + grow))
            self.keys.extend([None] * grow)
            reuse = list(reuse) + list(range(size, size + fresh))
        rows = np.array(reuse, dtype=np.int64)
        for name, value in self.empty.items():
            self.cols[name][rows] = value
        self.cols["live"][rows] = True
        return rows

    # ----------------------------------------------------------- boundaries
    def reached(self, rows: np.ndarray, watermark: int) -> np.ndarray:
        """Has the watermark reached the windows' max timestamps?"""
        return window_reached(self.cols["end"][rows], watermark)

    def horizons(self, rows: np.ndarray) -> np.ndarray:
        return horizon(self.cols["end"][rows], self.allowed_lateness)

    def expired(self, watermark: int) -> np.ndarray:
        """Open rows whose horizon the watermark has reached (garbage collected at this watermark)."""
        c = self.cols
        return np.flatnonzero(c["live"] & window_expired(c["end"], self.allowed_lateness, watermark))

    def needs_final_pane(self, rows: np.ndarray) -> np.ndarray:
        """Garbage collection emits a last pane for these windows: trigger not finished, records unemitted."""
        return ~self.cols["closed"][rows] & (self.cols["new_count"][rows] > 0)

    # -------------------------------------------------------------- records
    def add_arrivals(
        self,
        rows: np.ndarray,
        counts: np.ndarray,
        watermark: int,
        processing_time: int | np.ndarray,
        hold_times: np.ndarray,
    ) -> None:
        """``counts`` records arrived for ``rows`` (distinct) at ``watermark`` and ``processing_time`` (one for all
        rows, or one per row).

        Beam's hold rule: a window's records hold its output time (``hold_times``, one combined value per row)
        only while the watermark has not reached its max timestamp; late records never hold.
        """
        c = self.cols
        c["new_count"][rows] += counts
        pending = c["pending"][rows]
        c["pending"][rows] = np.where(pending == NO_TIME, processing_time, pending)
        holds = ~window_reached(c["end"][rows], watermark)
        holding = rows[holds]
        if len(holding):
            c["held"][holding] = True
            c["hold"][holding] = self.combiner.fold(c["hold"][holding], np.asarray(hold_times)[holds])

    def add_arrival(self, row: int, count: int, watermark: int, processing_time: int, hold_time: int) -> None:
        """:meth:`add_arrivals` for one row (the general policy's per-window loop; same rule, no arrays)."""
        c = self.cols
        c["new_count"][row] += count
        if c["pending"][row] == NO_TIME:
            c["pending"][row] = processing_time
        if not window_reached(int(c["end"][row]), watermark):
            c["held"][row] = True
            c["hold"][row] = self.combiner.fold(int(c["hold"][row]), hold_time)

    # --------------------------------------------------------------- firing
    def fire(
        self,
        rows: np.ndarray,
        watermark: int,
        is_last: np.ndarray,
        counts: np.ndarray | None = None,
        holds: np.ndarray | None = None,
    ) -> Firing:
        """Fire ``rows`` at ``watermark``: decide each pane (see the module docstring) and start the windows over.

        A row may fire several times in one call (a pane after every n-th record, a LATE pane per late record):
        its firings must be consecutive and in order, and carry ``counts`` (records in each pane, >= 1) and
        ``holds`` (each pane's combined output time). By default a firing carries the window's pending records
        and hold. Accumulators are the caller's (see :meth:`emit`).
        """
        c = self.cols
        repeated = len(rows) > 1 and bool((rows[1:] == rows[:-1]).any())
        counts = c["new_count"][rows] if counts is None else counts
        holds = c["hold"][rows] if holds is None else holds
        timing = pane_timing(c["had_nonearly"][rows], self.reached(rows, watermark), c["held"][rows])
        if repeated:
            first = np.r_[True, rows[1:] != rows[:-1]]
            run = np.cumsum(first) - 1
            rank = np.arange(len(rows)) - np.flatnonzero(first)[run]
            # After a row's first (emitted) firing, a non-early one makes every following firing LATE.
            timing = np.where((rank == 0) | (timing == EARLY), timing, LATE)
        emitted = (counts > 0) | (timing == ON_TIME)
        nonearly = emitted & (timing != EARLY)
        if repeated:
            index = c["pane_index"][rows] + _before_in_run(emitted, first, run)
            nonspec = c["nonspec"][rows] + _before_in_run(nonearly, first, run)
            np.add.at(c["pane_index"], rows, emitted)
            np.add.at(c["nonspec"], rows, nonearly)
        else:
            index, nonspec = c["pane_index"][rows], c["nonspec"][rows]
            c["pane_index"][rows] = index + emitted
            c["nonspec"][rows] = nonspec + nonearly
        firing = Firing(
            rows=rows,
            emitted=emitted,
            timing=timing,
            pane_index=index,
            nonspeculative_index=np.where(timing == EARLY, -1, nonspec),
            timestamp=self.combiner.pane_timestamps(holds, max_timestamp(c["end"][rows])),
            is_last=np.asarray(is_last, dtype=bool),
        )
        done = rows[nonearly]
        c["had_nonearly"][done] = True
        c["held"][done] = False
        c["hold"][rows] = self.combiner.empty_hold
        c["new_count"][rows] = 0
        c["pending"][rows] = NO_TIME
        return firing

    def emit(self, rows: np.ndarray, watermark: int, is_last: np.ndarray) -> tuple[Firing, Any]:
        """Fire ``rows`` (distinct) with their accumulators' values; DISCARDING restarts the accumulators."""
        assert self.accumulators is not None, "the operator has not attached its accumulators"
        values = self.accumulators.results(rows)
        firing = self.fire(rows, watermark, is_last)
        if self.accumulation is AccumulationMode.DISCARDING:
            self.accumulators.reset(rows)
        return firing, values

    # ---------------------------------------------------------------- output
    def pane_frame(self, firing: Firing, results: dict[str, np.ndarray], single: bool) -> pd.DataFrame:
        """The emitted panes of ``firing`` as a frame (``Emitted.pane_frames``): ``results`` per firing, one
        1-d array per aggregate name (``single``: one aggregate, the column ``value``)."""
        return frame_of([self.pane_columns(firing, results, single)], single)

    def pane_columns(self, firing: Firing, results: dict[str, np.ndarray], single: bool) -> dict[str, np.ndarray]:
        """:meth:`pane_frame`'s columns, taken now (a caller that fires window by window collects them and makes
        one frame with :func:`frame_of`: a frame per pane would cost more than the pane)."""
        keep = firing.emitted
        rows = firing.rows[keep]
        keys = np.empty(len(rows), dtype=object)
        keys[:] = operator.itemgetter(*rows.tolist())(self.keys) if len(rows) > 1 else [self.keys[r] for r in rows]
        columns = {
            "key": keys,
            "window_start": self.cols["start"][rows],
            "window_end": self.cols["end"][rows],
            output.PANE_TIMESTAMP: firing.timestamp[keep],
            "timing": TIMING_NAMES[firing.timing[keep]],
            "pane_index": firing.pane_index[keep],
            "nonspeculative_index": firing.nonspeculative_index[keep],
            "is_last": firing.is_last[keep],
        }
        for name, values in results.items():
            columns[SINGLE_RESULT if single else name] = np.asarray(values)[keep]
        return columns

    def output_hold(self) -> int | None:
        """The lowest output timestamp a pending pane will carry (holds the stage's output watermark), or None."""
        c = self.cols
        rows = np.flatnonzero(c["live"] & c["held"] & ~c["closed"])
        if not len(rows):
            return None
        return int(self.combiner.pane_timestamps(c["hold"][rows], max_timestamp(c["end"][rows])).min())

    def key_output_watermarks(self, keys: np.ndarray, watermark: int) -> np.ndarray:
        """For each of ``keys`` (one per record): MIN(``watermark``, one below the lowest output timestamp the
        key's pending panes will carry): the output watermark as the record's key sees it (the stage's rule,
        ``StageWatermark.update_output``, over the key's own holds).

        The hold rule (``TimestampCombiner.element_holds``) compares with this per-key value rather than the
        whole operator's: it is never below the stage's output watermark (so the rule's guarantee holds) and it
        does not depend on which keys share a bucket or an executor, so panes are the same on Spark, in the
        core and after a change of the bucket count. (Beam's runners use their operator instance's output
        watermark, which depends on the parallelism.)
        """
        c = self.cols
        rows = np.flatnonzero(c["live"] & c["held"] & ~c["closed"])
        if not len(rows):
            return np.full(len(keys), watermark, dtype=np.int64)
        times = self.combiner.pane_timestamps(c["hold"][rows], max_timestamp(c["end"][rows]))
        held_keys = np.empty(len(rows), dtype=object)
        held_keys[:] = [self.keys[r] for r in rows.tolist()]
        codes, uniques = pd.factorize(pd.Series(np.concatenate([held_keys, keys]), dtype=object), use_na_sentinel=False)
        lowest = np.full(len(uniques), watermark, dtype=np.int64)
        np.minimum.at(lowest, codes[: len(rows)], np.maximum(times, MIN_TIMESTAMP + 1) - 1)
        return lowest[codes[len(rows) :]]

    def oldest_pending(self) -> int | None:
        """Processing time of the oldest record not yet emitted in a pane, or None."""
        pending = self.cols["pending"][self.cols["live"]]
        pending = pending[pending != NO_TIME]
        return int(pending.min()) if len(pending) else None

    def book(self, row: int) -> PaneBook:
        """The bookkeeping of ``row`` (read-only)."""
        c = self.cols
        hold, pending = int(c["hold"][row]), int(c["pending"][row])
        held, closed = bool(c["held"][row]), bool(c["closed"][row])
        window = self.window(row)
        holds = held and not closed
        return PaneBook(
            window=window,
            records_since_last_pane=int(c["new_count"][row]),
            panes_emitted=int(c["pane_index"][row]),
            nonspeculative_emitted=int(c["nonspec"][row]),
            nonearly_fired=bool(c["had_nonearly"][row]),
            finished=closed,
            holds_output_watermark=holds,
            output_hold=int(self.combiner.pane_timestamps(hold, window.max_timestamp)) if holds else None,
            pending_since=None if pending == NO_TIME else pending,
        )

    # -------------------------------------------------------------- snapshot
    def snapshot(self) -> dict[str, Any]:
        """The open rows as plain data: ``{"keys": [...], "cols": {name: array}}``."""
        live = self.live_rows()
        return {"keys": [self.keys[r] for r in live.tolist()], "cols": {n: c[live] for n, c in self.cols.items()}}

    def restore(self, data: dict[str, Any]) -> None:
        """Replace the table's rows with a :meth:`snapshot`'s (columns it lacks get their new-row value)."""
        size = len(data["keys"])
        for name, column in self.cols.items():
            saved = data["cols"].get(name)
            self.cols[name] = (
                np.asarray(saved, dtype=column.dtype)
                if saved is not None
                else np.full(size, self.empty[name], dtype=column.dtype)
            )
        self.keys = list(data["keys"])
        self.free = []
        self._index = None  # built on the first lookup: a batch that only fires (a flush) never needs it
        if self.key_windows is not None:
            self.key_windows = {}
            for row, key in enumerate(self.keys):
                self.key_windows.setdefault(key, {})[self.window(row)] = row


def frame_of(parts: Sequence[dict[str, np.ndarray]], single: bool) -> pd.DataFrame:
    """One pane frame (:func:`~floodmark.core.emitted.pane_frame`) from :meth:`WindowTable.pane_columns` taken in
    order (at least one, same columns; ``single``: one aggregate, in the column ``value``)."""
    columns = parts[0] if len(parts) == 1 else {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    return pane_frame(columns, single)


def _before_in_run(flags: np.ndarray, first: np.ndarray, run: np.ndarray) -> np.ndarray:
    """For each entry, how many earlier entries of its run (runs start where ``first``) have ``flags``."""
    counts = np.cumsum(flags) - flags
    return counts - counts[np.flatnonzero(first)][run]
