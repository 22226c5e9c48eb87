"""The window operator: the per-key, per-window state machine of one windowed stage.

A pure, deterministic function of its inputs: :class:`WindowOperator` holds the
state, and three calls move it forward, each returning what it emitted as an
:class:`Emitted` (panes, late records, bad records):

* :meth:`WindowOperator.add_records` - a batch of records (many keys at once)
  arrives while the watermark and processing time stand still;
* :meth:`WindowOperator.advance_watermark` - the input watermark moves up;
* :meth:`WindowOperator.advance_processing_time` - processing time moves up.

A micro-batch runtime calls ``advance_processing_time(now)``,
``advance_watermark(w)`` then ``add_records(batch)`` for every batch; the
harness calls them one by one. Cutting a batch of records into several
``add_records`` calls never changes the panes (element-driven triggers are
evaluated after every record; see :mod:`floodmark.core.triggers`).

Vectorised: window assignment, the expiry test and grouping by (key, window) are
numpy operations over the whole batch; each (key, window) group then updates its
accumulator with one numpy reduction per trigger check, not per record.
Merging windows (sessions) are processed record by record per key.

Boundaries (Flink's convention, see ``docs/semantics.md``): a window fires ON_TIME
when ``watermark >= max_timestamp``; its state is garbage collected and later
records for it go to the late output when ``max_timestamp + allowed_lateness <=
watermark``; in between, records make LATE panes (if the trigger has late
firings). Records whose timestamp is missing or not an integer become bad
records. Nothing is dropped silently.
"""

from __future__ import annotations

import heapq
import itertools
import math
import numbers
import pickle
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from floodmark.core.aggregates import Aggregate, add_columns
from floodmark.core.panes import AccumulationMode, Pane, Timing
from floodmark.core.records import BadRecord, LateReason, LateRecord, RecordBatch
from floodmark.core.time import MIN_TIMESTAMP, Duration, non_negative_millis, saturating_add
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.triggers import Default, Trigger, TriggerContext
from floodmark.core.windows import Window, WindowAssigner


@dataclass(frozen=True)
class WindowSpec:
    """Everything that defines a windowed aggregation (Beam's ``WindowingStrategy`` + combine).

    :arg window: the window assigner. :arg aggregate: what each pane computes.
    :arg trigger: when panes fire (default: :class:`Default`).
    :arg allowed_lateness: how long after its max timestamp (in watermark time) a
        window keeps its state and accepts records (ms or timedelta, >= 0).
    :arg accumulation: ACCUMULATING or DISCARDING panes.
    :arg timestamp_combiner: the panes' output timestamps.
    """

    window: WindowAssigner
    aggregate: Aggregate
    trigger: Trigger = field(default_factory=Default)
    allowed_lateness: int = 0
    accumulation: AccumulationMode = AccumulationMode.DISCARDING
    timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW

    def __post_init__(self) -> None:
        if not isinstance(self.window, WindowAssigner):
            raise TypeError(f"window must be a window assigner, got {type(self.window).__name__}")
        if not isinstance(self.aggregate, Aggregate):
            raise TypeError(f"aggregate must be an Aggregate, got {type(self.aggregate).__name__}")
        if not isinstance(self.trigger, Trigger):
            raise TypeError(f"trigger must be a Trigger, got {type(self.trigger).__name__}")
        lateness: Duration = self.allowed_lateness
        object.__setattr__(self, "allowed_lateness", non_negative_millis(lateness, "allowed lateness"))
        object.__setattr__(self, "accumulation", AccumulationMode(self.accumulation))
        object.__setattr__(self, "timestamp_combiner", TimestampCombiner(self.timestamp_combiner))

    def horizon(self, window: Window) -> int:
        """The watermark at which ``window`` is garbage collected: max timestamp + allowed lateness."""
        return saturating_add(window.max_timestamp, self.allowed_lateness)


@dataclass
class WindowState:
    """The state of one window of one key. Plain data: it pickles."""

    window: Window
    acc: Any
    trigger: dict[str, Any]
    new_count: int = 0
    """Records added since the last pane (0 = the next pane would be empty)."""
    hold: int | None = None
    """Combined output time of the records since the last pane that can hold the watermark."""
    held: bool = False
    """A record arrived before the watermark reached the max timestamp, and no
    non-EARLY pane has fired yet: the window holds the output watermark and its
    first non-EARLY pane is ON_TIME."""
    pane_index: int = 0
    nonspeculative_index: int = 0
    had_nonearly: bool = False
    closed: bool = False
    """The trigger finished: the window only remembers that, until garbage collection."""
    pending_since: int | None = None
    """Processing time of the oldest record not yet emitted in a pane."""


@dataclass
class Emitted:
    """What one operator call produced.

    Panes come as :class:`Pane` objects (``panes``, the general operator) or as
    pandas frames (``pane_frames``, the columnar operator: columns ``key``,
    ``window_start``, ``window_end``, ``timestamp``, ``timing``, ``index``,
    ``nonspeculative_index``, ``is_last`` and ``value`` or ``value.<name>``).
    :meth:`all_panes` gives both as objects.
    """

    panes: list[Pane] = field(default_factory=list)
    late: list[LateRecord] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)
    pane_frames: list[pd.DataFrame] = field(default_factory=list)

    def extend(self, other: Emitted) -> None:
        self.panes.extend(other.panes)
        self.late.extend(other.late)
        self.bad.extend(other.bad)
        self.pane_frames.extend(other.pane_frames)

    def pane_count(self) -> int:
        return len(self.panes) + sum(len(f) for f in self.pane_frames)

    def all_panes(self) -> list[Pane]:
        """Every pane as a :class:`Pane` object (frames converted, in order after ``panes``)."""
        panes = list(self.panes)
        for frame in self.pane_frames:
            value_columns = [c for c in frame.columns if c == "value" or c.startswith("value.")]
            for row in frame.to_dict("records"):
                named = {c[len("value.") :]: _py(row[c]) for c in value_columns if c != "value"}
                value = _py(row["value"]) if "value" in row else named
                panes.append(
                    Pane(
                        key=row["key"],
                        window=Window(int(row["window_start"]), int(row["window_end"])),
                        value=value,
                        timestamp=int(row["timestamp"]),
                        timing=Timing(row["timing"]),
                        index=int(row["index"]),
                        nonspeculative_index=int(row["nonspeculative_index"]),
                        is_last=bool(row["is_last"]),
                    )
                )
        return panes


def _py(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def validate_timestamps(timestamps: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Split raw timestamps into usable ``int64`` values and a bad-record mask.

    :returns: ``(values, bad_mask, reasons)``; ``values[i]`` is meaningless where
        ``bad_mask[i]``; ``reasons`` has one message per bad record, in order.
    """
    array = np.asarray(timestamps)
    if array.dtype.kind in "iu":
        return array.astype(np.int64, copy=False), np.zeros(len(array), dtype=bool), []
    values = np.zeros(len(array), dtype=np.int64)
    bad = np.zeros(len(array), dtype=bool)
    reasons: list[str] = []
    for i, raw in enumerate(array.tolist()):
        reason = None
        if raw is None or (isinstance(raw, float) and math.isnan(raw)):
            reason = "missing timestamp"
        elif isinstance(raw, bool) or not isinstance(raw, numbers.Real):
            reason = f"timestamp is not a number: {raw!r}"
        elif isinstance(raw, float) and not raw.is_integer():
            reason = f"timestamp is not whole milliseconds: {raw!r}"
        elif not -(2**63) <= int(raw) < 2**63:
            reason = f"timestamp out of range: {raw!r}"
        if reason is None:
            values[i] = int(raw)
        else:
            bad[i] = True
            reasons.append(reason)
    return values, bad, reasons


@dataclass(frozen=True)
class Assigned:
    """A batch after validation, window assignment and the expiry test (shared by both operators).

    One row per (record, live window): ``rows`` are record positions in the
    batch; records without a usable timestamp and (record, window) pairs past
    the window's horizon are already in ``out.bad`` / ``out.late``.
    """

    keys: np.ndarray
    payload: np.ndarray
    rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    timestamps: np.ndarray
    out_times: np.ndarray


def late_record(spec: WindowSpec, watermark: int, key, window: Window, timestamp: int, value, reason) -> LateRecord:
    return LateRecord(
        key=key,
        window=window,
        timestamp=timestamp,
        value=value,
        watermark=watermark,
        lateness=watermark - timestamp,
        horizon=spec.horizon(window),
        reason=reason,
    )


def assign_batch(spec: WindowSpec, watermark: int, batch: RecordBatch, out: Emitted) -> Assigned | None:
    """Validate timestamps, assign windows and route expired pairs; ``None`` when nothing is left."""
    n = len(batch)
    keys = _as_object_array(batch.keys)
    payload = batch.payload if batch.payload is not None else batch.columns.get(None)
    payload = _as_object_array(payload) if payload is not None else np.full(n, None, dtype=object)
    for name in spec.aggregate.fields:
        if name not in batch.columns:
            raise KeyError(f"the aggregate reads field {name!r}, which the batch does not have")
    timestamps, bad, reasons = validate_timestamps(batch.timestamps)
    if bad.any():
        raw_timestamps = np.asarray(batch.timestamps)
        for position, reason in zip(np.flatnonzero(bad), reasons, strict=True):
            raw = raw_timestamps[position]
            raw = raw.item() if isinstance(raw, np.generic) else raw
            out.bad.append(BadRecord(keys[position], payload[position], raw, reason))
    good = np.flatnonzero(~bad)
    if len(good) == 0:
        return None
    assigned = spec.window.assign(timestamps[good])
    rows = good[assigned.record_index]
    starts, ends = assigned.start, assigned.end
    row_ts = timestamps[rows]
    out_times = spec.window.output_times(row_ts, starts, ends)
    lateness = spec.allowed_lateness
    horizons = np.minimum(ends - 1, np.iinfo(np.int64).max - lateness) + lateness  # saturating
    expired = horizons <= watermark
    for i in np.flatnonzero(expired):
        row = rows[i]
        window = Window(int(starts[i]), int(ends[i]))
        out.late.append(
            late_record(spec, watermark, keys[row], window, int(row_ts[i]), _plain(payload[row]), LateReason.EXPIRED)
        )
    live = ~expired
    if not live.any():
        return None
    return Assigned(keys, payload, rows[live], starts[live], ends[live], row_ts[live], out_times[live])


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


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
        self.windows: dict[Hashable, dict[Window, WindowState]] = {}
        self._seq = itertools.count()
        self._watermark_timers: list[tuple[int, int, Hashable, Window]] = []
        self._processing_timers: list[tuple[int, int, Hashable, Window]] = []
        self._scheduled: dict[tuple[Hashable, Window], tuple[int | None, int | None]] = {}

    # ------------------------------------------------------------------ time
    def advance_watermark(self, watermark: int) -> Emitted:
        """Move the input watermark to ``watermark`` (a lower value is ignored) and fire
        every window that is due: on-time panes, watermark-driven trigger firings,
        and the final pane of windows whose horizon was reached (then cleared)."""
        out = Emitted()
        if watermark <= self.watermark:
            return out
        self.watermark = watermark
        for key, window in self._due(self._watermark_timers, watermark, 0):
            state = self.windows[key][window]
            ctx = self._ctx(window)
            collect = self.spec.horizon(window) <= watermark
            if not state.closed and self.spec.trigger.should_fire(state.trigger, ctx):
                self._fire(key, state, ctx, out, collect)
            elif collect and not state.closed and state.new_count > 0:
                self._emit(key, state, ctx, out, is_last=True)
            if collect:
                self._drop_window(key, window)
            else:
                self._schedule(key, state)
        return out

    def advance_processing_time(self, processing_time: int) -> Emitted:
        """Move processing time to ``processing_time`` (a lower value is ignored) and fire
        the processing-time triggers that are due."""
        out = Emitted()
        if processing_time <= self.processing_time:
            return out
        self.processing_time = processing_time
        for key, window in self._due(self._processing_timers, processing_time, 1):
            state = self.windows[key][window]
            ctx = self._ctx(window)
            if not state.closed and self.spec.trigger.should_fire(state.trigger, ctx):
                self._fire(key, state, ctx, out, collect=False)
            self._schedule(key, state)
        return out

    # --------------------------------------------------------------- records
    def add_records(self, batch: RecordBatch) -> Emitted:
        """Process a batch of records at the current watermark and processing time."""
        out = Emitted()
        n = len(batch)
        if n == 0:
            return out
        assigned = assign_batch(self.spec, self.watermark, batch, out)
        if assigned is None:
            return out
        columns = {name: np.asarray(values) for name, values in batch.columns.items()}
        keys, payload, rows = assigned.keys, assigned.payload, assigned.rows
        starts, ends, row_ts, out_times = assigned.starts, assigned.ends, assigned.timestamps, assigned.out_times
        key_codes, unique_keys = pd.factorize(pd.Series(keys[rows], dtype=object), use_na_sentinel=False)
        if self.spec.window.is_merging:
            self._add_merging(rows, key_codes, unique_keys, starts, ends, row_ts, out_times, columns, payload, out)
        else:
            self._add_grouped(rows, key_codes, unique_keys, starts, ends, row_ts, out_times, columns, payload, out)
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
            window = Window(int(starts[lo]), int(ends[lo]))
            state = self._state(key, window)
            self._feed(key, state, rows[lo:hi], row_ts[lo:hi], out_times[lo:hi], columns, payload, out)

    def _add_merging(self, rows, key_codes, unique_keys, starts, ends, row_ts, out_times, columns, payload, out):
        for i in range(len(rows)):
            key = unique_keys[key_codes[i]]
            proto = Window(int(starts[i]), int(ends[i]))
            existing = self.windows.get(key, {})
            touching = [w for w in existing if w.intersects(proto)]
            if any(existing[w].closed for w in touching):
                closed = next(w for w in touching if existing[w].closed)
                out.late.append(self._late(key, closed, int(row_ts[i]), payload[rows[i]], LateReason.WINDOW_CLOSED))
                continue
            state = self._merge(key, proto, touching)
            self._feed(key, state, rows[i : i + 1], row_ts[i : i + 1], out_times[i : i + 1], columns, payload, out)

    def _merge(self, key: Hashable, proto: Window, touching: list[Window]) -> WindowState:
        if not touching:
            return self._state(key, proto)
        merged_window = proto
        for window in touching:
            merged_window = merged_window.cover(window)
        if len(touching) == 1 and merged_window == touching[0]:
            return self.windows[key][merged_window]
        states = [self.windows[key][w] for w in touching]
        ctx = self._ctx(merged_window)
        spec = self.spec
        fresh_trigger = spec.trigger.new_state()
        kept = self.windows[key].get(merged_window)  # pane history survives only for the same window
        merged = WindowState(
            window=merged_window,
            acc=spec.aggregate.merge([s.acc for s in states]),
            trigger=spec.trigger.on_merge([s.trigger for s in states] + [fresh_trigger], ctx),
            new_count=sum(s.new_count for s in states),
            hold=spec.timestamp_combiner.merge([s.hold for s in states if s.hold is not None]),
            held=any(s.held for s in states),
            pane_index=kept.pane_index if kept else 0,
            nonspeculative_index=kept.nonspeculative_index if kept else 0,
            had_nonearly=kept.had_nonearly if kept else False,
            pending_since=min((s.pending_since for s in states if s.pending_since is not None), default=None),
        )
        for window in touching:
            self._drop_window(key, window)
        self.windows.setdefault(key, {})[merged_window] = merged
        return merged

    def _feed(self, key, state: WindowState, rows, row_ts, out_times, columns, payload, out: Emitted) -> None:
        """Add one group's records (same key and window, arrival order) and fire when due."""
        spec = self.spec
        ctx = self._ctx(state.window)
        holds_watermark = self.watermark < state.window.max_timestamp
        i, n = 0, len(rows)
        while i < n:
            if state.closed:
                for j in range(i, n):
                    out.late.append(
                        self._late(key, state.window, int(row_ts[j]), payload[rows[j]], LateReason.WINDOW_CLOSED)
                    )
                break
            wanted = spec.trigger.elements_until_check(state.trigger, ctx)
            take = n - i if wanted is None else min(wanted, n - i)
            chunk = rows[i : i + take]
            state.acc = add_columns(spec.aggregate, state.acc, {f: columns[f][chunk] for f in spec.aggregate.fields})
            spec.trigger.on_elements(state.trigger, take, ctx)
            state.new_count += take
            if state.pending_since is None:
                state.pending_since = self.processing_time
            if holds_watermark:
                state.held = True
                chunk_times = out_times[i : i + take]
                state.hold = spec.timestamp_combiner.combine(state.hold, int(chunk_times.min()), int(chunk_times.max()))
            i += take
            if spec.trigger.should_fire(state.trigger, ctx):
                self._fire(key, state, ctx, out, collect=False)
        self._schedule(key, state)

    # ---------------------------------------------------------------- firing
    def _fire(self, key, state: WindowState, ctx: TriggerContext, out: Emitted, collect: bool) -> None:
        finished = self.spec.trigger.on_fire(state.trigger, ctx)
        self._emit(key, state, ctx, out, is_last=finished or collect)
        if finished:
            state.closed = True
            state.acc = None

    def _emit(self, key, state: WindowState, ctx: TriggerContext, out: Emitted, is_last: bool) -> None:
        window = state.window
        if state.had_nonearly:
            timing = Timing.LATE
        elif not ctx.end_of_window_reached:
            timing = Timing.EARLY
        elif state.held:
            timing = Timing.ON_TIME
        else:
            timing = Timing.LATE
        # Beam: an empty pane is emitted only when it is the ON_TIME pane (OnTimeBehavior.FIRE_ALWAYS).
        if state.new_count > 0 or timing is Timing.ON_TIME:
            out.panes.append(
                Pane(
                    key=key,
                    window=window,
                    value=self.spec.aggregate.result(state.acc),
                    timestamp=self.spec.timestamp_combiner.pane_timestamp(state.hold, window.max_timestamp),
                    timing=timing,
                    index=state.pane_index,
                    nonspeculative_index=-1 if timing is Timing.EARLY else state.nonspeculative_index,
                    is_last=is_last,
                )
            )
            state.pane_index += 1
            if timing is not Timing.EARLY:
                state.nonspeculative_index += 1
                state.had_nonearly = True
                state.held = False
        state.hold = None
        state.new_count = 0
        state.pending_since = None
        if self.spec.accumulation is AccumulationMode.DISCARDING:
            state.acc = self.spec.aggregate.create()

    # ----------------------------------------------------------- bookkeeping
    def _ctx(self, window: Window) -> TriggerContext:
        return TriggerContext(window, self.watermark, self.processing_time)

    def _late(self, key, window: Window, timestamp: int, value: Any, reason: LateReason) -> LateRecord:
        return late_record(self.spec, self.watermark, key, window, timestamp, value, reason)

    def _state(self, key: Hashable, window: Window) -> WindowState:
        per_key = self.windows.setdefault(key, {})
        state = per_key.get(window)
        if state is None:
            spec = self.spec
            state = WindowState(window, spec.aggregate.create(), spec.trigger.new_state())
            per_key[window] = state
        return state

    def _drop_window(self, key: Hashable, window: Window) -> None:
        per_key = self.windows[key]
        del per_key[window]
        if not per_key:
            del self.windows[key]
        self._scheduled.pop((key, window), None)

    def _schedule(self, key: Hashable, state: WindowState) -> None:
        """(Re)arm the window's watermark and processing-time timers (lazy heaps)."""
        window = state.window
        wm_deadline = self.spec.horizon(window)
        pt_deadline = None
        if not state.closed:
            # Deadlines already passed were evaluated when they passed (or when the
            # records arrived); re-arming them would loop.
            trigger_deadline = self.spec.trigger.watermark_deadline(state.trigger, window)
            if trigger_deadline is not None and trigger_deadline > self.watermark:
                wm_deadline = min(wm_deadline, trigger_deadline)
            pt_deadline = self.spec.trigger.processing_deadline(state.trigger)
            if pt_deadline is not None and pt_deadline <= self.processing_time:
                pt_deadline = None
        previous = self._scheduled.get((key, window), (None, None))
        if previous == (wm_deadline, pt_deadline):
            return
        self._scheduled[(key, window)] = (wm_deadline, pt_deadline)
        if wm_deadline != previous[0]:
            heapq.heappush(self._watermark_timers, (wm_deadline, next(self._seq), key, window))
        if pt_deadline is not None and pt_deadline != previous[1]:
            heapq.heappush(self._processing_timers, (pt_deadline, next(self._seq), key, window))

    def _due(self, heap: list, now: int, slot: int) -> Iterator[tuple[Hashable, Window]]:
        """Pop timers with deadline <= now, skipping entries superseded by a later schedule."""
        while heap and heap[0][0] <= now:
            deadline, _, key, window = heapq.heappop(heap)
            scheduled = self._scheduled.get((key, window))
            if scheduled is None or scheduled[slot] != deadline:
                continue
            # Mark consumed so that _schedule re-arms it even if the deadline is unchanged.
            self._scheduled[(key, window)] = (None, scheduled[1]) if slot == 0 else (scheduled[0], None)
            yield key, window

    # ------------------------------------------------------- watermarks out
    def output_hold(self) -> int | None:
        """The lowest output timestamp a pending pane will carry (holds the stage's
        output watermark), or ``None`` when nothing is held."""
        combiner = self.spec.timestamp_combiner
        holds = [
            combiner.pane_timestamp(state.hold, state.window.max_timestamp)
            for per_key in self.windows.values()
            for state in per_key.values()
            if state.held and not state.closed
        ]
        return min(holds) if holds else None

    def oldest_pending_processing_time(self) -> int | None:
        """Processing time of the oldest record not yet emitted in a pane (for the
        processing-time watermark), or ``None`` when nothing is pending."""
        pending = [
            state.pending_since
            for per_key in self.windows.values()
            for state in per_key.values()
            if state.pending_since is not None
        ]
        return min(pending) if pending else None

    def window_count(self) -> int:
        return sum(len(per_key) for per_key in self.windows.values())

    # -------------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """The whole state as bytes (timers are derived and rebuilt on restore)."""
        return pickle.dumps(
            {"watermark": self.watermark, "processing_time": self.processing_time, "windows": self.windows},
            protocol=pickle.HIGHEST_PROTOCOL,
        )

    @classmethod
    def restore(cls, spec: WindowSpec, snapshot: bytes) -> WindowOperator:
        data = pickle.loads(snapshot)
        operator = cls(spec, data["watermark"], data["processing_time"])
        operator.windows = data["windows"]
        for key, per_key in operator.windows.items():
            for state in per_key.values():
                operator._schedule(key, state)
        return operator


def _as_object_array(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    array = np.empty(len(values), dtype=object)
    array[:] = list(values) if not isinstance(values, np.ndarray) else values.tolist()
    return array
