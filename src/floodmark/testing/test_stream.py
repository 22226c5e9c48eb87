"""``TestStream``: a scripted input for whole pipelines (Beam's ``TestStream``).

Build a script of events - records, watermark moves, processing-time moves -
then run it through one window spec or a chain of stages::

    stream = (TestStream()
              .add_elements([("a", 1), ("b", 12)], key="user1")
              .advance_watermark_to(15)
              .advance_processing_time(1_000)
              .advance_watermark_to_infinity())
    result = stream.run([Stage("sessions", spec1), Stage("totals", spec2)])
    result.panes("totals")
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from floodmark.core.pipeline import Stage, StagedPipeline
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP


@dataclass(frozen=True)
class _AddElements:
    elements: tuple[tuple[Any, Any], ...]
    key: Hashable


@dataclass(frozen=True)
class _AdvanceWatermark:
    watermark: int


@dataclass(frozen=True)
class _AdvanceProcessingTime:
    processing_time: int


class TestStream:
    """A replayable script of records, watermarks and processing times."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.events: list[_AddElements | _AdvanceWatermark | _AdvanceProcessingTime] = []

    def add_elements(self, elements: Iterable[tuple[Any, Any]], key: Hashable = None) -> TestStream:
        """Records ``(value, timestamp_ms)`` of ``key``, in arrival order."""
        self.events.append(_AddElements(tuple(elements), key))
        return self

    def advance_watermark_to(self, watermark: int) -> TestStream:
        self.events.append(_AdvanceWatermark(watermark))
        return self

    def advance_watermark_to_infinity(self) -> TestStream:
        return self.advance_watermark_to(MAX_TIMESTAMP)

    def advance_processing_time(self, processing_time: int) -> TestStream:
        """Move processing time to ``processing_time`` (absolute ms)."""
        self.events.append(_AdvanceProcessingTime(processing_time))
        return self

    def run(self, pipeline: WindowSpec | Sequence[Stage]) -> StagedPipeline:
        """Play the script into a fresh pipeline; returns it for inspection."""
        stages = [Stage("window", pipeline)] if isinstance(pipeline, WindowSpec) else list(pipeline)
        runner = StagedPipeline(stages)
        for event in self.events:
            if isinstance(event, _AddElements):
                fields = runner.stages[0].spec.aggregate.fields
                runner.add_records(RecordBatch.from_elements(event.elements, event.key, fields))
            elif isinstance(event, _AdvanceWatermark):
                runner.advance_watermark(event.watermark)
            else:
                runner.advance_processing_time(event.processing_time)
        return runner
