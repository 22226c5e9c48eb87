"""Watermarks between stages: input, output, event-time and processing-time lag.

A stage's *input watermark* is the MIN over the output watermarks of its
upstream stages and sources (idle upstreams excluded, like splits). Its *output
watermark* is ``MIN(input watermark, hold - 1)``, where the hold is the lowest
output timestamp the stage still owes downstream (buffered window state that
will be emitted with that timestamp; see ``WindowOperator.output_hold``): one
below it, because a row at or behind a watermark is late (a window whose max
timestamp is the row's own has fired once the watermark reaches it; Flink's
boundary, where Beam's "late = strictly behind" lets the hold be the timestamp
itself). Both never regress. ``input - output`` is the event-time delay the
stage adds.

The *processing-time watermark* of a stage is the processing time of the oldest
record it has taken in but not yet emitted (or "now" when nothing is pending).
``now - event-time watermark`` is the event-time lag; ``now - processing-time
watermark`` the processing-time lag. Event-time lag rising with flat
processing-time lag means data is buffered normally (windows waiting to
close); both rising means the stage is stuck.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from floodmark.core.time import MIN_TIMESTAMP


@dataclass(frozen=True)
class StageTimes:
    """A stage's watermarks and lags at one processing time (all ms)."""

    input_watermark: int
    output_watermark: int
    processing_time_watermark: int
    now: int

    @classmethod
    def at(cls, now: int, input_watermark: int, output_watermark: int, oldest_pending: int | None) -> StageTimes:
        """The times at processing time ``now`` of a stage whose oldest record taken in and not yet emitted
        arrived at ``oldest_pending`` (``None``: nothing pending, the processing-time watermark is ``now``)."""
        pending = now if oldest_pending is None else min(now, oldest_pending)
        return cls(input_watermark, output_watermark, pending, now)

    @property
    def event_time_lag(self) -> int:
        return self.now - self.output_watermark

    @property
    def processing_time_lag(self) -> int:
        return self.now - self.processing_time_watermark

    @property
    def stage_delay(self) -> int:
        """Event time the stage holds back: input watermark - output watermark."""
        return self.input_watermark - self.output_watermark


def held_below(hold: int) -> int:
    """The highest output watermark that keeps an output timestamped ``hold`` on time downstream: ``hold - 1``."""
    return max(MIN_TIMESTAMP, hold - 1)


class StageWatermark:
    """Input and output watermark of one stage; neither ever regresses.

    :arg upstreams: names of the upstream stages or sources feeding this stage.
    """

    def __init__(self, upstreams: list[str]) -> None:
        if not upstreams:
            raise ValueError("a stage needs at least one upstream")
        self.upstream: dict[str, tuple[int, bool]] = {name: (MIN_TIMESTAMP, False) for name in upstreams}
        self.input_watermark = MIN_TIMESTAMP
        self.output_watermark = MIN_TIMESTAMP

    def update_upstream(self, name: str, watermark: int, idle: bool = False) -> int:
        """Record upstream ``name``'s output watermark; returns the new input watermark."""
        if name not in self.upstream:
            raise KeyError(f"unknown upstream {name!r}; known: {sorted(self.upstream)}")
        previous, _ = self.upstream[name]
        self.upstream[name] = (max(previous, watermark), idle)
        active = [w for w, is_idle in self.upstream.values() if not is_idle]
        candidate = min(active) if active else max(w for w, _ in self.upstream.values())
        self.input_watermark = max(self.input_watermark, candidate)
        return self.input_watermark

    def update_output(self, hold: int | None) -> int:
        """Recompute the output watermark from the stage's current hold (``None``: nothing held)."""
        candidate = self.input_watermark if hold is None else min(self.input_watermark, held_below(hold))
        self.output_watermark = max(self.output_watermark, candidate)
        return self.output_watermark

    def times(self, now: int, oldest_pending: int | None) -> StageTimes:
        """The stage's watermarks at processing time ``now``."""
        return StageTimes.at(now, self.input_watermark, self.output_watermark, oldest_pending)

    def snapshot(self) -> dict[str, Any]:
        return {
            "upstream": {k: list(v) for k, v in self.upstream.items()},
            "input": self.input_watermark,
            "output": self.output_watermark,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.upstream = {k: (v[0], v[1]) for k, v in state["upstream"].items()}
        self.input_watermark = state["input"]
        self.output_watermark = state["output"]
