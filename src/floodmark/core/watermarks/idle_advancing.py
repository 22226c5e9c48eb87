"""The idle-advancing generator: event time keeps moving when input stops."""

from __future__ import annotations

from typing import Any

from floodmark.core.time import MIN_TIMESTAMP, Duration, format_duration, non_negative_millis, positive_millis
from floodmark.core.watermarks.generator import WatermarkGenerator
from floodmark.core.watermarks.generator_view import GeneratorView
from floodmark.core.watermarks.output import WatermarkOutput


class BoundedOutOfOrdernessWatermarkBasedOnEventTime(WatermarkGenerator):
    """Bounded out-of-orderness that advances on its own after ``wait`` of silence.

    A Flink user's ``BoundedOutOfOrdernessWatermarkBasedOnEventTime(bound, wait,
    interval)`` (a custom generator for a source gone quiet), with its exact arithmetic:

    * ``on_event``: ``max_ts = max(max_ts, ts)``; ``last_event = max_ts``;
      ``logical = max_ts``.
    * ``on_periodic_emit``: ``logical += interval``; if ``logical - last_event >
      wait`` (strictly): emit ``logical - bound - 1`` and set ``max_ts = logical``;
      otherwise emit ``max_ts - bound - 1``.

    Every periodic call is assumed to stand for ``interval`` ms of processing
    time, so ``interval`` must equal the auto-watermark interval the generator is
    driven with (the coordinator's ``periodic_interval``). A lone last record's
    window [start, end) closes once ``wait`` has passed and ``logical - bound - 1
    >= end - 1``: after about ``wait + (end - ts) + bound`` ms of silence.

    Interplay with idleness: while a split is idle its
    ``on_periodic_emit`` is not called, so ``wait`` must be shorter than the idle
    timeout or this generator never gets to advance; and ``wait`` longer than the
    window size delays every window of a quiet split by more than a window.

    :arg bound: out-of-orderness bound (>= 0).
    :arg wait: silence after which event time starts advancing (>= 0).
    :arg interval: the auto-watermark interval in ms (> 0), Flink's default 200.
    """

    def __init__(self, bound: Duration, wait: Duration, interval: Duration = 200) -> None:
        self.bound = non_negative_millis(bound, "the out-of-orderness bound")
        self.wait = non_negative_millis(wait, "wait")
        self.interval = positive_millis(interval, "interval")
        start = MIN_TIMESTAMP + self.bound + 1
        self.max_timestamp = start
        self.last_event_timestamp = start
        self.logical_time = start

    def on_event(self, event: Any, timestamp: int, output: WatermarkOutput) -> None:
        self.max_timestamp = max(self.max_timestamp, timestamp)
        self.last_event_timestamp = self.max_timestamp
        self.logical_time = self.max_timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        self.logical_time += self.interval
        if self.logical_time - self.last_event_timestamp > self.wait:
            output.emit_watermark(self.logical_time - self.bound - 1)
            self.max_timestamp = self.logical_time
        else:
            output.emit_watermark(self.max_timestamp - self.bound - 1)

    def describe(self) -> str:
        return (
            f"idle-advancing, bound {format_duration(self.bound)}, advances on its own after "
            f"{format_duration(self.wait)} without records"
        )

    def view(self) -> GeneratorView:
        highest = self._seen(self.last_event_timestamp)
        return GeneratorView(self.describe(), self.bound, highest, highest is not None, watermark_lag=self.bound + 1)

    def _seen(self, value: int) -> int | None:
        return None if value == MIN_TIMESTAMP + self.bound + 1 else value  # the initial sentinel: no record yet

    def snapshot(self) -> dict[str, Any]:
        """What it has seen and how far it advanced, not its settings
        (:func:`~floodmark.core.watermarks.generator.highest_seen`): ``max_timestamp`` is the highest record's
        timestamp, ``advanced_to`` the timestamp its watermark follows (moved on by silence), ``logical_time`` its
        clock of periodic calls."""
        return {
            "max_timestamp": self._seen(self.last_event_timestamp),
            "advanced_to": self._seen(self.max_timestamp),
            "logical_time": self._seen(self.logical_time),
        }

    def restore(self, state: dict[str, Any]) -> None:
        start = MIN_TIMESTAMP + self.bound + 1
        if "last_event_timestamp" in state:  # every attribute, as written before settings were kept out
            old_start = MIN_TIMESTAMP + int(state["bound"]) + 1
            state = {
                "max_timestamp": None if state["last_event_timestamp"] == old_start else state["last_event_timestamp"],
                "advanced_to": None if state["max_timestamp"] == old_start else state["max_timestamp"],
                "logical_time": None if state["logical_time"] == old_start else state["logical_time"],
            }
        highest = state.get("max_timestamp")
        # Another generator's snapshot has only the highest timestamp: as if that record had just arrived.
        advanced, logical = state.get("advanced_to", highest), state.get("logical_time", highest)
        self.last_event_timestamp = start if highest is None else highest
        self.max_timestamp = start if advanced is None else advanced
        self.logical_time = start if logical is None else logical
