"""Idleness detection (Flink's ``IdlenessTimer`` and ``WatermarksWithIdleness``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from floodmark.core.clock import Clock
from floodmark.core.time import MIN_TIMESTAMP, Duration, format_duration, positive_millis
from floodmark.core.watermarks.batch_stats import SplitBatchStats
from floodmark.core.watermarks.generator import WatermarkGenerator
from floodmark.core.watermarks.generator_view import GeneratorView
from floodmark.core.watermarks.output import WatermarkOutput


class IdlenessTimer:
    """Decides that a split is idle after ``timeout`` ms of processing time without records.

    Flink's arithmetic: the first periodic check that sees no activity since the
    previous check starts the inactivity timer; a later check declares the split
    idle once strictly more than ``timeout`` ms have passed since then. A split
    is therefore marked idle between ``timeout`` and ``timeout + one periodic
    interval`` after its last record. Any activity resets the timer.
    """

    def __init__(self, clock: Clock, timeout: Duration) -> None:
        self.clock = clock
        self.timeout = positive_millis(timeout, "the idle timeout")
        self.counter = 0
        self.last_counter = 0
        self.start_of_inactivity: int | None = None

    def activity(self) -> None:
        self.counter += 1

    def check_if_idle(self) -> bool:
        if self.counter != self.last_counter:
            self.last_counter = self.counter
            self.start_of_inactivity = None
            return False
        now = self.clock.now_ms()
        if self.start_of_inactivity is None:
            self.start_of_inactivity = now
            return False
        return now - self.start_of_inactivity > self.timeout

    def snapshot(self) -> dict[str, Any]:
        return {
            "counter": self.counter,
            "last_counter": self.last_counter,
            "start_of_inactivity": self.start_of_inactivity,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.counter = state["counter"]
        self.last_counter = state["last_counter"]
        self.start_of_inactivity = state["start_of_inactivity"]


class WatermarksWithIdleness(WatermarkGenerator):
    """Wraps any generator: marks the split idle after ``timeout`` without records.

    While idle, the wrapped generator's ``on_periodic_emit`` is not called (as in
    Flink); the next record calls its ``on_event`` and marks the output active.

    Micro-batch mode (a decision, ``docs/semantics.md``): a batch's records arrived
    at any time between the reads of two batches, and records keep arriving while
    a batch is processed, unread. So a split that had records in a batch counts as
    active at every periodic check until the next batch's statistics arrive; the
    timeout runs from the first batch without its records. A batch that takes longer
    than the timeout (a cold first batch, a slow cluster) then never makes an active
    split idle, which would let the combined watermark jump over its unread records.

    Idle only when caught up: silence is not enough when the source says the split has records it did not read
    (``SplitBatchStats.unread``: a Kafka partition held back by ``maxOffsetsPerTrigger`` or paused by alignment,
    files of a split later in the order). Such a split counts as active like one that had records::

        active_in_batch = count > 0 or unread > 0
        unread          = the batch's ``unread`` if the source said it, else the last batch's that did (0 before)

    so a split is idle once it had no record for the timeout *and* was caught up at every batch in between. A batch
    whose source does not say (a replayed batch Spark planned in an earlier run) keeps what the last one said.

    ``advance``: event time goes on while the split is idle (the idle-advancing generator's idea for any
    generator). At every periodic check while idle::

        watermark = W + (now - t)      W: its watermark when it was marked idle, at processing time t (ms)

    An idle split does not hold the combined watermark back; once every split is idle the combined watermark is the
    highest of theirs (:mod:`~floodmark.core.watermarks.multiplexer`), so it keeps pace with processing time and the
    last windows fire without new input. A record that then arrives wakes the split and is judged by the watermark
    it finds (late at or below it: LATE panes within the allowed lateness, else the late output). A split that never
    had a watermark does not advance.
    """

    def __init__(self, generator: WatermarkGenerator, timeout: Duration, clock: Clock, advance: bool = False) -> None:
        self.generator = generator
        self.timer = IdlenessTimer(clock, timeout)
        self.advance = advance
        self.active_in_batch = False
        self.unread: int | None = None
        self.emitted = MIN_TIMESTAMP
        self.idle_since: tuple[int, int] | None = None

    def on_event(self, event: Any, timestamp: int, output: WatermarkOutput) -> None:
        self.generator.on_event(event, timestamp, _Recorded(output, self))
        self.timer.activity()
        output.mark_active()

    def on_batch(self, stats: SplitBatchStats, output: WatermarkOutput) -> None:
        self.generator.on_batch(stats, _Recorded(output, self))
        if stats.unread is not None:
            self.unread = stats.unread
        self.active_in_batch = stats.count > 0 or bool(self.unread)
        if self.active_in_batch:
            self.timer.activity()
            output.mark_active()

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self.active_in_batch:
            self.timer.activity()
        if self.timer.check_if_idle():
            if self.advance and self.emitted > MIN_TIMESTAMP:
                now = self.timer.clock.now_ms()
                if self.idle_since is None:
                    self.idle_since = (now, self.emitted)
                since, watermark = self.idle_since
                output.emit_watermark(watermark + now - since)
            output.mark_idle()
        else:
            self.idle_since = None
            self.generator.on_periodic_emit(_Recorded(output, self))

    def describe(self) -> str:
        then = ", then advancing with processing time" if self.advance else ""
        return f"{self.generator.describe()}, idle after {format_duration(self.timer.timeout)} without records{then}"

    def view(self) -> GeneratorView:
        """The wrapped generator's view, with this description and the idleness timer's state."""
        inner = self.generator.view()
        seen = inner.has_seen_records if inner.has_seen_records is not None else self.timer.counter > 0
        return replace(
            inner,
            description=self.describe(),
            has_seen_records=seen,
            idle_timeout=self.timer.timeout,
            inactive_since=self.timer.start_of_inactivity,
            unread=self.unread,
        )

    def snapshot(self) -> dict[str, Any]:
        return {
            "generator": self.generator.snapshot(),
            "timer": self.timer.snapshot(),
            "active_in_batch": self.active_in_batch,
            "unread": self.unread,
            "emitted": self.emitted,
            "idle_since": self.idle_since,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`snapshot`, or from the wrapped generator's own snapshot (idleness added to a running
        job: the timer starts now, as for a split that has just had records)."""
        if not is_wrapped(state):
            self.generator.restore(state)
            return
        self.generator.restore(state["generator"])
        self.timer.restore(state["timer"])
        self.active_in_batch = state.get("active_in_batch", False)
        self.unread = state.get("unread")
        self.emitted = state.get("emitted", MIN_TIMESTAMP)
        since = state.get("idle_since")
        self.idle_since = None if since is None else (int(since[0]), int(since[1]))


class _Recorded:
    """The split's output, the wrapped generator's watermarks noted on the way (what an idle split advances from)."""

    def __init__(self, output: WatermarkOutput, wrapper: WatermarksWithIdleness) -> None:
        self.output = output
        self.wrapper = wrapper

    def emit_watermark(self, timestamp: int) -> None:
        self.wrapper.emitted = max(self.wrapper.emitted, timestamp)
        self.output.emit_watermark(timestamp)

    def mark_idle(self) -> None:
        self.output.mark_idle()

    def mark_active(self) -> None:
        self.output.mark_active()


def is_wrapped(state: dict[str, Any]) -> bool:
    """``state`` is a :class:`WatermarksWithIdleness` snapshot (the generator's own is under ``"generator"``)."""
    return {"generator", "timer"} <= set(state)


def without_idleness(state: dict[str, Any]) -> dict[str, Any]:
    """The wrapped generator's state in ``state`` (idleness removed from a running job), else ``state``."""
    return state["generator"] if is_wrapped(state) else state
