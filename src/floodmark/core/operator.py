"""The general window operator: every trigger, merging windows (sessions), any aggregate.

A pure, deterministic function of its inputs: :class:`WindowOperator` holds the
state, and three calls move it forward, each returning what it emitted as an
:class:`~floodmark.core.emitted.Emitted` (panes, late records, bad records):

* :meth:`WindowOperator.add_records` - a batch of records (many keys at once)
  arrives while the watermark and processing time stand still;
* :meth:`WindowOperator.advance_watermark` - the input watermark moves up;
* :meth:`WindowOperator.advance_processing_time` - processing time moves up.

A micro-batch runtime calls ``advance_processing_time(now)``,
``advance_watermark(w)`` then ``add_records(batch)`` for every batch; the
harness calls them one by one. Cutting a batch of records into several
``add_records`` calls never changes the panes (element-driven triggers are
evaluated after every record; see :mod:`floodmark.core.triggers`).

How it executes: the windows are rows of a
:class:`~floodmark.core.window_table.WindowTable`, which holds the bookkeeping
and the pane rules shared with the columnar operator (timing, indices, pane
timestamps, accumulation, garbage collection). This operator adds one Python
object per window for the accumulator (so any aggregate works) and one for the
trigger's state (so any trigger works, through Beam's protocol), and timers:
lazy heaps of the triggers' watermark and processing-time deadlines, derived
from the state and rebuilt on restore. Window assignment, the expiry test and
grouping by (key, window) are numpy operations over the whole batch; each
(key, window) group then updates its accumulator in slices as large as the
trigger allows (``elements_until_check``). Merging windows (sessions) go record
by record, merged by the window assigner's rule.

Boundaries (see :mod:`floodmark.core.windows`): a window fires ON_TIME when the
watermark reaches its max timestamp; its state is garbage collected and later
records for it go to the late output at its horizon; in between, records make
LATE panes (if the trigger has late firings). Records whose timestamp is missing
or not an integer become bad records. Nothing is dropped silently.
"""

from __future__ import annotations

import heapq
import itertools
import pickle
from collections.abc import Hashable, Iterator
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from floodmark.core.aggregates import Aggregate, add_columns
from floodmark.core.assign import assign_batch, late_record
from floodmark.core.emitted import Emitted
from floodmark.core.records import LateReason, LateRecord, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.triggers import TriggerContext
from floodmark.core.values import unwrap
from floodmark.core.window_table import WindowTable, WindowView
from floodmark.core.windows import Window

ENGINE = "window operator"


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


class WindowOperator:
    """Windowed aggregation of one stage for many keys; see the module docstring.

    :arg spec: the windowing, trigger, lateness, accumulation and aggregation.
    :arg watermark: the initial input watermark (ms).
    :arg processing_time: the initial processing time (ms).
    """

    def __init__(self, spec: WindowSpec, watermark: int = MIN_TIMESTAMP, processing_time: int = 0) -> None:
        self.spec = spec
        self.watermark = watermark
        self.processing_time = processing_time
        self.table = WindowTable(
            spec.timestamp_combiner,
            spec.allowed_lateness,
            spec.accumulation,
            {"acc": (object, None), "trigger": (object, None)},
            track_keys=spec.window.is_merging,
        )
        self.accumulators = ObjectAccumulators(spec.aggregate, self.table)
        self.table.accumulators = self.accumulators
        self._seq = itertools.count()
        self._watermark_timers: list[tuple[int, int, Hashable, int]] = []
        self._processing_timers: list[tuple[int, int, Hashable, int]] = []
        self._scheduled: dict[tuple[Hashable, int], tuple[int | None, int | None]] = {}

    # ------------------------------------------------------------------ time
    def advance_watermark(self, watermark: int) -> Emitted:
        """Move the input watermark to ``watermark`` (a lower value is ignored) and fire
        every window that is due: on-time panes, watermark-driven trigger firings,
        and the final pane of windows whose horizon was reached (then cleared)."""
        out = Emitted()
        if watermark <= self.watermark:
            return out
        self.watermark = watermark
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
            emitted, values = self.table.emit(np.array(firing), watermark, np.array(is_last))
            out.panes.extend(self.table.panes(emitted, values))
        for row in finished:
            self._close(row)
        for row in collected:
            self._release(row)
        for row in kept:
            self._schedule(row)
        return out

    def advance_processing_time(self, processing_time: int) -> Emitted:
        """Move processing time to ``processing_time`` (a lower value is ignored) and fire
        the processing-time triggers that are due."""
        out = Emitted()
        if processing_time <= self.processing_time:
            return out
        self.processing_time = processing_time
        c = self.table.cols
        for row in self._due(self._processing_timers, processing_time, 1):
            ctx = self._ctx(row)
            if not c["closed"][row] and self.spec.trigger.should_fire(c["trigger"][row], ctx):
                self._fire(row, ctx, out, collect=False)
            self._schedule(row)
        return out

    # --------------------------------------------------------------- records
    def add_records(self, batch: RecordBatch) -> Emitted:
        """Process a batch of records at the current watermark and processing time."""
        out = Emitted()
        if len(batch) == 0:
            return out
        watermarks = partial(self.table.key_output_watermarks, watermark=self.watermark)
        assigned = assign_batch(self.spec, self.watermark, batch, out.bad, out.late, watermarks)
        if assigned is None:
            return out
        out.accepted = assigned.pairs  # less the pairs kept out (expired or for a closed window), below
        columns = {name: np.asarray(values) for name, values in batch.columns.items()} | assigned.numbers
        keys, payload, rows = assigned.keys, assigned.payload, assigned.rows
        starts, ends, row_ts, out_times = assigned.starts, assigned.ends, assigned.timestamps, assigned.out_times
        key_codes, unique_keys = pd.factorize(pd.Series(keys[rows], dtype=object), use_na_sentinel=False)
        add = self._add_merging if self.spec.window.is_merging else self._add_grouped
        add(rows, key_codes, unique_keys, starts, ends, row_ts, out_times, columns, payload, out)
        out.accepted -= len(out.late)
        return out

    def _add_grouped(self, rows, key_codes, unique_keys, starts, ends, row_ts, out_times, columns, payload, out):
        # Sort by (key, window start), stably so that records keep arrival order inside a group.
        order = np.lexsort((np.arange(len(rows)), starts, key_codes))
        key_codes, starts, ends = key_codes[order], starts[order], ends[order]
        rows, row_ts, out_times = rows[order], row_ts[order], out_times[order]
        boundary = np.flatnonzero((np.diff(key_codes) != 0) | (np.diff(starts) != 0)) + 1
        bounds = np.concatenate(([0], boundary, [len(rows)]))
        for g in range(len(bounds) - 1):
            lo, hi = int(bounds[g]), int(bounds[g + 1])
            key = unique_keys[key_codes[lo]]
            row = self._row(key, Window(int(starts[lo]), int(ends[lo])))
            self._feed(key, row, rows[lo:hi], row_ts[lo:hi], out_times[lo:hi], columns, payload, out)

    def _add_merging(self, rows, key_codes, unique_keys, starts, ends, row_ts, out_times, columns, payload, out):
        c = self.table.cols
        for i in range(len(rows)):
            key = unique_keys[key_codes[i]]
            proto = Window(int(starts[i]), int(ends[i]))
            existing = self.table.rows_of_key(key)
            closed = sorted(w for w, r in existing.items() if c["closed"][r] and w.intersects(proto))
            if closed:
                out.late.append(self._late(key, closed[0], int(row_ts[i]), payload[rows[i]], LateReason.WINDOW_CLOSED))
                continue
            row = self._merge(key, proto, existing)
            self._feed(key, row, rows[i : i + 1], row_ts[i : i + 1], out_times[i : i + 1], columns, payload, out)

    def _merge(self, key: Hashable, proto: Window, existing: dict[Window, int]) -> int:
        """The row of the window ``proto`` merges into with ``key``'s open windows (the assigner's rule)."""
        merged_window, touching = self.spec.window.merge_into(list(existing), proto)
        if not touching:
            return self._row(key, proto)
        if touching == [merged_window]:
            return existing[merged_window]
        spec, c = self.spec, self.table.cols
        member_rows = [existing[w] for w in touching]
        ctx = TriggerContext(merged_window, self.watermark, self.processing_time)
        trigger = spec.trigger.on_merge([c["trigger"][r] for r in member_rows] + [spec.trigger.new_state()], ctx)
        for member in member_rows:
            self._scheduled.pop((key, int(c["start"][member])), None)
        # The merged window takes over the first member's row; the others are released.
        row, *others = member_rows
        self.table.merge_into(row, merged_window, others)
        c["trigger"][row] = trigger
        return row

    def _feed(self, key, row: int, rows, row_ts, out_times, columns, payload, out: Emitted) -> None:
        """Add one group's records (same key and window, arrival order) and fire when due."""
        spec, c = self.spec, self.table.cols
        trigger, combiner = spec.trigger, spec.timestamp_combiner
        ctx = self._ctx(row)
        i, n = 0, len(rows)
        while i < n:
            if c["closed"][row]:
                for j in range(i, n):
                    out.late.append(
                        self._late(key, ctx.window, int(row_ts[j]), payload[rows[j]], LateReason.WINDOW_CLOSED)
                    )
                break
            wanted = trigger.elements_until_check(c["trigger"][row], ctx)
            take = n - i if wanted is None else min(wanted, n - i)
            chunk = {field: columns[field][rows[i : i + take]] for field in spec.aggregate.fields}
            c["acc"][row] = add_columns(spec.aggregate, c["acc"][row], chunk)
            trigger.on_elements(c["trigger"][row], take, ctx)
            hold = combiner.reduce(out_times[i : i + take])
            self.table.add_arrival(row, take, self.watermark, self.processing_time, hold)
            i += take
            if trigger.should_fire(c["trigger"][row], ctx):
                self._fire(row, ctx, out, collect=False)
        self._schedule(row)

    # ---------------------------------------------------------------- firing
    def _fire(self, row: int, ctx: TriggerContext, out: Emitted, collect: bool) -> None:
        c = self.table.cols
        finished = self.spec.trigger.on_fire(c["trigger"][row], ctx)
        self._emit(row, out, is_last=finished or collect)
        if finished:
            self._close(row)

    def _close(self, row: int) -> None:
        """The trigger finished: the window refuses records until garbage collection; its values go."""
        self.table.cols["closed"][row] = True
        self.table.cols["acc"][row] = None

    def _emit(self, row: int, out: Emitted, is_last: bool) -> None:
        firing, values = self.table.emit(np.array([row]), self.watermark, np.array([is_last]))
        out.panes.extend(self.table.panes(firing, values))

    # ----------------------------------------------------------- bookkeeping
    def _ctx(self, row: int) -> TriggerContext:
        return TriggerContext(self.table.window(row), self.watermark, self.processing_time)

    def _late(self, key, window: Window, timestamp: int, value: Any, reason: LateReason) -> LateRecord:
        return late_record(self.spec, self.watermark, key, window, timestamp, unwrap(value), reason)

    def _row(self, key: Hashable, window: Window) -> int:
        """The row of ``key``'s ``window``, opened with a fresh accumulator and trigger state if new."""
        row = self.table.row_of(key, window.start)
        if row is None:
            row = self.table.open(key, window)
            self.table.cols["acc"][row] = self.spec.aggregate.create()
            self.table.cols["trigger"][row] = self.spec.trigger.new_state()
        return row

    def _release(self, row: int) -> None:
        self._scheduled.pop((self.table.keys[row], int(self.table.cols["start"][row])), None)
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
            if trigger_deadline is not None and trigger_deadline > self.watermark:
                wm_deadline = min(wm_deadline, trigger_deadline)
            pt_deadline = self.spec.trigger.processing_deadline(state)
            if pt_deadline is not None and pt_deadline <= self.processing_time:
                pt_deadline = None
        ident = (key, window.start)
        previous = self._scheduled.get(ident, (None, None))
        if previous == (wm_deadline, pt_deadline):
            return
        self._scheduled[ident] = (wm_deadline, pt_deadline)
        if wm_deadline != previous[0]:
            heapq.heappush(self._watermark_timers, (wm_deadline, next(self._seq), key, window.start))
        if pt_deadline is not None and pt_deadline != previous[1]:
            heapq.heappush(self._processing_timers, (pt_deadline, next(self._seq), key, window.start))

    def _due(self, heap: list, now: int, slot: int) -> Iterator[int]:
        """Pop timers with deadline <= now, skipping entries superseded by a later schedule; yields rows."""
        while heap and heap[0][0] <= now:
            deadline, _, key, start = heapq.heappop(heap)
            scheduled = self._scheduled.get((key, start))
            if scheduled is None or scheduled[slot] != deadline:
                continue
            # Mark consumed so that _schedule re-arms it even if the deadline is unchanged.
            self._scheduled[(key, start)] = (None, scheduled[1]) if slot == 0 else (scheduled[0], None)
            row = self.table.row_of(key, start)
            if row is not None:
                yield row

    # ------------------------------------------------------- watermarks out
    def output_hold(self) -> int | None:
        """The lowest output timestamp a pending pane will carry (holds the stage's output
        watermark), or ``None`` when nothing is held."""
        return self.table.output_hold()

    def oldest_pending_processing_time(self) -> int | None:
        """Processing time of the oldest record not yet emitted in a pane (for the
        processing-time watermark), or ``None`` when nothing is pending."""
        return self.table.oldest_pending()

    def next_watermark_deadline(self) -> int | None:
        """The lowest input watermark at which :meth:`advance_watermark` would fire or collect a window, or None."""
        return self._next_due(self._watermark_timers, 0)

    def next_processing_deadline(self) -> int | None:
        """The lowest processing time at which :meth:`advance_processing_time` would ask a trigger, or None."""
        return self._next_due(self._processing_timers, 1)

    def _next_due(self, heap: list, slot: int) -> int | None:
        """The earliest live deadline of a timer heap; superseded entries on top are dropped (``_due`` would
        skip them)."""
        while heap:
            deadline, _, key, start = heap[0]
            scheduled = self._scheduled.get((key, start))
            if scheduled is not None and scheduled[slot] == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def window_count(self) -> int:
        return self.table.window_count()

    def window_view(self, key: Hashable, window: Window) -> WindowView | None:
        """What the operator holds for ``key``'s ``window`` (a session overlapping it stands in), or None."""
        row, note = self.table.lookup(key, window, self.spec.window.is_merging)
        if row is None:
            return None
        book = self.table.book(row)
        details = ("trigger finished (window closed)",) if book.finished else ()
        return WindowView(book, self.table.cols["trigger"][row], ENGINE, details, note)

    # -------------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """The whole state as bytes (timers are derived and rebuilt on restore)."""
        data = {"watermark": self.watermark, "processing_time": self.processing_time, **self.table.snapshot()}
        return pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, spec: WindowSpec, snapshot: bytes) -> WindowOperator:
        return cls.from_data(spec, pickle.loads(snapshot))

    @classmethod
    def from_data(cls, spec: WindowSpec, data: dict) -> WindowOperator:
        """The operator a snapshot's unpickled ``data`` describes."""
        operator = cls(spec, data["watermark"], data["processing_time"])
        operator.table.restore(data)
        for row in operator.table.live_rows().tolist():
            operator._schedule(row)
        return operator
