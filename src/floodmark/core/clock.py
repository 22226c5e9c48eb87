"""Processing-time clocks, injected wherever logic needs "now".

Logic never reads the wall clock itself: it is handed a :class:`Clock` (or a
``now_ms`` argument). Tests and the micro-batch runtime use :class:`ManualClock`
so that idleness and processing-time triggers are deterministic and replayable.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of processing time in integer milliseconds."""

    def now_ms(self) -> int:
        """The current processing time, in ms since the epoch. Never decreases."""
        ...


class SystemClock:
    """The wall clock. Only entry points (CLI, the Spark driver loop) use it."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; it refuses to go backwards."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance_to(self, now_ms: int) -> None:
        """Set the time to ``now_ms``; a value lower than the current time is ignored."""
        if now_ms > self._now:
            self._now = now_ms

    def advance_by(self, millis: int) -> None:
        if millis < 0:
            raise ValueError("a clock cannot move backwards")
        self._now += millis
