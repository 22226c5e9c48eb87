"""The general firing policy: every trigger (Beam's state machine), merging windows, any aggregate.

Each window of the table has one Python object for its accumulator (so any aggregate works) and one for its
trigger's state (so any trigger works, through Beam's protocol), in the table's ``acc`` and ``trigger`` columns,
and timers: lazy heaps of the triggers' watermark and processing-time deadlines, derived from the state and
rebuilt on restore. Grouping by (key, window) is numpy work over the whole batch; each (key, window) group then
updates its accumulator in slices as large as the trigger allows (``elements_until_check``), and the trigger is
asked after every slice, so cutting a batch into several calls never changes the panes. Merging windows
(sessions) go record by record through :func:`~floodmark.core.window.sessions.merge_record`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from floodmark.core.aggregates import Aggregate, Several, add_columns
from floodmark.core.assign import Assigned
from floodmark.core.combine import Partials
from floodmark.core.emitted import SINGLE_RESULT, Emitted
from floodmark.core.records import LateReason, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.triggers import TriggerContext
from floodmark.core.values import object_array
from floodmark.core.window.policy import OperatorTime
from floodmark.core.window.sessions import merge_record
from floodmark.core.window.table import WindowTable, frame_of
from floodmark.core.windows import Window


class ObjectAccumulators:
    """One accumulator object per window (any aggregate), in the table's ``acc`` column."""

    def __init__(self, aggregate: Aggregate, table: WindowTable) -> None:
        self.aggregate = aggregate
        self.column = table.cols  # the table replaces arrays when it grows: always index through it

    def create(self, rows: np.ndarray) -> None:
        for row in rows.tolist():
            self.column["acc"][row] = self.aggregate.create()

    def results(self, rows: np.ndarray) -> list[Any]:
        return [self.aggregate.result(self.column["acc"][row]) for row in rows.tolist()]

    def reset(self, rows: np.ndarray) -> None:
        self.create(rows)

    def fold(self, targets: np.ndarray, others: np.ndarray) -> None:
        acc = self.column["acc"]
        for target, other in zip(targets.tolist(), others.tolist(), strict=True):
            acc[target] = self.aggregate.merge([acc[target], acc[other]])


class GeneralPolicy:
    """The general firing policy of one operator (see the module docstring).

    :arg spec: the windowing, trigger, lateness, accumulation and aggregation.
    :arg time: the operator's time, read at every call.
    """

    name = "general"

    def __init__(self, spec: WindowSpec, time: OperatorTime) -> None:
        self.spec = spec
        self.time = time
        self.table = WindowTable(
            spec.timestamp_combiner,
            spec.allowed_lateness,
            spec.accumulation,
            {"acc": (object, None), "trigger": (object, None)},
            track_keys=spec.window.is_merging,
            named_by_end=spec.window.named_by_end,
        )
        self.accumulators = ObjectAccumulators(spec.aggregate, self.table)
        self.table.accumulators = self.accumulators
        self._seq = itertools.count()
        self._watermark_timers: list[tuple[int, int, Hashable, int]] = []
        self._processing_timers: list[tuple[int, int, Hashable, int]] = []
        self._scheduled: dict[tuple[Hashable, int], tuple[int | None, int | None]] = {}
        self._fired: list[dict[str, np.ndarray]] = []
        """Pane columns fired during the current move (one frame per move: :meth:`_flush`)."""

    # ------------------------------------------------------------------ time
    def on_watermark(self, out: Emitted) -> None:
        watermark = self.time.watermark
        c = self.table.cols
        # The due windows are independent of each other: decide each one's firing with its trigger, then emit
        # them in one vectorised call, in the order they came due.
        firing: list[int] = []
        is_last: list[bool] = []
        finished: list[int] = []
        collected: list[int] = []
        kept: list[int] = []
        for row in self._due(self._watermark_timers, watermark, 0):
            ctx = self._ctx(row)
            collect = self.spec.expired(ctx.window, watermark)
            if not c["closed"][row] and self.spec.trigger.should_fire(c["trigger"][row], ctx):
                done = self.spec.trigger.on_fire(c["trigger"][row], ctx)
                firing.append(row)
                is_last.append(done or collect)
                if done:
                    finished.append(row)
            elif collect and self.table.needs_final_pane(row):
                firing.append(row)
                is_last.append(True)
            (collected if collect else kept).append(row)
        if firing:
            self._emit(np.array(firing), np.array(is_last))
        self._flush(out)
        for row in finished:
            self._close(row)
        for row in collected:
            self._release(row)
        for row in kept:
            self._schedule(row)

    def on_processing_time(self, out: Emitted) -> None:
        c = self.table.cols
        for row in self._due(self._processing_timers, self.time.processing_time, 1):
            ctx = self._ctx(row)
            if not c["closed"][row] and self.spec.trigger.should_fire(c["trigger"][row], ctx):
                self._fire(row, ctx)
            self._schedule(row)
        self._flush(out)

    # --------------------------------------------------------------- records
    def add(self, batch: RecordBatch, assigned: Assigned, out: Emitted) -> None:
        columns = {name: np.asarray(values) for name, values in batch.columns.items()} | assigned.numbers
        keys, rows = assigned.keys, assigned.rows
        key_codes, unique_keys = pd.factorize(pd.Series(keys[rows], dtype=object), use_na_sentinel=False)
        add = self._add_merging if self.spec.window.is_merging else self._add_grouped
        add(assigned, key_codes, unique_keys, columns, out)
        self._flush(out)

    def add_partials(self, partials: Partials) -> None:
        raise ValueError("partial aggregates need a spec the columnar policy runs")

    def _add_grouped(self, assigned: Assigned, key_codes, unique_keys, columns, out: Emitted) -> None:
        rows, starts, ends = assigned.rows, assigned.starts, assigned.ends
        row_ts, out_times = assigned.timestamps, assigned.out_times
        names = self.spec.window.window_ids(starts, ends)
        # Sort by (key, window), stably so that records keep arrival order inside a group.
        order = np.lexsort((np.arange(len(rows)), names, key_codes))
        key_codes, starts, ends, names = key_codes[order], starts[order], ends[order], names[order]
        rows, row_ts, out_times = rows[order], row_ts[order], out_times[order]
        boundary = np.flatnonzero((np.diff(key_codes) != 0) | (np.diff(names) != 0)) + 1
        bounds = np.concatenate(([0], boundary, [len(rows)]))
        for g in range(len(bounds) - 1):
            lo, hi = int(bounds[g]), int(bounds[g + 1])
            key = unique_keys[key_codes[lo]]
            row = self._row(key, Window(int(starts[lo]), int(ends[lo])))
            self._feed(key, row, rows[lo:hi], row_ts[lo:hi], out_times[lo:hi], columns, assigned.payload, out)

    def _add_merging(self, assigned: Assigned, key_codes, unique_keys, columns, out: Emitted) -> None:
        rows, starts, ends = assigned.rows, assigned.starts, assigned.ends
        row_ts, out_times, payload = assigned.timestamps, assigned.out_times, assigned.payload
        for i in range(len(rows)):
            key = unique_keys[key_codes[i]]
            proto = Window(int(starts[i]), int(ends[i]))
            joined = merge_record(
                self.spec, self.table, self.table.rows_of_key(key), key, proto, self.time.watermark, self._merge
            )
            if joined.row is None:
                assert joined.refused is not None
                out.late.append(
                    self.time.late(self.spec, key, joined.window, int(row_ts[i]), payload[rows[i]], joined.refused)
                )
                continue
            if joined.opened:
                self._start(joined.row)
            self._feed(key, joined.row, rows[i : i + 1], row_ts[i : i + 1], out_times[i : i + 1], columns, payload, out)

    def _merge(self, row: int, others: list[int], merged: Window) -> None:
        """Beam's ``onMerge``: the merged window's trigger state from its members' (and a new window's)."""
        c = self.table.cols
        members = [row, *others]
        ctx = TriggerContext(merged, self.time.watermark, self.time.processing_time)
        states = [c["trigger"][r] for r in members] + [self.spec.trigger.new_state()]
        for member in members:
            self._scheduled.pop((self.table.keys[member], int(c[self.table.name_column][member])), None)
        c["trigger"][row] = self.spec.trigger.on_merge(states, ctx)

    def _feed(self, key, row: int, rows, row_ts, out_times, columns, payload, out: Emitted) -> None:
        """Add one group's records (same key and window, arrival order) and fire when due."""
        spec, c = self.spec, self.table.cols
        trigger, combiner = spec.trigger, spec.timestamp_combiner
        ctx = self._ctx(row)
        i, n = 0, len(rows)
        while i < n:
            if c["closed"][row]:
                for j in range(i, n):
                    late = self.time.late(
                        spec, key, ctx.window, int(row_ts[j]), payload[rows[j]], LateReason.WINDOW_CLOSED
                    )
                    out.late.append(late)
                break
            wanted = trigger.elements_until_check(c["trigger"][row], ctx)
            take = n - i if wanted is None else min(wanted, n - i)
            chunk = {field: columns[field][rows[i : i + take]] for field in spec.aggregate.fields}
            c["acc"][row] = add_columns(spec.aggregate, c["acc"][row], chunk)
            trigger.on_elements(c["trigger"][row], take, ctx)
            hold = combiner.reduce(out_times[i : i + take])
            self.table.add_arrival(row, take, self.time.watermark, self.time.processing_time, hold)
            i += take
            if trigger.should_fire(c["trigger"][row], ctx):
                self._fire(row, ctx)
        self._schedule(row)

    # ---------------------------------------------------------------- firing
    def _fire(self, row: int, ctx: TriggerContext) -> None:
        c = self.table.cols
        finished = self.spec.trigger.on_fire(c["trigger"][row], ctx)
        self._emit(np.array([row]), np.array([finished]))
        if finished:
            self._close(row)

    def _emit(self, rows: np.ndarray, is_last: np.ndarray) -> None:
        """Fire ``rows`` (distinct): their panes' columns are kept until :meth:`_flush`, the aggregate's results
        as object columns (a named aggregate's result, a dict, one column per name)."""
        firing, values = self.table.emit(rows, self.time.watermark, is_last)
        aggregate = self.spec.aggregate
        names = list(aggregate.parts) if isinstance(aggregate, Several) else [None]
        results = {
            name or SINGLE_RESULT: object_array(v if name is None else v[name] for v in values) for name in names
        }
        self._fired.append(self.table.pane_columns(firing, results, single=names == [None]))

    def _flush(self, out: Emitted) -> None:
        """The panes fired since the last flush, as one frame, in firing order."""
        if self._fired:
            out.pane_frames.append(frame_of(self._fired, not isinstance(self.spec.aggregate, Several)))
            self._fired = []

    def _close(self, row: int) -> None:
        """The trigger finished: the window refuses records until garbage collection; its values go."""
        self.table.close(row)
        self.table.cols["acc"][row] = None

    # ----------------------------------------------------------- bookkeeping
    def _ctx(self, row: int) -> TriggerContext:
        return TriggerContext(self.table.window(row), self.time.watermark, self.time.processing_time)

    def _row(self, key: Hashable, window: Window) -> int:
        """The row of ``key``'s ``window``, opened with a fresh accumulator and trigger state if new."""
        row = self.table.row_of(key, self.table.name(window))
        if row is None:
            row = self.table.open(key, window)
            self._start(row)
        return row

    def _start(self, row: int) -> None:
        """Give a newly opened row a fresh accumulator and trigger state."""
        self.table.cols["acc"][row] = self.spec.aggregate.create()
        self.table.cols["trigger"][row] = self.spec.trigger.new_state()

    def _release(self, row: int) -> None:
        self._scheduled.pop((self.table.keys[row], int(self.table.cols[self.table.name_column][row])), None)
        self.table.release(np.array([row]))

    def _schedule(self, row: int) -> None:
        """(Re)arm the window's watermark and processing-time timers (lazy heaps)."""
        c = self.table.cols
        key, window = self.table.keys[row], self.table.window(row)
        wm_deadline = self.spec.horizon(window)
        pt_deadline = None
        if not c["closed"][row]:
            # Deadlines already passed were evaluated when they passed (or when the
            # records arrived); re-arming them would loop.
            state = c["trigger"][row]
            trigger_deadline = self.spec.trigger.watermark_deadline(state, window)
            if trigger_deadline is not None and trigger_deadline > self.time.watermark:
                wm_deadline = min(wm_deadline, trigger_deadline)
            pt_deadline = self.spec.trigger.processing_deadline(state)
            if pt_deadline is not None and pt_deadline <= self.time.processing_time:
                pt_deadline = None
        ident = (key, self.table.name(window))
        previous = self._scheduled.get(ident, (None, None))
        if previous == (wm_deadline, pt_deadline):
            return
        self._scheduled[ident] = (wm_deadline, pt_deadline)
        if wm_deadline != previous[0]:
            heapq.heappush(self._watermark_timers, (wm_deadline, next(self._seq), *ident))
        if pt_deadline is not None and pt_deadline != previous[1]:
            heapq.heappush(self._processing_timers, (pt_deadline, next(self._seq), *ident))

    def _due(self, heap: list, now: int, slot: int) -> Iterator[int]:
        """Pop timers with deadline <= now, skipping entries superseded by a later schedule; yields rows."""
        while heap and heap[0][0] <= now:
            deadline, _, key, name = heapq.heappop(heap)
            scheduled = self._scheduled.get((key, name))
            if scheduled is None or scheduled[slot] != deadline:
                continue
            # Mark consumed so that _schedule re-arms it even if the deadline is unchanged.
            self._scheduled[(key, name)] = (None, scheduled[1]) if slot == 0 else (scheduled[0], None)
            row = self.table.row_of(key, name)
            if row is not None:
                yield row

    # ---------------------------------------------------------------- gauges
    def next_watermark_deadline(self) -> int | None:
        return self._next_due(self._watermark_timers, 0)

    def next_processing_deadline(self) -> int | None:
        return self._next_due(self._processing_timers, 1)

    def _next_due(self, heap: list, slot: int) -> int | None:
        """The earliest live deadline of a timer heap; superseded entries on top are dropped (``_due`` would
        skip them)."""
        while heap:
            deadline, _, key, name = heap[0]
            scheduled = self._scheduled.get((key, name))
            if scheduled is not None and scheduled[slot] == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def output_hold(self) -> int | None:
        return self.table.output_hold()

    def oldest_pending(self) -> int | None:
        return self.table.oldest_pending()

    def window_count(self) -> int:
        return self.table.window_count()

    def gather(self) -> None:
        pass  # nothing is kept apart from the table

    def trigger_view(self, row: int) -> tuple[Any, tuple[str, ...]]:
        details = ("trigger finished (window closed)",) if self.table.cols["closed"][row] else ()
        return self.table.cols["trigger"][row], details

    # -------------------------------------------------------------- snapshot
    def snapshot(self, apart: bool = False) -> tuple[dict[str, Any], dict[int, bytes], set[int]]:
        return {}, {}, set()  # the trigger states are a table column; the timers are derived from them

    def restore(self, data: dict[str, Any]) -> None:
        for row in self.table.live_rows().tolist():
            self._schedule(row)
