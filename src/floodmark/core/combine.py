"""The map-side combine: partial aggregates of on-time records, made before a shuffle.

Native Spark aggregates per (window, key) before its shuffle; floodmark does the
same for specs of the columnar policy (``WindowSpec.combines_records``). Which
records may be combined, and how, is decided here once: the Spark runtime's
Arrow combiner (:mod:`floodmark.spark.map_side.combiner`) asks :func:`open_window_pairs`
and :func:`accumulator_reductions` and ships :class:`Partials` that
:meth:`~floodmark.core.window.WindowOperator.add_partials` merges.

The rule: a record all of whose windows are still open (the watermark has not
reached their max timestamp) and whose output times in them are not behind the
watermark (EARLIEST/LATEST: whether it holds then depends on the stage's output
watermark) can be combined: it only adds to its windows' accumulators, counts
and holds. Every other record must travel as a record: it
fires a LATE pane of its own, goes to the late output with its payload, or is a
bad record. Early count firings need the records themselves (a pane after
exactly n records, in arrival order), so those specs do not combine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from floodmark.core.assign import numeric_inputs, validate_timestamps
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.windows import window_reached


@dataclass(frozen=True)
class Partials:
    """Partial aggregates of on-time records, one row per (key, window): what a map-side combiner ships.

    :ivar keys: object array of keys. :ivar starts, ends: window bounds in ms
        (start inclusive, end exclusive). :ivar counts: records per row.
    :ivar hold: the rows' combined output time (the timestamp combiner's ``reduce``).
    :ivar accumulators: ``{column: array}`` in the spec's columnar layout (``AccumulatorColumn.name``).
    :ivar origin: for each row, the position of one of its records in the batch
        it was combined from (a runtime copies per-key columns from there), or ``None``.
    A (key, window) may appear in several rows (e.g. one per Spark partition);
    :meth:`~floodmark.core.window.WindowOperator.add_partials` combines them.
    """

    keys: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    counts: np.ndarray
    hold: np.ndarray
    accumulators: dict[str, np.ndarray]
    origin: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.keys)


def group_order(keys: np.ndarray, names: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort order grouping rows by (key, window) with arrival order kept inside groups; group heads; group ids.

    ``names`` tells a key's windows apart (``WindowAssigner.window_ids``: their starts, or ends).
    """
    codes, _ = pd.factorize(pd.Series(keys, dtype=object), use_na_sentinel=False)
    order = np.lexsort((np.arange(len(keys)), names, codes))
    codes, names = codes[order], names[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (codes[1:] != codes[:-1]) | (names[1:] != names[:-1])
    return order, first, np.cumsum(first) - 1


def group_keys(sorted_keys: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The key of each group (``first`` marks group heads in ``sorted_keys``), as an object array."""
    heads = np.empty(int(first.sum()), dtype=object)
    heads[:] = list(sorted_keys[first])
    return heads


def reduce_records(
    spec: WindowSpec,
    keys: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    out_times: np.ndarray,
    values: dict[str | None, np.ndarray],
) -> Partials:
    """Aggregate (record, window) pairs into one partial per (key, window); arrays are per pair."""
    layout = spec.columnar_layout
    assert layout is not None, "the spec has no columnar layout"
    order, first, group = group_order(keys, spec.window.window_ids(starts, ends))
    heads = order[first]
    bounds = np.flatnonzero(first)
    accumulators = {}
    for column in layout.columns:
        reduction = column.reduction
        v = np.asarray(values[column.field], dtype=np.float64)[order] if reduction.reads_values else None
        accumulators[column.name] = reduction.of_groups(v, group, bounds)
    return Partials(
        group_keys(np.asarray(keys, dtype=object)[order], first),
        starts[heads],
        ends[heads],
        np.bincount(group, minlength=len(heads)).astype(np.int64),
        spec.timestamp_combiner.reduce_at(np.asarray(out_times, dtype=np.int64)[order], bounds),
        accumulators,
        origin=heads,
    )


def reduce_partials(
    spec: WindowSpec, partials: Partials, grouping: tuple[np.ndarray, np.ndarray] | None = None
) -> Partials:
    """Combine partials of the same (key, window) into one row each, in arrival order within a group.

    :arg grouping: ``(order, first)`` of :func:`group_order` over ``partials``, when the caller has it.
    """
    if grouping is None:
        grouping = group_order(partials.keys, spec.window.window_ids(partials.starts, partials.ends))[:2]
    order, first = grouping
    if first.all():
        return partials
    bounds = np.flatnonzero(first)
    heads = order[first]
    layout = spec.columnar_layout
    assert layout is not None, "the spec has no columnar layout"
    accumulators = {c.name: c.reduction.reduce_at(partials.accumulators[c.name][order], bounds) for c in layout.columns}
    return Partials(
        group_keys(partials.keys[order], first),
        partials.starts[heads],
        partials.ends[heads],
        np.add.reduceat(partials.counts[order], bounds),
        spec.timestamp_combiner.reduce_at(partials.hold[order], bounds),
        accumulators,
    )


def open_window_pairs(
    spec: WindowSpec, watermark: int, timestamps: np.ndarray, rejected: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which (record, window) pairs can be aggregated before the shuffle, and which records cannot.

    See the module docstring for the rule; ``watermark`` is the one the operator
    will use for this batch (a higher one is safe: it only keeps more records raw).

    :arg timestamps: event times in ms, one per record.
    :arg rejected: records already known to be bad (e.g. an aggregate input that is not a finite number):
        they stay records, as do records whose timestamp is not usable.
    :returns: ``(rows, starts, ends, out_times, raw)``: per pair, the record's
        position, the window's bounds (start inclusive, end exclusive) and the
        record's output time in that window; ``raw`` are the positions of the
        records that must stay records, in order.
    """
    timestamps, bad, _ = validate_timestamps(timestamps)
    if rejected is not None:
        bad |= rejected
    good = np.flatnonzero(~bad)
    raw = bad.copy()
    assigned = spec.window.assign(timestamps[good])
    rows = good[assigned.record_index]
    out_times = spec.window.output_times(timestamps[rows], assigned.start, assigned.end)
    raw[rows[window_reached(assigned.end, watermark)]] = True
    if spec.timestamp_combiner is not TimestampCombiner.END_OF_WINDOW:
        # Whether an output time at or behind the watermark holds depends on the stage's output watermark,
        # which only the operator knows (TimestampCombiner.element_holds): such records travel as records.
        raw[rows[out_times <= watermark]] = True
    keep = ~raw[rows]
    rows, starts, ends, out_times = rows[keep], assigned.start[keep], assigned.end[keep], out_times[keep]
    return rows, starts, ends, out_times, np.flatnonzero(raw)


def accumulator_reductions(spec: WindowSpec) -> list[tuple[str, str, str | None]]:
    """How each accumulator column is made from records: ``[(column, reduction, field)]``.

    ``reduction`` is ``"count"`` (records per row, ``field`` None), ``"sum"``, ``"min"`` or ``"max"`` of
    ``field`` (as float64): Arrow's hash-aggregate names, so a runtime can aggregate with its own engine and
    still produce :class:`Partials` the operator merges.
    """
    layout = spec.columnar_layout
    assert layout is not None, "the spec has no columnar layout"
    return [(c.name, c.reduction.name, c.field) for c in layout.columns]


def accumulator_layout(spec: WindowSpec) -> list[tuple[str, type]]:
    """The accumulator columns of a columnar spec, ``[(name, numpy dtype)]`` (e.g. ``("total.v", float64)``)."""
    layout = spec.columnar_layout
    return [] if layout is None else [(c.name, c.reduction.dtype) for c in layout.columns]


def combine(spec: WindowSpec, watermark: int, batch: RecordBatch) -> tuple[Partials, np.ndarray]:
    """The map-side combine of ``batch``: partials of what can be combined, and the rest's positions.

    :returns: ``(partials, raw)``; ``raw`` are positions into ``batch``, in order.
    Feeding ``operator.add_partials(partials)`` and ``operator.add(batch[raw])``
    gives the same panes as ``operator.add(batch)`` (sums of floats up to rounding).
    """
    if not spec.combines_records:
        raise ValueError("this spec cannot be combined before the shuffle (see WindowSpec.combines_records)")
    layout = spec.columnar_layout
    assert layout is not None
    numbers, rejected, _ = numeric_inputs(layout.value_fields, batch.columns, len(batch))
    rows, starts, ends, out_times, raw = open_window_pairs(spec, watermark, batch.timestamps, rejected)
    keys = np.asarray(batch.keys, dtype=object) if not isinstance(batch.keys, np.ndarray) else batch.keys
    values = {field: valid[rows] for field, valid in numbers.items()}
    partials = reduce_records(spec, keys[rows], starts, ends, out_times, values)
    origin = rows[partials.origin] if partials.origin is not None else None
    return dataclasses.replace(partials, origin=origin), raw
