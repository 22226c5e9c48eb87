"""Flink's bounded out-of-orderness and ascending-timestamps generators."""

from __future__ import annotations

from typing import Any

from floodmark.core.time import MIN_TIMESTAMP, Duration, format_duration, non_negative_millis
from floodmark.core.watermarks.generator import WatermarkGenerator, highest_seen
from floodmark.core.watermarks.generator_view import GeneratorView
from floodmark.core.watermarks.output import WatermarkOutput


class BoundedOutOfOrderness(WatermarkGenerator):
    """Watermark = highest timestamp seen - bound - 1 (Flink's ``BoundedOutOfOrdernessWatermarks``).

    A record whose timestamp is at most ``bound`` ms behind the highest timestamp
    seen so far is never late. Emits periodically only; before any record the
    watermark is ``MIN_TIMESTAMP``. Flink's own test vector: bound 10, records
    12345, 12300, 12340, 12280 -> watermark 12334.

    :arg bound: the out-of-orderness bound (ms or timedelta, >= 0).
    """

    def __init__(self, bound: Duration) -> None:
        self.bound = non_negative_millis(bound, "the out-of-orderness bound")
        # Chosen so that the first emitted watermark is exactly MIN_TIMESTAMP.
        self.max_timestamp = MIN_TIMESTAMP + self.bound + 1

    def on_event(self, event: Any, timestamp: int, output: WatermarkOutput) -> None:
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(self.max_timestamp - self.bound - 1)

    def describe(self) -> str:
        return f"bounded out-of-orderness, bound {format_duration(self.bound)}"

    def view(self) -> GeneratorView:
        highest = self._highest()
        return GeneratorView(self.describe(), self.bound, highest, highest is not None, watermark_lag=self.bound + 1)

    def _highest(self) -> int | None:
        # The initial value is a sentinel just above MIN (so that the first watermark is MIN): no record yet.
        return None if self.max_timestamp == MIN_TIMESTAMP + self.bound + 1 else self.max_timestamp

    def snapshot(self) -> dict[str, Any]:
        """What it has seen, not its bound (:func:`~floodmark.core.watermarks.generator.highest_seen`)."""
        return {"max_timestamp": self._highest()}

    def restore(self, state: dict[str, Any]) -> None:
        highest = highest_seen(state, sentinel_above_bound=1)
        self.max_timestamp = MIN_TIMESTAMP + self.bound + 1 if highest is None else highest


class AscendingTimestamps(BoundedOutOfOrderness):
    """Watermark = highest timestamp seen - 1 (Flink's ``AscendingTimestampsWatermarks``).

    For inputs whose timestamps never decrease within a split; a record with a
    lower timestamp than an earlier one of its split may be late.
    """

    def __init__(self) -> None:
        super().__init__(0)

    def describe(self) -> str:
        return "ascending timestamps"


class LegacyBoundedOutOfOrderness(WatermarkGenerator):
    """Flink's legacy ``BoundedOutOfOrdernessTimestampExtractor`` (the clickstream job's): watermark = max - bound.

    The pre-1.11 Flink extractor: note the missing ``- 1`` compared with
    :class:`BoundedOutOfOrderness`, so a record exactly ``bound`` behind the
    maximum is already late. The emitted value never falls below the last one.

    :arg bound: the out-of-orderness bound (ms or timedelta, >= 0).
    :arg punctuated: also emit after every record, as the clickstream job's source-side
        variant does (``ctx.emitWatermark`` per record); periodic only by default.
    """

    def __init__(self, bound: Duration, punctuated: bool = False) -> None:
        self.bound = non_negative_millis(bound, "the out-of-orderness bound")
        self.punctuated = punctuated
        self.current_max_timestamp = MIN_TIMESTAMP + self.bound
        self.last_emitted_watermark = MIN_TIMESTAMP

    def _current_watermark(self) -> int:
        potential = self.current_max_timestamp - self.bound
        if potential >= self.last_emitted_watermark:
            self.last_emitted_watermark = potential
        return self.last_emitted_watermark

    def on_event(self, event: Any, timestamp: int, output: WatermarkOutput) -> None:
        if timestamp > self.current_max_timestamp:
            self.current_max_timestamp = timestamp
        if self.punctuated:
            output.emit_watermark(self._current_watermark())

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(self._current_watermark())

    def describe(self) -> str:
        return f"legacy bounded out-of-orderness (max - bound), bound {format_duration(self.bound)}"

    def view(self) -> GeneratorView:
        highest = self._highest()
        # watermark = max - bound (no - 1)
        return GeneratorView(self.describe(), self.bound, highest, highest is not None, watermark_lag=self.bound)

    def _highest(self) -> int | None:
        return None if self.current_max_timestamp == MIN_TIMESTAMP + self.bound else self.current_max_timestamp

    def snapshot(self) -> dict[str, Any]:
        """What it has seen and emitted, not its bound (:func:`~floodmark.core.watermarks.generator.highest_seen`)."""
        return {"max_timestamp": self._highest(), "last_emitted_watermark": self.last_emitted_watermark}

    def restore(self, state: dict[str, Any]) -> None:
        highest = highest_seen(state, sentinel_above_bound=0, field="current_max_timestamp")
        self.current_max_timestamp = MIN_TIMESTAMP + self.bound if highest is None else highest
        self.last_emitted_watermark = state.get("last_emitted_watermark", MIN_TIMESTAMP)
