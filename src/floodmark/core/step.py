"""The window operator as a pure step function, on the fastest implementation that fits the spec.

Runtimes call :func:`step` once per micro-batch and bucket: ``(state, records,
watermark, processing time) -> (state, output)``. :func:`make_operator` picks
the columnar operator (:mod:`floodmark.core.columnar`) when the spec has a
columnar form (``WindowSpec.is_columnar``) and the general one
(:mod:`floodmark.core.operator`) otherwise; both give the same panes
(property-tested).
"""

from __future__ import annotations

import pickle

from floodmark.core.columnar import ColumnarWindowOperator
from floodmark.core.combine import Partials
from floodmark.core.emitted import Emitted
from floodmark.core.operator import WindowOperator
from floodmark.core.records import RecordBatch
from floodmark.core.segments import SegmentLoader
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP

Operator = WindowOperator | ColumnarWindowOperator

OPERATORS: dict[str, type[Operator]] = {"general": WindowOperator, "columnar": ColumnarWindowOperator}
"""The two execution strategies by name (``WindowHarness(operator=...)``)."""


def operator_class(spec: WindowSpec, kind: str = "auto") -> type[Operator]:
    """The operator class for ``spec``: ``"general"``, ``"columnar"`` or ``"auto"`` (the fastest that fits)."""
    if kind == "auto":
        return ColumnarWindowOperator if spec.is_columnar else WindowOperator
    if kind not in OPERATORS:
        raise ValueError(f"unknown operator {kind!r}: use 'general', 'columnar' or 'auto'")
    return OPERATORS[kind]


def make_operator(
    spec: WindowSpec, watermark: int = MIN_TIMESTAMP, processing_time: int = 0, deferred: bool = False
) -> Operator:
    """The fastest operator that implements ``spec`` exactly; ``deferred``: one that keeps partials apart until
    the watermark reaches their windows, where the spec allows (:mod:`floodmark.core.segments`)."""
    kind = operator_class(spec)
    if kind is ColumnarWindowOperator:
        return ColumnarWindowOperator(spec, watermark, processing_time, deferred)
    return kind(spec, watermark, processing_time)


def restore_operator(spec: WindowSpec, snapshot: bytes, load_segment: SegmentLoader | None = None) -> Operator:
    """The operator that took ``snapshot`` (or the head of :meth:`ColumnarWindowOperator.snapshot_parts`, whose
    segments ``load_segment`` reads), restored.

    A snapshot stays with the operator that took it: the general operator's (one accumulator object per
    window, column ``acc``) resumes on the general operator even where :func:`make_operator` now picks the
    columnar one, so state written before sessions ran on the columnar operator keeps its panes.
    """
    data = pickle.loads(snapshot)
    kind = WindowOperator if "acc" in data["cols"] else operator_class(spec)
    if kind is ColumnarWindowOperator:
        return ColumnarWindowOperator.from_data(spec, data, load_segment is not None, load_segment)
    return kind.from_data(spec, data)


def step(
    spec: WindowSpec,
    snapshot: bytes | None,
    batch: RecordBatch | None,
    watermark: int,
    processing_time: int,
    partials: Partials | None = None,
) -> tuple[bytes, Emitted, Operator]:
    """The operator as a pure function: ``(state, records, watermark, processing time) -> (state, output)``.

    ``snapshot=None`` starts from an empty state (see :func:`advance` for the order). Returns the new snapshot,
    what was emitted, and the live operator (for holds and gauges).
    """
    operator = make_operator(spec) if snapshot is None else restore_operator(spec, snapshot)
    out = advance(operator, batch, watermark, processing_time, partials)
    return operator.snapshot(), out, operator


def advance(
    operator: Operator,
    batch: RecordBatch | None,
    watermark: int,
    processing_time: int,
    partials: Partials | None = None,
) -> Emitted:
    """One micro-batch of ``operator``: advances processing time, then the watermark, then adds the records;
    ``partials`` (from :func:`floodmark.core.combine.combine` with the same watermark) are added before the
    records."""
    out = operator.advance_processing_time(processing_time)
    out.extend(operator.advance_watermark(watermark))
    if partials is not None and len(partials):
        if not isinstance(operator, ColumnarWindowOperator):
            raise ValueError("partial aggregates need a spec of the columnar operator")
        out.extend(operator.add_partials(partials))
    if batch is not None and len(batch):
        out.extend(operator.add_records(batch))
    return out
