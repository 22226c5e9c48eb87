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

Nothing is modelled twice. Projections ("at processing time X if no records
arrive") run a restored copy of the coordinator forward, one periodic interval
at a time (:mod:`floodmark.core.watermarks.projection`); split facts come from
the generators' ``describe()`` and ``view()`` (a
:class:`~floodmark.core.watermarks.generator_view.GeneratorView`: the bound, the highest timestamp,
``timestamp_for``...); the window's state comes from the operator's
``window_view`` and the trigger describes itself (``Trigger.describe``). The
window operator sees a new source watermark only when the runtime hands it over
(the next micro-batch on Spark), so a window whose firing point the source
watermark has passed but the operator's has not is reported as ``DUE``.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, format_duration, format_instant, format_relative
from floodmark.core.triggers import TriggerContext
from floodmark.core.watermarks.coordinator import SourceWatermarks
from floodmark.core.watermarks.percentile import allowed_behind
from floodmark.core.watermarks.projection import Projection, SplitProjection, project
from floodmark.core.window.table import PaneBook, WindowView
from floodmark.core.windows import Window, window_reached

__all__ = [
    "Explanation",
    "PaneState",
    "SplitReport",
    "UpstreamReport",
    "WindowStatus",
    "explain_stage_window",
    "explain_window",
]


class OperatorView(Protocol):
    """What explain reads from a window operator (``WindowOperator`` implements it, on either policy)."""

    watermark: int

    def window_view(self, key: Hashable, window: Window) -> WindowView | None: ...


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
        timestamp without any new record (a pending periodic emit, or the idle-advancing
        generator), if it will before being marked idle.
    :ivar unread: what its source had left unread of it when it planned the last batch that said (records of a
        Kafka partition, files read in order; ``None``: not said). A split with unread records is never idle.
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
    unread: int | None = None


@dataclass(frozen=True)
class UpstreamReport:
    """One upstream of a stage, seen from one window of that stage (:func:`explain_stage_window`).

    A stage's input watermark is the MIN over its non-idle upstreams (:mod:`floodmark.core.watermarks.graph`):
    a source hands on its combined watermark; an upstream stage its output watermark,
    ``MIN(its input watermark, hold)`` (never regressing), the hold being the lowest timestamp of the panes it
    still owes.

    :ivar name: the source or stage. :ivar is_stage: an upstream stage (else a source).
    :ivar watermark: what it hands on after the batch (ms). :ivar idle: it does not hold the stage back (an
        idle source; a stage whose upstreams are all idle).
    :ivar gap_ms: ``max_timestamp - watermark`` clamped to ``[0, MAX_TIMESTAMP]``.
    :ivar input_watermark: an upstream stage's input watermark for the next batch (``None`` for a source).
    :ivar hold: an upstream stage's lowest hold after the batch (``None``: it owes no pane, or a source).
    """

    name: str
    is_stage: bool
    watermark: int
    idle: bool
    gap_ms: int
    input_watermark: int | None = None
    hold: int | None = None

    @property
    def next_watermark(self) -> int:
        """What it hands on after its next batch if no record arrives and nothing fires: an upstream stage's
        output watermark becomes ``MIN(input watermark, hold)`` (never lower than now); a source's stays."""
        if not self.is_stage or self.input_watermark is None:
            return self.watermark
        candidate = self.input_watermark if self.hold is None else min(self.input_watermark, self.hold)
        return max(self.watermark, candidate)

    @property
    def held_by_panes(self) -> bool:
        """Its own pending panes keep its output watermark below its input watermark."""
        return (
            self.is_stage
            and self.hold is not None
            and self.input_watermark is not None
            and (self.hold < self.input_watermark)
        )


@dataclass(frozen=True)
class PaneState(PaneBook):
    """The operator's state for one key and window (either policy): its bookkeeping
    (:class:`~floodmark.core.window.table.PaneBook`, as ``window_view`` gives it) and what its trigger says.

    :ivar records_until_check: records after which the trigger is asked again (``None``: records alone
        never make it fire now).
    :ivar processing_deadline: processing time (ms) of its processing-time timer, if one is armed.
    """

    records_until_check: int | None = None
    processing_deadline: int | None = None


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
    :ivar upstreams: for a stage that reads other stages or several sources (:func:`explain_stage_window`):
        its upstreams, by watermark then name; ``combined_watermark`` is then the stage's input watermark,
        their MIN, and the split fields are empty.
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
    upstreams: tuple[UpstreamReport, ...] = ()

    def text(self) -> str:
        """A multi-line plain-English explanation (times as UTC ISO with ms plus raw ms)."""
        w = self.window
        lines = [
            f"Key {self.key!r}, window [{format_instant(w.start)}, {format_instant(w.end)}): {self.status.value}",
            f"Why: {self.reason}",
            f"Window max timestamp (end - 1): {format_instant(self.max_timestamp)}; horizon (max timestamp + "
            f"allowed lateness {format_duration(self.allowed_lateness_ms)}): {format_instant(self.horizon)}.",
        ]
        parts = "upstreams" if self.upstreams else "splits"
        how = f"MIN over the non-idle {parts}" if self.percentile == 100.0 else f"{self.percentile:g}th percentile"
        if self.all_splits_idle:
            how = f"every {parts[:-1]} is idle: the highest {parts[:-1]} watermark"
        head = "Input watermark" if self.upstreams else "Combined watermark"
        line = f"{head} ({how}): {format_instant(self.combined_watermark)}"
        if self.remaining_ms > 0:
            line += f", {format_duration(self.remaining_ms)} short of the max timestamp"
        lines.append(line + ".")
        if self.operator_watermark is not None and self.operator_watermark != self.combined_watermark:
            lines.append(f"Operator watermark: {format_instant(self.operator_watermark)}.")
        lines.append(f"Processing time now: {format_instant(self.processing_time)}.")
        if self.upstreams:
            lines.append("Upstreams:")
            for upstream in self.upstreams:
                lines.append(f"  - {_upstream_line(upstream, self.max_timestamp, self.combined_watermark)}")
        elif self.splits:
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
        fires = fires.replace("; stage ", ";\n    stage ").replace("; source ", ";\n    source ")
        lines.append(f"Fires when: {fires}")
        lines.extend(f"Note: {note}" for note in self.notes)
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- formatting
def _split_line(report: SplitReport, holding: bool) -> str:
    if report.watermark <= MIN_TIMESTAMP:
        head = f"{report.split}: no watermark yet"
    else:
        head = f"{report.split}: watermark {format_instant(report.watermark)}"
    if report.idle:
        caught_up = "caught up, " if report.unread == 0 else ""
        state = f"IDLE ({caught_up}excluded from the combined watermark)"
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
    if report.unread and not report.idle:
        facts.append(f"behind: {report.unread:,} unread when the last batch was planned, so never idle")
    elif report.inactive_since is not None and not report.idle:
        facts.append(f"no record seen by the idleness checks since {format_instant(report.inactive_since)}")
    return f"{head}: {state} ({'; '.join(facts)})"


# ------------------------------------------------------------------------------------------------- splits
@dataclass(frozen=True)
class _Split:
    """One split as explain sees it: its output, its generator's public facts, its projected future."""

    split: str
    watermark: int
    idle: bool
    generator: Any
    future: SplitProjection
    next_tick: int

    def reaches_at(self, target: int) -> int | None:
        return self.future.reaches_at.get(target)

    def report(self, max_timestamp: int) -> SplitReport:
        g = self.generator.view()
        emit = self.future.next_emit
        return SplitReport(
            split=self.split,
            watermark=self.watermark,
            idle=self.idle,
            gap_ms=min(MAX_TIMESTAMP, max(0, max_timestamp - self.watermark)),
            has_records=g.has_seen_records,
            highest_event_time=g.highest_timestamp,
            generator=g.description,
            bound_ms=g.out_of_orderness,
            needs_event_time=g.timestamp_for(max_timestamp),
            next_emit_watermark=emit if emit is not None and emit > self.watermark else None,
            idle_timeout_ms=g.idle_timeout,
            inactive_since=g.inactive_since,
            idle_at=self.future.idle_at,
            self_advance_at=self.reaches_at(max_timestamp) if self.watermark < max_timestamp else None,
            unread=g.unread,
        )


def _splits(watermarks: SourceWatermarks, projection: Projection) -> list[_Split]:
    return [
        _Split(
            split,
            output.watermark,
            output.idle,
            watermarks.generators[split],
            projection.splits.get(split, SplitProjection()),
            projection.next_tick,
        )
        for split, output in watermarks.multiplexer.outputs.items()
    ]


# ------------------------------------------------------------------------------------------ operator state
def _pane_state(spec: WindowSpec, view: WindowView, ctx: TriggerContext) -> PaneState:
    book, trigger = view.book, spec.trigger
    return PaneState(
        **{f.name: getattr(book, f.name) for f in fields(book)},
        records_until_check=None if book.finished else trigger.elements_until_check(view.trigger_state, ctx),
        processing_deadline=None if book.finished else trigger.processing_deadline(view.trigger_state),
    )


def _trigger_text(spec: WindowSpec, view: WindowView, pane: PaneState, ctx: TriggerContext) -> str:
    parts = [
        f"{pane.records_since_last_pane} record(s) since the last pane",
        f"{pane.panes_emitted} pane(s) emitted"
        + (f" ({view.book.nonspeculative_emitted} ON_TIME/LATE)" if pane.panes_emitted else ""),
        *view.details,
    ]
    if pane.holds_output_watermark and pane.output_hold is not None:
        parts.append(f"holds the output watermark at {format_instant(pane.output_hold)}")
    if pane.pending_since is not None:
        parts.append(f"oldest unemitted record arrived at processing time {format_instant(pane.pending_since)}")
    trigger = f"{spec.trigger!r} finished" if pane.finished else spec.trigger.describe(view.trigger_state, ctx)
    return f"{view.engine}: {'; '.join(parts)}. Trigger: {trigger}."


# ------------------------------------------------------------------------------------------ the analysis
def explain_window(
    spec: WindowSpec,
    key: Any,
    window: Window,
    watermarks: SourceWatermarks,
    operator: OperatorView | None = None,
    processing_time: int | None = None,
    applied_watermark: int | None = None,
) -> Explanation:
    """Explain why ``window`` of ``key`` has (not) fired and what will make it fire. Reads only.

    :arg spec: the aggregation's spec (window assigner, trigger, allowed lateness).
    :arg key: the key, as the operator stores it.
    :arg window: ``[start, end)`` in event-time ms (``end`` exclusive).
    :arg watermarks: the source's coordinator (per-split generators and the combined watermark).
    :arg operator: the window operator holding the key's state (either operator); without it the status is
        decided from the watermark alone (``WAITING_FOR_WATERMARK``, ``WATERMARK_PASSED`` or ``EXPIRED``).
    :arg processing_time: "now" in processing-time ms, for relative times; default: the coordinator's clock.
    :arg applied_watermark: without ``operator``, the watermark the operator has applied (a run read back from
        its files: the watermark its last batch ran with). The status then follows it, as the panes emitted so
        far do: ``WATERMARK_PASSED`` or ``EXPIRED`` once it reached the window, ``DUE`` when only the source's
        watermark has. ``MAX`` is the end of a bounded input, which fires every window.
    """
    now = watermarks.clock.now_ms() if processing_time is None else processing_time
    percentile = float(watermarks.multiplexer.percentile)
    combined = watermarks.watermark
    notes: list[str] = []

    view: WindowView | None = None
    op_watermark: int | None = applied_watermark if operator is None else None
    if operator is not None:
        op_watermark = operator.watermark
        view = operator.window_view(key, window)
        if view is not None:
            window = view.book.window
            if view.note:
                notes.append(view.note)
    max_ts = window.max_timestamp

    # Operator side: the trigger's view at the operator's own watermark and "now".
    pane: PaneState | None = None
    trigger_text: str | None = None
    ctx = TriggerContext(window, op_watermark if op_watermark is not None else combined, now)
    if view is not None:
        pane = _pane_state(spec, view, ctx)
        trigger_text = _trigger_text(spec, view, pane, ctx)
    status, target, target_is_gc = _status(spec, view, operator is not None, window, combined, op_watermark, ctx)

    projection = project(watermarks, [max_ts] + ([target] if target is not None else []))
    splits = _splits(watermarks, projection)
    reports = sorted((s.report(max_ts) for s in splits), key=lambda r: (r.watermark, r.split))
    active = [r for r in reports if not r.idle]
    all_idle = bool(reports) and not active
    reached = window_reached(window.end, combined)
    holding = () if reached else tuple(r for r in active if r.watermark < max_ts)
    if reached:
        needed = 0
    elif all_idle:
        needed = 1
    else:
        needed = max(0, len(holding) - allowed_behind(len(active), percentile))
    projected = projection.combined_reaches_at.get(target) if target is not None else None
    facts = _Facts(
        spec=spec,
        key=key,
        window=window,
        combined=combined,
        op_watermark=op_watermark,
        now=now,
        percentile=percentile,
        splits=splits,
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
            spec.trigger.describe(view.trigger_state, ctx) if view is not None and not view.book.finished else None
        ),
    )
    fires_when = _fires_when(status, facts)
    notes.extend(_notes(facts))
    return Explanation(
        **_window_fields(spec, key, window, combined),
        status=status,
        reason=_reason(status, facts),
        combined_watermark=combined,
        operator_watermark=op_watermark,
        processing_time=now,
        percentile=percentile,
        all_splits_idle=all_idle,
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


def _window_fields(spec: WindowSpec, key: Any, window: Window, watermark: int) -> dict[str, Any]:
    """The fields of an :class:`Explanation` that follow from the window and the watermark it is measured from."""
    max_ts, horizon = window.max_timestamp, spec.horizon(window)
    return {
        "key": key,
        "window": window,
        "max_timestamp": max_ts,
        "horizon": horizon,
        "allowed_lateness_ms": spec.allowed_lateness,
        "remaining_ms": min(MAX_TIMESTAMP, max(0, max_ts - watermark)),
        "horizon_remaining_ms": min(MAX_TIMESTAMP, max(0, horizon - watermark)),
    }


def _next_pane_watermark(spec: WindowSpec, view: WindowView, op_watermark: int) -> tuple[int | None, bool]:
    """The watermark at which the operator next emits for the window without records (its timers), and
    whether that is the garbage-collection pane rather than a firing the trigger waits for."""
    book = view.book
    if book.finished:
        return None, False
    deadline = spec.trigger.watermark_deadline(view.trigger_state, book.window)
    if deadline is not None and deadline > op_watermark:
        return deadline, False
    # Garbage collection emits a final pane only when records are unemitted.
    return (spec.horizon(book.window), True) if book.records_since_last_pane > 0 else (None, False)


def _status(
    spec: WindowSpec,
    view: WindowView | None,
    has_operator: bool,
    window: Window,
    combined: int,
    op_watermark: int | None,
    ctx: TriggerContext,
) -> tuple[WindowStatus, int | None, bool]:
    """The status, the target watermark and whether the target is the garbage-collection pane (the window's
    boundaries asked of :mod:`floodmark.core.windows`: reached at its max timestamp, expired at its horizon)."""
    max_ts = window.max_timestamp
    if not has_operator:
        applied = combined if op_watermark is None else op_watermark
        if spec.expired(window, applied):
            return WindowStatus.EXPIRED, None, False
        if window_reached(window.end, applied):
            return WindowStatus.WATERMARK_PASSED, None, False
        if window_reached(window.end, combined):
            return WindowStatus.DUE, max_ts, False
        return WindowStatus.WAITING_FOR_WATERMARK, max_ts, False
    assert op_watermark is not None
    if view is None:
        expired = spec.expired(window, max(combined, op_watermark))
        return (WindowStatus.EXPIRED if expired else WindowStatus.NO_DATA), None, False
    nxt, gc = _next_pane_watermark(spec, view, op_watermark)
    if view.book.finished:
        return (WindowStatus.EXPIRED if spec.expired(window, combined) else WindowStatus.FIRED_FINAL), None, False
    if nxt is not None and combined >= nxt:
        return WindowStatus.DUE, nxt, gc
    if nxt is not None and not gc:
        return WindowStatus.WAITING_FOR_WATERMARK, nxt, gc
    if spec.expired(window, combined):
        return WindowStatus.EXPIRED, None, False  # nothing unemitted: the state just goes at the next watermark
    if view.book.nonearly_fired:
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
    splits: list[_Split]
    reports: list[SplitReport]
    holding: tuple[SplitReport, ...]
    needed: int
    all_idle: bool
    view: WindowView | None
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
        ahead = f.op_watermark is not None and f.op_watermark > f.combined
        return (
            f"the {'operator' if ahead else 'combined'} watermark "
            f"{format_instant(max(f.combined, f.op_watermark or MIN_TIMESTAMP))} reached the "
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
        passed = "the combined watermark has" if f.op_watermark is None else "the operator's watermark has"
        return f"{passed} passed the window's max timestamp: it has fired if it had records."
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
    allowed = allowed_behind(len(active), f.percentile)
    return (
        f"percentile {f.percentile:g}: the combined watermark {format_instant(f.combined)} is the value at least "
        f"{f.percentile:g} % of the {len(active)} active splits have reached, not their minimum; {len(below)} "
        f"split(s) are below {format_instant(target)} ({_names(below)}) and at most {allowed} may stay below."
    )


def _split_requirement(split: _Split, target: int, now: int) -> str:
    """What one split needs for its watermark to reach ``target`` (or to stop holding it back)."""
    options = []
    emit, reach = split.future.next_emit, split.reaches_at(target)
    if emit is not None and emit >= target:
        options.append(
            f"nothing new: records it already has lift it to {format_instant(emit)} at the next periodic emit "
            f"(processing time {format_instant(split.next_tick)}, {format_relative(split.next_tick, now)})"
        )
    else:
        view = split.generator.view()
        needs = view.timestamp_for(target)
        if needs is not None:
            bound = view.out_of_orderness
            options.append(
                f"a record with event time >= {format_instant(needs)} (bound {format_duration(bound or 0)}), "
                f"published at the next periodic emit"
            )
        else:
            options.append(f"its generator to emit a watermark >= {format_instant(target)}")
        if reach is not None:
            options.append(
                f"advancing on its own (its generator moves without records: {split.generator.describe()}): "
                f"at processing time {format_instant(reach)} ({format_relative(reach, now)}) if no record arrives"
            )
    idle_at, timeout = split.future.idle_at, split.generator.view().idle_timeout
    if idle_at is not None and timeout is not None:
        options.append(
            f"being marked idle after {format_duration(timeout)} without records (idleness timeout): "
            f"at processing time {format_instant(idle_at)} ({format_relative(idle_at, now)}) if no record arrives"
        )
    wm = "no watermark yet" if split.watermark <= MIN_TIMESTAMP else f"watermark {format_instant(split.watermark)}"
    return f"split {split.split!r} ({wm}) needs " + ", or ".join(options)


def _watermark_condition(f: _Facts, target: int, what: str) -> str:
    """What has to happen for the combined watermark to reach ``target``, with the no-record projection."""
    if f.combined >= target:
        return f"{what}: the combined watermark {format_instant(f.combined)} is already there"
    to_go = format_duration(target - f.combined)
    head = f"{what} when the combined watermark reaches {format_instant(target)} ({to_go} to go)"
    by_split = {s.split: s for s in f.splits}
    if not f.splits:
        return head + ": no split has reported yet; the first records define the watermark"
    if f.all_idle:
        wakes = [_split_requirement(by_split[r.split], target, f.now) for r in f.reports]
        text = head + ": every split is idle, so any split whose records lift its watermark that far does it: "
        text += "; ".join(wakes)
    else:
        below = [r for r in f.reports if not r.idle and r.watermark < target]
        active = sum(1 for r in f.reports if not r.idle)
        must = max(0, len(below) - allowed_behind(active, f.percentile))
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
            f"{format_instant(f.projected)} ({format_relative(f.projected, f.now)})"
        )
    elif target == f.target:
        text += ". If no record arrives at all, it never gets there: " + _never_reason(f, target)
    return text


def _never_reason(f: _Facts, target: int) -> str:
    stuck = [s for s in f.splits if not s.idle and s.watermark < target and s.future.idle_at is None]
    stuck = [s for s in stuck if s.reaches_at(target) is None]
    if stuck:
        return (
            f"split(s) {', '.join(repr(s.split) for s in stuck)} have no idleness timeout and their generator "
            f"does not advance on its own"
        )
    highest = max((s.watermark for s in f.splits), default=MIN_TIMESTAMP)
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
            f"at processing time {format_instant(deadline)} ({format_relative(deadline, f.now)}) if the trigger's "
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
        watermark = max(f.combined, f.op_watermark if f.op_watermark is not None else MIN_TIMESTAMP)
        return (
            "it fired ON_TIME when the watermark passed its max timestamp if it had records (give the operator to "
            f"know); late records make LATE panes, if the trigger has late firings, until the watermark reaches "
            f"{format_instant(horizon)} ({format_duration(max(0, horizon - watermark))} to go)"
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
    then = _first_late_record(f.spec, f.window, op_wm, f.now)
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
    elif f.op_watermark is not None and f.op_watermark >= MAX_TIMESTAMP:
        notes.append(
            "the operator's watermark is MAX: the input ended (a bounded run), which fired every window with records "
            "and closed it."
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


def _first_late_record(spec: WindowSpec, window: Window, watermark: int, now: int) -> str:
    """What the trigger does with a first record for a window the watermark has passed (asked, not assumed)."""
    trigger = spec.trigger
    ctx = TriggerContext(window, watermark, now)
    state = trigger.new_state()
    trigger.on_elements(state, 1, ctx)
    if not trigger.should_fire(state, ctx):
        return "is handled by the trigger's own conditions"
    if trigger.on_fire(state, ctx):
        return "fires one LATE pane at once and closes"
    return "fires a LATE pane at once, and later records follow the trigger's late firings"


# -------------------------------------------------------------------------- stages that read other stages
def explain_stage_window(
    spec: WindowSpec,
    key: Any,
    window: Window,
    input_watermark: int,
    upstreams: Iterable[UpstreamReport],
    processing_time: int,
    applied_watermark: int | None = None,
) -> Explanation:
    """Explain why ``window`` of ``key`` in a stage fed by ``upstreams`` has (not) fired. Reads only.

    For a stage that reads other stages (or several sources): its watermark is not made from splits but
    from its upstreams' (:mod:`floodmark.core.watermarks.graph`), so the explanation names the upstream that
    holds it back and why (an upstream stage's own pending panes, or its input watermark). For a stage reading
    one source, :func:`explain_window` says which split holds that source.

    :arg input_watermark: the stage's input watermark for its next batch (ms): the MIN over ``upstreams``'
        non-idle watermarks, as the graph computed it. :arg processing_time: "now" (ms).
    :arg applied_watermark: the input watermark the stage's last batch ran with (its panes so far were fired
        with it); the status follows it as :func:`explain_window`'s does without an operator: ``DUE`` when
        only ``input_watermark`` covers the window.
    """
    max_ts, horizon = window.max_timestamp, spec.horizon(window)
    reports = tuple(sorted(upstreams, key=lambda u: (u.watermark, u.name)))
    ctx = TriggerContext(
        window, applied_watermark if applied_watermark is not None else input_watermark, processing_time
    )
    status, target, _ = _status(spec, None, False, window, input_watermark, applied_watermark, ctx)
    active = [u for u in reports if not u.idle]
    all_idle = bool(reports) and not active
    reached = window_reached(window.end, input_watermark)
    holding = () if reached else tuple(u for u in active if u.watermark < max_ts)
    applied = input_watermark if applied_watermark is None else applied_watermark
    notes = [
        "a stage reading stages gets their watermarks one batch later (panes travel downstream within the batch "
        "that fires them, and the next batch's input watermark is made from the upstreams' output watermarks "
        "after it): one trigger of event-time latency per stage."
    ]
    if status is WindowStatus.EXPIRED:
        reason = (
            f"the stage's watermark {format_instant(max(applied, input_watermark))} reached the horizon "
            f"{format_instant(horizon)}: the window is closed for good."
        )
        fires_when = (
            f"never: the watermark reached the horizon {format_instant(horizon)}; records for this window go to the "
            "late output (EXPIRED)"
        )
    elif status is WindowStatus.WATERMARK_PASSED:
        reason = "the stage's input watermark has passed the window's max timestamp: it has fired if it had records."
        fires_when = (
            "it fired ON_TIME when the watermark passed its max timestamp if it had records; late panes from "
            f"upstream make LATE panes, if the trigger has late firings, until the watermark reaches "
            f"{format_instant(horizon)} ({format_duration(max(0, horizon - applied))} to go)"
        )
    elif status is WindowStatus.DUE:
        reason = (
            f"its upstreams' watermarks after the last batch, {format_instant(input_watermark)}, cover it; the stage "
            f"(watermark {format_instant(applied)}) fires it in its next batch."
        )
        fires_when = "in the stage's next batch, which runs with the input watermark that covers it"
    else:  # WAITING_FOR_WATERMARK
        reason = _upstream_reason(reports, holding, all_idle, input_watermark, max_ts)
        fires_when = _upstream_condition(holding, all_idle, input_watermark, max_ts)
    return Explanation(
        **_window_fields(spec, key, window, input_watermark),
        status=status,
        reason=reason,
        combined_watermark=input_watermark,
        operator_watermark=applied_watermark,
        processing_time=processing_time,
        percentile=100.0,
        all_splits_idle=all_idle,
        target_watermark=target,
        splits=(),
        holding_splits=(),
        idle_splits=(),
        splits_without_records=(),
        splits_needed=0 if reached else (1 if all_idle else len(holding)),
        watermark_reaches_at=None,
        pane_state=None,
        trigger_state=None,
        fires_when=fires_when,
        notes=tuple(notes),
        upstreams=reports,
    )


def upstream_what(upstream: UpstreamReport, max_timestamp: int) -> str:
    """What ``upstream``'s watermark is made of, in words, looking one batch ahead."""
    if not upstream.is_stage:
        return "the source's combined watermark"
    if upstream.next_watermark >= max_timestamp > upstream.watermark:
        return (
            f"its last batch; it hands on {format_instant(upstream.next_watermark)} after its next batch (its "
            f"input watermark is already there{'' if upstream.hold is None else ' and so are its pending panes'}), "
            "and this stage fires the window the batch after"
        )
    if upstream.held_by_panes:
        assert upstream.hold is not None
        assert upstream.input_watermark is not None
        return (
            f"its own pending panes: the earliest it still owes is timestamped {format_instant(upstream.hold)}, "
            f"below its input watermark {format_instant(upstream.input_watermark)}, so its output watermark rises "
            "no further than that until the pane fires"
        )
    if upstream.input_watermark is None or upstream.input_watermark <= MIN_TIMESTAMP:
        return "its input watermark: it has none yet"
    return f"its input watermark, {format_instant(upstream.input_watermark)}"


def upstream_head(upstream: UpstreamReport) -> str:
    """``stage 'name': watermark ...`` (or ``no watermark yet``): how an upstream's line starts."""
    kind = "stage" if upstream.is_stage else "source"
    if upstream.watermark <= MIN_TIMESTAMP:
        return f"{kind} {upstream.name!r}: no watermark yet"
    return f"{kind} {upstream.name!r}: watermark {format_instant(upstream.watermark)}"


def _upstream_line(upstream: UpstreamReport, max_timestamp: int, input_watermark: int) -> str:
    head = upstream_head(upstream)
    if upstream.idle:
        state = "IDLE (excluded from the input watermark)"
    elif upstream.watermark < max_timestamp and input_watermark < max_timestamp:
        state = f"HOLDING THE WINDOW BACK, {format_duration(upstream.gap_ms)} behind"
    elif upstream.gap_ms == 0:
        state = "past the max timestamp"
    else:
        state = f"active, {format_duration(upstream.gap_ms)} behind"
    return f"{head}: {state} (held by {upstream_what(upstream, max_timestamp)})"


def _upstream_reason(
    reports: tuple[UpstreamReport, ...],
    holding: tuple[UpstreamReport, ...],
    all_idle: bool,
    input_watermark: int,
    max_ts: int,
) -> str:
    if all_idle:
        return (
            f"every upstream is idle; the input watermark is the highest of theirs, "
            f"{format_instant(input_watermark)}, {format_duration(max_ts - input_watermark)} short."
        )
    if not holding:
        return f"the input watermark {format_instant(input_watermark)} is below the window's max timestamp."
    return holding_sentence(holding, max_ts, " the window's max timestamp")


def holding_sentence(holding: Sequence[UpstreamReport], target: int, below: str = "") -> str:
    """Which upstream holds a stage's input watermark below ``target`` (``holding``: the non-idle upstreams below
    it, lowest first, at least one) and why, in one sentence; ``below`` names the target after "below"."""
    lowest = holding[0]
    kind = "stage" if lowest.is_stage else "source"
    text = (
        f"upstream {kind} {lowest.name!r} holds the input watermark at {format_instant(lowest.watermark)}, "
        f"{format_duration(lowest.gap_ms)} below{below}: held by {upstream_what(lowest, target)}"
    )
    if len(holding) > 1:
        text += f" (also below: {', '.join(repr(u.name) for u in holding[1:])})"
    return text + "."


def _upstream_condition(holding: tuple[UpstreamReport, ...], all_idle: bool, input_watermark: int, max_ts: int) -> str:
    head = (
        f"the ON_TIME pane fires in the stage's first batch after its input watermark reaches "
        f"{format_instant(max_ts)} ({format_duration(max_ts - input_watermark)} to go)"
    )
    if all_idle or not holding:
        return head + ": any upstream whose watermark gets that far lifts it"
    needs = []
    for upstream in holding:
        if upstream.next_watermark >= max_ts:
            needs.append(f"stage {upstream.name!r} gets there in its next batch")
        elif not upstream.is_stage:
            needs.append(
                f"source {upstream.name!r} needs its combined watermark to reach it (explain a stage that reads "
                "only that source for its splits)"
            )
        elif upstream.held_by_panes:
            needs.append(
                f"stage {upstream.name!r} needs to fire the panes it holds (explain its windows: they wait for its "
                "own watermark or trigger)"
            )
        else:
            needs.append(f"stage {upstream.name!r} needs its input watermark to reach it (explain that stage)")
    quantifier = "every one of these upstreams must get there or go idle: " if len(needs) > 1 else ""
    return f"{head}: {quantifier}" + "; ".join(needs)
