"""A trigger compiled to the columnar form: what fires a window, as data, for all windows at once.

The columnar firing policy (:mod:`floodmark.core.window.columnar`) does not run a trigger's state machine; it
runs the few shapes :func:`compile_trigger` recognises, described by a :class:`ColumnarTrigger`, as vectorised
masks over the window table. Every other trigger (composites, other late firings, a zero early delay, processing
time alone with allowed lateness) compiles to ``None`` and runs on the general policy, through Beam's protocol
(:mod:`floodmark.core.triggers`).

:func:`trigger_state` goes the other way: the state object the trigger's own protocol would hold for a window of
the columnar policy, rebuilt from the policy's bookkeeping, so that ``floodmark explain`` says the same on both.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from floodmark.core.triggers import (
    AfterCount,
    AfterProcessingTime,
    AfterWatermark,
    Default,
    Never,
    Repeatedly,
    State,
    Trigger,
)


class LateFirings(enum.Enum):
    """What a columnar trigger does with records of a window the watermark has reached (within lateness)."""

    EVERY_RECORD = "every record"
    """Each late record fires a LATE pane of its own (``Default()``, ``AfterWatermark(late=AfterCount(1))``)."""

    NONE = "none"
    """The ON_TIME pane is the last (``AfterWatermark()`` without late firings): the trigger finishes there and
    later records go to the late output (WINDOW_CLOSED); a window first seen after its end fires one LATE pane
    with its first record, then closes."""

    AT_HORIZON = "at the horizon"
    """The trigger never fires (``Never()``): late records accumulate, the garbage-collection pane emits them."""


@dataclass(frozen=True)
class ColumnarTrigger:
    """A trigger in the form the columnar policy runs.

    :ivar on_time: an ON_TIME pane when the watermark reaches the window's max timestamp (``False``: ``Never()``
        and ``Repeatedly(AfterProcessingTime(d))``, whose only pane from the watermark is the garbage-collection pane
        at the horizon).
    :ivar late: what records arriving after that do (:class:`LateFirings`).
    :ivar early_delay: EARLY panes ``early_delay`` ms (> 0) of processing time after a window's first record
        since its last pane (``AfterProcessingTime(d)`` as early firings, or repeated on its own), or ``None``.
    :ivar early_count: an EARLY pane after every ``early_count``-th record of a window, in arrival order
        (``AfterCount(n)`` as early firings), or ``None``.
    """

    on_time: bool
    late: LateFirings
    early_delay: int | None = None
    early_count: int | None = None

    @property
    def finishes_on_time(self) -> bool:
        """The ON_TIME (or first LATE) pane is the window's last; later records are refused (WINDOW_CLOSED)."""
        return self.late is LateFirings.NONE

    @property
    def needs_records(self) -> bool:
        """Panes depend on which records arrived in which order (count firings): no partial aggregates."""
        return self.early_count is not None


def compile_trigger(trigger: Trigger, allowed_lateness: int) -> ColumnarTrigger | None:
    """``trigger`` as the columnar policy runs it for windows kept ``allowed_lateness`` ms past their max
    timestamp, or ``None`` (the general policy runs it).

    ``Default()``; ``Never()``; ``AfterWatermark(early, late)`` whose early firings are ``AfterCount(n)`` or
    ``AfterProcessingTime(d > 0)`` (repeated) or none, and whose late firings are ``AfterCount(1)`` (every late
    record) or none; ``Repeatedly(AfterProcessingTime(d > 0))`` without allowed lateness (Beam's processing-time
    windows: a global window firing every ``d`` ms after its first record since the last pane).

    ``Repeatedly(AfterProcessingTime(d))`` fires by processing time only, as early firings do, and leaves the
    window to its garbage-collection pane at the horizon, as ``Never()`` does. That is the columnar form only while
    a window has no late phase: with allowed lateness > 0 it would go on firing by processing time after the
    watermark reached the window (LATE panes every ``d``), where the columnar form's early firings stop.
    """
    if isinstance(trigger, Default):
        return ColumnarTrigger(on_time=True, late=LateFirings.EVERY_RECORD)
    if isinstance(trigger, Never):
        return ColumnarTrigger(on_time=False, late=LateFirings.AT_HORIZON)
    if isinstance(trigger, AfterWatermark):
        early = _early_firings(trigger.early.trigger) if trigger.early else {}
        late = _late_firings(trigger.late.trigger) if trigger.late else LateFirings.NONE
        if early is None or late is None:
            return None
        return ColumnarTrigger(on_time=True, late=late, **early)
    if isinstance(trigger, Repeatedly) and isinstance(trigger.trigger, AfterProcessingTime) and allowed_lateness == 0:
        early = _early_firings(trigger.trigger)
        return None if early is None else ColumnarTrigger(on_time=False, late=LateFirings.AT_HORIZON, **early)
    return None


def _early_firings(trigger: Trigger) -> dict[str, int] | None:
    """``trigger`` repeated as early firings: the columnar form's early fields, or None."""
    if isinstance(trigger, Repeatedly):
        return _early_firings(trigger.trigger)
    if isinstance(trigger, AfterCount):
        return {"early_count": trigger.count}
    if isinstance(trigger, AfterProcessingTime) and trigger.delay > 0:
        # A zero delay fires as records arrive, inside the add call: partials and records of one window arriving
        # in separate calls would fire separate panes, so it stays on the general policy.
        return {"early_delay": trigger.delay}
    return None


def _late_firings(trigger: Trigger) -> LateFirings | None:
    """``trigger`` repeated as late firings: the columnar form's late behaviour, or None."""
    if isinstance(trigger, Repeatedly):
        return _late_firings(trigger.trigger)
    if isinstance(trigger, AfterCount) and trigger.count == 1:
        return LateFirings.EVERY_RECORD
    return None


def trigger_state(trigger: Trigger, fired: bool, closed: bool, pending_since: int | None, new_count: int) -> State:
    """The state ``trigger``'s protocol would hold for a window of the columnar policy, from its bookkeeping:
    ``fired`` (the watermark fired it), ``closed`` (finished), ``pending_since`` (processing time of its first
    record since the last pane), ``new_count`` (records since the last pane)."""
    if isinstance(trigger, Default):
        return {"fired": fired, "since_fire": 0}
    if isinstance(trigger, AfterCount):
        return {"n": new_count}
    if isinstance(trigger, AfterProcessingTime):
        return {"deadline": None if pending_since is None else pending_since + trigger.delay}
    if isinstance(trigger, Repeatedly):
        return trigger_state(trigger.trigger, fired, closed, pending_since, new_count)
    if isinstance(trigger, AfterWatermark):
        late_phase = fired or closed
        early = None
        if trigger.early:  # the early trigger's state only matters before the watermark fired the window
            since, count = (None, 0) if late_phase else (pending_since, new_count)
            early = trigger_state(trigger.early, False, False, since, count)
        late = trigger.late.new_state() if trigger.late else None  # late firings fire at every record: none waits
        return {"late_phase": late_phase, "early": early, "late": late}
    return trigger.new_state()
