"""The window operator as a pure step function, on the fastest implementation that fits the spec.

Runtimes call :func:`step` once per micro-batch and bucket: ``(state, records,
watermark, processing time) -> (state, output)``. :func:`make_operator` picks
the columnar operator (:mod:`floodmark.core.columnar`) when it supports the
spec and the general one (:mod:`floodmark.core.operator`) otherwise; both give
the same panes (property-tested).
"""

from __future__ import annotations

from floodmark.core.columnar import ColumnarWindowOperator, Partials, supports
from floodmark.core.operator import Emitted, WindowOperator, WindowSpec
from floodmark.core.records import RecordBatch
from floodmark.core.time import MIN_TIMESTAMP

Operator = WindowOperator | ColumnarWindowOperator


def make_operator(spec: WindowSpec, watermark: int = MIN_TIMESTAMP, processing_time: int = 0) -> Operator:
    """The fastest operator that implements ``spec`` exactly."""
    if supports(spec):
        return ColumnarWindowOperator(spec, watermark, processing_time)
    return WindowOperator(spec, watermark, processing_time)


def restore_operator(spec: WindowSpec, snapshot: bytes) -> Operator:
    """An operator from a snapshot taken by the one :func:`make_operator` picks for ``spec``."""
    if supports(spec):
        return ColumnarWindowOperator.restore(spec, snapshot)
    return WindowOperator.restore(spec, snapshot)


def step(
    spec: WindowSpec,
    snapshot: bytes | None,
    batch: RecordBatch | None,
    watermark: int,
    processing_time: int,
    partials: Partials | None = None,
) -> tuple[bytes, Emitted, Operator]:
    """The operator as a pure function: ``(state, records, watermark, processing time) -> (state, output)``.

    Advances processing time, then the watermark, then adds the records (the
    micro-batch order); ``partials`` (from :func:`floodmark.core.columnar.combine`
    with the same watermark) are added before the records. ``snapshot=None`` starts from an empty state. Returns the
    new snapshot, what was emitted, and the live operator (for holds and gauges).
    """
    operator = make_operator(spec) if snapshot is None else restore_operator(spec, snapshot)
    out = operator.advance_processing_time(processing_time)
    out.extend(operator.advance_watermark(watermark))
    if partials is not None and len(partials):
        if not isinstance(operator, ColumnarWindowOperator):
            raise ValueError("partial aggregates need a spec of the columnar operator")
        out.extend(operator.add_partials(partials))
    if batch is not None and len(batch):
        out.extend(operator.add_records(batch))
    return operator.snapshot(), out, operator
