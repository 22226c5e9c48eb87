"""Combining many split watermarks into one (Flink's ``WatermarkOutputMultiplexer``).

Each split writes to its own :class:`SplitOutput`. The combined watermark is the
MIN over the splits that are not idle (or, with ``percentile=p``, the highest
value that p % of them have reached; ``p = 100`` is the MIN; see
:mod:`floodmark.core.watermarks.percentile`). It never regresses: a lower candidate
is ignored, like every watermark.

All splits idle (a decision, documented in ``docs/semantics.md``): the combined
output is marked idle and its watermark advances to the MAX of the split
watermarks (recent Flink's rule for all-idle inputs): every split has promised
no records at or below its own watermark, and no active split is left to
contradict the highest promise. A split that later wakes up with records below
that watermark has late records, which the window operator routes to LATE
panes or the late output, never silently away.

Splits with no output at all yet are unknown and hold nothing back unless they
are declared with :meth:`WatermarkMultiplexer.register` (then they hold the
combined watermark at MIN until they emit or are marked idle, as an empty Kafka
partition does in Flink).
"""

from __future__ import annotations

from typing import Any

from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks.percentile import completeness_percentile


class SplitOutput:
    """The watermark output of one split: highest watermark so far and the idle flag."""

    def __init__(self) -> None:
        self.watermark: int = MIN_TIMESTAMP
        self.idle: bool = False

    def emit_watermark(self, timestamp: int) -> None:
        self.idle = False
        if timestamp > self.watermark:
            self.watermark = timestamp

    def mark_idle(self) -> None:
        self.idle = True

    def mark_active(self) -> None:
        self.idle = False


class WatermarkMultiplexer:
    """Per-split outputs combined by MIN (or a percentile) over non-idle splits.

    :arg percentile: 100 (default) combines by MIN, Flink's and Beam's rule; a
        lower value lets the combined watermark run ahead of the slowest splits
        (*Streaming Systems*' percentile watermarks: earlier results, more late records).
    """

    def __init__(self, percentile: float = 100.0) -> None:
        completeness_percentile([0], percentile)  # validates
        self.percentile = percentile
        self.outputs: dict[str, SplitOutput] = {}
        self.watermark: int = MIN_TIMESTAMP
        self.idle: bool = False

    def register(self, split: str) -> SplitOutput:
        """The output of ``split``, created (active, at MIN) on first use."""
        output = self.outputs.get(split)
        if output is None:
            output = self.outputs[split] = SplitOutput()
        return output

    def update_combined(self) -> int:
        """Recompute the combined watermark and idle flag from the split outputs."""
        if not self.outputs:
            return self.watermark
        active = [o.watermark for o in self.outputs.values() if not o.idle]
        if active:
            self.idle = False
            candidate = min(active) if self.percentile == 100.0 else completeness_percentile(active, self.percentile)
        else:
            self.idle = True
            candidate = max(o.watermark for o in self.outputs.values())
        if candidate > self.watermark:
            self.watermark = candidate
        return self.watermark

    def holding_split(self) -> str | None:
        """The active split with the lowest watermark (the one holding the MIN back)."""
        active = [(o.watermark, split) for split, o in self.outputs.items() if not o.idle]
        return min(active)[1] if active else None

    def snapshot(self) -> dict[str, Any]:
        return {
            "watermark": self.watermark,
            "idle": self.idle,
            "outputs": {s: {"watermark": o.watermark, "idle": o.idle} for s, o in self.outputs.items()},
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.watermark = state["watermark"]
        self.idle = state["idle"]
        self.outputs = {}
        for split, saved in state["outputs"].items():
            output = self.register(split)
            output.watermark = saved["watermark"]
            output.idle = saved["idle"]
