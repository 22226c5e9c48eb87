"""``WindowHarness``: drive one windowed aggregation by hand and look at its panes."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from floodmark.core.aggregates import Aggregate
from floodmark.core.emitted import Emitted
from floodmark.core.panes import AccumulationMode, Pane
from floodmark.core.records import BadRecord, LateRecord, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, Duration
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.triggers import Default, Trigger
from floodmark.core.window import WindowOperator
from floodmark.core.windows import Window, WindowAssigner


class WindowHarness:
    """One window operator with the watermark and processing time under your control.

    Example::

        h = WindowHarness(window=windows.Tumbling(10), aggregate=aggregates.count())
        h.add_elements([("a", 1), ("b", 3)], key="k")   # (value, timestamp ms)
        panes = h.advance_watermark_to(9)                # the ON_TIME pane of [0, 10)

    Every call returns the panes it fired; ``panes``, ``late`` and ``bad`` hold
    everything so far. The watermark and processing time start at MIN and 0;
    lower values than the current ones are ignored (they never go back).

    :arg policy: the operator's firing policy: ``"auto"`` (default: the one Spark would run, the columnar
        policy when the spec has a columnar form), ``"general"`` or ``"columnar"`` (a ``ValueError`` if the spec
        has no columnar form). Both give the same panes.
    """

    def __init__(
        self,
        window: WindowAssigner,
        aggregate: Aggregate,
        trigger: Trigger | None = None,
        allowed_lateness: Duration = 0,
        accumulation: AccumulationMode = AccumulationMode.DISCARDING,
        timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW,
        watermark: int = MIN_TIMESTAMP,
        processing_time: int = 0,
        policy: str = "auto",
    ) -> None:
        self.spec = WindowSpec(
            window=window,
            aggregate=aggregate,
            trigger=trigger if trigger is not None else Default(),
            allowed_lateness=allowed_lateness,
            accumulation=accumulation,
            timestamp_combiner=timestamp_combiner,
        )
        self.operator = WindowOperator(self.spec, watermark, processing_time, policy)
        self.panes: list[Pane] = []
        self.late: list[LateRecord] = []
        self.bad: list[BadRecord] = []

    def add_elements(self, elements: Iterable[tuple[Any, Any]], key: Hashable = None) -> list[Pane]:
        """Add ``(value, timestamp)`` pairs for ``key``, in order; returns the panes they fired."""
        batch = RecordBatch.from_elements(elements, key, self.spec.aggregate.fields)
        return self._collect(self.operator.add(batch))

    def add_batch(self, batch: RecordBatch) -> list[Pane]:
        """Add a columnar batch of many keys at once (what the runtimes do)."""
        return self._collect(self.operator.add(batch))

    def advance_watermark_to(self, watermark: int) -> list[Pane]:
        """Move the watermark up to ``watermark`` (ms); returns the panes that fired."""
        return self._collect(self.operator.advance_watermark(watermark))

    def advance_watermark_to_infinity(self) -> list[Pane]:
        """End of input: the watermark goes to MAX and every window fires and is cleared."""
        return self.advance_watermark_to(MAX_TIMESTAMP)

    def advance_processing_time_to(self, processing_time: int) -> list[Pane]:
        """Move processing time up to ``processing_time`` (ms); returns the panes that fired."""
        return self._collect(self.operator.advance_processing_time(processing_time))

    @property
    def watermark(self) -> int:
        return self.operator.watermark

    def open_windows(self, key: Hashable) -> set[Window]:
        """The windows of ``key`` that hold state (not yet garbage collected)."""
        return self.operator.table.windows_of(key)

    def output_watermark_hold(self) -> int | None:
        return self.operator.gauges().hold

    def _collect(self, emitted: Emitted) -> list[Pane]:
        panes = emitted.all_panes()
        self.panes.extend(panes)
        self.late.extend(emitted.late)
        self.bad.extend(emitted.bad)
        return panes
