"""``WatermarkStrategy``: how to get timestamps and build one generator per split.

In the spirit of Flink's builder::

    WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=50))
        .with_idleness(timedelta(minutes=1))
        .with_watermark_alignment("replay", max_drift=timedelta(minutes=10))
        .with_timestamp_assigner(lambda record, previous: record["ts"])

A strategy is an immutable description; :meth:`WatermarkStrategy.create_generator`
builds a fresh generator for one split. Strategies are picklable as long as the
functions given to them are (Spark ships them to the driver-side coordinator only;
generators never run on executors).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from floodmark.core.clock import Clock
from floodmark.core.time import Duration, positive_millis, to_millis
from floodmark.core.watermarks.alignment import WatermarkAlignment
from floodmark.core.watermarks.bounded import (
    AscendingTimestamps,
    BoundedOutOfOrderness,
    LegacyBoundedOutOfOrderness,
)
from floodmark.core.watermarks.generator import WatermarkGenerator
from floodmark.core.watermarks.idle_advancing import BoundedOutOfOrdernessWatermarkBasedOnEventTime
from floodmark.core.watermarks.idleness import WatermarksWithIdleness

TimestampAssigner = Callable[[Any, int | None], int]
"""``(record, previous_timestamp) -> timestamp_ms`` (Flink's ``SerializableTimestampAssigner``).

``previous_timestamp`` is the timestamp the record already carries, if any (for
example Kafka's record timestamp), else ``None``.
"""


@dataclass(frozen=True)
class WatermarkStrategy:
    """A recipe for per-split watermark generators plus an optional timestamp assigner.

    :arg generator_factory: builds a fresh generator for one split.
    :arg idle_timeout_ms: if set, each generator is wrapped in
        :class:`WatermarksWithIdleness` with this timeout.
    :arg timestamp_assigner: extracts the timestamp from a record; ``None`` means
        the record's existing timestamp is used.
    :arg idle_advance: with idleness, an idle split's watermark goes on with processing time.
    :arg alignment: the source's splits are paused while they run ahead of their alignment group
        (:mod:`~floodmark.core.watermarks.alignment`); None: never.
    :arg recipe: how the generator is made, as data (``{"kind": "bounded_out_of_orderness", "bound": 50000}``):
        set by the ``for_*`` constructors, so that a job's definition can be written down and read back
        (:mod:`floodmark.driver.definition`); None for a factory that cannot be named (a lambda).
    """

    generator_factory: Callable[[], WatermarkGenerator]
    idle_timeout_ms: int | None = None
    timestamp_assigner: TimestampAssigner | None = None
    description: str = "custom generator"
    alignment: WatermarkAlignment | None = None
    idle_advance: bool = False
    recipe: Mapping[str, Any] | None = field(default=None, compare=False)

    # --- built-in strategies -------------------------------------------------------
    @staticmethod
    def for_bounded_out_of_orderness(bound: Duration) -> WatermarkStrategy:
        """Watermark = highest timestamp - ``bound`` - 1 (see :class:`BoundedOutOfOrderness`)."""
        BoundedOutOfOrderness(bound)  # validate now, not when the first split appears
        return WatermarkStrategy(
            lambda: BoundedOutOfOrderness(bound),
            description=f"bounded out-of-orderness {bound}",
            recipe={"kind": "bounded_out_of_orderness", "bound": to_millis(bound)},
        )

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        """Watermark = highest timestamp - 1 (see :class:`AscendingTimestamps`)."""
        return WatermarkStrategy(
            AscendingTimestamps, description="monotonous timestamps", recipe={"kind": "monotonous_timestamps"}
        )

    @staticmethod
    def for_legacy_bounded_out_of_orderness(bound: Duration, punctuated: bool = False) -> WatermarkStrategy:
        """Flink's legacy extractor: watermark = highest timestamp - ``bound``, never decreasing."""
        LegacyBoundedOutOfOrderness(bound)
        return WatermarkStrategy(
            lambda: LegacyBoundedOutOfOrderness(bound, punctuated),
            description=f"legacy bounded out-of-orderness {bound}",
            recipe={"kind": "legacy_bounded_out_of_orderness", "bound": to_millis(bound), "punctuated": punctuated},
        )

    @staticmethod
    def for_idle_advancing(bound: Duration, wait: Duration, interval: Duration = 200) -> WatermarkStrategy:
        """The idle-advancing generator (see :class:`BoundedOutOfOrdernessWatermarkBasedOnEventTime`)."""
        BoundedOutOfOrdernessWatermarkBasedOnEventTime(bound, wait, interval)
        return WatermarkStrategy(
            lambda: BoundedOutOfOrdernessWatermarkBasedOnEventTime(bound, wait, interval),
            description=f"idle-advancing bound={bound} wait={wait} interval={interval}",
            recipe={
                "kind": "idle_advancing",
                "bound": to_millis(bound),
                "wait": to_millis(wait),
                "interval": to_millis(interval),
            },
        )

    @staticmethod
    def for_generator(factory: Callable[[], WatermarkGenerator]) -> WatermarkStrategy:
        """A user-defined generator: ``factory()`` must return a new :class:`WatermarkGenerator`."""
        if not callable(factory):
            raise TypeError("for_generator needs a callable returning a new WatermarkGenerator")
        name = import_path(factory)
        return WatermarkStrategy(
            factory,
            description=getattr(factory, "__name__", "custom generator"),
            recipe=None if name is None else {"kind": "generator", "factory": name},
        )

    # --- decorations ----------------------------------------------------------------
    def with_idleness(self, timeout: Duration, advance: bool = False) -> WatermarkStrategy:
        """Mark a split idle after ``timeout`` of processing time without records, once caught up (a split whose
        source says it has records left to read is never idle); ``advance``: while idle, its watermark goes on with
        processing time, so that the last windows fire when every split has gone quiet
        (:class:`WatermarksWithIdleness`)."""
        return replace(self, idle_timeout_ms=positive_millis(timeout, "the idle timeout"), idle_advance=advance)

    def with_watermark_alignment(self, group: str, max_drift: Duration) -> WatermarkStrategy:
        """Pause a split while its watermark is more than ``max_drift`` ahead of the lowest watermark of the
        splits of every source in ``group`` (Flink's ``withWatermarkAlignment``; idle splits do not count; see
        :mod:`~floodmark.core.watermarks.alignment`). The runtime must be able to pause splits: on Spark, a
        Kafka source read with :func:`floodmark.spark.read_kafka` and a ``maxOffsetsPerTrigger``."""
        return replace(self, alignment=WatermarkAlignment.of(group, max_drift))

    def with_timestamp_assigner(self, assigner: TimestampAssigner) -> WatermarkStrategy:
        """Take each record's timestamp from ``assigner(record, previous_timestamp)``."""
        if not callable(assigner):
            raise TypeError("the timestamp assigner must be callable")
        return replace(self, timestamp_assigner=assigner)

    # --- use --------------------------------------------------------------------------
    def create_generator(self, clock: Clock) -> WatermarkGenerator:
        """A fresh generator for one split; ``clock`` drives idleness detection."""
        generator = self.generator_factory()
        if not isinstance(generator, WatermarkGenerator):
            raise TypeError(f"the generator factory returned {type(generator).__name__}, not a WatermarkGenerator")
        if self.idle_timeout_ms is not None:
            generator = WatermarksWithIdleness(generator, self.idle_timeout_ms, clock, self.idle_advance)
        return generator

    def extract_timestamp(self, record: Any, previous_timestamp: int | None = None) -> int:
        """The record's timestamp in ms: from the assigner, else ``previous_timestamp``.

        :raises ValueError: when there is no usable timestamp (callers route the
            record to the bad-record output with this message).
        """
        if self.timestamp_assigner is not None:
            timestamp = self.timestamp_assigner(record, previous_timestamp)
        else:
            timestamp = previous_timestamp
        if timestamp is None:
            raise ValueError("record has no timestamp")
        if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Integral):
            raise ValueError(f"timestamp must be int milliseconds, got {type(timestamp).__name__}")
        return int(timestamp)


def import_path(obj: Any) -> str | None:
    """``module:qualified.name`` of a module-level function or class (what ``importlib`` can find again); None
    for a lambda, a nested function or an instance."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    return f"{module}:{qualname}"
