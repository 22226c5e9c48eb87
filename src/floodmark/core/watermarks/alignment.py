"""Watermark alignment: splits that run ahead of their group stop being read until the group catches up.

Flink's rule (FLIP-182, per split since FLIP-217; ``WatermarkStrategy.withWatermarkAlignment(group,
maxAllowedWatermarkDrift)``): every split of the sources in an alignment group reports its watermark; the
group's *maximal allowed watermark* is the lowest of them plus ``max_drift``, and a split whose watermark is
above it is paused. A paused split's watermark stays where it is, the slower splits read on, the lowest
watermark rises, and the split is read again once it is within the drift. So the state a stage keeps for
windows that only the fast splits have reached is bounded by the drift instead of by how far the fast splits
could run ahead (a replay of a topic whose partitions start hours apart).

Which splits count for the lowest watermark::

    max_allowed = min(watermark of s for s in group if not idle(s) and has_watermark(s)) + max_drift
    paused      = {s in group : not idle(s) and watermark(s) > max_allowed}

* **idle splits** do not count (Flink: an idle subtask reports no watermark) and are never paused;
* **splits without a watermark yet** (no record so far: a known split that is silent) do not count either:
  nothing can catch up with them, and until idleness releases them they hold the *combined* watermark back
  anyway (:class:`~floodmark.core.watermarks.multiplexer.WatermarkMultiplexer`);
* with no counting split, nothing is paused.

Alignment changes *when* records are read, never *which*: a runtime must still read a paused split when no
split that may be read has anything to read (else a bounded replay whose slowest split has ended but is not
idle would stop early), and it never drops or reorders a split's records.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from floodmark.core.time import MIN_TIMESTAMP, Duration, positive_millis

Split = TypeVar("Split", bound=Hashable)


@dataclass(frozen=True)
class WatermarkAlignment:
    """The alignment a :class:`~floodmark.core.watermarks.strategy.WatermarkStrategy` asks for.

    :arg group: sources whose strategies name the same group are aligned together (their splits pooled).
    :arg max_drift_ms: how far (ms) a split's watermark may run ahead of the group's lowest before it is paused.
    """

    group: str
    max_drift_ms: int

    @staticmethod
    def of(group: str, max_drift: Duration) -> WatermarkAlignment:
        if not group:
            raise ValueError("an alignment group needs a name")
        return WatermarkAlignment(group, positive_millis(max_drift, "the maximal watermark drift"))

    def max_allowed(self, split_watermarks: Mapping[Split, tuple[int, bool]]) -> int | None:
        """The group's maximal allowed watermark (ms) for ``{split: (watermark, idle)}`` of every split in the
        group, or None when no split counts (see the module docstring)."""
        counting = [mark for mark, idle in split_watermarks.values() if not idle and mark > MIN_TIMESTAMP]
        return min(counting) + self.max_drift_ms if counting else None

    def paused(self, split_watermarks: Mapping[Split, tuple[int, bool]]) -> frozenset[Split]:
        """The splits of ``{split: (watermark, idle)}`` (the whole group) that are not to be read now."""
        limit = self.max_allowed(split_watermarks)
        if limit is None:
            return frozenset()
        return frozenset(split for split, (mark, idle) in split_watermarks.items() if not idle and mark > limit)
