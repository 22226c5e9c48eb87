"""Percentile watermarks: trade completeness for latency on purpose.

*Streaming Systems* defines a p-percentile watermark as one that guarantees that
p % of the records with earlier timestamps have been seen; the 100-percentile
watermark is the classic, complete one. floodmark offers two forms, with the
same convention (100 = complete, lower = earlier results and more late records):

* across splits: ``SourceWatermarks(..., percentile=p)`` combines split
  watermarks so that at least p % of the active splits have reached the
  combined watermark (p = 100 is the MIN: Flink's and Beam's rule);
* within a split: :class:`PercentileOfRecentTimestamps` sizes the
  out-of-orderness bound from the recent records so that p % of them would not
  have been late.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from floodmark.core.time import MIN_TIMESTAMP, format_duration
from floodmark.core.watermarks.batch_stats import SplitBatchStats
from floodmark.core.watermarks.generator import WatermarkGenerator
from floodmark.core.watermarks.generator_view import GeneratorView
from floodmark.core.watermarks.output import WatermarkOutput


def _check_percentile(percentile: float) -> float:
    if not 0.0 < percentile <= 100.0:
        raise ValueError(f"percentile must be in (0, 100], got {percentile}")
    return float(percentile)


def allowed_behind(count: int, percentile: float) -> int:
    """How many of ``count`` values may stay below the ``percentile`` completeness value (0 for 100: the MIN).

    The completeness value is the sorted values' entry at this index.
    """
    if count == 0:
        return 0
    return min(math.floor(count * (1.0 - _check_percentile(percentile) / 100.0) + 1e-9), count - 1)


def completeness_percentile(values: list[int], percentile: float) -> int:
    """The highest value that at least ``percentile`` % of ``values`` are at or above.

    ``percentile = 100`` gives the minimum; lower values move towards the maximum.
    """
    ordered = sorted(values)
    return ordered[allowed_behind(len(ordered), percentile)]


class PercentileOfRecentTimestamps(WatermarkGenerator):
    """Adaptive bounded out-of-orderness: the bound is the p-th percentile of recent delays.

    Each record's delay is how far it trails the highest timestamp seen before
    it (0 for a record that raises the maximum). The generator keeps the last
    ``sample_size`` delays and emits ``max_ts - bound - 1`` with ``bound`` the
    nearest-rank p-th percentile of them: with ``percentile=100`` no sampled
    record would have been late; with 90 about one in ten out-of-order records
    is, but windows close sooner. Before any record: MIN.

    Micro-batch mode sees only batch statistics: each batch contributes the
    delays of its quantile timestamps (and of its minimum) against the maximum
    including that batch, one sample per quantile.
    """

    def __init__(self, percentile: float, sample_size: int = 10_000) -> None:
        self.percentile = _check_percentile(percentile)
        if sample_size < 1:
            raise ValueError("sample_size must be positive")
        self.sample_size = sample_size
        self.max_timestamp: int | None = None
        self.delays: deque[int] = deque(maxlen=sample_size)

    def on_event(self, event: Any, timestamp: int, output: WatermarkOutput) -> None:
        if self.max_timestamp is None or timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
            self.delays.append(0)
        else:
            self.delays.append(self.max_timestamp - timestamp)

    def on_batch(self, stats: SplitBatchStats, output: WatermarkOutput) -> None:
        if stats.count == 0:
            return
        top = stats.max_timestamp if self.max_timestamp is None else max(self.max_timestamp, stats.max_timestamp)
        for ts in [stats.min_timestamp, *stats.quantiles.values()]:
            self.delays.append(max(0, top - ts))
        self.max_timestamp = top

    def current_bound(self) -> int:
        if not self.delays:
            return 0
        ordered = sorted(self.delays)
        rank = max(1, math.ceil(self.percentile / 100.0 * len(ordered)))
        return ordered[rank - 1]

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self.max_timestamp is None:
            output.emit_watermark(MIN_TIMESTAMP)
        else:
            output.emit_watermark(self.max_timestamp - self.current_bound() - 1)

    def describe(self) -> str:
        bound = format_duration(self.current_bound())
        return f"percentile-of-recent-delays (p{self.percentile:g}), current bound {bound}"

    def view(self) -> GeneratorView:
        bound = self.current_bound()
        seen = self.max_timestamp is not None
        return GeneratorView(self.describe(), bound, self.max_timestamp, seen, watermark_lag=bound + 1)

    def snapshot(self) -> dict[str, Any]:
        return {"max_timestamp": self.max_timestamp, "delays": list(self.delays)}

    def restore(self, state: dict[str, Any]) -> None:
        self.max_timestamp = state["max_timestamp"]
        # Another generator's snapshot has no delays: the percentile starts over from its highest timestamp.
        self.delays = deque(state.get("delays", ()), maxlen=self.sample_size)
