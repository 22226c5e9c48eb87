"""Triggers: when a window emits a pane (Beam's trigger state machines, Beam's names).

Every trigger is an immutable description plus a small protocol over a mutable
``state`` dict that the window operator keeps per (key, window) (Beam's
``TriggerFn``: ``on_element``, ``on_merge``, ``should_fire``, ``on_fire``,
``reset``):

* ``new_state()`` -> the state of a fresh window;
* ``on_elements(state, n, ctx)``: ``n`` records were added to the window;
* ``should_fire(state, ctx)`` -> fire now?;
* ``on_fire(state, ctx)`` -> ``True`` when the trigger is finished (the window
  closes: later records for it go to the late output, reason WINDOW_CLOSED);
* ``reset(state)``; ``on_merge(states, ctx)`` -> the state of a merged window.

Plus three scheduling hints the vectorised operator uses instead of asking every
window after every record and every watermark move:

* ``elements_until_check(state, ctx)``: the least number of further records
  after which ``should_fire`` may turn true because of records (``None``: records
  alone never make it fire). The operator adds that many records in one
  vectorised step, then asks ``should_fire``;
* ``watermark_deadline(state, window)``: the lowest watermark at which
  ``should_fire`` may turn true without new records (``None``: never);
* ``processing_deadline(state)``: the same for processing time.

Element-driven triggers are evaluated after every record, never once per
batch: the panes do not depend on how records are cut into batches. Beam
evaluates them once per bundle, so its panes depend on bundling; floodmark's
equal Beam's with one-record bundles (and Flink's). See ``docs/semantics.md``.

Each trigger also says what it is doing (``describe(state, ctx)``, for
``floodmark explain``). The general firing policy runs this protocol; the
columnar one runs the triggers :func:`floodmark.core.compiled_trigger.compile_trigger`
recognises, compiled to data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.core.time import Duration, format_duration, format_instant, format_relative, non_negative_millis
from floodmark.core.windows import Window, window_reached

State = dict[str, Any]


@dataclass(frozen=True)
class TriggerContext:
    """What a trigger may look at: the window and the current times (ms)."""

    window: Window
    watermark: int
    processing_time: int
    end_of_window_reached: bool = field(init=False)
    """The watermark has reached the window's max timestamp (see :func:`~floodmark.core.windows.window_reached`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "end_of_window_reached", bool(window_reached(self.window.end, self.watermark)))


def _min_or_none(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


class Trigger:
    """Base class of all triggers; see the module docstring for the protocol."""

    def new_state(self) -> State:
        return {}

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        pass

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        return None

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        raise NotImplementedError

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        raise NotImplementedError

    def reset(self, state: State) -> None:
        state.clear()
        state.update(self.new_state())

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        return self.new_state()

    def watermark_deadline(self, state: State, window: Window) -> int | None:
        return None

    def processing_deadline(self, state: State) -> int | None:
        return None

    def may_fire_before_watermark(self) -> bool:
        """Can this trigger fire before the end of the window (EARLY panes)?"""
        return True

    def describe(self, state: State, ctx: TriggerContext) -> str:
        """The trigger's state in words (reads only)."""
        return f"{self!r} with state {state!r}"


class Default(Trigger):
    """Beam's default trigger: fire when the watermark reaches the end of the window,
    then once more for every late record (within allowed lateness). Never finishes.
    """

    def new_state(self) -> State:
        return {"fired": False, "since_fire": 0}

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        state["since_fire"] += n

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        return 1 if ctx.end_of_window_reached else None

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return ctx.end_of_window_reached and (not state["fired"] or state["since_fire"] > 0)

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        state["fired"] = True
        state["since_fire"] = 0
        return False

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        return {
            "fired": all(s["fired"] for s in states) and ctx.end_of_window_reached,
            "since_fire": sum(s["since_fire"] for s in states),
        }

    def watermark_deadline(self, state: State, window: Window) -> int | None:
        return None if state["fired"] else window.max_timestamp

    def may_fire_before_watermark(self) -> bool:
        return False

    def describe(self, state: State, ctx: TriggerContext) -> str:
        if state["fired"]:
            return f"Default: fired; {state['since_fire']} record(s) since its last firing"
        return "Default: not fired yet (fires when the watermark reaches the max timestamp)"

    def __repr__(self) -> str:
        return "Default()"


class AfterCount(Trigger):
    """Fire once the window has received ``count`` records since the last reset; then finish."""

    def __init__(self, count: int) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"AfterCount needs a positive int, got {count!r}")
        self.count = count

    def new_state(self) -> State:
        return {"n": 0}

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        state["n"] += n

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        return max(1, self.count - state["n"])

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return state["n"] >= self.count

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        return True

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        return {"n": sum(s["n"] for s in states)}

    def describe(self, state: State, ctx: TriggerContext) -> str:
        return f"AfterCount({self.count}): {state['n']} of {self.count} record(s)"

    def __repr__(self) -> str:
        return f"AfterCount({self.count})"


class AfterProcessingTime(Trigger):
    """Fire ``delay`` ms of processing time after the first record since the last reset; then finish.

    Java Beam's semantics (the first record starts the delay; Beam Python restarts
    it with every record). It fires when processing time >= arrival + delay.
    """

    def __init__(self, delay: Duration) -> None:
        self.delay = non_negative_millis(delay, "the processing-time delay")

    def new_state(self) -> State:
        return {"deadline": None}

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        if state["deadline"] is None and n > 0:
            state["deadline"] = ctx.processing_time + self.delay

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return state["deadline"] is not None and ctx.processing_time >= state["deadline"]

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        return True

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        return {"deadline": _min_or_none([s["deadline"] for s in states])}

    def processing_deadline(self, state: State) -> int | None:
        return state["deadline"]

    def describe(self, state: State, ctx: TriggerContext) -> str:
        name = f"AfterProcessingTime({format_duration(self.delay)})"
        if state["deadline"] is None:
            return f"{name}: not started (the next record starts it)"
        when = state["deadline"]
        return f"{name}: fires at processing time {format_instant(when)} ({format_relative(when, ctx.processing_time)})"

    def __repr__(self) -> str:
        return f"AfterProcessingTime({self.delay})"


class Never(Trigger):
    """Never fires; the window emits one final pane when it is garbage collected (if non-empty)."""

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return False

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        return False

    def may_fire_before_watermark(self) -> bool:
        return False

    def describe(self, state: State, ctx: TriggerContext) -> str:
        return "Never: fires only when the window is garbage collected (at the horizon)"

    def __repr__(self) -> str:
        return "Never()"


class Repeatedly(Trigger):
    """Fire every time ``trigger`` fires, resetting it after each firing. Never finishes."""

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = _check_trigger(trigger)

    def new_state(self) -> State:
        return self.trigger.new_state()

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        self.trigger.on_elements(state, n, ctx)

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        return self.trigger.elements_until_check(state, ctx)

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return self.trigger.should_fire(state, ctx)

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        if self.trigger.on_fire(state, ctx):
            self.trigger.reset(state)
        return False

    def reset(self, state: State) -> None:
        self.trigger.reset(state)

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        return self.trigger.on_merge(states, ctx)

    def watermark_deadline(self, state: State, window: Window) -> int | None:
        return self.trigger.watermark_deadline(state, window)

    def processing_deadline(self, state: State) -> int | None:
        return self.trigger.processing_deadline(state)

    def may_fire_before_watermark(self) -> bool:
        return self.trigger.may_fire_before_watermark()

    def describe(self, state: State, ctx: TriggerContext) -> str:
        return f"Repeatedly[{self.trigger.describe(state, ctx)}]"

    def __repr__(self) -> str:
        return f"Repeatedly({self.trigger!r})"


class AfterWatermark(Trigger):
    """Fire ON_TIME when the watermark reaches the window's max timestamp.

    ``early``: fired repeatedly before that (EARLY panes); ``late``: fired
    repeatedly after it, for records within the allowed lateness (LATE panes).
    Without ``late`` the trigger finishes at the on-time pane, so later records
    go to the late output (reason WINDOW_CLOSED), as in Beam; use ``late`` or
    :class:`Default` to get LATE panes.
    """

    def __init__(self, early: Trigger | None = None, late: Trigger | None = None) -> None:
        self.early = Repeatedly(_check_trigger(early)) if early is not None else None
        self.late = Repeatedly(_check_trigger(late)) if late is not None else None

    def new_state(self) -> State:
        return {
            "late_phase": False,
            "early": self.early.new_state() if self.early else None,
            "late": self.late.new_state() if self.late else None,
        }

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        if state["late_phase"]:
            if self.late:
                self.late.on_elements(state["late"], n, ctx)
        elif self.early:
            self.early.on_elements(state["early"], n, ctx)

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        if state["late_phase"]:
            return self.late.elements_until_check(state["late"], ctx) if self.late else None
        if ctx.end_of_window_reached:
            return 1
        return self.early.elements_until_check(state["early"], ctx) if self.early else None

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        if state["late_phase"]:
            return bool(self.late and self.late.should_fire(state["late"], ctx))
        if ctx.end_of_window_reached:
            return True
        return bool(self.early and self.early.should_fire(state["early"], ctx))

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        if state["late_phase"]:
            return self.late.on_fire(state["late"], ctx) if self.late else True
        if ctx.end_of_window_reached:
            state["late_phase"] = True
            return self.late is None
        if self.early:
            self.early.on_fire(state["early"], ctx)
        return False

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        # Java Beam's rule: the merged window is in its late phase only if every merged
        # window was and the merged window's own end has been reached.
        late_phase = all(s["late_phase"] for s in states) and ctx.end_of_window_reached
        merged = self.new_state()
        merged["late_phase"] = late_phase
        if late_phase and self.late:
            merged["late"] = self.late.on_merge([s["late"] for s in states], ctx)
        if not late_phase and self.early:
            merged["early"] = self.early.on_merge(
                [s["early"] for s in states if not s["late_phase"]] or [self.early.new_state()], ctx
            )
        return merged

    def watermark_deadline(self, state: State, window: Window) -> int | None:
        if state["late_phase"]:
            return self.late.watermark_deadline(state["late"], window) if self.late else None
        early = self.early.watermark_deadline(state["early"], window) if self.early else None
        return _min_or_none([window.max_timestamp, early])

    def processing_deadline(self, state: State) -> int | None:
        if state["late_phase"]:
            return self.late.processing_deadline(state["late"]) if self.late else None
        return self.early.processing_deadline(state["early"]) if self.early else None

    def may_fire_before_watermark(self) -> bool:
        return self.early is not None

    def describe(self, state: State, ctx: TriggerContext) -> str:
        if state["late_phase"]:
            late = self.late.describe(state["late"], ctx) if self.late else None
            return "AfterWatermark: on-time pane fired; " + (
                f"late firings: {late}" if late else "no late firings (finished)"
            )
        text = "AfterWatermark: waiting for the watermark to reach the max timestamp"
        if self.early:
            text += f"; early firings: {self.early.describe(state['early'], ctx)}"
        return text

    def __repr__(self) -> str:
        early = self.early.trigger if self.early else None
        late = self.late.trigger if self.late else None
        return f"AfterWatermark(early={early!r}, late={late!r})"


class _Composite(Trigger):
    def __init__(self, *triggers: Trigger) -> None:
        if not triggers:
            raise ValueError(f"{type(self).__name__} needs at least one trigger")
        self.triggers = tuple(_check_trigger(t) for t in triggers)

    def new_state(self) -> State:
        return {"subs": [t.new_state() for t in self.triggers], "done": [False] * len(self.triggers)}

    def _live(self, state: State) -> list[tuple[Trigger, State]]:
        return [(t, s) for t, s, d in zip(self.triggers, state["subs"], state["done"], strict=True) if not d]

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        for trigger, sub in self._live(state):
            trigger.on_elements(sub, n, ctx)

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        return {
            "subs": [t.on_merge([s["subs"][i] for s in states], ctx) for i, t in enumerate(self.triggers)],
            "done": [all(s["done"][i] for s in states) for i in range(len(self.triggers))],
        }

    def watermark_deadline(self, state: State, window: Window) -> int | None:
        return _min_or_none([t.watermark_deadline(s, window) for t, s in self._live(state)])

    def processing_deadline(self, state: State) -> int | None:
        return _min_or_none([t.processing_deadline(s) for t, s in self._live(state)])

    def may_fire_before_watermark(self) -> bool:
        return any(t.may_fire_before_watermark() for t in self.triggers)

    def describe(self, state: State, ctx: TriggerContext) -> str:
        subs = [
            t.describe(s, ctx) + (" [done]" if done else "")
            for t, s, done in zip(self.triggers, state["subs"], state["done"], strict=True)
        ]
        return f"{type(self).__name__}({'; '.join(subs)})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.triggers))})"


class AfterAny(_Composite):
    """Fire when any sub-trigger fires; finish when a sub-trigger that fired finishes."""

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        return _min_or_none([t.elements_until_check(s, ctx) for t, s in self._live(state)])

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return any(t.should_fire(s, ctx) for t, s in self._live(state))

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        finished = False
        for i, (trigger, sub) in enumerate(zip(self.triggers, state["subs"], strict=True)):
            if not state["done"][i] and trigger.should_fire(sub, ctx) and trigger.on_fire(sub, ctx):
                state["done"][i] = True
                finished = True
        return finished


class AfterAll(_Composite):
    """Fire when every sub-trigger has fired or is ready; then finish (Java Beam's ``AfterAll``)."""

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        needed = [t.elements_until_check(s, ctx) for t, s in self._live(state) if not t.should_fire(s, ctx)]
        if any(n is None for n in needed):
            return None
        return max(needed, default=1)

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return all(t.should_fire(s, ctx) for t, s in self._live(state))

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        for trigger, sub in self._live(state):
            trigger.on_fire(sub, ctx)
        state["done"] = [True] * len(self.triggers)
        return True


class AfterEach(_Composite):
    """Run the sub-triggers in sequence: fire with the first until it finishes, then the next, ...

    Finishes when the last sub-trigger finishes.
    """

    def new_state(self) -> State:
        state = super().new_state()
        state["index"] = 0
        return state

    def _current(self, state: State) -> tuple[Trigger, State] | None:
        index = state["index"]
        if index >= len(self.triggers):
            return None
        return self.triggers[index], state["subs"][index]

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        current = self._current(state)
        if current:
            current[0].on_elements(current[1], n, ctx)

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        current = self._current(state)
        return current[0].elements_until_check(current[1], ctx) if current else None

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        current = self._current(state)
        return bool(current and current[0].should_fire(current[1], ctx))

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        current = self._current(state)
        if current is None:
            return True
        if current[0].on_fire(current[1], ctx):
            state["done"][state["index"]] = True
            state["index"] += 1
        return state["index"] >= len(self.triggers)

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        merged = super().on_merge(states, ctx)
        merged["index"] = min(s["index"] for s in states)
        return merged

    def watermark_deadline(self, state: State, window: Window) -> int | None:
        current = self._current(state)
        return current[0].watermark_deadline(current[1], window) if current else None

    def processing_deadline(self, state: State) -> int | None:
        current = self._current(state)
        return current[0].processing_deadline(current[1]) if current else None

    def describe(self, state: State, ctx: TriggerContext) -> str:
        current = self._current(state)
        if current is None:
            return "AfterEach: all steps finished"
        step = f"step {state['index'] + 1} of {len(self.triggers)}"
        return f"AfterEach: {step}: {current[0].describe(current[1], ctx)}"


class OrFinally(Trigger):
    """Fire like ``trigger`` until ``until`` fires; that firing is the final pane."""

    def __init__(self, trigger: Trigger, until: Trigger) -> None:
        self.trigger = _check_trigger(trigger)
        self.until = _check_trigger(until)

    def new_state(self) -> State:
        return {"main": self.trigger.new_state(), "until": self.until.new_state()}

    def on_elements(self, state: State, n: int, ctx: TriggerContext) -> None:
        self.trigger.on_elements(state["main"], n, ctx)
        self.until.on_elements(state["until"], n, ctx)

    def elements_until_check(self, state: State, ctx: TriggerContext) -> int | None:
        return _min_or_none(
            [
                self.trigger.elements_until_check(state["main"], ctx),
                self.until.elements_until_check(state["until"], ctx),
            ]
        )

    def should_fire(self, state: State, ctx: TriggerContext) -> bool:
        return self.until.should_fire(state["until"], ctx) or self.trigger.should_fire(state["main"], ctx)

    def on_fire(self, state: State, ctx: TriggerContext) -> bool:
        if self.until.should_fire(state["until"], ctx):
            self.until.on_fire(state["until"], ctx)
            return True
        return self.trigger.on_fire(state["main"], ctx)

    def reset(self, state: State) -> None:
        self.trigger.reset(state["main"])

    def on_merge(self, states: Sequence[State], ctx: TriggerContext) -> State:
        return {
            "main": self.trigger.on_merge([s["main"] for s in states], ctx),
            "until": self.until.on_merge([s["until"] for s in states], ctx),
        }

    def watermark_deadline(self, state: State, window: Window) -> int | None:
        return _min_or_none(
            [
                self.trigger.watermark_deadline(state["main"], window),
                self.until.watermark_deadline(state["until"], window),
            ]
        )

    def processing_deadline(self, state: State) -> int | None:
        return _min_or_none(
            [self.trigger.processing_deadline(state["main"]), self.until.processing_deadline(state["until"])]
        )

    def may_fire_before_watermark(self) -> bool:
        return self.trigger.may_fire_before_watermark() or self.until.may_fire_before_watermark()

    def describe(self, state: State, ctx: TriggerContext) -> str:
        return f"{self.trigger.describe(state['main'], ctx)}, until {self.until.describe(state['until'], ctx)}"

    def __repr__(self) -> str:
        return f"OrFinally({self.trigger!r}, until={self.until!r})"


def _check_trigger(trigger: Any) -> Trigger:
    if not isinstance(trigger, Trigger):
        raise TypeError(f"expected a trigger, got {type(trigger).__name__}: {trigger!r}")
    return trigger
