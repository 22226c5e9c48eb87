"""The columnar window operator: the fast path for the most common pipelines.

Same contract and same panes as :class:`~floodmark.core.operator.WindowOperator`
(a property test runs both on random streams), but the state of all windows
of all keys is a set of numpy columns instead of one Python object per window,
so a batch costs numpy work plus one dict lookup per (key, window) group, and
firing is a vectorised mask over the state. It covers:

* non-merging windows (tumbling, sliding, global);
* triggers ``Default()``, ``Never()`` and ``AfterWatermark()`` with late firings
  on every late record (``late=AfterCount(1)``, as ``Default()``) or none, and with
  or without early firings:

  - ``AfterProcessingTime(delay > 0)`` (Beam's "speculative results every N
    seconds"): a window fires EARLY once ``delay`` ms of processing time have
    passed since its first record after the last pane; the deadline is the
    ``pending`` column plus the delay;
  - ``AfterCount(n)``: a pane after every n-th record of the window, mid-batch, in
    arrival order (``new_count`` is the trigger's count); these need the records,
    so no map-side partials (:func:`supports_partials`);
* aggregates count, sum, min, max and mean (alone or in ``several``).

Everything else (sessions, a zero early delay, other late firings, composite
triggers, collect_list, user-defined aggregates) runs on the general operator;
:func:`floodmark.core.step.make_operator` picks. Pane frames: fired panes come out as one pandas
frame per call (``Emitted.pane_frames``) so that runtimes never build a Python
object per pane; ``Emitted.all_panes()`` turns them into :class:`Pane` objects.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from floodmark.core import aggregates as agg
from floodmark.core.operator import Emitted, WindowSpec, assign_batch, late_record, validate_timestamps
from floodmark.core.panes import AccumulationMode
from floodmark.core.records import LateReason, LateRecord, RecordBatch
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.triggers import AfterCount, AfterProcessingTime, AfterWatermark, Default, Never, Trigger
from floodmark.core.windows import Global, Sliding, Tumbling, Window

NONE_TIME = np.iinfo(np.int64).max  # "no value" in int64 time columns
SIMPLE = (agg.Count, agg.Sum, agg.Min, agg.Max, agg.Mean)


def _parts(aggregate: agg.Aggregate) -> dict[str, agg.Aggregate] | None:
    parts = aggregate.parts if isinstance(aggregate, agg.Several) else {"value": aggregate}
    if all(type(part) in SIMPLE for part in parts.values()):
        return parts
    return None


def early_delay(spec: WindowSpec) -> int | None:
    """The delay of ``spec``'s early firings in ms when they are ``AfterProcessingTime(delay)``, else None."""
    trigger = spec.trigger
    if (
        type(trigger) is AfterWatermark
        and trigger.early is not None
        and type(trigger.early.trigger) is AfterProcessingTime
    ):
        return trigger.early.trigger.delay
    return None


def early_count(spec: WindowSpec) -> int | None:
    """``n`` when ``spec``'s early firings are ``AfterCount(n)`` (a pane every n records), else None."""
    trigger = spec.trigger
    if type(trigger) is AfterWatermark and trigger.early is not None and type(trigger.early.trigger) is AfterCount:
        return trigger.early.trigger.count
    return None


def finishes_on_time(trigger: Trigger) -> bool:
    """``AfterWatermark()`` without late firings: the on-time pane is the last, later records are refused."""
    return type(trigger) is AfterWatermark and trigger.late is None


def _fires_every_late_record(trigger: AfterWatermark) -> bool:
    """``late=AfterCount(1)``: one LATE pane per late record, as ``Default()`` does."""
    return trigger.late is not None and type(trigger.late.trigger) is AfterCount and trigger.late.trigger.count == 1


def supports(spec: WindowSpec) -> bool:
    """Can the columnar operator run ``spec``?"""
    trigger = spec.trigger
    if type(trigger) is AfterWatermark:
        delay = early_delay(spec)
        # A zero delay fires as records arrive, inside the add call: partials and records of one window arriving
        # in separate calls would fire separate panes, so it stays on the general operator.
        simple_early = trigger.early is None or (delay is not None and delay > 0) or early_count(spec) is not None
        simple_trigger = simple_early and (trigger.late is None or _fires_every_late_record(trigger))
    else:
        simple_trigger = isinstance(trigger, Default | Never)
    return (
        isinstance(spec.window, Tumbling | Sliding | Global) and simple_trigger and _parts(spec.aggregate) is not None
    )


def supports_partials(spec: WindowSpec) -> bool:
    """Can records be aggregated before the shuffle (:func:`combine`) for ``spec``?

    Not with early count firings: a pane fires after exactly n records, in
    arrival order, so the operator needs the records themselves.
    """
    return supports(spec) and early_count(spec) is None


class ColumnarWindowOperator:
    """Columnar implementation of the window operator for simple specs (see module docstring)."""

    INT_COLUMNS = ("start", "end", "new_count", "hold", "pane_index", "nonspec", "pending")
    BOOL_COLUMNS = ("held", "had_nonearly", "closed", "fired", "live")

    def __init__(self, spec: WindowSpec, watermark: int = MIN_TIMESTAMP, processing_time: int = 0) -> None:
        if not supports(spec):
            raise ValueError("this spec needs the general WindowOperator")
        self.spec = spec
        self.early_delay = early_delay(spec)
        self.early_count = early_count(spec)
        self.parts = _parts(spec.aggregate) or {}
        self.single = not isinstance(spec.aggregate, agg.Several)
        self.watermark = watermark
        self.processing_time = processing_time
        self.keys: list[Any] = []
        self.index: dict[tuple[Any, int], int] = {}
        self.free: list[int] = []
        self.cols: dict[str, np.ndarray] = {}
        for name in self.INT_COLUMNS:
            self.cols[name] = np.zeros(0, dtype=np.int64)
        for name in self.BOOL_COLUMNS:
            self.cols[name] = np.zeros(0, dtype=bool)
        for name, part in self.parts.items():
            for col, dtype in self._acc_columns(name, part):
                self.cols[col] = np.zeros(0, dtype=dtype)
        combiner = spec.timestamp_combiner
        self.hold_empty = MIN_TIMESTAMP if combiner is TimestampCombiner.LATEST else NONE_TIME

    # ---------------------------------------------------------------- layout
    @staticmethod
    def _acc_columns(name: str, part: agg.Aggregate) -> list[tuple[str, Any]]:
        if isinstance(part, agg.Count):
            return [(f"{name}.n", np.int64)]
        if isinstance(part, agg.Mean):
            return [(f"{name}.s", np.float64), (f"{name}.n", np.int64)]
        return [(f"{name}.v", np.float64)]  # Sum: 0.0; Min/Max: NaN = none yet

    def _acc_empty(self, col: str, part: agg.Aggregate) -> Any:
        if isinstance(part, agg.Min | agg.Max) and col.endswith(".v"):
            return np.nan
        return 0

    def _allocate(self, count: int) -> np.ndarray:
        reuse = self.free[-count:] if count <= len(self.free) else list(self.free)
        del self.free[len(self.free) - len(reuse) :]
        fresh = count - len(reuse)
        if fresh:
            size = len(self.cols["live"])
            for name, column in self.cols.items():
                self.cols[name] = np.concatenate([column, np.zeros(max(fresh, size // 2), dtype=column.dtype)])
            self.free.extend(range(size + fresh, len(self.cols["live"])))
            self.keys.extend([None] * (len(self.cols["live"]) - size))
            reuse = list(reuse) + list(range(size, size + fresh))
        rows = np.array(reuse, dtype=np.int64)
        c = self.cols
        for name in ("new_count", "pane_index", "nonspec"):
            c[name][rows] = 0
        c["hold"][rows] = self.hold_empty
        c["pending"][rows] = NONE_TIME
        for name in ("held", "had_nonearly", "closed", "fired"):
            c[name][rows] = False
        c["live"][rows] = True
        for name, part in self.parts.items():
            for col, _ in self._acc_columns(name, part):
                c[col][rows] = self._acc_empty(col, part)
        return rows

    def _rows_for(self, keys: list[Any], starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row of each (key, start), creating missing ones; also whether each existed before."""
        found = [self.index.get((k, s), -1) for k, s in zip(keys, starts.tolist(), strict=True)]
        rows = np.array(found, dtype=np.int64)
        existed = rows >= 0
        missing = np.flatnonzero(~existed)
        if len(missing):
            new_rows = self._allocate(len(missing))
            rows[missing] = new_rows
            self.cols["start"][new_rows] = starts[missing]
            self.cols["end"][new_rows] = ends[missing]
            for i, row in zip(missing.tolist(), new_rows.tolist(), strict=True):
                self.keys[row] = keys[i]
                self.index[(keys[i], int(starts[i]))] = row
        return rows, existed

    def _release(self, rows: np.ndarray) -> None:
        starts = self.cols["start"][rows].tolist()
        for row, start in zip(rows.tolist(), starts, strict=True):
            del self.index[(self.keys[row], start)]
            self.keys[row] = None
        self.cols["live"][rows] = False
        self.free.extend(rows.tolist())

    def _horizon(self, ends: np.ndarray) -> np.ndarray:
        lateness = self.spec.allowed_lateness
        return np.minimum(ends - 1, MAX_TIMESTAMP - lateness) + lateness

    # ------------------------------------------------------------------ time
    def advance_processing_time(self, processing_time: int) -> Emitted:
        """Move processing time forward (a lower value is ignored); fire the EARLY panes that are due.

        A window in its early phase fires when ``processing_time >= pending + delay``,
        ``pending`` being the processing time of its first record since its last pane.
        """
        out = Emitted()
        if processing_time <= self.processing_time:
            return out
        self.processing_time = processing_time
        if self.early_delay is None:
            return out
        c = self.cols
        pending = c["pending"]
        due = (
            c["live"]
            & ~c["closed"]
            & ~c["fired"]
            & (c["end"] - 1 > self.watermark)
            & (pending != NONE_TIME)
            & (pending <= processing_time - self.early_delay)
        )
        rows = np.flatnonzero(due)
        if len(rows):
            out.pane_frames.append(self._emit(rows, np.zeros(len(rows), dtype=bool)))
        return out

    def advance_watermark(self, watermark: int) -> Emitted:
        out = Emitted()
        if watermark <= self.watermark:
            return out
        self.watermark = watermark
        c = self.cols
        live = c["live"]
        max_ts = c["end"] - 1
        collect = live & (self._horizon(c["end"]) <= watermark)
        trigger = self.spec.trigger
        if isinstance(trigger, Never):
            firing = np.zeros_like(live)
        else:
            firing = live & ~c["closed"] & ~c["fired"] & (max_ts <= watermark)
        final = collect & ~firing & ~c["closed"] & (c["new_count"] > 0)
        rows = np.flatnonzero(firing | final)
        if len(rows):
            finished = finishes_on_time(trigger) & firing[rows]
            is_last = finished | collect[rows]
            out.pane_frames.append(self._emit(rows, is_last))
            c["fired"][rows[firing[rows]]] = True
            closed_rows = rows[finished]
            c["closed"][closed_rows] = True
        gone = np.flatnonzero(collect)
        if len(gone):
            self._release(gone)
        return out

    def _emit(self, rows: np.ndarray, is_last: np.ndarray) -> pd.DataFrame:
        """Fire ``rows`` at the current watermark: one pane each (empty non-ON_TIME panes skipped)."""
        c = self.cols
        max_ts = c["end"][rows] - 1
        held = c["held"][rows]
        had_nonearly = c["had_nonearly"][rows]
        early = max_ts > self.watermark
        timing = np.where(had_nonearly, "LATE", np.where(early, "EARLY", np.where(held, "ON_TIME", "LATE")))
        emit = (c["new_count"][rows] > 0) | (timing == "ON_TIME")
        hold = c["hold"][rows]
        if self.spec.timestamp_combiner is TimestampCombiner.END_OF_WINDOW:
            stamps = max_ts
        else:
            stamps = np.where(hold == self.hold_empty, max_ts, np.minimum(hold, max_ts))
        frame = self._pane_frame(rows, timing, is_last, stamps)[emit]
        emitted = rows[emit]
        nonearly = emitted[timing[emit] != "EARLY"]
        c["pane_index"][emitted] += 1
        c["nonspec"][nonearly] += 1
        c["had_nonearly"][nonearly] = True
        c["held"][nonearly] = False
        c["hold"][rows] = self.hold_empty
        c["new_count"][rows] = 0
        c["pending"][rows] = NONE_TIME
        if self.spec.accumulation is AccumulationMode.DISCARDING:
            self._reset_acc(rows)
        return frame

    def _reset_acc(self, rows: np.ndarray) -> None:
        for name, part in self.parts.items():
            for col, _ in self._acc_columns(name, part):
                self.cols[col][rows] = self._acc_empty(col, part)

    def _results(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        return self._results_of({col: column[rows] for col, column in self.cols.items() if "." in col})

    def _results_of(self, acc: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Aggregate results from accumulator columns (``name.n``, ``name.s``, ``name.v``)."""
        results = {}
        for name, part in self.parts.items():
            if isinstance(part, agg.Count):
                results[name] = acc[f"{name}.n"]
            elif isinstance(part, agg.Mean):
                n = acc[f"{name}.n"]
                with np.errstate(invalid="ignore", divide="ignore"):
                    results[name] = np.where(n > 0, acc[f"{name}.s"] / np.maximum(n, 1), np.nan)
            else:
                results[name] = acc[f"{name}.v"]
        return results

    def _pane_frame(self, rows, timing, is_last, stamps, results=None, index=None, nonspec=None) -> pd.DataFrame:
        c = self.cols
        keys = np.empty(len(rows), dtype=object)
        keys[:] = [self.keys[r] for r in rows.tolist()]
        index = c["pane_index"][rows] if index is None else index
        nonspec = c["nonspec"][rows] if nonspec is None else nonspec
        frame = pd.DataFrame(
            {
                "key": keys,
                "window_start": c["start"][rows],
                "window_end": c["end"][rows],
                "timestamp": stamps,
                "timing": timing,
                "index": index,
                "nonspeculative_index": np.where(timing == "EARLY", -1, nonspec),
                "is_last": is_last,
            }
        )
        for name, values in (results if results is not None else self._results(rows)).items():
            frame["value" if self.single else f"value.{name}"] = values
        return frame

    # --------------------------------------------------------------- records
    def add_records(self, batch: RecordBatch) -> Emitted:
        out = Emitted()
        n = len(batch)
        if n == 0:
            return out
        assigned = assign_batch(self.spec, self.watermark, batch, out)
        if assigned is None:
            return out
        keys, payload, pos = assigned.keys, assigned.payload, assigned.rows
        starts, ends, ts, out_times = assigned.starts, assigned.ends, assigned.timestamps, assigned.out_times
        values = {
            part.field: np.asarray(batch.columns[part.field], dtype=np.float64)[pos]
            for part in self.parts.values()
            if not isinstance(part, agg.Count)
        }
        late_phase = ends - 1 <= self.watermark
        if (~late_phase).any() and self.early_count is not None:
            self._accumulate_counting(out, keys, pos, starts, ends, out_times, values, ~late_phase)
        elif (~late_phase).any():
            self._accumulate(keys, pos, starts, ends, out_times, values, ~late_phase)
        if late_phase.any() and not isinstance(self.spec.trigger, Never):
            self._late_records(out, keys, pos, starts, ends, ts, values, late_phase, payload)
        elif late_phase.any():
            self._accumulate(keys, pos, starts, ends, out_times, values, late_phase, holds=False)
        return out

    def _groups(self, keys, pos, starts, mask):
        """Group the selected rows by (key, window start), keeping arrival order inside groups."""
        sel = np.flatnonzero(mask)
        order, first, group = _group_order(keys[pos[sel]], starts[sel])
        sel = sel[order]
        heads = sel[first]
        group_keys = _group_keys(keys[pos[sel]], first)
        return sel, group, heads, group_keys

    def _accumulate(self, keys, pos, starts, ends, out_times, values, mask, holds=True):
        sel = np.flatnonzero(mask)
        partials = reduce_records(
            self.spec, keys[pos[sel]], starts[sel], ends[sel], out_times[sel], {f: v[sel] for f, v in values.items()}
        )
        self._merge(partials, holds)

    def _accumulate_counting(self, out, keys, pos, starts, ends, out_times, values, mask):
        """Early-phase records with early ``AfterCount(n)`` firings: an EARLY pane after every n-th record.

        Records of one window are taken in arrival order; position ``p`` counts
        from the window's last pane (``new_count`` records are already in the
        state, fewer than n: the n-th always fires), so segment ``p // n`` of the
        window's records ends with a pane. The state's accumulators and hold are
        folded into segment 0.
        """
        sel, group, heads, group_keys = self._groups(keys, pos, starts, mask)
        c = self.cols
        rows, _ = self._rows_for(group_keys, starts[heads], ends[heads])
        n = self.early_count
        first_of_group = np.flatnonzero(np.r_[True, np.diff(group) != 0])
        position = c["new_count"][rows][group] + np.arange(len(sel)) - first_of_group[group]
        segment = position // n
        new_segment = np.r_[True, (np.diff(group) != 0) | (np.diff(segment) != 0)]
        bounds = np.flatnonzero(new_segment)
        last_of_segment = np.r_[bounds[1:], len(sel)] - 1
        seg_group, seg_index = group[bounds], segment[bounds]
        seg_row = rows[seg_group]
        complete = (position[last_of_segment] + 1) % n == 0
        folds_state = seg_index == 0
        # Per segment: accumulators of its records, plus the state's in the group's first segment.
        seg_acc: dict[str, np.ndarray] = {}
        for col, part in _layout_parts(self.parts):
            state = c[col][seg_row]
            if col.endswith(".n"):
                mine = np.diff(np.r_[bounds, len(sel)]).astype(np.int64)
            else:
                v = values[part.field][sel]
                if isinstance(part, agg.Min | agg.Max) and col.endswith(".v"):
                    reduce = np.fmin if isinstance(part, agg.Min) else np.fmax
                    mine = reduce.reduceat(v, bounds)
                    seg_acc[col] = np.where(folds_state, reduce(state, mine), mine)
                    continue
                mine = np.add.reduceat(v, bounds)
            seg_acc[col] = np.where(folds_state, state + mine, mine)
        times = out_times[sel]
        combiner = self.spec.timestamp_combiner
        if combiner is TimestampCombiner.LATEST:
            seg_hold = np.maximum.reduceat(times, bounds)
            seg_hold = np.where(folds_state, np.maximum(c["hold"][seg_row], seg_hold), seg_hold)
        elif combiner is TimestampCombiner.EARLIEST:
            seg_hold = np.minimum.reduceat(times, bounds)
            seg_hold = np.where(folds_state, np.minimum(c["hold"][seg_row], seg_hold), seg_hold)
        else:
            seg_hold = np.full(len(bounds), self.hold_empty, dtype=np.int64)
        accumulating = self.spec.accumulation is AccumulationMode.ACCUMULATING
        if accumulating:  # a pane shows everything so far: cumulate the segments of each window
            for col, part in _layout_parts(self.parts):
                grouped = pd.Series(seg_acc[col]).groupby(seg_group)
                if isinstance(part, agg.Min | agg.Max) and col.endswith(".v"):
                    seg_acc[col] = (grouped.cummin() if isinstance(part, agg.Min) else grouped.cummax()).to_numpy()
                else:
                    seg_acc[col] = grouped.cumsum().to_numpy().astype(c[col].dtype)
        fired = np.flatnonzero(complete)
        if len(fired):
            f_rows = seg_row[fired]
            max_ts = c["end"][f_rows] - 1
            hold = seg_hold[fired]
            if combiner is TimestampCombiner.END_OF_WINDOW:
                stamps = max_ts
            else:
                stamps = np.where(hold == self.hold_empty, max_ts, np.minimum(hold, max_ts))
            out.pane_frames.append(
                self._pane_frame(
                    f_rows,
                    np.full(len(fired), "EARLY", dtype=object),
                    np.zeros(len(fired), dtype=bool),
                    stamps,
                    results=self._results_of({col: seg_acc[col][fired] for col in seg_acc}),
                    index=c["pane_index"][f_rows] + seg_index[fired],
                )
            )
        # The state after the batch: each window's last segment (empty when it just fired).
        last = np.r_[np.diff(seg_group) != 0, True]
        w_rows, w_complete = seg_row[last], complete[last]
        panes_fired = np.bincount(seg_group, weights=complete, minlength=len(rows)).astype(np.int64)
        c["pane_index"][rows] += panes_fired
        c["new_count"][w_rows] = np.where(w_complete, 0, position[last_of_segment[last]] + 1 - n * seg_index[last])
        for col, part in _layout_parts(self.parts):
            tail = seg_acc[col][last]
            if accumulating:
                c[col][w_rows] = tail
            else:
                c[col][w_rows] = np.where(w_complete, self._acc_empty(col, part), tail)
        c["hold"][w_rows] = np.where(w_complete, self.hold_empty, seg_hold[last])
        pending = c["pending"][w_rows]
        had_pane = panes_fired[seg_group[last]] > 0
        c["pending"][w_rows] = np.where(
            w_complete,
            NONE_TIME,
            np.where(had_pane | (pending == NONE_TIME), self.processing_time, pending),
        )
        c["held"][w_rows] = True

    def add_partials(self, partials: Partials) -> Emitted:
        """Merge the partial aggregates of on-time records (from :func:`combine`, possibly several of them).

        Same result as :meth:`add_records` of the records the partials were made
        of. Every window must still be open (``end - 1 > watermark``): records
        of windows the watermark has reached must come as records, because they
        fire LATE panes one by one or go to the late output with their payload.
        """
        if len(partials) == 0:
            return Emitted()
        if not supports_partials(self.spec):
            raise ValueError("early count firings need the records themselves, not partial aggregates")
        if (partials.ends - 1 <= self.watermark).any():
            raise ValueError(
                "partial aggregates for a window the watermark has already reached: the combiner and the "
                "operator disagree on the watermark"
            )
        self._merge(reduce_partials(self.spec, partials), holds=True)
        return Emitted()

    def _merge(self, partials: Partials, holds: bool) -> None:
        """Add one partial per distinct (key, window) into the state (no firing: windows are open)."""
        rows, _ = self._rows_for(list(partials.keys), partials.starts, partials.ends)
        c = self.cols
        c["new_count"][rows] += partials.counts
        pending = c["pending"][rows]
        c["pending"][rows] = np.where(pending == NONE_TIME, self.processing_time, pending)
        for col, part in _layout_parts(self.parts):
            incoming = partials.accumulators[col]
            if isinstance(part, agg.Min | agg.Max) and col.endswith(".v"):
                reduce = np.minimum if isinstance(part, agg.Min) else np.maximum
                c[col][rows] = np.where(np.isnan(c[col][rows]), incoming, reduce(c[col][rows], incoming))
            else:
                c[col][rows] += incoming
        if holds:
            c["held"][rows] = True
            combiner = self.spec.timestamp_combiner
            if combiner is TimestampCombiner.EARLIEST:
                c["hold"][rows] = np.minimum(c["hold"][rows], partials.hold)
            elif combiner is TimestampCombiner.LATEST:
                c["hold"][rows] = np.maximum(c["hold"][rows], partials.hold)

    def _late_records(self, out, keys, pos, starts, ends, ts, values, mask, payload):
        """Records whose window already reached its max timestamp (within allowed lateness)."""
        sel, group, heads, group_keys = self._groups(keys, pos, starts, mask)
        rows, _ = self._rows_for(group_keys, starts[heads], ends[heads])
        c = self.cols
        per_record_row = rows[group]
        rank = np.arange(len(sel)) - np.flatnonzero(np.r_[True, np.diff(group) != 0])[group]
        closed = c["closed"][per_record_row]
        if finishes_on_time(self.spec.trigger):
            # A window first seen after its end fires once with its first record, then closes.
            firing = ~closed & (rank == 0)
            refused = ~firing
        else:  # Default or late=AfterCount(1): every late record fires a LATE pane of its own
            firing = ~closed
            refused = closed
        for i in np.flatnonzero(refused).tolist():
            row = per_record_row[i]
            window = Window(int(c["start"][row]), int(c["end"][row]))
            p = pos[sel[i]]
            out.late.append(self._late(keys[p], window, int(ts[sel[i]]), _at(payload, p), LateReason.WINDOW_CLOSED))
        fire_idx = np.flatnonzero(firing)
        if len(fire_idx) == 0:
            return
        f_rows = per_record_row[fire_idx]
        f_group = group[fire_idx]
        f_rank = rank[fire_idx]  # a group fires all its records (Default) or only its first (AfterWatermark)
        last = np.r_[np.diff(f_group) != 0, True]  # the last firing record of each window
        accumulating = self.spec.accumulation is AccumulationMode.ACCUMULATING
        results: dict[str, np.ndarray] = {}
        for name, part in self.parts.items():
            if isinstance(part, agg.Count):
                if accumulating:
                    results[name] = c[f"{name}.n"][f_rows] + f_rank + 1
                    c[f"{name}.n"][f_rows[last]] = results[name][last]
                else:
                    results[name] = np.ones(len(fire_idx), dtype=np.int64)
                continue
            v = values[part.field][sel[fire_idx]]
            if not accumulating:
                results[name] = v
                continue
            grouped = pd.Series(v).groupby(f_group)
            if isinstance(part, agg.Sum):
                results[name] = c[f"{name}.v"][f_rows] + grouped.cumsum().to_numpy()
                c[f"{name}.v"][f_rows[last]] = results[name][last]
            elif isinstance(part, agg.Mean):
                total = c[f"{name}.s"][f_rows] + grouped.cumsum().to_numpy()
                count = c[f"{name}.n"][f_rows] + f_rank + 1
                results[name] = total / count
                c[f"{name}.s"][f_rows[last]] = total[last]
                c[f"{name}.n"][f_rows[last]] = count[last]
            else:
                cumulative = (grouped.cummin() if isinstance(part, agg.Min) else grouped.cummax()).to_numpy()
                reduce = np.fmin if isinstance(part, agg.Min) else np.fmax
                results[name] = reduce(c[f"{name}.v"][f_rows], cumulative)
                c[f"{name}.v"][f_rows[last]] = results[name][last]
        timing = np.full(len(fire_idx), "LATE", dtype=object)
        is_last = np.full(len(fire_idx), finishes_on_time(self.spec.trigger))
        out.pane_frames.append(
            self._pane_frame(
                f_rows,
                timing,
                is_last,
                c["end"][f_rows] - 1,
                results=results,
                index=c["pane_index"][f_rows] + f_rank,
                nonspec=c["nonspec"][f_rows] + f_rank,
            )
        )
        window_rows = f_rows[last]
        fired = f_rank[last] + 1
        c["pane_index"][window_rows] += fired
        c["nonspec"][window_rows] += fired
        c["had_nonearly"][window_rows] = True
        c["held"][window_rows] = False
        c["fired"][window_rows] = True
        if finishes_on_time(self.spec.trigger):
            c["closed"][window_rows] = True
        if not accumulating:
            self._reset_acc(window_rows)

    def _late(self, key, window: Window, timestamp: int, value: Any, reason: LateReason) -> LateRecord:
        return late_record(self.spec, self.watermark, key, window, timestamp, value, reason)

    # ------------------------------------------------------------ gauges
    def output_hold(self) -> int | None:
        c = self.cols
        mask = c["live"] & c["held"] & ~c["closed"]
        if not mask.any():
            return None
        max_ts = c["end"][mask] - 1
        if self.spec.timestamp_combiner is TimestampCombiner.END_OF_WINDOW:
            return int(max_ts.min())
        hold = c["hold"][mask]
        return int(np.where(hold == self.hold_empty, max_ts, np.minimum(hold, max_ts)).min())

    def oldest_pending_processing_time(self) -> int | None:
        pending = self.cols["pending"][self.cols["live"]]
        pending = pending[pending != NONE_TIME]
        return int(pending.min()) if len(pending) else None

    def window_count(self) -> int:
        return int(self.cols["live"].sum())

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        live = np.flatnonzero(self.cols["live"])
        data = {
            "watermark": self.watermark,
            "processing_time": self.processing_time,
            "keys": [self.keys[r] for r in live.tolist()],
            "cols": {name: column[live] for name, column in self.cols.items()},
        }
        return pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, spec: WindowSpec, snapshot: bytes) -> ColumnarWindowOperator:
        data = pickle.loads(snapshot)
        operator = cls(spec, data["watermark"], data["processing_time"])
        operator.cols = dict(data["cols"])
        operator.keys = list(data["keys"])
        starts = operator.cols["start"].tolist()
        operator.index = {(k, s): i for i, (k, s) in enumerate(zip(operator.keys, starts, strict=True))}
        return operator


# ------------------------------------------------------------------ map-side combine
@dataclass(frozen=True)
class Partials:
    """Partial aggregates of on-time records, one row per (key, window): what a map-side combiner ships.

    :ivar keys: object array of keys. :ivar starts, ends: window bounds in ms
        (start inclusive, end exclusive). :ivar counts: records per row.
    :ivar hold: the rows' earliest (``EARLIEST``) or latest (``LATEST``)
        output time; unused with ``END_OF_WINDOW``.
    :ivar accumulators: ``{column: array}`` in the layout of :func:`accumulator_layout`.
    :ivar origin: for each row, the position of one of its records in the batch
        it was combined from (a runtime copies per-key columns from there), or ``None``.
    A (key, window) may appear in several rows (e.g. one per Spark partition);
    :meth:`ColumnarWindowOperator.add_partials` combines them.
    """

    keys: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    counts: np.ndarray
    hold: np.ndarray
    accumulators: dict[str, np.ndarray]
    origin: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.keys)


def accumulator_layout(spec: WindowSpec) -> list[tuple[str, Any]]:
    """The accumulator columns of a columnar spec, ``[(name, numpy dtype)]`` (e.g. ``("total.v", float64)``)."""
    parts = _parts(spec.aggregate) or {}
    return [
        (col, dtype) for name, part in parts.items() for col, dtype in ColumnarWindowOperator._acc_columns(name, part)
    ]


def _layout_parts(parts: dict[str, agg.Aggregate]) -> list[tuple[str, agg.Aggregate]]:
    return [(col, part) for name, part in parts.items() for col, _ in ColumnarWindowOperator._acc_columns(name, part)]


def _group_order(keys: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort order grouping rows by (key, start) with arrival order kept inside groups; group heads; group ids."""
    codes, _ = pd.factorize(pd.Series(keys, dtype=object), use_na_sentinel=False)
    order = np.lexsort((np.arange(len(keys)), starts, codes))
    codes, starts = codes[order], starts[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (codes[1:] != codes[:-1]) | (starts[1:] != starts[:-1])
    return order, first, np.cumsum(first) - 1


def _group_keys(sorted_keys: np.ndarray, first: np.ndarray) -> np.ndarray:
    heads = np.empty(int(first.sum()), dtype=object)
    heads[:] = list(sorted_keys[first])
    return heads


def reduce_records(
    spec: WindowSpec,
    keys: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    out_times: np.ndarray,
    values: dict[str | None, np.ndarray],
) -> Partials:
    """Aggregate (record, window) pairs into one partial per (key, window); arrays are per pair."""
    parts = _parts(spec.aggregate) or {}
    order, first, group = _group_order(keys, starts)
    heads = order[first]
    bounds = np.flatnonzero(first)
    counts = np.bincount(group, minlength=len(heads)).astype(np.int64)
    accumulators: dict[str, np.ndarray] = {}
    for name, part in parts.items():
        if isinstance(part, agg.Count):
            accumulators[f"{name}.n"] = counts
            continue
        v = np.asarray(values[part.field], dtype=np.float64)[order]
        if isinstance(part, agg.Sum):
            accumulators[f"{name}.v"] = np.bincount(group, weights=v, minlength=len(heads))
        elif isinstance(part, agg.Mean):
            accumulators[f"{name}.s"] = np.bincount(group, weights=v, minlength=len(heads))
            accumulators[f"{name}.n"] = counts
        else:
            reduce = np.minimum if isinstance(part, agg.Min) else np.maximum
            accumulators[f"{name}.v"] = reduce.reduceat(v, bounds) if len(v) else v
    combiner = spec.timestamp_combiner
    t = np.asarray(out_times, dtype=np.int64)[order]
    if combiner is TimestampCombiner.LATEST:
        hold = np.maximum.reduceat(t, bounds) if len(t) else t
    else:
        hold = np.minimum.reduceat(t, bounds) if len(t) else t
    return Partials(
        _group_keys(np.asarray(keys, dtype=object)[order], first),
        starts[heads],
        ends[heads],
        counts,
        hold,
        accumulators,
        origin=heads,
    )


def reduce_partials(spec: WindowSpec, partials: Partials) -> Partials:
    """Combine partials of the same (key, window) into one row each."""
    order, first, _ = _group_order(partials.keys, partials.starts)
    if first.all():
        return partials
    bounds = np.flatnonzero(first)
    heads = order[first]
    parts = _parts(spec.aggregate) or {}

    def total(values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values[order], bounds)

    accumulators = {}
    for col, part in _layout_parts(parts):
        values = partials.accumulators[col]
        if isinstance(part, agg.Min | agg.Max) and col.endswith(".v"):
            reduce = np.fmin if isinstance(part, agg.Min) else np.fmax
            accumulators[col] = reduce.reduceat(values[order], bounds)
        else:
            accumulators[col] = total(values)
    hold_reduce = np.maximum if spec.timestamp_combiner is TimestampCombiner.LATEST else np.minimum
    return Partials(
        _group_keys(partials.keys[order], first),
        partials.starts[heads],
        partials.ends[heads],
        total(partials.counts),
        hold_reduce.reduceat(partials.hold[order], bounds),
        accumulators,
    )


def open_window_pairs(
    spec: WindowSpec, watermark: int, timestamps: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which (record, window) pairs can be aggregated before the shuffle, and which records cannot.

    A record all of whose windows are still open (``end - 1 > watermark``, the
    watermark the operator will use for this batch) can be aggregated; every
    other record (late within allowed lateness, expired, or without a usable
    timestamp) must travel as a record, because it fires a LATE pane of its
    own, goes to the late output with its payload, or is a bad record.

    :arg timestamps: event times in ms, one per record.
    :returns: ``(rows, starts, ends, out_times, raw)``: per pair, the record's
        position, the window's bounds (start inclusive, end exclusive) and the
        record's output time in that window; ``raw`` are the positions of the
        records that must stay records, in order.
    """
    timestamps, bad, _ = validate_timestamps(timestamps)
    good = np.flatnonzero(~bad)
    raw = bad.copy()
    assigned = spec.window.assign(timestamps[good])
    rows = good[assigned.record_index]
    raw[rows[assigned.end - 1 <= watermark]] = True
    keep = ~raw[rows]
    rows, starts, ends = rows[keep], assigned.start[keep], assigned.end[keep]
    out_times = spec.window.output_times(timestamps[rows], starts, ends)
    return rows, starts, ends, out_times, np.flatnonzero(raw)


def accumulator_reductions(spec: WindowSpec) -> list[tuple[str, str, str | None]]:
    """How each accumulator column of :func:`accumulator_layout` is made from records.

    :returns: ``[(column, reduction, field)]`` with reduction ``"count"`` (records
        per row, ``field`` None), ``"sum"``, ``"min"`` or ``"max"`` of ``field``
        (as float64). Lets a runtime aggregate with its own engine (e.g. Arrow)
        and still produce :class:`Partials` the operator merges.
    """
    reductions: list[tuple[str, str, str | None]] = []
    for name, part in (_parts(spec.aggregate) or {}).items():
        for col, _ in ColumnarWindowOperator._acc_columns(name, part):
            if col.endswith(".n"):
                reductions.append((col, "count", None))
            elif col.endswith(".s") or isinstance(part, agg.Sum):
                reductions.append((col, "sum", part.field))
            else:
                reductions.append((col, "min" if isinstance(part, agg.Min) else "max", part.field))
    return reductions


def combine(spec: WindowSpec, watermark: int, batch: RecordBatch) -> tuple[Partials, np.ndarray]:
    """The map-side combine: aggregate what can be aggregated before the shuffle.

    Records split as :func:`open_window_pairs` says. A watermark at or above the
    operator's is safe: it only keeps more records raw.

    :returns: ``(partials, raw)``; ``raw`` are positions into ``batch``, in order.
    Feeding ``operator.add_partials(partials)`` and ``operator.add_records(batch[raw])``
    gives the same panes as ``operator.add_records(batch)`` (sums of floats up to rounding).
    """
    if not supports_partials(spec):
        raise ValueError("this spec cannot be combined before the shuffle (see supports_partials)")
    rows, starts, ends, out_times, raw = open_window_pairs(spec, watermark, batch.timestamps)
    keys = np.asarray(batch.keys, dtype=object) if not isinstance(batch.keys, np.ndarray) else batch.keys
    values = {
        part.field: np.asarray(batch.columns[part.field], dtype=np.float64)[rows]
        for part in (_parts(spec.aggregate) or {}).values()
        if not isinstance(part, agg.Count)
    }
    partials = reduce_records(spec, keys[rows], starts, ends, out_times, values)
    origin = rows[partials.origin] if partials.origin is not None else None
    return dataclasses.replace(partials, origin=origin), raw


def _at(payload: Any, position: int) -> Any:
    if payload is None:
        return None
    value = payload[position]
    return value.item() if isinstance(value, np.generic) else value
