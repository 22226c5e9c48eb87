"""A source as a query's graph holds it: its streaming DataFrame, its event time and how its watermark is made."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame

from floodmark.core.time import Duration, positive_millis
from floodmark.core.watermarks import WatermarkStrategy


@dataclass(frozen=True)
class SourceTime:
    """How an input's watermark is made: one generator per split, combined by MIN (or a percentile).

    :arg watermarks: the strategy (generator, idleness) each split's generator is built from.
    :arg split: the split column (Kafka's ``partition``) or expression; ``None``: one split for the whole input.
    :arg periodic_interval: Flink's auto-watermark interval (ms or timedelta, > 0): how often, in processing
        time, each split's generator is asked for a watermark.
    :arg percentile: 100 (default) combines splits by MIN; lower lets the watermark run ahead of the slowest
        splits (percentile watermarks: earlier panes, more late records).
    :arg known_splits: splits that hold the watermark back before their first record (Kafka partitions).
    """

    watermarks: WatermarkStrategy
    split: str | Column | None = None
    periodic_interval: Duration = 200
    percentile: float = 100.0
    known_splits: Iterable[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "periodic_interval", positive_millis(self.periodic_interval, "periodic_interval"))
        object.__setattr__(self, "known_splits", tuple(str(s) for s in self.known_splits))


@dataclass(frozen=True)
class Source:
    """A streaming DataFrame read by a query, with its event time and its watermarks."""

    name: str
    frame: DataFrame
    event_time: str | Column
    time: SourceTime
    max_future_skew: Duration | None = None
    time_zone: str = "UTC"
