"""The window operator as a pure step function: ``(state, records, watermark, processing time) -> (state, output)``.

Runtimes call :func:`step` (or :func:`advance` on a live operator) once per micro-batch and bucket.
"""

from __future__ import annotations

from floodmark.core.combine import Partials
from floodmark.core.emitted import Emitted
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.window.operator import WindowOperator, restore_operator


def step(
    spec: WindowSpec,
    snapshot: bytes | None,
    batch: RecordBatch | None,
    watermark: int,
    processing_time: int,
    partials: Partials | None = None,
) -> tuple[bytes, Emitted, WindowOperator]:
    """The operator as a pure function: ``(state, records, watermark, processing time) -> (state, output)``.

    ``snapshot=None`` starts from an empty state (see :func:`advance` for the order). Returns the new snapshot,
    what was emitted, and the live operator (for holds and gauges).
    """
    operator = WindowOperator(spec) if snapshot is None else restore_operator(spec, snapshot)
    out = advance(operator, batch, watermark, processing_time, partials)
    return operator.snapshot(), out, operator


def advance(
    operator: WindowOperator,
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
        out.extend(operator.add_partials(partials))
    if batch is not None and len(batch):
        out.extend(operator.add(batch))
    return out
