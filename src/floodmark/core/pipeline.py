"""Windowed stages chained into a pipeline, with stage watermarks (seed 003).

Stage ``i``'s panes become stage ``i+1``'s records (key and value mapped by the
stage's ``output_key`` / ``output_value``, timestamp = the pane's output
timestamp), and stage ``i+1``'s input watermark is stage ``i``'s output
watermark: ``MIN(input watermark, hold)``, where the hold comes from the pane
timestamps the stage still owes (see :class:`~floodmark.core.timestamps.TimestampCombiner`).
With ``EARLIEST`` output timestamps an upstream session stage holds the
downstream watermark back until its sessions close - seed 003's example.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from floodmark.core.emitted import Emitted
from floodmark.core.operator import WindowOperator
from floodmark.core.panes import Pane
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks.stage import StageTimes, StageWatermark


@dataclass(frozen=True)
class Stage:
    """One windowed aggregation in a pipeline.

    :arg name: unique stage name. :arg spec: its windowing and aggregation.
    :arg output_key: ``pane -> key`` for the next stage (default: the pane's key).
    :arg output_value: ``pane -> value`` for the next stage (default: the pane's value).
    """

    name: str
    spec: WindowSpec
    output_key: Callable[[Pane], Hashable] | None = None
    output_value: Callable[[Pane], Any] | None = None


@dataclass
class StageResult:
    """Everything one stage emitted."""

    emitted: Emitted = field(default_factory=Emitted)
    watermarks: list[tuple[int, int, int]] = field(default_factory=list)
    """``(processing_time, input_watermark, output_watermark)`` after every step."""


class StagedPipeline:
    """A linear chain of windowed stages, driven like a single operator."""

    def __init__(self, stages: Sequence[Stage], processing_time: int = 0) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        self.stages = list(stages)
        self.operators = [WindowOperator(s.spec, MIN_TIMESTAMP, processing_time) for s in stages]
        self.watermarks = [StageWatermark(["input" if i == 0 else stages[i - 1].name]) for i in range(len(stages))]
        self.results = {s.name: StageResult() for s in stages}
        self.processing_time = processing_time
        self._input_watermark = MIN_TIMESTAMP

    def add_records(self, batch: RecordBatch) -> None:
        """Records into the first stage at the current watermark."""
        self._cascade(first=self.operators[0].add_records(batch))

    def advance_watermark(self, watermark: int) -> None:
        """The pipeline's input watermark moves to ``watermark``."""
        self._input_watermark = max(self._input_watermark, watermark)
        self._cascade()

    def advance_processing_time(self, processing_time: int) -> None:
        self.processing_time = max(self.processing_time, processing_time)
        pending = [op.advance_processing_time(self.processing_time) for op in self.operators]
        self._cascade(pending=pending)

    def stage_times(self, name: str) -> StageTimes:
        i = self._index(name)
        return self.watermarks[i].times(self.processing_time, self.operators[i].oldest_pending_processing_time())

    def panes(self, name: str | None = None) -> list[Pane]:
        """Panes of stage ``name`` (default: the last stage)."""
        return self.results[name or self.stages[-1].name].emitted.panes

    def _index(self, name: str) -> int:
        for i, stage in enumerate(self.stages):
            if stage.name == name:
                return i
        raise KeyError(f"no stage named {name!r}")

    def _cascade(self, first: Emitted | None = None, pending: list[Emitted] | None = None) -> None:
        carried = first
        for i, (stage, operator, marks) in enumerate(zip(self.stages, self.operators, self.watermarks, strict=True)):
            emitted = Emitted()
            if pending is not None:
                emitted.extend(pending[i])
            if i == 0:
                if carried is not None:
                    emitted.extend(carried)
                upstream_watermark = self._input_watermark
                upstream = "input"
            else:
                upstream = self.stages[i - 1].name
                upstream_watermark = self.watermarks[i - 1].output_watermark
                if carried is not None and carried.panes:
                    emitted.extend(operator.add_records(self._records_from(self.stages[i - 1], carried.panes)))
            marks.update_upstream(upstream, upstream_watermark)
            emitted.extend(operator.advance_watermark(marks.input_watermark))
            marks.update_output(operator.output_hold())
            result = self.results[stage.name]
            result.emitted.extend(emitted)
            result.watermarks.append((self.processing_time, marks.input_watermark, marks.output_watermark))
            carried = emitted

    @staticmethod
    def _records_from(stage: Stage, panes: list[Pane]) -> RecordBatch:
        keys = np.empty(len(panes), dtype=object)
        keys[:] = [stage.output_key(p) if stage.output_key else p.key for p in panes]
        values = np.empty(len(panes), dtype=object)
        values[:] = [stage.output_value(p) if stage.output_value else p.value for p in panes]
        timestamps = np.array([p.timestamp for p in panes], dtype=np.int64)
        return RecordBatch(keys, timestamps, {None: values})
