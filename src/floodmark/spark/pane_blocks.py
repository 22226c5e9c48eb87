"""How a bucket's panes cross from its Python worker to the JVM: many panes per row, as arrays.

Spark 4.3's ``applyInPandasWithState`` worker pays in Python for every row a
group returns (pyspark/worker.py, ``construct_record_batch``): a count column
built from Python lists, four state columns padded to the row count with
object NaN that pandas then checks value by value, and the conversion of every
column to Arrow. On a flush of 1M panes that was ~2 s of Python per 125k panes,
~8x what the core takes to fire them; and every row then crossed the JVM's row
machinery with all of the output's columns (most of them null for a pane).

So a single-stage bucket returns its panes as blocks: one PANE row per up to
:data:`PANES_PER_ROW` panes, carrying its pane count in ``fm_pane_count`` and
one array column per pane column (``fm_panes_<column>``): element i is pane i's
value, or the array has a single element, the value of every pane of the block.
Spark's worker turns every array into a Python list before Arrow sees it
(``convert_array``), so a column that is the same for the whole block (the
window bounds, timing and indexes of a flush, often) crosses as one value. The
sink turns blocks back into one row per pane in JVM code (an index exploded
from ``sequence(0, count - 1)``, then each array's element i or its only one).
Late records, dead letters, STATS and GAUGE rows stay one row each (rare, or one
per split and bucket); pane-only scalar columns are not in the output at all.
:func:`pack` (the worker) and :func:`unpack` (the sink) are the two halves of
this format; :func:`schema` is what Spark is told.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructField, StructType

from floodmark.spark import plan as p
from floodmark.spark.rows import conform

PREFIX = "fm_panes_"
"""Array column of pane column ``c``: ``fm_panes_c``."""

COUNT = "fm_pane_count"
"""On a PANE row: the number of panes it carries (on a GAUGE row: the panes the bucket emitted)."""

INDEX = "fm_pane_index"
"""The sink's index of a pane in its block (never output)."""

PANES_PER_ROW = 65_536
"""Panes per block row: keeps a row's arrays far below the JVM's array limits whatever a bucket fires."""


def schema(plan: p.RuntimePlan) -> StructType:
    """The rows a single-stage bucket returns to Spark: the row form (:meth:`RuntimePlan.output_schema`)
    without its pane-only columns, plus one array column per pane column."""
    row_form = plan.output_schema()
    pane_only = set(plan.pane_columns()) - set(plan.record_columns())
    fields = [f for f in row_form.fields if f.name not in pane_only]
    fields += [StructField(PREFIX + c, ArrayType(row_form[c].dataType)) for c in plan.pane_columns()]
    return StructType(fields)


def pack(
    parts: Sequence[pd.DataFrame], pane_frames: Sequence[pd.DataFrame], plan: p.RuntimePlan, spark_schema: StructType
) -> pd.DataFrame:
    """A bucket's output -> ``spark_schema`` (:func:`schema`), its panes in blocks.

    :arg parts: rows of any kind in the row form's columns (:meth:`RuntimePlan.output_schema`; some columns may
        be missing: null), PANE rows included. :arg pane_frames: more panes, in the row form's pane columns.
    """
    rows = conform(parts, plan.output_schema())
    is_pane = rows["fm_kind"].to_numpy(dtype=object) == p.PANE
    count = int(is_pane.sum()) + sum(len(frame) for frame in pane_frames)
    if not count:
        return conform([rows], spark_schema)
    panes = conform([rows.loc[is_pane], *pane_frames], _pane_schema(plan))
    starts = range(0, count, PANES_PER_ROW)
    block: dict[str, Any] = {
        "fm_kind": np.full(len(starts), p.PANE, dtype=object),
        COUNT: [min(PANES_PER_ROW, count - start) for start in starts],
    }
    for column in plan.pane_columns():
        values = _element_values(panes[column].array)
        cells = np.empty(len(starts), dtype=object)
        for i, start in enumerate(starts):
            values_of_block = values[start : start + PANES_PER_ROW]
            cells[i] = values_of_block[:1] if _all_equal(values_of_block) else values_of_block
        block[PREFIX + column] = cells
    return conform([rows.loc[~is_pane], pd.DataFrame(block, copy=False)], spark_schema)


def _pane_schema(plan: p.RuntimePlan) -> StructType:
    row_form = plan.output_schema()
    return StructType([row_form[c] for c in plan.pane_columns()])


def _element_values(column: Any) -> np.ndarray:
    """A pane column's values (a pandas array) as the elements of its arrays: numpy's own type when it has no
    nulls, else objects with None (a float's NaN is a null too, as in Spark's conversion of a scalar column)."""
    if isinstance(column.dtype, pd.api.extensions.ExtensionDtype) and column.dtype.kind in "iub":
        if not column.isna().any():
            return column.to_numpy(dtype=column.dtype.numpy_dtype)
        return column.to_numpy(dtype=object, na_value=None)
    return np.asarray(column)


def _all_equal(values: np.ndarray) -> bool:
    """Whether every value equals the first (None equals None; NaN equals nothing, so it stays per pane)."""
    if len(values) < 2:
        return True
    first = values[0]
    try:
        return bool(values[-1] == first) and bool((values == first).all())
    except (TypeError, ValueError):  # e.g. pandas' NA, whose comparisons have no truth value: keep every value
        return False


class Unpacking:
    """:func:`unpack` in two ``select`` calls for ``plan``, their expressions built once.

    A query's sink builds one and applies it to every batch: building PySpark Column expressions is what
    costs (several py4j round trips per operation, so they are parsed from SQL text: one call per column),
    and every ``select`` on a batch's DataFrame analyses the whole micro-batch plan again (~10-30 ms), hence
    two selects and no separate filter.

    :arg only: a SQL condition on the rows to unpack (e.g. ``fm_kind = 'PANE'``); other rows yield no pane
        (default: every row).
    """

    def __init__(self, plan: p.RuntimePlan, only: str | None = None) -> None:
        self.names = plan.pane_columns()
        indexes = f"sequence(0, CAST({COUNT} AS INT) - 1)"
        if only is not None:
            indexes = f"CASE WHEN {only} THEN {indexes} END"
        self.indexing = [
            *(F.expr(p.sql_name(PREFIX + name)) for name in self.names),
            F.expr(f"explode({indexes}) AS {INDEX}"),
        ]
        """First select: the block arrays, one row per pane index (no row for a row ``only`` leaves out)."""

    @staticmethod
    def element(name: str) -> str:
        """Second select's expression (SQL) of pane column ``name``: its array's element at the pane's index, or
        the array's only element (a value every pane of the block shares)."""
        values = p.sql_name(PREFIX + name)
        return f"CASE WHEN size({values}) = 1 THEN {values}[0] ELSE {values}[{INDEX}] END"

    def __call__(self, rows: DataFrame) -> DataFrame:
        elements = [F.expr(f"{self.element(name)} AS {p.sql_name(name)}") for name in self.names]
        return rows.select(*self.indexing).select(*elements)


def unpack(rows: DataFrame, plan: p.RuntimePlan) -> DataFrame:
    """PANE block rows -> one row per pane, in :meth:`RuntimePlan.pane_columns` (the JVM explodes them)."""
    return Unpacking(plan)(rows)
