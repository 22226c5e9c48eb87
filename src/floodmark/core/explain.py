"""Why has this window not fired? (the engine-free half of ``floodmark explain``).

:func:`explain_window` reads, without changing anything, a source's
:class:`~floodmark.core.watermarks.SourceWatermarks` (per-split watermarks, idle
flags, the generators' own state) and optionally the window operator's state for
one key and window, and returns an :class:`Explanation`: structured fields for
programs and :meth:`Explanation.text` for an operator on call.

Conventions (those of ``docs/semantics.md``):

* every time and duration is an ``int`` of milliseconds; event times and
  watermarks are event-time ms, ``processing time`` is processing-time ms (the
  coordinator's clock);
* a window ``[start, end)`` (``end`` exclusive) fires on time when the watermark
  reaches its max timestamp ``end - 1`` (inclusive: ``W >= end - 1``) and is
  garbage collected when the watermark reaches its horizon ``end - 1 +
  allowed_lateness`` (also inclusive);
* the combined watermark is the MIN over non-idle splits (with
  ``percentile < 100``, the highest value that that share of the non-idle splits
  has reached); all splits idle: the highest split watermark.

Projections ("at processing time X if no records arrive") replay the
coordinator's rules on paper: periodic emits every ``periodic_interval`` from
``last_periodic``, Flink's idleness timer arithmetic, the seed-000 generator's
self-advance. They assume the coordinator is advanced at least once per interval
(``max_periodic_catch_up`` skips are not modelled) and that no records arrive.
The window operator sees a new source watermark only when the runtime hands it
over (the next micro-batch on Spark), so a window whose firing point the source
watermark has passed but the operator's has not is reported as ``DUE``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from floodmark.core.columnar import NONE_TIME, ColumnarWindowOperator
from floodmark.core.operator import WindowOperator, WindowSpec
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, format_timestamp
from floodmark.core.triggers import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    Default,
    Never,
    OrFinally,
    Repeatedly,
    Trigger,
    TriggerContext,
)
from floodmark.core.watermarks.bounded import AscendingTimestamps, BoundedOutOfOrderness, LegacyBoundedOutOfOrderness
from floodmark.core.watermarks.coordinator import SourceWatermarks
from floodmark.core.watermarks.generator import WatermarkGenerator
from floodmark.core.watermarks.idle_advancing import BoundedOutOfOrdernessWatermarkBasedOnEventTime
from floodmark.core.watermarks.idleness import IdlenessTimer, WatermarksWithIdleness
from floodmark.core.watermarks.multiplexer import SplitOutput
from floodmark.core.watermarks.percentile import PercentileOfRecentTimestamps, completeness_percentile
from floodmark.core.windows import Window

__all__ = [
    "Explanation",
    "PaneState",
    "SplitReport",
    "WindowStatus",
    "explain_window",
    "format_duration",
    "format_instant",
]


class WindowStatus(enum.StrEnum):
    """Where one window of one key stands."""

    NO_DATA = "NO_DATA"
    """The operator has no state for this key and window (no record yet) and it has not expired."""

    WAITING_FOR_WATERMARK = "WAITING_FOR_WATERMARK"
    """Its next pane is fired by the watermark (the ON_TIME pane at the max timestamp, or for a trigger
    without conditions of its own the garbage-collection pane at the horizon) and the combined watermark
    is below that point. Also the status when no operator is given and the watermark is below the max
    timestamp."""

    DUE = "DUE"
    """The source's combined watermark has reached the firing point but the operator's watermark has
    not: it fires when the operator next receives the watermark (the next micro-batch on Spark)."""

    WAITING_FOR_TRIGGER = "WAITING_FOR_TRIGGER"
    """No ON_TIME/LATE pane yet and the watermark is not what it waits for: the trigger's own condition
    (a record count, a processing-time delay) decides; a garbage-collection pane follows at the horizon
    if records are still unemitted then."""

    FIRED_CAN_FIRE_LATE = "FIRED_CAN_FIRE_LATE"
    """An ON_TIME or LATE pane was emitted and the trigger has not finished: records within the allowed
    lateness still make LATE panes until the watermark reaches the horizon."""

    FIRED_FINAL = "FIRED_FINAL"
    """The trigger finished with the window's final pane: later records go to the late output
    (``WINDOW_CLOSED``) until the horizon, then ``EXPIRED``."""

    EXPIRED = "EXPIRED"
    """The watermark reached the horizon (max timestamp + allowed lateness): state dropped (or dropped at
    the operator's next watermark) and records for it go to the late output (``EXPIRED``)."""

    WATERMARK_PASSED = "WATERMARK_PASSED"
    """No operator given and the watermark is at or past the max timestamp but below the horizon: the
    window fired ON_TIME if it had records; late records may still make LATE panes."""


@dataclass(frozen=True)
class SplitReport:
    """One split of the source, seen from one window.

    :ivar split: the split id. :ivar watermark: its watermark (ms; ``MIN_TIMESTAMP``: none yet).
    :ivar idle: marked idle (it does not hold the combined watermark back).
    :ivar gap_ms: ``max_timestamp - watermark`` clamped to ``[0, MAX_TIMESTAMP]``: how much event time
        it still has to cover for the window's max timestamp (0 once reached).
    :ivar has_records: whether it has seen a record (``None``: its generator does not tell).
    :ivar highest_event_time: the highest record event time it has seen (ms), if the generator tells.
    :ivar generator: a description of its generator (kind, bound, idleness timeout).
    :ivar bound_ms: its out-of-orderness bound (the current adaptive one for the percentile generator).
    :ivar needs_event_time: the lowest record event time (ms, inclusive) that lifts its watermark to the
        window's max timestamp at its next periodic emit (``None``: unknown generator).
    :ivar next_emit_watermark: the watermark its next periodic emit publishes from the records it already
        has, when higher than ``watermark`` (emits are periodic, so a split lags its records until then).
    :ivar idle_timeout_ms: the idleness timeout, if idleness is on.
    :ivar inactive_since: processing time (ms) of the first periodic check that saw no new record, when
        its idleness timer runs (the last record arrived within one interval before that).
    :ivar idle_at: processing time (ms) at which it will be marked idle if no record arrives
        (``None``: already idle, or no idleness).
    :ivar self_advance_at: processing time (ms) at which its own watermark reaches the window's max
        timestamp without any new record (a pending periodic emit, or the seed-000 idle-advancing
        generator), if it will before being marked idle.
    """

    split: str
    watermark: int
    idle: bool
    gap_ms: int
    has_records: bool | None
    highest_event_time: int | None
    generator: str
    bound_ms: int | None
    needs_event_time: int | None
    next_emit_watermark: int | None
    idle_timeout_ms: int | None
    inactive_since: int | None
    idle_at: int | None
    self_advance_at: int | None


@dataclass(frozen=True)
class PaneState:
    """The operator's state for one key and window (both operators).

    :ivar records_since_last_pane: records added since the previous pane (0: the next pane is empty).
    :ivar panes_emitted: panes emitted so far (the next pane's index).
    :ivar nonearly_fired: an ON_TIME or LATE pane has been emitted.
    :ivar finished: the trigger finished (the window is closed until garbage collection).
    :ivar holds_output_watermark: a record arrived before the watermark reached the max timestamp and no
        ON_TIME/LATE pane has fired since (its first non-early pane will be ON_TIME).
    :ivar output_hold: the output timestamp its next pane carries (holds the stage's output watermark).
    :ivar pending_since: processing time (ms) of the oldest record not yet emitted in a pane.
    :ivar records_until_check: records after which the trigger is asked again (``None``: records alone
        never make it fire now).
    :ivar processing_deadline: processing time (ms) of its processing-time timer, if one is armed.
    """

    records_since_last_pane: int
    panes_emitted: int
    nonearly_fired: bool
    finished: bool
    holds_output_watermark: bool
    output_hold: int | None
    pending_since: int | None
    records_until_check: int | None
    processing_deadline: int | None


@dataclass(frozen=True)
class Explanation:
    """Why one window of one key has (not) fired, and when it will.

    Times are ms (event time unless named processing time). ``remaining_ms`` and the splits' gaps are
    measured to ``max_timestamp`` (the on-time point); ``target_watermark`` is the watermark at which the
    window's *next* watermark-driven pane fires, which is the horizon when only the garbage-collection
    pane is left.

    :ivar key, window: what was asked (a session of the operator that covers the window replaces it).
    :ivar max_timestamp: ``window.end - 1``. :ivar horizon: ``max_timestamp + allowed_lateness``
        (saturating). :ivar status: see :class:`WindowStatus`. :ivar reason: one line: why.
    :ivar combined_watermark: the source's combined watermark. :ivar operator_watermark: the operator's
        input watermark, if an operator was given. :ivar processing_time: "now" for relative times.
    :ivar percentile: how splits are combined (100 = MIN). :ivar all_splits_idle: every split is idle.
    :ivar remaining_ms: ``max(0, max_timestamp - combined_watermark)``.
    :ivar horizon_remaining_ms: ``max(0, horizon - combined_watermark)``.
    :ivar target_watermark: see above; ``None`` when moving the watermark alone emits nothing more.
    :ivar splits: every split, by watermark then id. :ivar holding_splits: when the combined watermark
        is below ``max_timestamp``, the non-idle splits below it, by watermark ascending (else empty).
    :ivar idle_splits: the idle splits. :ivar splits_without_records: splits that have seen no record.
    :ivar splits_needed: how many of ``holding_splits`` must still reach ``max_timestamp`` (or go idle)
        for the combined watermark to reach it: all of them with MIN, fewer with a percentile; with every
        split idle, 1 (any split whose records lift it that far).
    :ivar watermark_reaches_at: processing time at which the combined watermark reaches
        ``target_watermark`` if no record arrives (idleness, self-advancing generators, pending emits);
        ``None`` if it never does, or no target.
    :ivar pane_state: the operator's state for the window (``None``: no operator or no state).
    :ivar trigger_state: that state in words, with the trigger's own state.
    :ivar fires_when: in words: what makes it fire next. :ivar notes: further remarks.
    """

    key: Any
    window: Window
    max_timestamp: int
    horizon: int
    allowed_lateness_ms: int
    status: WindowStatus
    reason: str
    combined_watermark: int
    operator_watermark: int | None
    processing_time: int
    percentile: float
    all_splits_idle: bool
    remaining_ms: int
    horizon_remaining_ms: int
    target_watermark: int | None
    splits: tuple[SplitReport, ...]
    holding_splits: tuple[SplitReport, ...]
    idle_splits: tuple[SplitReport, ...]
    splits_without_records: tuple[str, ...]
    splits_needed: int
    watermark_reaches_at: int | None
    pane_state: PaneState | None
    trigger_state: str | None
    fires_when: str
    notes: tuple[str, ...] = ()

    def text(self) -> str:
        """A multi-line plain-English explanation (times as UTC ISO with ms plus raw ms)."""
        w = self.window
        lines = [
            f"Key {self.key!r}, window [{format_instant(w.start)}, {format_instant(w.end)}): {self.status.value}",
            f"Why: {self.reason}",
            f"Window max timestamp (end - 1): {format_instant(self.max_timestamp)}; horizon (max timestamp + "
            f"allowed lateness {format_duration(self.allowed_lateness_ms)}): {format_instant(self.horizon)}.",
        ]
        how = "MIN over the non-idle splits" if self.percentile == 100.0 else f"{self.percentile:g}th percentile"
        if self.all_splits_idle:
            how = "every split is idle: the highest split watermark"
        line = f"Combined watermark ({how}): {format_instant(self.combined_watermark)}"
        if self.remaining_ms > 0:
            line += f", {format_duration(self.remaining_ms)} short of the max timestamp"
        lines.append(line + ".")
        if self.operator_watermark is not None and self.operator_watermark != self.combined_watermark:
            lines.append(f"Operator watermark: {format_instant(self.operator_watermark)}.")
        lines.append(f"Processing time now: {format_instant(self.processing_time)}.")
        if self.splits:
            lines.append("Splits:")
            holding = {s.split for s in self.holding_splits}
            for report in self.splits:
                lines.append(f"  - {_split_line(report, report.split in holding)}")
        else:
            lines.append("Splits: none known yet (no record from any split).")
        if self.trigger_state is not None:
            lines.append(f"Trigger and pane state: {self.trigger_state}")
        # One requirement per line: the sentence is built from "; split ..." items and a closing projection.
        fires = self.fires_when.replace("; split ", ";\n    split ").replace(". If no record", ".\n  If no record")
        lines.append(f"Fires when: {fires}")
        lines.extend(f"Note: {note}" for note in self.notes)
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- formatting
_DAY, _HOUR, _MINUTE, _SECOND = 86_400_000, 3_600_000, 60_000, 1_000
_UNBOUNDED = 10**15  # ~31 700 years: a gap measured from MIN_TIMESTAMP, not a real duration


def format_instant(ms: int) -> str:
    """``2024-01-01T11:59:59.999Z (1704110399999 ms)``; ``MIN`` / ``MAX`` for the extremes."""
    if ms <= MIN_TIMESTAMP:
        return "MIN"
    if ms >= MAX_TIMESTAMP:
        return "MAX"
    return f"{format_timestamp(ms)} ({ms} ms)"


def format_duration(ms: int) -> str:
    """``1 min 10.5 s (70500 ms)``; ``unbounded`` for gaps measured from MIN."""
    if abs(ms) >= _UNBOUNDED:
        return "unbounded"
    sign, rest = ("-", -ms) if ms < 0 else ("", ms)
    if rest < _SECOND:
        return f"{sign}{rest} ms"
    parts = []
    for size, unit in ((_DAY, "d"), (_HOUR, "h"), (_MINUTE, "min")):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}")
    seconds, millis = divmod(rest, _SECOND)
    if millis:
        parts.append(f"{seconds}.{millis:03d}".rstrip("0") + " s")
    elif seconds:
        parts.append(f"{seconds} s")
    return f"{sign}{' '.join(parts)} ({ms} ms)"


def _relative(at: int, now: int) -> str:
    if at == now:
        return "now"
    return f"in {format_duration(at - now)}" if at > now else f"{format_duration(now - at)} ago"


def _split_line(report: SplitReport, holding: bool) -> str:
    if report.watermark <= MIN_TIMESTAMP:
        head = f"{report.split}: no watermark yet"
    else:
        head = f"{report.split}: watermark {format_instant(report.watermark)}"
    if report.idle:
        state = "IDLE (excluded from the combined watermark)"
    elif holding:
        behind = "" if report.watermark <= MIN_TIMESTAMP else f", {format_duration(report.gap_ms)} behind"
        state = f"HOLDING THE WINDOW BACK{behind}"
    elif report.gap_ms == 0:
        state = "past the max timestamp"
    else:
        state = f"active, {format_duration(report.gap_ms)} behind"
    facts = [report.generator]
    if report.has_records is False:
        facts.append("never seen a record")
    elif report.highest_event_time is not None:
        facts.append(f"highest event time {format_instant(report.highest_event_time)}")
    if report.next_emit_watermark is not None:
        facts.append(f"next periodic emit lifts it to {format_instant(report.next_emit_watermark)}")
    if report.inactive_since is not None and not report.idle:
        facts.append(f"no record seen by the idleness checks since {format_instant(report.inactive_since)}")
    return f"{head}: {state} ({'; '.join(facts)})"


# ------------------------------------------------------------------------------------------ split models
class _SplitModel:
    """Read-only view of one split's output and generator, with projections."""

    def __init__(
        self, split: str, output: SplitOutput, generator: WatermarkGenerator | None, source: SourceWatermarks
    ) -> None:
        self.split = split
        self.watermark = output.watermark
        self.idle = output.idle
        self.interval: int = source.periodic_interval
        self.next_tick: int = source.last_periodic + self.interval
        self.timer: IdlenessTimer | None = None
        inner = generator
        while isinstance(inner, WatermarksWithIdleness):  # the outermost timer decides idleness
            self.timer = self.timer or inner.timer
            inner = inner.generator
        self.inner = inner
        self.last_periodic: int = source.last_periodic

    # --- facts read from the generator
    def bound(self) -> int | None:
        g = self.inner
        if isinstance(g, BoundedOutOfOrderness | LegacyBoundedOutOfOrderness):
            return g.bound
        if isinstance(g, BoundedOutOfOrdernessWatermarkBasedOnEventTime):
            return g.bound
        if isinstance(g, PercentileOfRecentTimestamps):
            return g.current_bound()
        return None

    def highest_event_time(self) -> int | None:
        g = self.inner
        # Each generator starts from a sentinel just above MIN; equal to it means "no record yet".
        if isinstance(g, BoundedOutOfOrderness):
            return None if g.max_timestamp == MIN_TIMESTAMP + g.bound + 1 else g.max_timestamp
        if isinstance(g, LegacyBoundedOutOfOrderness):
            return None if g.current_max_timestamp == MIN_TIMESTAMP + g.bound else g.current_max_timestamp
        if isinstance(g, BoundedOutOfOrdernessWatermarkBasedOnEventTime):
            start = MIN_TIMESTAMP + g.bound + 1
            return None if g.last_event_timestamp == start else g.last_event_timestamp
        if isinstance(g, PercentileOfRecentTimestamps):
            return g.max_timestamp
        return None

    def has_records(self) -> bool | None:
        if self._known_generator():
            return self.highest_event_time() is not None
        if self.timer is not None:
            return self.timer.counter > 0
        return None

    def _known_generator(self) -> bool:
        return isinstance(
            self.inner,
            BoundedOutOfOrderness
            | LegacyBoundedOutOfOrderness
            | BoundedOutOfOrdernessWatermarkBasedOnEventTime
            | PercentileOfRecentTimestamps,
        )

    def description(self) -> str:
        g = self.inner
        if isinstance(g, AscendingTimestamps):
            text = "ascending timestamps"
        elif isinstance(g, BoundedOutOfOrderness):
            text = f"bounded out-of-orderness, bound {format_duration(g.bound)}"
        elif isinstance(g, LegacyBoundedOutOfOrderness):
            text = f"legacy bounded out-of-orderness (max - bound), bound {format_duration(g.bound)}"
        elif isinstance(g, BoundedOutOfOrdernessWatermarkBasedOnEventTime):
            text = (
                f"idle-advancing (seed 000), bound {format_duration(g.bound)}, advances on its own after "
                f"{format_duration(g.wait)} without records"
            )
        elif isinstance(g, PercentileOfRecentTimestamps):
            bound = format_duration(g.current_bound())
            text = f"percentile-of-recent-delays (p{g.percentile:g}), current bound {bound}"
        else:
            text = f"generator {type(g).__name__}"
        if self.timer is not None:
            text += f", idle after {format_duration(self.timer.timeout)} without records"
        return text

    def next_emit(self) -> int | None:
        """What the next periodic emit publishes from the records already seen (``None``: unknown)."""
        g = self.inner
        if isinstance(g, BoundedOutOfOrderness):
            return g.max_timestamp - g.bound - 1
        if isinstance(g, LegacyBoundedOutOfOrderness):
            return max(g.last_emitted_watermark, g.current_max_timestamp - g.bound)
        if isinstance(g, BoundedOutOfOrdernessWatermarkBasedOnEventTime):
            logical = g.logical_time + g.interval
            if logical - g.last_event_timestamp > g.wait:
                return logical - g.bound - 1
            return g.max_timestamp - g.bound - 1
        if isinstance(g, PercentileOfRecentTimestamps):
            return MIN_TIMESTAMP if g.max_timestamp is None else g.max_timestamp - g.current_bound() - 1
        return None

    def needs_event_time(self, target: int) -> int | None:
        """The lowest record event time (inclusive) that lifts this split's watermark to ``target``."""
        g = self.inner
        if isinstance(g, LegacyBoundedOutOfOrderness):
            return target + g.bound  # watermark = max - bound (no - 1)
        bound = self.bound()
        return None if bound is None else target + bound + 1

    def idle_at(self) -> int | None:
        """Processing time of the periodic check that marks it idle if no record arrives (Flink's timer)."""
        timer = self.timer
        if timer is None or self.idle:
            return None
        if timer.counter != timer.last_counter:
            start = self.last_periodic + 2 * self.interval  # next check consumes the activity, the one after starts
        elif timer.start_of_inactivity is None:
            start = self.last_periodic + self.interval
        else:
            start = timer.start_of_inactivity
        # First check strictly more than `timeout` after the start (checks run every interval).
        ticks = max(1, (start + timer.timeout - self.last_periodic) // self.interval + 1)
        return self.last_periodic + ticks * self.interval

    def reach_at(self, target: int) -> int | None:
        """Processing time at which its own watermark reaches ``target`` without records (``None``: never),
        unless it is marked idle first (idleness is checked before the wrapped generator emits)."""
        if self.idle:
            return None
        if self.watermark >= target:
            return self.last_periodic
        at: int | None = None
        emit = self.next_emit()
        g = self.inner
        if emit is not None and emit >= target:
            at = self.next_tick
        elif isinstance(g, BoundedOutOfOrdernessWatermarkBasedOnEventTime):
            # Tick k adds k * interval of logical time; it emits logical - bound - 1 once logical - last > wait.
            after_wait = (g.wait + g.last_event_timestamp - g.logical_time) // g.interval + 1
            reaching = -((g.logical_time - target - g.bound - 1) // g.interval)
            at = self.last_periodic + max(1, after_wait, reaching) * self.interval
        idle_at = self.idle_at()
        if at is None or at >= MAX_TIMESTAMP or (idle_at is not None and at >= idle_at):
            return None
        return at

    def report(self, max_timestamp: int) -> SplitReport:
        emit = self.next_emit()
        timer = self.timer
        return SplitReport(
            split=self.split,
            watermark=self.watermark,
            idle=self.idle,
            gap_ms=min(MAX_TIMESTAMP, max(0, max_timestamp - self.watermark)),
            has_records=self.has_records(),
            highest_event_time=self.highest_event_time(),
            generator=self.description(),
            bound_ms=self.bound(),
            needs_event_time=self.needs_event_time(max_timestamp),
            next_emit_watermark=emit if emit is not None and emit > self.watermark else None,
            idle_timeout_ms=timer.timeout if timer is not None else None,
            inactive_since=timer.start_of_inactivity if timer is not None else None,
            idle_at=self.idle_at(),
            self_advance_at=self.reach_at(max_timestamp) if self.watermark < max_timestamp else None,
        )


def _combine(watermarks: dict[str, int], idle: dict[str, bool], percentile: float) -> int:
    """The multiplexer's candidate (without the never-regress step)."""
    active = [wm for split, wm in watermarks.items() if not idle[split]]
    if not active:
        return max(watermarks.values(), default=MIN_TIMESTAMP)
    return min(active) if percentile == 100.0 else completeness_percentile(active, percentile)


def _project(models: list[_SplitModel], combined: int, percentile: float, target: int) -> int | None:
    """Processing time at which the combined watermark reaches ``target`` if no record arrives."""
    if combined >= target:
        return None
    events: list[tuple[int, bool, str, int]] = []  # (processing time, marks idle, split, new watermark)
    for model in models:
        if model.idle:
            continue
        idle_at = model.idle_at()
        emit = model.next_emit()
        if emit is not None and emit > model.watermark and (idle_at is None or model.next_tick < idle_at):
            events.append((model.next_tick, False, model.split, emit))
        reach = model.reach_at(target)
        if reach is not None:
            events.append((reach, False, model.split, target))
        if idle_at is not None:
            events.append((idle_at, True, model.split, MIN_TIMESTAMP))
    watermarks = {m.split: m.watermark for m in models}
    idle = {m.split: m.idle for m in models}
    events.sort()
    i = 0
    while i < len(events):
        now = events[i][0]
        while i < len(events) and events[i][0] == now:  # the coordinator combines once per advance
            _, marks_idle, split, value = events[i]
            if marks_idle:
                idle[split] = True
            else:
                watermarks[split] = max(watermarks[split], value)
            i += 1
        combined = max(combined, _combine(watermarks, idle, percentile))
        if combined >= target:
            return now
    return None


def _allowed_behind(active: int, percentile: float) -> int:
    """How many non-idle splits may stay below a value the combined watermark has reached."""
    if percentile == 100.0 or active == 0:
        return 0
    # Same arithmetic as completeness_percentile: the value is the sorted list's entry at this index.
    return min(math.floor(active * (1.0 - percentile / 100.0) + 1e-9), active - 1)


# ------------------------------------------------------------------------------------------ operator state
@dataclass(frozen=True)
class _View:
    window: Window
    trigger_state: dict[str, Any]
    new_count: int
    pane_index: int
    nonspeculative_index: int
    had_nonearly: bool
    closed: bool
    held: bool
    hold: int | None
    pending_since: int | None
    columnar: bool


def _lookup(
    spec: WindowSpec, operator: WindowOperator | ColumnarWindowOperator, key: Hashable, window: Window
) -> tuple[_View | None, str | None]:
    """The state of (key, window), read-only; a note when a covering session stands in for ``window``."""
    if isinstance(operator, ColumnarWindowOperator):
        row = operator.index.get((key, window.start))
        c = operator.cols
        if row is None or not c["live"][row] or int(c["end"][row]) != window.end:
            return None, None
        fired, closed = bool(c["fired"][row]), bool(c["closed"][row])
        # The columnar operator keeps flags, not trigger dicts: rebuild the dict its trigger would have.
        trigger = spec.trigger
        if isinstance(trigger, Default):
            state: dict[str, Any] = {"fired": fired, "since_fire": 0}
        elif isinstance(trigger, AfterWatermark):
            late_phase = fired or closed
            early = None
            if operator.early_delay is not None:  # the early deadline is the pending column plus the delay
                pending_since = int(c["pending"][row])
                waiting = pending_since != NONE_TIME and not late_phase
                early = {"deadline": pending_since + operator.early_delay if waiting else None}
            elif operator.early_count is not None:  # the early count is the records since the last pane
                early = {"n": 0 if late_phase else int(c["new_count"][row])}
            # Late firings on the columnar operator fire at every late record: never a record in waiting.
            late = trigger.late.new_state() if trigger.late is not None else None
            state = {"late_phase": late_phase, "early": early, "late": late}
        else:
            state = trigger.new_state()
        hold = int(c["hold"][row])
        pending = int(c["pending"][row])
        return (
            _View(
                window=window,
                trigger_state=state,
                new_count=int(c["new_count"][row]),
                pane_index=int(c["pane_index"][row]),
                nonspeculative_index=int(c["nonspec"][row]),
                had_nonearly=bool(c["had_nonearly"][row]),
                closed=closed,
                held=bool(c["held"][row]),
                hold=None if hold == operator.hold_empty else hold,
                pending_since=None if pending == NONE_TIME else pending,
                columnar=True,
            ),
            None,
        )
    per_key = operator.windows.get(key, {})
    state_obj = per_key.get(window)
    note = None
    if state_obj is None and spec.window.is_merging:
        covering = sorted(w for w in per_key if w.intersects(window))
        if len(covering) == 1:
            state_obj = per_key[covering[0]]
            note = f"the session {_window_text(covering[0])} of this key overlaps the window asked about: explained"
    if state_obj is None:
        return None, None
    return (
        _View(
            window=state_obj.window,
            trigger_state=state_obj.trigger,
            new_count=state_obj.new_count,
            pane_index=state_obj.pane_index,
            nonspeculative_index=state_obj.nonspeculative_index,
            had_nonearly=state_obj.had_nonearly,
            closed=state_obj.closed,
            held=state_obj.held,
            hold=state_obj.hold,
            pending_since=state_obj.pending_since,
            columnar=False,
        ),
        note,
    )


def _window_text(window: Window) -> str:
    return f"[{format_instant(window.start)}, {format_instant(window.end)})"


def _describe_trigger(trigger: Trigger, state: dict[str, Any], ctx: TriggerContext) -> str:
    """The trigger's state in words (read-only: only query methods are called)."""
    if isinstance(trigger, Default):
        if state["fired"]:
            return f"Default: fired; {state['since_fire']} record(s) since its last firing"
        return "Default: not fired yet (fires when the watermark reaches the max timestamp)"
    if isinstance(trigger, AfterCount):
        return f"AfterCount({trigger.count}): {state['n']} of {trigger.count} record(s)"
    if isinstance(trigger, AfterProcessingTime):
        if state["deadline"] is None:
            return f"AfterProcessingTime({format_duration(trigger.delay)}): not started (the next record starts it)"
        when = state["deadline"]
        return (
            f"AfterProcessingTime({format_duration(trigger.delay)}): fires at processing time "
            f"{format_instant(when)} ({_relative(when, ctx.processing_time)})"
        )
    if isinstance(trigger, Never):
        return "Never: fires only when the window is garbage collected (at the horizon)"
    if isinstance(trigger, Repeatedly):
        return f"Repeatedly[{_describe_trigger(trigger.trigger, state, ctx)}]"
    if isinstance(trigger, AfterWatermark):
        if state["late_phase"]:
            late = _describe_trigger(trigger.late, state["late"], ctx) if trigger.late else None
            return "AfterWatermark: on-time pane fired; " + (
                f"late firings: {late}" if late else "no late firings (finished)"
            )
        text = "AfterWatermark: waiting for the watermark to reach the max timestamp"
        if trigger.early:
            text += f"; early firings: {_describe_trigger(trigger.early, state['early'], ctx)}"
        return text
    if isinstance(trigger, AfterEach):
        index = state["index"]
        if index >= len(trigger.triggers):
            return "AfterEach: all steps finished"
        current = _describe_trigger(trigger.triggers[index], state["subs"][index], ctx)
        return f"AfterEach: step {index + 1} of {len(trigger.triggers)}: {current}"
    if isinstance(trigger, AfterAny | AfterAll):
        subs = [
            _describe_trigger(t, s, ctx) + (" [done]" if done else "")
            for t, s, done in zip(trigger.triggers, state["subs"], state["done"], strict=True)
        ]
        return f"{type(trigger).__name__}({'; '.join(subs)})"
    if isinstance(trigger, OrFinally):
        main = _describe_trigger(trigger.trigger, state["main"], ctx)
        return f"{main}, until {_describe_trigger(trigger.until, state['until'], ctx)}"
    return f"{trigger!r} with state {state!r}"


def _pane_state(spec: WindowSpec, view: _View, ctx: TriggerContext) -> PaneState:
    trigger = spec.trigger
    closed = view.closed
    return PaneState(
        records_since_last_pane=view.new_count,
        panes_emitted=view.pane_index,
        nonearly_fired=view.had_nonearly,
        finished=closed,
        holds_output_watermark=view.held and not closed,
        output_hold=(
            spec.timestamp_combiner.pane_timestamp(view.hold, view.window.max_timestamp)
            if view.held and not closed
            else None
        ),
        pending_since=view.pending_since,
        records_until_check=None if closed else trigger.elements_until_check(view.trigger_state, ctx),
        processing_deadline=None if closed else trigger.processing_deadline(view.trigger_state),
    )


def _trigger_text(spec: WindowSpec, view: _View, pane: PaneState, ctx: TriggerContext) -> str:
    parts = [
        f"{pane.records_since_last_pane} record(s) since the last pane",
        f"{pane.panes_emitted} pane(s) emitted"
        + (f" ({view.nonspeculative_index} ON_TIME/LATE)" if pane.panes_emitted else ""),
    ]
    if view.columnar:
        parts.append("fired: " + ("yes" if view.had_nonearly else "no"))
        parts.append("closed: " + ("yes" if view.closed else "no"))
    elif pane.finished:
        parts.append("trigger finished (window closed)")
    if pane.holds_output_watermark and pane.output_hold is not None:
        parts.append(f"holds the output watermark at {format_instant(pane.output_hold)}")
    if pane.pending_since is not None:
        parts.append(f"oldest unemitted record arrived at processing time {format_instant(pane.pending_since)}")
    engine = "columnar operator" if view.columnar else "window operator"
    trigger = (
        f"{spec.trigger!r} finished" if pane.finished else _describe_trigger(spec.trigger, view.trigger_state, ctx)
    )
    return f"{engine}: {'; '.join(parts)}. Trigger: {trigger}."


# ------------------------------------------------------------------------------------------ the analysis
def explain_window(
    spec: WindowSpec,
    key: Any,
    window: Window,
    watermarks: SourceWatermarks,
    operator: WindowOperator | ColumnarWindowOperator | None = None,
    processing_time: int | None = None,
) -> Explanation:
    """Explain why ``window`` of ``key`` has (not) fired and what will make it fire. Reads only.

    :arg spec: the aggregation's spec (window assigner, trigger, allowed lateness).
    :arg key: the key, as the operator stores it.
    :arg window: ``[start, end)`` in event-time ms (``end`` exclusive).
    :arg watermarks: the source's coordinator (per-split generators and the combined watermark).
    :arg operator: the window operator holding the key's state; without it the status is decided from
        the watermark alone (``WAITING_FOR_WATERMARK``, ``WATERMARK_PASSED`` or ``EXPIRED``).
    :arg processing_time: "now" in processing-time ms, for relative times; default: the coordinator's clock.
    """
    now = watermarks.clock.now_ms() if processing_time is None else processing_time
    percentile = float(watermarks.multiplexer.percentile)
    combined = watermarks.watermark
    models = [
        _SplitModel(split, output, watermarks.generators.get(split), watermarks)
        for split, output in watermarks.multiplexer.outputs.items()
    ]
    notes: list[str] = []

    view: _View | None = None
    op_watermark: int | None = None
    if operator is not None:
        op_watermark = operator.watermark
        view, note = _lookup(spec, operator, key, window)
        if note:
            notes.append(note)
        if view is not None:
            window = view.window
    max_ts = window.max_timestamp
    horizon = spec.horizon(window)

    reports = sorted((m.report(max_ts) for m in models), key=lambda r: (r.watermark, r.split))
    active = [r for r in reports if not r.idle]
    all_idle = bool(reports) and not active
    holding = tuple(r for r in active if r.watermark < max_ts) if combined < max_ts else ()
    if combined >= max_ts:
        needed = 0
    elif all_idle:
        needed = 1
    else:
        needed = max(0, len(holding) - _allowed_behind(len(active), percentile))

    # Operator side: the trigger's view at the operator's own watermark and "now".
    pane: PaneState | None = None
    trigger_text: str | None = None
    ctx = TriggerContext(window, op_watermark if op_watermark is not None else combined, now)
    if view is not None:
        pane = _pane_state(spec, view, ctx)
        trigger_text = _trigger_text(spec, view, pane, ctx)

    status, target, target_is_gc = _status(spec, view, operator is not None, window, combined, op_watermark, ctx)
    projected = _project(models, combined, percentile, target) if target is not None else None
    facts = _Facts(
        spec=spec,
        key=key,
        window=window,
        combined=combined,
        op_watermark=op_watermark,
        now=now,
        percentile=percentile,
        models=models,
        reports=reports,
        holding=holding,
        needed=needed,
        all_idle=all_idle,
        view=view,
        pane=pane,
        target=target,
        target_is_gc=target_is_gc,
        projected=projected,
        trigger_description=(
            _describe_trigger(spec.trigger, view.trigger_state, ctx) if view is not None and not view.closed else None
        ),
    )
    fires_when = _fires_when(status, facts)
    notes.extend(_notes(facts))
    return Explanation(
        key=key,
        window=window,
        max_timestamp=max_ts,
        horizon=horizon,
        allowed_lateness_ms=spec.allowed_lateness,
        status=status,
        reason=_reason(status, facts),
        combined_watermark=combined,
        operator_watermark=op_watermark,
        processing_time=now,
        percentile=percentile,
        all_splits_idle=all_idle,
        remaining_ms=min(MAX_TIMESTAMP, max(0, max_ts - combined)),
        horizon_remaining_ms=min(MAX_TIMESTAMP, max(0, horizon - combined)),
        target_watermark=target,
        splits=tuple(reports),
        holding_splits=holding,
        idle_splits=tuple(r for r in reports if r.idle),
        splits_without_records=tuple(r.split for r in reports if r.has_records is False),
        splits_needed=needed,
        watermark_reaches_at=projected,
        pane_state=pane,
        trigger_state=trigger_text,
        fires_when=fires_when,
        notes=tuple(notes),
    )


def _next_pane_watermark(spec: WindowSpec, view: _View, op_watermark: int) -> tuple[int | None, bool]:
    """The watermark at which the operator next emits for the window without records (its timers), and
    whether that is the garbage-collection pane rather than a firing the trigger waits for."""
    if view.closed:
        return None, False
    deadline = spec.trigger.watermark_deadline(view.trigger_state, view.window)
    if deadline is not None and deadline > op_watermark:
        return deadline, False
    # Garbage collection emits a final pane only when records are unemitted.
    return (spec.horizon(view.window), True) if view.new_count > 0 else (None, False)


def _status(
    spec: WindowSpec,
    view: _View | None,
    has_operator: bool,
    window: Window,
    combined: int,
    op_watermark: int | None,
    ctx: TriggerContext,
) -> tuple[WindowStatus, int | None, bool]:
    """The status, the target watermark and whether the target is the garbage-collection pane."""
    max_ts, horizon = window.max_timestamp, spec.horizon(window)
    if not has_operator:
        if combined >= horizon:
            return WindowStatus.EXPIRED, None, False
        if combined >= max_ts:
            return WindowStatus.WATERMARK_PASSED, None, False
        return WindowStatus.WAITING_FOR_WATERMARK, max_ts, False
    assert op_watermark is not None
    if view is None:
        expired = max(combined, op_watermark) >= horizon
        return (WindowStatus.EXPIRED if expired else WindowStatus.NO_DATA), None, False
    nxt, gc = _next_pane_watermark(spec, view, op_watermark)
    if view.closed:
        return (WindowStatus.EXPIRED if combined >= horizon else WindowStatus.FIRED_FINAL), None, False
    if nxt is not None and combined >= nxt:
        return WindowStatus.DUE, nxt, gc
    if nxt is not None and not gc:
        return WindowStatus.WAITING_FOR_WATERMARK, nxt, gc
    if combined >= horizon:
        return WindowStatus.EXPIRED, None, False  # nothing unemitted: the state just goes at the next watermark
    if view.had_nonearly:
        return WindowStatus.FIRED_CAN_FIRE_LATE, nxt, gc
    trigger = spec.trigger
    own_condition = (
        trigger.elements_until_check(view.trigger_state, ctx) is not None
        or trigger.processing_deadline(view.trigger_state) is not None
        or trigger.may_fire_before_watermark()
    )
    if nxt is not None and not own_condition:
        return WindowStatus.WAITING_FOR_WATERMARK, nxt, gc  # e.g. Never(): only the garbage-collection pane
    return WindowStatus.WAITING_FOR_TRIGGER, nxt, gc


@dataclass(frozen=True)
class _Facts:
    spec: WindowSpec
    key: Any
    window: Window
    combined: int
    op_watermark: int | None
    now: int
    percentile: float
    models: list[_SplitModel]
    reports: list[SplitReport]
    holding: tuple[SplitReport, ...]
    needed: int
    all_idle: bool
    view: _View | None
    pane: PaneState | None
    target: int | None
    target_is_gc: bool
    projected: int | None
    trigger_description: str | None

    @property
    def max_ts(self) -> int:
        return self.window.max_timestamp

    @property
    def horizon(self) -> int:
        return self.spec.horizon(self.window)


def _names(reports: Iterable[SplitReport]) -> str:
    return ", ".join(repr(r.split) for r in reports)


def _reason(status: WindowStatus, f: _Facts) -> str:
    if status is WindowStatus.EXPIRED:
        return (
            f"the combined watermark {format_instant(max(f.combined, f.op_watermark or MIN_TIMESTAMP))} reached the "
            f"horizon {format_instant(f.horizon)}: the window is closed for good."
        )
    if status is WindowStatus.FIRED_FINAL:
        return "it has fired its final pane (the trigger finished)."
    if status is WindowStatus.FIRED_CAN_FIRE_LATE:
        return (
            f"it has fired (ON_TIME/LATE) and stays open for late records until the watermark reaches "
            f"{format_instant(f.horizon)}."
        )
    if status is WindowStatus.WATERMARK_PASSED:
        return "the combined watermark has passed the window's max timestamp: it has fired if it had records."
    if status is WindowStatus.DUE:
        return (
            f"the source watermark {format_instant(f.combined)} already covers it; the operator (watermark "
            f"{format_instant(f.op_watermark or MIN_TIMESTAMP)}) fires it when it next receives the watermark."
        )
    if status is WindowStatus.WAITING_FOR_TRIGGER:
        return f"the trigger's own condition has not been met yet: {f.trigger_description}."
    prefix = "no records for this key and window yet; " if status is WindowStatus.NO_DATA else ""
    target = f.target if f.target is not None else f.max_ts
    return prefix + _watermark_reason(f, target)


def _watermark_reason(f: _Facts, target: int) -> str:
    if f.combined >= target:
        return f"the combined watermark {format_instant(f.combined)} is past {format_instant(target)}."
    if not f.reports:
        return "no split has reported yet, so the combined watermark is MIN."
    if f.all_idle:
        return (
            f"every split is idle; the combined watermark is the highest split watermark, "
            f"{format_instant(f.combined)}, {format_duration(target - f.combined)} short."
        )
    below = [r for r in f.reports if not r.idle and r.watermark < target]
    if f.combined <= MIN_TIMESTAMP:
        empty = [r for r in below if r.watermark <= MIN_TIMESTAMP]
        never = [r for r in empty if r.has_records is False]
        text = f"the combined watermark is MIN: split(s) {_names(empty)} have no watermark yet"
        return text + (f" ({_names(never)} never saw a record)." if never else ".")
    if f.percentile == 100.0:
        lowest = below[0]
        text = (
            f"split {lowest.split!r} holds the combined watermark at {format_instant(lowest.watermark)}, "
            f"{format_duration(target - lowest.watermark)} below {format_instant(target)}"
        )
        if len(below) > 1:
            text += f" (also below: {_names(below[1:])})"
        return text + "."
    active = [r for r in f.reports if not r.idle]
    allowed = _allowed_behind(len(active), f.percentile)
    return (
        f"percentile {f.percentile:g}: the combined watermark {format_instant(f.combined)} is the value at least "
        f"{f.percentile:g} % of the {len(active)} active splits have reached, not their minimum; {len(below)} "
        f"split(s) are below {format_instant(target)} ({_names(below)}) and at most {allowed} may stay below."
    )


def _split_requirement(model: _SplitModel, target: int, now: int) -> str:
    """What one split needs for its watermark to reach ``target`` (or to stop holding it back)."""
    options = []
    emit = model.next_emit()
    if emit is not None and emit >= target:
        options.append(
            f"nothing new: records it already has lift it to {format_instant(emit)} at the next periodic emit "
            f"(processing time {format_instant(model.next_tick)}, {_relative(model.next_tick, now)})"
        )
    else:
        needs = model.needs_event_time(target)
        bound = model.bound()
        if needs is not None:
            options.append(
                f"a record with event time >= {format_instant(needs)} (bound {format_duration(bound or 0)}), "
                f"published at the next periodic emit"
            )
        else:
            options.append(f"its generator to emit a watermark >= {format_instant(target)}")
        reach = model.reach_at(target)
        if reach is not None and isinstance(model.inner, BoundedOutOfOrdernessWatermarkBasedOnEventTime):
            options.append(
                f"advancing on its own (idle-advancing generator, wait {format_duration(model.inner.wait)}): "
                f"at processing time {format_instant(reach)} ({_relative(reach, now)}) if no record arrives"
            )
    idle_at = model.idle_at()
    if idle_at is not None and model.timer is not None:
        options.append(
            f"being marked idle after {format_duration(model.timer.timeout)} without records (idleness timeout): "
            f"at processing time {format_instant(idle_at)} ({_relative(idle_at, now)}) if no record arrives"
        )
    wm = "no watermark yet" if model.watermark <= MIN_TIMESTAMP else f"watermark {format_instant(model.watermark)}"
    return f"split {model.split!r} ({wm}) needs " + ", or ".join(options)


def _watermark_condition(f: _Facts, target: int, what: str) -> str:
    """What has to happen for the combined watermark to reach ``target``, with the no-record projection."""
    if f.combined >= target:
        return f"{what}: the combined watermark {format_instant(f.combined)} is already there"
    to_go = format_duration(target - f.combined)
    head = f"{what} when the combined watermark reaches {format_instant(target)} ({to_go} to go)"
    by_split = {m.split: m for m in f.models}
    if not f.models:
        return head + ": no split has reported yet; the first records define the watermark"
    if f.all_idle:
        wakes = [_split_requirement(by_split[r.split], target, f.now) for r in f.reports]
        text = head + ": every split is idle, so any split whose records lift its watermark that far does it: "
        text += "; ".join(wakes)
    else:
        below = [r for r in f.reports if not r.idle and r.watermark < target]
        active = sum(1 for r in f.reports if not r.idle)
        must = max(0, len(below) - _allowed_behind(active, f.percentile))
        if f.percentile == 100.0:
            quantifier = "every one of these splits must reach it or be marked idle" if len(below) > 1 else ""
        else:
            quantifier = (
                f"{must} more of these {len(below)} split(s) must reach it (percentile {f.percentile:g}: at most "
                f"{len(below) - must} of the {active} active splits may stay below)"
            )
        requirements = "; ".join(_split_requirement(by_split[r.split], target, f.now) for r in below)
        text = head + ": " + (f"{quantifier}: " if quantifier else "") + requirements
    if f.projected is not None and target == f.target:
        text += (
            f". If no record arrives at all, the source watermark gets there at processing time "
            f"{format_instant(f.projected)} ({_relative(f.projected, f.now)})"
        )
    elif target == f.target:
        text += ". If no record arrives at all, it never gets there: " + _never_reason(f, target)
    return text


def _never_reason(f: _Facts, target: int) -> str:
    stuck = [m for m in f.models if not m.idle and m.watermark < target and m.idle_at() is None]
    stuck = [m for m in stuck if m.reach_at(target) is None]
    if stuck:
        return (
            f"split(s) {', '.join(repr(m.split) for m in stuck)} have no idleness timeout and their generator "
            f"does not advance on its own"
        )
    highest = max((m.watermark for m in f.models), default=MIN_TIMESTAMP)
    return (
        f"once every split is idle the combined watermark is the highest split watermark, "
        f"{format_instant(highest)}, which is below it"
    )


def _trigger_conditions(f: _Facts) -> list[str]:
    """The trigger's own ways to fire (records, processing time), from the operator's state."""
    pane, view = f.pane, f.view
    if pane is None or view is None or pane.finished:
        return []
    op_wm = f.op_watermark if f.op_watermark is not None else f.combined
    kind = "an EARLY pane" if op_wm < f.max_ts else "a LATE pane"
    conditions = []
    if pane.records_until_check == 1:
        conditions.append(f"possibly with the next record for this key and window ({kind})")
    elif pane.records_until_check is not None:
        conditions.append(
            f"possibly after {pane.records_until_check} more record(s) for this key and window "
            f"(the trigger's record condition: {kind})"
        )
    deadline = pane.processing_deadline
    if deadline is not None:
        conditions.append(
            f"at processing time {format_instant(deadline)} ({_relative(deadline, f.now)}) if the trigger's "
            f"other conditions hold then ({kind})"
        )
    return conditions


def _fires_when(status: WindowStatus, f: _Facts) -> str:
    horizon = f.horizon
    if status is WindowStatus.EXPIRED:
        return (
            f"never: the watermark reached the horizon {format_instant(horizon)}; records for this window go to "
            f"the late output (EXPIRED)"
        )
    if status is WindowStatus.FIRED_FINAL:
        return (
            f"not again: the trigger finished; records for this window go to the late output (WINDOW_CLOSED) "
            f"until the watermark reaches {format_instant(horizon)}, then EXPIRED"
        )
    if status is WindowStatus.DUE:
        return (
            "at the operator's next watermark advance (the next micro-batch on Spark): the source watermark "
            f"{format_instant(f.combined)} has reached {format_instant(f.target if f.target is not None else f.max_ts)}"
        )
    if status is WindowStatus.WATERMARK_PASSED:
        return (
            "it fired ON_TIME when the watermark passed its max timestamp if it had records (give the operator to "
            f"know); late records make LATE panes, if the trigger has late firings, until the watermark reaches "
            f"{format_instant(horizon)} ({format_duration(max(0, horizon - f.combined))} to go)"
        )
    if status is WindowStatus.NO_DATA:
        return _no_data(f)
    conditions = _trigger_conditions(f)
    if status is WindowStatus.FIRED_CAN_FIRE_LATE:
        late = "; or ".join(conditions) if conditions else "only if the trigger's late firings allow it"
        return (
            f"for late records only: {late}. Late firings are possible until the combined watermark reaches the "
            f"horizon {format_instant(horizon)} ({format_duration(max(0, horizon - f.combined))} to go)"
        )
    target = f.target
    if status is WindowStatus.WAITING_FOR_WATERMARK and target is not None:
        what = "final (garbage-collection) pane" if f.target_is_gc else "ON_TIME pane"
        text = _watermark_condition(f, target, f"the {what} fires")
        if conditions:
            text = "; or ".join(conditions) + "; and " + text
        return text
    # WAITING_FOR_TRIGGER
    parts = conditions or ["when the trigger's condition is met (see the trigger state)"]
    text = "; or ".join(parts)
    if target is not None:
        text += "; at the latest, " + _watermark_condition(f, target, "a final (garbage-collection) pane fires")
    return text


def _no_data(f: _Facts) -> str:
    op_wm = max(f.combined, f.op_watermark if f.op_watermark is not None else MIN_TIMESTAMP)
    if op_wm < f.max_ts:
        return "nothing to fire yet. A record for it arriving now is on time; " + _watermark_condition(
            f, f.max_ts, "the window's ON_TIME pane would fire"
        )
    trigger = f.spec.trigger
    if isinstance(trigger, Default):
        then = "fires a LATE pane at once"
    elif isinstance(trigger, AfterWatermark):
        then = "fires one LATE pane at once" + (" and then follows the late trigger" if trigger.late else " and closes")
    else:
        then = "is handled by the trigger's own conditions"
    return (
        f"nothing to fire: the watermark has passed the window's end, so a record for it arriving now is late but "
        f"within the allowed lateness (until the watermark reaches {format_instant(f.horizon)}, "
        f"{format_duration(max(0, f.horizon - op_wm))} to go) and {then}"
    )


def _notes(f: _Facts) -> list[str]:
    notes = []
    if f.percentile != 100.0:
        notes.append(
            f"percentile combining ({f.percentile:g}): the combined watermark may be above some active splits; "
            "their records at or below it are late."
        )
    never = [r for r in f.reports if r.has_records is False]
    if never:
        notes.append(
            f"split(s) {_names(never)} have never seen a record; a declared split holds the watermark at MIN "
            "until its first record or until it is marked idle."
        )
    idle_behind = [r for r in f.reports if r.idle and r.watermark < f.combined]
    if idle_behind:
        notes.append(
            f"idle split(s) {_names(idle_behind)} are behind the combined watermark: if they wake up, their "
            "records at or below it are late."
        )
    if f.op_watermark is not None and f.op_watermark < f.combined:
        notes.append(
            f"the operator's watermark {format_instant(f.op_watermark)} lags the source's "
            f"{format_instant(f.combined)}: the runtime hands the new watermark over with the next batch."
        )
    elif f.op_watermark is not None and f.op_watermark > f.combined:
        notes.append(
            f"the operator's watermark {format_instant(f.op_watermark)} is ahead of this source's: it is driven "
            "by more than this source (or by hand)."
        )
    for r in f.reports:
        if r.next_emit_watermark is not None and not r.idle and r.watermark < f.max_ts <= r.next_emit_watermark:
            notes.append(
                f"split {r.split!r} already has records that lift its watermark to "
                f"{format_instant(r.next_emit_watermark)} at the next periodic emit."
            )
    return notes
