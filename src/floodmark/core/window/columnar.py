"""The columnar firing policy: the common pipelines as vectorised masks over numeric columns.

Same panes as the general policy (:mod:`floodmark.core.window.general`; a property test runs both on random
streams). It runs a spec when the spec has a columnar form (``WindowSpec.is_columnar``): a trigger whose compiled
form (:func:`floodmark.core.compiled_trigger.compile_trigger`: ``Default()``, ``Never()``, ``AfterWatermark()`` with
early firings every n records or d > 0 ms of processing time and late firings on every late record or none,
``Repeatedly(AfterProcessingTime(d > 0))`` without allowed lateness) and an aggregate with a
:class:`~floodmark.core.aggregates.ColumnarLayout` (count, sum, min, max, mean, alone or in ``several``); count
firings not with merging windows.

Accumulators are numeric columns of the operator's :class:`~floodmark.core.window.table.WindowTable` (the
layout's reductions) and the trigger is data, so a batch costs numpy work plus one dict lookup per (key, window)
group, and firing is a vectorised mask over the table. What the compiled trigger says, per window:

* ``on_time``: fire when the watermark reaches the max timestamp (``fired`` column); ``late``: afterwards every
  late record fires a LATE pane (``EVERY_RECORD``), or the first pane was final (``NONE``: the window closes), or
  late records wait for the garbage-collection pane (``AT_HORIZON``);
* ``early_delay``: an EARLY pane once ``delay`` ms of processing time have passed since the window's first record
  after its last pane (``pending + delay``);
* ``early_count``: an EARLY pane after every n-th record of the window, mid-batch, in arrival order (these need
  the records: no map-side partials).

Fired panes come out as one pandas frame per call (``Emitted.pane_frames``) so that runtimes never build a Python
object per pane.

With ``deferred=True`` (specs where ``WindowSpec.defers_partials``) the partials of windows the watermark has not
reached stay apart from the table as segments (:mod:`floodmark.core.segments`) until the watermark reaches them:
a runtime that stores the segments apart (``WindowOperator.snapshot_parts``) then reads and writes per batch what
the batch touches, not every open window. The panes are the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from floodmark.core.aggregates import ColumnarLayout
from floodmark.core.assign import Assigned
from floodmark.core.combine import Partials, group_keys, group_order, reduce_partials, reduce_records
from floodmark.core.compiled_trigger import LateFirings, trigger_state
from floodmark.core.emitted import Emitted
from floodmark.core.panes import AccumulationMode
from floodmark.core.records import LateReason, RecordBatch
from floodmark.core.segments import PartialSegments, SegmentLoader
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.window.policy import OperatorTime
from floodmark.core.window.sessions import merge_record
from floodmark.core.window.table import NO_TIME, WindowTable
from floodmark.core.windows import Window, horizon, max_timestamp, merge_groups, window_reached


class ColumnarAccumulators:
    """The aggregate's accumulators as numeric columns of the table (its :class:`ColumnarLayout`)."""

    def __init__(self, layout: ColumnarLayout, table: WindowTable) -> None:
        self.layout = layout
        self.cols = table.cols  # the table replaces arrays when it grows: always index through it

    def of(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        return {c.name: self.cols[c.name][rows] for c in self.layout.columns}

    def results(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        return self.layout.results(self.of(rows))

    def reset(self, rows: np.ndarray) -> None:
        for column in self.layout.columns:
            self.cols[column.name][rows] = column.reduction.empty

    def fold(self, targets: np.ndarray, others: np.ndarray) -> None:
        self.merge(targets, self.of(others))

    def merge(self, rows: np.ndarray, incoming: dict[str, np.ndarray]) -> None:
        """Fold ``incoming`` accumulators into ``rows`` (distinct)."""
        for column in self.layout.columns:
            self.cols[column.name][rows] = column.reduction.merge(self.cols[column.name][rows], incoming[column.name])


class ColumnarPolicy:
    """The columnar firing policy of one operator (see the module docstring)."""

    name = "columnar"

    def __init__(
        self,
        spec: WindowSpec,
        time: OperatorTime,
        deferred: bool = False,
        load_segment: SegmentLoader | None = None,
    ) -> None:
        """:arg deferred: keep partials apart until the watermark reaches their windows (ignored unless
        ``spec.defers_partials``). :arg load_segment: reads a segment stored apart
        (:func:`floodmark.core.window.restore_operator` of a ``snapshot_parts`` head)."""
        if not spec.is_columnar:
            raise ValueError("this spec needs the general policy")
        self.spec = spec
        self.trigger = spec.columnar_trigger
        self.layout = spec.columnar_layout
        assert self.trigger is not None and self.layout is not None
        self.time = time
        extra = {c.name: (c.reduction.dtype, c.reduction.empty) for c in self.layout.columns}
        extra["fired"] = (bool, False)  # the watermark fired the window (its on-time or first late pane)
        self.table = WindowTable(
            spec.timestamp_combiner,
            spec.allowed_lateness,
            spec.accumulation,
            extra,
            named_by_end=spec.window.named_by_end,
        )
        self.accumulators = ColumnarAccumulators(self.layout, self.table)
        self.table.accumulators = self.accumulators
        self.segments = PartialSegments(spec, load_segment) if deferred and spec.defers_partials else None
        self.load_segment = load_segment
        self.retired: set[int] = set()
        """Stored segments merged into the table on a restore under a spec that no longer defers partials (to delete
        at the next snapshot apart)."""

    # ------------------------------------------------------------------ time
    def on_processing_time(self, out: Emitted) -> None:
        """EARLY panes: a window in its early phase fires when ``processing_time >= pending + delay``,
        ``pending`` being the processing time of its first record since its last pane."""
        delay = self.trigger.early_delay
        if delay is None:
            return
        c = self.table.cols
        waiting = c["live"] & ~c["closed"] & ~c["fired"] & ~window_reached(c["end"], self.time.watermark)
        due = waiting & (c["pending"] != NO_TIME) & (c["pending"] <= self.time.processing_time - delay)
        rows = np.flatnonzero(due)
        if len(rows):
            out.pane_frames.append(self._emit(rows, np.zeros(len(rows), dtype=bool)))

    def on_watermark(self, out: Emitted) -> None:
        """ON_TIME panes, then garbage collection."""
        watermark = self.time.watermark
        if self.segments is not None:
            self._merge_segments(watermark)
        c = self.table.cols
        firing = c["live"] & ~c["closed"] & ~c["fired"] & window_reached(c["end"], watermark)
        if not self.trigger.on_time:
            firing[:] = False
        gone = self.table.expired(watermark)
        final = gone[self.table.needs_final_pane(gone) & ~firing[gone]]
        rows = np.flatnonzero(firing)  # sorted and distinct, as union1d's result
        if len(final):
            rows = np.union1d(rows, final)
        if len(rows):
            collected = np.isin(rows, gone)
            finished = firing[rows] & self.trigger.finishes_on_time
            out.pane_frames.append(self._emit(rows, finished | collected))
            c["fired"][rows[firing[rows]]] = True
            self.table.close(rows[finished])
        if len(gone):
            self.table.release(gone)

    def _emit(self, rows: np.ndarray, is_last: np.ndarray):
        """Fire ``rows`` (distinct) with their accumulated values: one pane each (empty non-ON_TIME panes skipped)."""
        firing, results = self.table.emit(rows, self.time.watermark, is_last)
        return self.table.pane_frame(firing, results, self.layout.single)

    # --------------------------------------------------------------- records
    def add(self, batch: RecordBatch, assigned: Assigned, out: Emitted) -> None:
        keys, payload, pos = assigned.keys, assigned.payload, assigned.rows
        starts, ends, ts, out_times = assigned.starts, assigned.ends, assigned.timestamps, assigned.out_times
        values = {f: assigned.numbers[f][pos] for f in self.layout.value_fields}
        if self.spec.window.is_merging:
            self._add_sessions(out, keys, pos, starts, ends, ts, out_times, values, payload)
            return
        late_phase = window_reached(ends, self.time.watermark)
        early_phase = ~late_phase
        if self.segments is not None and early_phase.any():
            self._merge_segments(None)  # a record for a window the watermark has not reached: merge them all
        if early_phase.any() and self.trigger.early_count is not None:
            self._accumulate_counting(out, keys, pos, starts, ends, out_times, values, early_phase)
        elif early_phase.any():
            self._accumulate(keys, pos, starts, ends, out_times, values, early_phase)
        if late_phase.any() and self.trigger.late is LateFirings.AT_HORIZON:
            self._accumulate(keys, pos, starts, ends, out_times, values, late_phase)
        elif late_phase.any():
            self._late_records(out, keys, pos, starts, ends, ts, values, late_phase, payload)

    def add_partials(self, partials: Partials) -> None:
        """Merge the partial aggregates of on-time records (from :func:`~floodmark.core.combine.combine`,
        possibly several of them).

        Same result as :meth:`add` of the records the partials were made
        of. Every window must still be open (the watermark has not reached its max
        timestamp): records of windows the watermark has reached must come as
        records, because they fire LATE panes one by one or go to the late output
        with their payload.
        """
        if not self.spec.combines_records:
            raise ValueError("early count firings need the records themselves, not partial aggregates")
        if window_reached(partials.ends, self.time.watermark).any():
            raise ValueError(
                "partial aggregates for a window the watermark has already reached: the combiner and the "
                "operator disagree on the watermark"
            )
        reduced = reduce_partials(self.spec, partials)
        if self.segments is not None and self.segments.defers(self.table.window_count(), len(reduced)):
            self.segments.add(reduced, self.time.processing_time)
        else:
            self._merge(reduced)

    def _groups(self, keys, pos, starts, ends, mask):
        """Group the selected rows by (key, window), keeping arrival order inside groups."""
        sel = np.flatnonzero(mask)
        order, first, group = group_order(keys[pos[sel]], self.spec.window.window_ids(starts[sel], ends[sel]))
        sel = sel[order]
        heads = sel[first]
        return sel, group, heads, group_keys(keys[pos[sel]], first)

    def _accumulate(self, keys, pos, starts, ends, out_times, values, mask):
        sel = np.flatnonzero(mask)
        partials = reduce_records(
            self.spec, keys[pos[sel]], starts[sel], ends[sel], out_times[sel], {f: v[sel] for f, v in values.items()}
        )
        self._merge(partials)

    def _merge(
        self, partials: Partials, watermark: int | None = None, arrivals: int | np.ndarray | None = None
    ) -> None:
        """Add one partial per distinct (key, window) to the table (no firing: nothing here is due), as arrived at
        ``watermark`` and processing time ``arrivals`` (one, or one per row; default: the operator's now)."""
        if self.table.window_count() == 0:
            rows = self.table.open_many(partials.keys, partials.starts, partials.ends)  # nothing to look up
        else:
            rows, _ = self.table.rows_for(list(partials.keys), partials.starts, partials.ends)
        self.accumulators.merge(rows, partials.accumulators)
        self.table.add_arrivals(
            rows,
            partials.counts,
            self.time.watermark if watermark is None else watermark,
            self.time.processing_time if arrivals is None else arrivals,
            partials.hold,
        )

    def _merge_segments(self, watermark: int | None) -> None:
        """Merge into the table, oldest first, the segments whose earliest window ``watermark`` has reached (all
        when None), as :meth:`_merge` would have when their partials arrived."""
        assert self.segments is not None
        due = self.segments.take(watermark)
        if due:
            segment = self.segments.merge(due)
            # Every window of a segment was open when its records arrived: they hold, as they did then.
            self._merge(segment.partials, MIN_TIMESTAMP, segment.arrivals)

    def _accumulate_counting(self, out, keys, pos, starts, ends, out_times, values, mask):
        """Early-phase records with early ``AfterCount(n)`` firings: an EARLY pane after every n-th record.

        Records of one window are taken in arrival order; position ``p`` counts
        from the window's last pane (``new_count`` records are already in the
        state, fewer than n: the n-th always fires), so segment ``p // n`` of the
        window's records ends with a pane. The state's accumulators and hold are
        folded into segment 0. As in the general policy, the records arrive
        first (the window now holds), then the complete segments fire, then what
        is left after the last pane stays pending.
        """
        sel, group, heads, group_keys_ = self._groups(keys, pos, starts, ends, mask)
        c, table, combiner = self.table.cols, self.table, self.spec.timestamp_combiner
        rows, _ = table.rows_for(group_keys_, starts[heads], ends[heads])
        n = self.trigger.early_count
        first_of_group = np.flatnonzero(np.r_[True, np.diff(group) != 0])
        # A window holding n or more records since its last pane (its trigger's count lowered on a restart) fires at
        # its next record, as a count checked when a record arrives does: it counts as holding n - 1.
        before = np.minimum(c["new_count"][rows], n - 1)
        position = before[group] + np.arange(len(sel)) - first_of_group[group]
        segment = position // n
        new_segment = np.r_[True, (np.diff(group) != 0) | (np.diff(segment) != 0)]
        bounds = np.flatnonzero(new_segment)
        segment_of = np.cumsum(new_segment) - 1
        last_of_segment = np.r_[bounds[1:], len(sel)] - 1
        seg_group, seg_index = group[bounds], segment[bounds]
        seg_row = rows[seg_group]
        complete = (position[last_of_segment] + 1) % n == 0
        folds_state = seg_index == 0
        # Per segment: its records' accumulators and hold, plus the state's in the window's first segment.
        seg_acc: dict[str, np.ndarray] = {}
        for column in self.layout.columns:
            reduction = column.reduction
            records = values[column.field][sel] if reduction.reads_values else None
            mine = reduction.of_groups(records, segment_of, bounds)
            seg_acc[column.name] = np.where(folds_state, reduction.merge(c[column.name][seg_row], mine), mine)
        seg_hold = combiner.reduce_at(out_times[sel], bounds)
        seg_hold = np.where(folds_state, combiner.fold(c["hold"][seg_row], seg_hold), seg_hold)
        if self.spec.accumulation is AccumulationMode.ACCUMULATING:  # a pane shows everything so far
            seg_acc = {c.name: c.reduction.cumulate(seg_acc[c.name], seg_group) for c in self.layout.columns}
        arrivals = np.bincount(group, minlength=len(rows))
        table.add_arrivals(rows, arrivals, self.time.watermark, self.time.processing_time, seg_hold[folds_state])
        fired = np.flatnonzero(complete)
        if len(fired):
            firing = table.fire(
                seg_row[fired],
                self.time.watermark,
                np.zeros(len(fired), dtype=bool),
                counts=np.full(len(fired), n, dtype=np.int64),
                holds=seg_hold[fired],
            )
            results = self.layout.results({name: values_[fired] for name, values_ in seg_acc.items()})
            out.pane_frames.append(table.pane_frame(firing, results, self.layout.single))
        # Each window keeps what follows its last pane: its last segment, unless that one fired.
        last = np.r_[np.diff(seg_group) != 0, True]
        w_rows, w_complete = seg_row[last], complete[last]
        for column in self.layout.columns:
            tail = seg_acc[column.name][last]
            if self.spec.accumulation is AccumulationMode.DISCARDING:
                tail = np.where(w_complete, column.reduction.empty, tail)
            c[column.name][w_rows] = tail
        fired_before = np.isin(w_rows, seg_row[fired])
        tail_rows = ~w_complete & fired_before  # windows that fired and have records left
        if tail_rows.any():
            tail_counts = (position[last_of_segment[last]] + 1 - n * seg_index[last])[tail_rows]
            tail_holds = seg_hold[last][tail_rows]
            table.add_arrivals(
                w_rows[tail_rows], tail_counts, self.time.watermark, self.time.processing_time, tail_holds
            )

    def _add_sessions(self, out, keys, pos, starts, ends, ts, out_times, values, payload):
        """Records of merging windows (sessions): each record's window ``[ts, ts + gap)`` merges with the key's
        open windows it overlaps, as the general policy does record by record.

        The batch's new windows and the open windows of its keys are grouped into the windows they merge
        into (:func:`~floodmark.core.windows.merge_groups`). Groups are independent of each other, and a
        group none of whose windows the watermark has reached fires nothing while its records arrive
        (early firings by processing time fire only when processing time moves; count firings do not run
        on this operator for sessions), so its records are added at once, in arrival order or not: the
        open members merge into one row (:meth:`WindowTable.merge_rows`), then the records' partial
        aggregate joins it. A group with a window the watermark has reached may fire, refuse records
        of closed windows and merge differently at every record: it goes record by record
        (:meth:`_session_records`), which is rare (late data).
        """
        c, table = self.table.cols, self.table
        n = len(pos)
        record_keys = keys[pos]
        live = table.live_rows()
        live_keys = np.empty(len(live), dtype=object)
        live_keys[:] = [table.keys[r] for r in live.tolist()]
        codes, _ = pd.factorize(
            pd.Series(np.concatenate([record_keys, live_keys]), dtype=object), use_na_sentinel=False
        )
        record_codes, live_codes = codes[:n], codes[n:]
        in_batch = np.zeros(int(codes.max()) + 1, dtype=bool)
        in_batch[record_codes] = True
        open_rows = live[in_batch[live_codes]]
        m = len(open_rows)
        # Intervals: the batch keys' open windows first (positions 0..m-1), then the records' (m..m+n-1).
        order, group = merge_groups(
            np.concatenate([live_codes[in_batch[live_codes]], record_codes]),
            np.concatenate([c["start"][open_rows], starts]),
            np.concatenate([c["end"][open_rows], ends]),
        )
        group_of = np.empty(m + n, dtype=np.int64)
        group_of[order] = group
        groups = int(group[-1]) + 1
        sorted_starts = np.concatenate([c["start"][open_rows], starts])[order]
        sorted_ends = np.concatenate([c["end"][open_rows], ends])[order]
        first = np.r_[True, group[1:] != group[:-1]]
        merged_start = sorted_starts[first]
        merged_end = np.maximum.reduceat(sorted_ends, np.flatnonzero(first))
        record_group, open_group = group_of[m:], group_of[:m]
        has_records = np.bincount(record_group, minlength=groups) > 0
        # A group is simple when none of its windows is due: a window the watermark has reached (a record's own
        # window, or one that fired, closed or waits for late firings) makes the group's panes, merges and
        # refusals depend on the order of its records.
        due = window_reached(np.concatenate([c["end"][open_rows], ends]), self.time.watermark)
        reached = np.bincount(group_of, weights=due, minlength=groups) > 0
        slow = has_records & reached
        if slow.any():
            for g in np.flatnonzero(slow).tolist():
                members = open_rows[open_group == g]
                mine = np.flatnonzero(record_group == g)
                self._session_records(
                    out,
                    keys,
                    pos[mine],
                    starts[mine],
                    ends[mine],
                    ts[mine],
                    out_times[mine],
                    {f: v[mine] for f, v in values.items()},
                    payload,
                    members,
                )
        fast = has_records & ~reached
        # Each fast group's row: its first open member (into which the others merge), else a new row.
        group_row = np.full(groups, -1, dtype=np.int64)
        members = np.flatnonzero(fast[open_group])
        if len(members):
            member_group = open_group[members]
            member_rows = open_rows[members]
            by_group = np.lexsort((c["start"][member_rows], member_group))
            member_group, member_rows = member_group[by_group], member_rows[by_group]
            head = np.r_[True, member_group[1:] != member_group[:-1]]
            group_row[member_group[head]] = member_rows[head]
            # Several members, or one that the records extend: they merge into one row, a new window.
            target_group = member_group[head]
            targets = member_rows[head]
            changed = (c["start"][targets] != merged_start[target_group]) | (
                c["end"][targets] != merged_end[target_group]
            )
            changed |= np.bincount(member_group, minlength=groups)[target_group] > 1
            targets, target_group = targets[changed], target_group[changed]
            position = np.full(groups, -1, dtype=np.int64)
            position[target_group] = np.arange(len(targets))
            others = ~head & (position[member_group] >= 0)
            table.merge_rows(
                targets,
                merged_start[target_group],
                merged_end[target_group],
                member_rows[others],
                position[member_group[others]],
            )
            c["fired"][targets] = False
        mine = np.flatnonzero(fast[record_group])
        if not len(mine):
            return
        # The records' partial aggregate per group, added to the group's row (no firing: nothing is due).
        order = mine[np.argsort(record_group[mine], kind="stable")]
        sorted_group = record_group[order]
        first = np.r_[True, sorted_group[1:] != sorted_group[:-1]]
        bounds = np.flatnonzero(first)
        segment = np.cumsum(first) - 1
        heads = sorted_group[first]
        new = np.flatnonzero(group_row[heads] < 0)
        if len(new):
            new_keys = np.empty(len(new), dtype=object)
            new_keys[:] = list(record_keys[order[bounds[new]]])
            group_row[heads[new]] = table.open_many(new_keys, merged_start[heads[new]], merged_end[heads[new]])
        rows = group_row[heads]
        partial = {}
        for column in self.layout.columns:
            reduction = column.reduction
            v = np.asarray(values[column.field], dtype=np.float64)[order] if reduction.reads_values else None
            partial[column.name] = reduction.of_groups(v, segment, bounds)
        self.accumulators.merge(rows, partial)
        holds = self.spec.timestamp_combiner.reduce_at(out_times[order], bounds)
        counts = np.diff(np.r_[bounds, len(order)])
        table.add_arrivals(rows, counts, self.time.watermark, self.time.processing_time, holds)

    def _session_records(self, out, keys, pos, starts, ends, ts, out_times, values, payload, members) -> None:
        """One merge group's records, one by one in arrival order
        (:func:`~floodmark.core.window.sessions.merge_record`: a merged window is new, its firing flags and pane
        history start over); the record joins its row, and if the watermark has reached the merged window's
        max timestamp the trigger's late behaviour applies: a LATE (or first) pane now (``EVERY_RECORD``), the
        same and the window closes (``NONE``), or nothing until the horizon.
        """
        c, table, watermark = self.table.cols, self.table, self.time.watermark
        windows = {table.window(r): int(r) for r in members.tolist()}
        own = self._record_accumulators(values, np.arange(len(pos)))
        for i in range(len(pos)):
            key, proto = keys[pos[i]], Window(int(starts[i]), int(ends[i]))
            joined = merge_record(self.spec, table, windows, key, proto, watermark, self._restart_firing)
            if joined.row is None:
                assert joined.refused is not None
                out.late.append(
                    self.time.late(self.spec, key, joined.window, int(ts[i]), payload[pos[i]], joined.refused)
                )
                continue
            row, merged = joined.row, joined.window
            for window in joined.absorbed:
                del windows[window]
            windows[merged] = row
            rows = np.array([row])
            self.accumulators.merge(rows, {name: acc[i : i + 1] for name, acc in own.items()})
            table.add_arrival(row, 1, self.time.watermark, self.time.processing_time, int(out_times[i]))
            if not window_reached(merged.end, watermark) or self.trigger.late is LateFirings.AT_HORIZON:
                continue
            finishes = self.trigger.finishes_on_time
            out.pane_frames.append(self._emit(rows, np.array([finishes])))
            c["fired"][row] = True
            if finishes:
                table.close(row)

    def _restart_firing(self, row: int, others: list[int], merged: Window) -> None:
        self.table.cols["fired"][row] = False  # the merged window is new: its watermark has not fired it

    def _record_accumulators(self, values, sel) -> dict[str, np.ndarray]:
        """Each selected record's own accumulators, as if it were alone in a window."""
        own = {}
        for column in self.layout.columns:
            reduction = column.reduction
            if reduction.reads_values:
                own[column.name] = np.asarray(values[column.field][sel], dtype=reduction.dtype)
            else:
                own[column.name] = np.ones(len(sel), dtype=reduction.dtype)
        return own

    def _late_records(self, out, keys, pos, starts, ends, ts, values, mask, payload):
        """Records whose window the watermark has already reached (within allowed lateness)."""
        sel, group, heads, group_keys_ = self._groups(keys, pos, starts, ends, mask)
        rows, _ = self.table.rows_for(group_keys_, starts[heads], ends[heads])
        c = self.table.cols
        per_record_row = rows[group]
        rank = np.arange(len(sel)) - np.flatnonzero(np.r_[True, np.diff(group) != 0])[group]
        closed = c["closed"][per_record_row]
        if self.trigger.finishes_on_time:
            # A window first seen after its end fires once with its first record, then closes.
            firing = ~closed & (rank == 0)
            refused = ~firing
        else:  # EVERY_RECORD: every late record fires a LATE pane of its own
            firing = ~closed
            refused = closed
        for i in np.flatnonzero(refused).tolist():
            row = per_record_row[i]
            p = pos[sel[i]]
            out.late.append(
                self.time.late(
                    self.spec, keys[p], self.table.window(row), int(ts[sel[i]]), payload[p], LateReason.WINDOW_CLOSED
                )
            )
        fire_idx = np.flatnonzero(firing)
        if len(fire_idx) == 0:
            return
        f_rows = per_record_row[fire_idx]
        f_group = group[fire_idx]
        last = np.r_[np.diff(f_group) != 0, True]  # the last firing record of each window
        accumulating = self.spec.accumulation is AccumulationMode.ACCUMULATING
        # One pane per record: the record alone (DISCARDING) or everything so far (ACCUMULATING).
        panes: dict[str, np.ndarray] = {}
        records = self._record_accumulators(values, sel[fire_idx])
        for column in self.layout.columns:
            reduction = column.reduction
            own = records[column.name]
            if accumulating:
                own = reduction.merge(c[column.name][f_rows], reduction.cumulate(own, f_group))
                c[column.name][f_rows[last]] = own[last]
            panes[column.name] = own
        finishes = self.trigger.finishes_on_time
        firing_ = self.table.fire(
            f_rows,
            self.time.watermark,
            np.full(len(fire_idx), finishes),
            counts=np.ones(len(fire_idx), dtype=np.int64),
            holds=np.full(len(fire_idx), self.spec.timestamp_combiner.empty_hold, dtype=np.int64),
        )
        out.pane_frames.append(self.table.pane_frame(firing_, self.layout.results(panes), self.layout.single))
        window_rows = f_rows[last]
        c["fired"][window_rows] = True
        if finishes:
            self.table.close(window_rows)
        if not accumulating:
            self.accumulators.reset(window_rows)

    # ------------------------------------------------------------ gauges
    def output_hold(self) -> int | None:
        hold = self.table.output_hold()
        first_end = self.segments.first_end() if self.segments is not None else None
        if first_end is None:
            return hold
        # A segment's windows hold at their max timestamps (END_OF_WINDOW: ``defers_partials``).
        pending = int(max_timestamp(np.int64(first_end)))
        return pending if hold is None else min(hold, pending)

    def oldest_pending(self) -> int | None:
        oldest = self.table.oldest_pending()
        arrival = self.segments.oldest_arrival() if self.segments is not None else None
        return min((t for t in (oldest, arrival) if t is not None), default=None)

    def next_watermark_deadline(self) -> int | None:
        """A window's ON_TIME pane (its max timestamp) or its garbage collection (its horizon)."""
        c = self.table.cols
        live = c["live"]
        deadlines = self.table.horizons(np.flatnonzero(live))
        if self.trigger.on_time:
            waiting = np.flatnonzero(live & ~c["closed"] & ~c["fired"])
            deadlines = np.concatenate([deadlines, max_timestamp(c["end"][waiting])])
        first_end = self.segments.first_end() if self.segments is not None else None
        if first_end is not None:
            # The earliest window of the segments: its ON_TIME pane (or its horizon, under Never()).
            first = np.array([first_end], dtype=np.int64)
            due = max_timestamp(first) if self.trigger.on_time else horizon(first, self.spec.allowed_lateness)
            deadlines = np.concatenate([deadlines, due])
        return int(deadlines.min()) if len(deadlines) else None

    def next_processing_deadline(self) -> int | None:
        """An EARLY pane's: the oldest pending record's arrival plus the early delay."""
        delay = self.trigger.early_delay
        if delay is None:
            return None
        c = self.table.cols
        waiting = c["live"] & ~c["closed"] & ~c["fired"] & ~window_reached(c["end"], self.time.watermark)
        pending = c["pending"][waiting & (c["pending"] != NO_TIME)]
        return int(pending.min()) + delay if len(pending) else None

    def window_count(self) -> int:
        """A window counts once per segment that holds it while segments are apart."""
        return self.table.window_count() + (self.segments.rows if self.segments is not None else 0)

    def gather(self) -> None:
        if self.segments is not None:
            self._merge_segments(None)  # off the hot path (explain): the window may be in any segment

    def _merge_retired(self, saved: dict[str, Any]) -> None:
        """A snapshot with deferred partials restored under a spec that no longer defers them (early firings added
        on a restart, ``floodmark.driver.definition_changes``): every segment is merged into the table now, as the
        watermark would have merged it, and the stored ones are deleted at the next snapshot apart."""
        self.segments = PartialSegments(self.spec, self.load_segment)
        self.segments.restore(saved)
        self._merge_segments(None)
        _, self.retired = self.segments.take_added()
        self.segments = None

    def trigger_view(self, row: int) -> tuple[Any, tuple[str, ...]]:
        """The trigger state rebuilt from the columns (:func:`~floodmark.core.compiled_trigger.trigger_state`)."""
        book = self.table.book(row)
        state = trigger_state(
            self.spec.trigger,
            fired=bool(self.table.cols["fired"][row]),
            closed=book.finished,
            pending_since=book.pending_since,
            new_count=book.records_since_last_pane,
        )
        yes_no = {True: "yes", False: "no"}
        return state, (f"fired: {yes_no[book.nonearly_fired]}", f"closed: {yes_no[book.finished]}")

    # ----------------------------------------------------------- snapshot
    def snapshot(self, apart: bool = False) -> tuple[dict[str, Any], dict[int, bytes], set[int]]:
        if self.segments is None:
            retired, self.retired = (self.retired, set()) if apart else (set(), self.retired)
            return {}, {}, retired
        if not apart:
            return {"segments": self.segments.snapshot_all()}, {}, set()
        added, dropped = self.segments.take_added()
        return {"segments": self.segments.snapshot()}, added, dropped

    def restore(self, data: dict[str, Any]) -> None:
        if "segments" in data and self.segments is None:
            self._merge_retired(data["segments"])
        elif "segments" in data:
            self.segments.restore(data["segments"])
