"""Where a watermark generator sends what it decides (Flink's ``WatermarkOutput``)."""

from __future__ import annotations

from typing import Protocol


class WatermarkOutput(Protocol):
    """The output a :class:`~floodmark.core.watermarks.generator.WatermarkGenerator` writes to.

    ``emit_watermark(t)`` proposes watermark ``t`` (ms) and marks the output
    active; a proposal lower than the output's current watermark is ignored, so a
    watermark never goes backwards. ``mark_idle()`` says the output will not hold
    back the combined watermark until it emits again or ``mark_active()`` is called.
    """

    def emit_watermark(self, timestamp: int) -> None: ...

    def mark_idle(self) -> None: ...

    def mark_active(self) -> None: ...


class RecordingOutput:
    """A standalone output that keeps the highest watermark and the idle flag.

    Useful for testing a generator on its own; it enforces the same
    never-regress rule as a split output of the multiplexer.
    """

    def __init__(self) -> None:
        from floodmark.core.time import MIN_TIMESTAMP

        self.watermark: int = MIN_TIMESTAMP
        self.idle: bool = False
        self.emitted: list[int] = []

    def emit_watermark(self, timestamp: int) -> None:
        self.emitted.append(timestamp)
        self.idle = False
        if timestamp > self.watermark:
            self.watermark = timestamp

    def mark_idle(self) -> None:
        self.idle = True

    def mark_active(self) -> None:
        self.idle = False
