"""``ProcessHarness``: drive a keyed process function by hand, without Spark, and look at what it emitted."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from floodmark.core.keyed_operator import KeyedRows
from floodmark.core.process import KeyedProcessFunction, KeyedProcessOperator, ProcessEmitted, ProcessOutput
from floodmark.core.records import BadRecord
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP


class ProcessHarness:
    """One keyed process function with the watermark and processing time under your control (Flink's
    ``KeyedOneInputStreamOperatorTestHarness``, in ms).

    Example::

        h = ProcessHarness(MyAlerts())
        h.add_elements([({"temp": 71}, 1_000)], key="sensor-1")   # (record, event time ms)
        h.advance_watermark_to(11_000)                           # event-time timers up to 11 s fire
        h.rows                                                   # what the function emitted, with key and time

    Every call returns the rows it emitted; ``rows`` and ``bad`` hold everything so far (a call of the function
    that raised is a dead letter in ``bad``). The watermark starts at MIN and processing time at 0; lower values
    than the current ones are ignored.
    """

    def __init__(self, function: KeyedProcessFunction, watermark: int = MIN_TIMESTAMP, processing_time: int = 0):
        self.operator = KeyedProcessOperator(function, watermark, processing_time)
        self.rows: list[ProcessOutput] = []
        self.bad: list[BadRecord] = []

    def add_elements(self, elements: Iterable[tuple[Any, Any]], key: Hashable = None) -> list[ProcessOutput]:
        """Records ``(record, event time)`` of ``key``, in arrival order; returns the rows they emitted."""
        pairs = list(elements)
        return self._collect(
            self.operator.add(KeyedRows([key] * len(pairs), [ts for _, ts in pairs], [record for record, _ in pairs]))
        )

    def advance_watermark_to(self, watermark: int) -> list[ProcessOutput]:
        """Move the input watermark up to ``watermark`` (ms); returns what the timers it reached emitted."""
        return self._collect(self.operator.advance_watermark(watermark))

    def advance_watermark_to_infinity(self) -> list[ProcessOutput]:
        """End of input: every pending event-time timer fires."""
        return self.advance_watermark_to(MAX_TIMESTAMP)

    def advance_processing_time_to(self, processing_time: int) -> list[ProcessOutput]:
        """Move processing time up to ``processing_time`` (ms); returns what the timers it reached emitted."""
        return self._collect(self.operator.advance_processing_time(processing_time))

    @property
    def watermark(self) -> int:
        return self.operator.watermark

    def state(self, key: Hashable) -> dict[str, Any]:
        """``key``'s state (a copy)."""
        return dict(self.operator.states.get(key, {}))

    def event_timers(self, key: Hashable) -> list[int]:
        """``key``'s pending event-time timers, ascending."""
        return sorted(self.operator.timers_of(key))

    def output_watermark_hold(self) -> int | None:
        """The earliest pending event-time timer: the stage's output watermark stays below it."""
        return self.operator.gauges().hold

    def _collect(self, emitted: ProcessEmitted) -> list[ProcessOutput]:
        self.rows.extend(emitted.rows)
        self.bad.extend(emitted.bad)
        return emitted.rows
