"""The keyed process operator: runs a :class:`~floodmark.core.process.function.KeyedProcessFunction` per key, with
its state and timers, and says what it emitted (the rules are in :mod:`floodmark.core.process.function`).

A call of your function that raises is not a failed query: the record (or timer) becomes a dead letter with the
error as its reason, and what the call did is dropped: its rows, its timer changes and the values it assigned in
``ctx.state`` (the function works on a copy of the key's state, kept only when the call returns; an object mutated
in place inside a state value is not copied, so keep state values immutable or assign them anew).

One batch, as a runtime drives it: :meth:`~KeyedProcessOperator.advance_processing_time` (processing-time timers),
:meth:`~KeyedProcessOperator.advance_watermark` (event-time timers up to the batch's watermark, in time order),
then :meth:`~KeyedProcessOperator.add` (the records in arrival order; a timer they set that is already due
fires at the next move, Flink's rule).
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from floodmark.core.assign import validate_timestamps
from floodmark.core.keyed_operator import KeyedRows, OperatorGauges
from floodmark.core.process.function import KeyedProcessFunction, TimeDomain, Timer
from floodmark.core.records import BadRecord
from floodmark.core.time import MIN_TIMESTAMP, event_time_in_range, out_of_range_reason
from floodmark.core.values import object_array

SNAPSHOT_FORMAT = 1
"""The layout of :meth:`KeyedProcessOperator.snapshot`; a restore refuses another."""


@dataclass(frozen=True)
class ProcessOutput:
    """A row your function emitted, with its key and event time (ms)."""

    key: Any
    row: Any
    timestamp: int


@dataclass
class ProcessEmitted:
    """What one call of the operator emitted, in order."""

    rows: list[ProcessOutput] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)

    def extend(self, other: ProcessEmitted) -> None:
        self.rows += other.rows
        self.bad += other.bad


class _Timers:
    """One domain's timers: per key ``{time: output time}``, a heap by time (firing) and one by output time
    (the hold), both with lazy deletion (an entry counts while its key still has that time with that output time)."""

    def __init__(self) -> None:
        self.by_key: dict[Hashable, dict[int, int]] = {}
        self.heap: list[tuple[int, int, Hashable, int]] = []
        self.holds: list[tuple[int, int, Hashable, int]] = []
        self.seq = 0

    def set(self, key: Hashable, time: int, output_time: int) -> None:
        times = self.by_key.setdefault(key, {})
        if times.get(time) != output_time:
            times[time] = output_time
            heapq.heappush(self.heap, (time, self.seq, key, output_time))
            heapq.heappush(self.holds, (output_time, self.seq, key, time))
            self.seq += 1

    def delete(self, key: Hashable, time: int) -> None:
        times = self.by_key.get(key)
        if times is not None:
            times.pop(time, None)
            if not times:
                del self.by_key[key]

    def _live(self, key: Hashable, time: int, output_time: int) -> bool:
        return self.by_key.get(key, {}).get(time) == output_time

    def pop_due(self, now: int) -> tuple[Hashable, int, int] | None:
        """The earliest live timer at or before ``now`` as ``(key, time, output time)``, removed; None if none."""
        while self.heap and self.heap[0][0] <= now:
            time, _, key, output_time = heapq.heappop(self.heap)
            if self._live(key, time, output_time):
                self.delete(key, time)
                return key, time, output_time
        return None

    def earliest(self) -> int | None:
        """The earliest live timer's time."""
        while self.heap and not self._live(self.heap[0][2], self.heap[0][0], self.heap[0][3]):
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None

    def lowest_output_time(self) -> int | None:
        """The lowest output time of the live timers (what they hold)."""
        while self.holds and not self._live(self.holds[0][2], self.holds[0][3], self.holds[0][0]):
            heapq.heappop(self.holds)
        return self.holds[0][0] if self.holds else None

    def entries(self) -> list[tuple[Hashable, list[tuple[int, int]]]]:
        return [(key, sorted(times.items())) for key, times in self.by_key.items()]


class _Context:
    """A :class:`~floodmark.core.process.function.ProcessContext` for one call; its effects apply on success."""

    def __init__(
        self, operator: KeyedProcessOperator, key: Hashable, timestamp: int, output_time: int | None = None
    ) -> None:
        self.key = key
        self.state = dict(operator.states.get(key, {}))
        self.timestamp = timestamp
        self.watermark = operator.watermark
        self.processing_time = operator.processing_time
        self._operator = operator
        self.output_time = timestamp if output_time is None else output_time
        self.rows: list[ProcessOutput] = []
        self.timer_changes: list[tuple[TimeDomain, int, int | None]] = []
        """(domain, time, output time): a timer set, or deleted (output time None)."""

    def emit(self, row: Any, timestamp: int | None = None) -> None:
        self.rows.append(ProcessOutput(self.key, row, self.output_time if timestamp is None else int(timestamp)))

    def set_event_timer(self, time: int, output_time: int | None = None) -> None:
        self._set(TimeDomain.EVENT_TIME, int(time), int(time) if output_time is None else int(output_time))

    def delete_event_timer(self, time: int) -> None:
        self.timer_changes.append((TimeDomain.EVENT_TIME, int(time), None))

    def set_processing_timer(self, time: int, output_time: int | None = None) -> None:
        self._set(TimeDomain.PROCESSING_TIME, int(time), self.timestamp if output_time is None else int(output_time))

    def delete_processing_timer(self, time: int) -> None:
        self.timer_changes.append((TimeDomain.PROCESSING_TIME, int(time), None))

    def event_timers(self) -> list[int]:
        pending = set(self._operator.timers[TimeDomain.EVENT_TIME].by_key.get(self.key, {}))
        for domain, time, output_time in self.timer_changes:
            if domain is TimeDomain.EVENT_TIME:
                (pending.discard if output_time is None else pending.add)(time)
        return sorted(pending)

    def _set(self, domain: TimeDomain, time: int, output_time: int) -> None:
        if domain is TimeDomain.EVENT_TIME and output_time > time:
            raise ValueError(f"an event-time timer at {time} cannot output at {output_time}, after it fires")
        if not event_time_in_range(output_time):
            raise ValueError(out_of_range_reason(output_time))
        self.timer_changes.append((domain, time, output_time))


class KeyedProcessOperator:
    """A keyed process function's state and timers for every key (see the module docstring).

    :arg function: your :class:`~floodmark.core.process.function.KeyedProcessFunction`.
    :arg watermark: the input watermark to start from. :arg processing_time: the clock to start from (ms).
    """

    def __init__(
        self, function: KeyedProcessFunction, watermark: int = MIN_TIMESTAMP, processing_time: int = 0
    ) -> None:
        if not isinstance(function, KeyedProcessFunction):
            raise TypeError(f"{function!r} is not a keyed process function: it needs process() and on_timer()")
        self.function = function
        self.watermark = watermark
        self.processing_time = processing_time
        self.states: dict[Hashable, dict[str, Any]] = {}
        self.timers = {TimeDomain.EVENT_TIME: _Timers(), TimeDomain.PROCESSING_TIME: _Timers()}

    # ------------------------------------------------------------------ moves
    def advance_processing_time(self, processing_time: int) -> ProcessEmitted:
        """Move the clock up to ``processing_time`` (a lower one is ignored) and fire the timers it reaches."""
        self.processing_time = max(self.processing_time, processing_time)
        return self._fire_due()

    def advance_watermark(self, watermark: int) -> ProcessEmitted:
        """Move the input watermark up to ``watermark`` (a lower one is ignored) and fire the event-time timers
        at or behind it, earliest first (those their callbacks set at or behind it too)."""
        self.watermark = max(self.watermark, watermark)
        return self._fire_due()

    def add(self, rows: KeyedRows) -> ProcessEmitted:
        """Hand each record (``rows.values``) to the function in arrival order. A timer a record sets at or behind
        the watermark (or the clock) fires at the next move of either, as Flink's does: not between this call's
        records."""
        out = ProcessEmitted()
        checked, bad, reasons = validate_timestamps(object_array(rows.timestamps))
        problems = iter(reasons)
        columns = (rows.keys, rows.timestamps, rows.values, checked.tolist(), bad.tolist())
        for key, raw, record, ts, is_bad in zip(*columns, strict=True):
            if is_bad:
                out.bad.append(BadRecord(key, record, raw, next(problems)))
                continue
            self._call(key, ts, record, lambda ctx, r=record: self.function.process(r, ctx), out)
        return out

    # ------------------------------------------------------------------ gauges
    def gauges(self) -> OperatorGauges:
        """The hold (the lowest output time of the pending timers: their callbacks' rows are timed there), the keys
        with state or timers as the open state, the earliest event-time timer as the next firing and the earliest
        processing-time timer as the next timer."""
        holds = [t.lowest_output_time() for t in self.timers.values()]
        keys = len(set(self.states) | {k for t in self.timers.values() for k in t.by_key})
        return OperatorGauges(
            min((h for h in holds if h is not None), default=None),
            None,
            keys,
            self.timers[TimeDomain.EVENT_TIME].earliest(),
            self.timers[TimeDomain.PROCESSING_TIME].earliest(),
        )

    def timers_of(self, key: Hashable, domain: TimeDomain = TimeDomain.EVENT_TIME) -> set[int]:
        """``key``'s pending timers of ``domain`` (a copy)."""
        return set(self.timers[domain].by_key.get(key, {}))

    # ------------------------------------------------------------------ state
    def snapshot(self) -> bytes:
        """States, timers, watermark and clock, for :func:`restore_process_operator` (values must pickle)."""
        data = {
            "format": SNAPSHOT_FORMAT,
            "watermark": self.watermark,
            "processing_time": self.processing_time,
            "states": list(self.states.items()),
            "timers": {domain.value: timers.entries() for domain, timers in self.timers.items()},
        }
        return pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)

    # ------------------------------------------------------------------ calls
    def _fire_due(self) -> ProcessEmitted:
        out = ProcessEmitted()
        while True:
            due = self.timers[TimeDomain.PROCESSING_TIME].pop_due(self.processing_time)
            domain = TimeDomain.PROCESSING_TIME
            if due is None:
                due, domain = self.timers[TimeDomain.EVENT_TIME].pop_due(self.watermark), TimeDomain.EVENT_TIME
            if due is None:
                return out
            key, time, output_time = due
            timer = Timer(time, domain, output_time)
            at = time if domain is TimeDomain.EVENT_TIME else output_time
            self._call(key, at, timer, lambda ctx, t=timer: self.function.on_timer(t, ctx), out, output_time)

    def _call(
        self,
        key: Hashable,
        timestamp: int,
        what: Any,
        call: Callable[[_Context], None],
        out: ProcessEmitted,
        output_time: int | None = None,
    ) -> None:
        ctx = _Context(self, key, timestamp, output_time)
        try:
            call(ctx)
        except Exception as error:
            text = f"{type(error).__name__}: {error}"
            where = "on_timer" if isinstance(what, Timer) else "process"
            out.bad.append(BadRecord(key, what, timestamp, f"the keyed process function's {where} raised {text}"))
            return
        if ctx.state:
            self.states[key] = ctx.state
        else:
            self.states.pop(key, None)
        for domain, time, output_time in ctx.timer_changes:
            if output_time is None:
                self.timers[domain].delete(key, time)
            else:
                self.timers[domain].set(key, time, output_time)
        out.rows += ctx.rows


def restore_process_operator(function: KeyedProcessFunction, snapshot: bytes) -> KeyedProcessOperator:
    """The operator :meth:`KeyedProcessOperator.snapshot` saved, running ``function``."""
    data = pickle.loads(snapshot)
    if data.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(
            f"a keyed process snapshot of format {data.get('format')} (this floodmark reads {SNAPSHOT_FORMAT})"
        )
    operator = KeyedProcessOperator(function, data["watermark"], data["processing_time"])
    operator.states = dict(data["states"])
    for domain_name, entries in data["timers"].items():
        timers = operator.timers[TimeDomain(domain_name)]
        for key, times in entries:
            for time, output_time in times:
                timers.set(key, time, output_time)
    return operator
