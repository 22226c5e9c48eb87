"""Why has an interval join or a process stage not emitted what waits at an event time? From a query's control log.

Neither has windows: what it owes waits for its input watermark ``W`` (the MIN of its inputs', a stage's output
watermark one batch later, :mod:`floodmark.core.watermarks.graph`), and the rules say at which ``W``:

* an interval join's row of ``side`` at ``t`` (:mod:`floodmark.core.join.spec`) joins the other side's rows at
  ``partners(side, t)`` (inclusive) as they arrive; it leaves the buffer when ``W >= cleanup_time(side, t)`` (its
  last match time + allowed lateness), and a row of an outer side that found no partner is emitted then, with nulls
  for the other side. A row at ``t`` that arrives once ``W >= t + allowed_lateness`` is late (the late output);
* a process stage's event-time timer at ``T`` fires in the first batch whose input watermark is ``>= T``
  (:mod:`floodmark.core.process.function`); until then it holds the stage's output watermark below its output time.

As of the end of batch N, as :mod:`floodmark.explain.stage` answers for windows: the watermark batch N ran with
decides what was done; the upstreams' state after it (entry N+1) what the next batch does (``DUE``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from floodmark.core.join.spec import IntervalJoinSpec, JoinKind, Side
from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.core.time import format_duration, format_instant
from floodmark.driver.controller import Controller
from floodmark.explain.stage import applied_watermark, upstream_reports
from floodmark.explain.window import UpstreamReport, holding_sentence, upstream_head, upstream_what
from floodmark.protocol import wire
from floodmark.protocol.control import BucketGauges


class TimeStatus(enum.StrEnum):
    """Where what waits at one event time of a stage stands."""

    WAITING_FOR_WATERMARK = "WAITING_FOR_WATERMARK"
    """The stage's input watermark is below the point that decides it."""
    DUE = "DUE"
    """Its upstreams' watermarks after the last batch reach that point: the stage's next batch decides it."""
    DONE = "DONE"
    """The watermark the last batch ran with reached that point: decided (cleaned up, or the timer fired)."""


@dataclass(frozen=True)
class TimeExplanation:
    """What waits at ``event_time`` in an interval join or a process stage, and when it is decided.

    Times are ms of event time. :ivar decided_at: the input watermark that decides it (a join row's cleanup time, a
    timer's time). :ivar applied_watermark: the input watermark the stage's last batch ran with.
    :ivar input_watermark: its input watermark for the next batch. :ivar upstreams: by watermark, then name.
    :ivar facts: what the stage's rules say of that event time (partners, lateness, timers), one line each.
    """

    stage: str
    what: str
    event_time: int
    decided_at: int
    status: TimeStatus
    reason: str
    applied_watermark: int
    input_watermark: int
    upstreams: tuple[UpstreamReport, ...]
    facts: tuple[str, ...]
    decided_when: str

    def text(self) -> str:
        """A multi-line plain-English explanation (times as UTC ISO with ms)."""
        lines = [
            f"Stage {self.stage!r}, {self.what} at {format_instant(self.event_time)}: {self.status.value}",
            f"Why: {self.reason}",
            *self.facts,
            f"Input watermark (MIN over the non-idle upstreams): {format_instant(self.input_watermark)}"
            + (
                f", {format_duration(self.decided_at - self.input_watermark)} short"
                if self.input_watermark < self.decided_at
                else ""
            )
            + f"; the last batch ran with {format_instant(self.applied_watermark)}.",
            "Upstreams:",
        ]
        for upstream in self.upstreams:
            lines.append(f"  - {_upstream_line(upstream, self.decided_at)}")
        lines.append(f"Decided when: {self.decided_when}")
        return "\n".join(lines)


def explain_time(
    controller: Controller,
    stage: WindowedStage | JoinStage | ProcessStage,
    event_time: int,
    side: Side | str | None = None,
    batch: int | None = None,
) -> TimeExplanation:
    """Why ``stage`` (an interval join or a process stage) has (not) emitted what waits at ``event_time`` as of the
    end of ``batch`` (default: the last): a row of ``side`` at that time (a join: its partners, its cleanup, whether
    it would be late now), or an event-time timer at that time (a process stage; ``side`` None).

    :raises ValueError: a window stage or a window join (:func:`~floodmark.explain.stage.explain_stage` explains
        their windows), a join without ``side``, a process stage with one. :raises LookupError: the log has no
        entries for ``batch``.
    """
    if isinstance(stage, JoinStage) and isinstance(stage.spec, IntervalJoinSpec):
        if side is None:
            raise ValueError(f"stage {stage.name!r} is a join: say which side's row (left or right)")
        row_side: Side | None = Side(str(side).upper())
        decided_at = stage.spec.cleanup_time(row_side, event_time)
    elif isinstance(stage, ProcessStage):
        if side is not None:
            raise ValueError(f"stage {stage.name!r} is a process stage: its timers have no side")
        row_side, decided_at = None, event_time
    else:
        raise ValueError(f"stage {stage.name!r} has windows: explain a key's window (explain_stage)")
    batch, applied = applied_watermark(controller, stage.name, batch)
    sources, graph, after = controller.graph_at(batch + 1)
    input_watermark = graph.watermarks[stage.name].input_watermark
    reports = tuple(
        sorted(upstream_reports(stage, sources, graph, after, decided_at), key=lambda u: (u.watermark, u.name))
    )
    if applied >= decided_at:
        status = TimeStatus.DONE
    elif input_watermark >= decided_at:
        status = TimeStatus.DUE
    else:
        status = TimeStatus.WAITING_FOR_WATERMARK
    holding = [u for u in reports if not u.idle and u.watermark < decided_at]
    if row_side is not None:
        assert isinstance(stage.spec, IntervalJoinSpec)
        facts, what, reason, when = _join_row(stage, stage.spec, row_side, event_time, input_watermark, status)
    else:
        gauges = BucketGauges(after.buckets)
        pending = (gauges.lowest(stage.name, wire.NEXT_FIRE), gauges.lowest(stage.name, wire.NEXT_TIMER))
        facts, what, reason, when = _timer(event_time, *pending, status)
    if status is TimeStatus.WAITING_FOR_WATERMARK:
        reason += " " + _holding(holding, decided_at)
        when += _needs(holding, decided_at)
    return TimeExplanation(
        stage.name, what, event_time, decided_at, status, reason, applied, input_watermark, reports, facts, when
    )


def _join_row(
    stage: JoinStage, spec: IntervalJoinSpec, side: Side, ts: int, next_watermark: int, status: TimeStatus
) -> tuple[tuple[str, ...], str, str, str]:
    """``next_watermark``: the input watermark the stage's next batch runs with, which judges a row arriving now."""
    other = Side.RIGHT if side is Side.LEFT else Side.LEFT
    low, high = spec.partners(side, ts)
    cleanup = spec.cleanup_time(side, ts)
    upstream = stage.left if side is Side.LEFT else stage.right
    outer = spec.how.keeps_unmatched(side)
    facts = [
        f"Partners: {other.value.lower()} rows of its key at [{format_instant(low)}, {format_instant(high)}] "
        f"(both inclusive), each joined once as the later of the two arrives.",
        f"Cleanup: at input watermark {format_instant(cleanup)} (last match time {format_instant(high)} + allowed "
        f"lateness {format_duration(spec.allowed_lateness)})"
        + (", when a row that found no partner is emitted with nulls (an outer side)." if outer else "."),
    ]
    late_at = ts + spec.allowed_lateness
    if next_watermark >= late_at:
        facts.append(
            f"Late: a {side.value.lower()} row at this time arriving now goes to the late output (the input "
            f"watermark of the next batch reached {format_instant(late_at)}, its time + allowed lateness), never "
            "joined."
        )
    else:
        facts.append(
            f"Not late: a {side.value.lower()} row at this time is joined if it arrives before the input watermark "
            f"reaches {format_instant(late_at)}."
        )
    what = f"a {side.value.lower()} row (from {upstream!r})"
    if status is TimeStatus.DONE:
        reason = "the input watermark reached its cleanup time: no partner can come; it left the buffer" + (
            ", emitted with nulls if it had no partner." if outer else "."
        )
        when = "decided: every pair it could make was emitted as its partners arrived"
    elif status is TimeStatus.DUE:
        reason = "its upstreams' watermarks after the last batch reach its cleanup time: the next batch cleans it up."
        when = "in the stage's next batch"
    else:
        reason = "partners may still arrive: the input watermark is below its cleanup time."
        when = (
            f"pairs are emitted as partners arrive; it leaves the buffer (and, without a partner, "
            f"{'is emitted with nulls' if outer else 'is dropped'}) in the first batch whose input watermark reaches "
            f"{format_instant(cleanup)}"
        )
    if spec.how is JoinKind.INNER and status is not TimeStatus.DONE:
        when += "; an inner join emits nothing for a row without a partner"
    return tuple(facts), what, reason, when


def _timer(
    time: int, next_event: int | None, next_processing: int | None, status: TimeStatus
) -> tuple[tuple[str, ...], str, str, str]:
    """``next_event``: the lowest input watermark at which a bucket of the stage has a timer due; ``next_processing``:
    the lowest processing time (the buckets' gauges after the last batch)."""
    facts = [
        "Pending timers (every key): the next event-time timer "
        + ("none" if next_event is None else f"at {format_instant(next_event)}")
        + ", the next processing-time timer "
        + ("none." if next_processing is None else f"at processing time {format_instant(next_processing)}.")
    ]
    if status is TimeStatus.DONE:
        reason = "the input watermark the last batch ran with reached it: a timer set for this time has fired."
        when = "decided: on_timer was called in the first batch whose input watermark reached it"
    elif status is TimeStatus.DUE:
        reason = "its upstreams' watermarks after the last batch reach it: the next batch fires a timer set for it."
        when = "in the stage's next batch"
    else:
        reason = "the input watermark is below it."
        when = f"a timer set for it fires in the first batch whose input watermark reaches {format_instant(time)}"
    return tuple(facts), "an event-time timer", reason, when


def _holding(holding: list[UpstreamReport], target: int) -> str:
    if not holding:
        return "Every upstream is idle or past it."
    text = holding_sentence(holding, target)
    return text[0].upper() + text[1:]


def _needs(holding: list[UpstreamReport], target: int) -> str:
    needs = [
        f"{'stage' if u.is_stage else 'source'} {u.name!r} must reach it or go idle"
        for u in holding
        if u.next_watermark < target
    ]
    return "; " + "; ".join(needs) if needs else ""


def _upstream_line(upstream: UpstreamReport, target: int) -> str:
    head = upstream_head(upstream)
    if upstream.idle:
        return f"{head}: IDLE (excluded from the input watermark)"
    if upstream.watermark < target:
        what = upstream_what(upstream, target)
        return f"{head}: HOLDING IT BACK, {format_duration(upstream.gap_ms)} behind (held by {what})"
    return f"{head}: past it"
