"""Panes packed many per row (``spark/pane_blocks.py``) come back as the row form, nulls included, through the
conversion Spark's worker applies (no Spark session here: the JVM's explode is covered by every Spark test that
reads panes, and by the last test against Spark's own)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.conversion import PandasToArrowConversion
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType
from spark_helpers import explode_pane_blocks

from floodmark import aggregates, windows
from floodmark.core.spec import WindowSpec
from floodmark.spark import pane_blocks
from floodmark.spark import plan as p
from floodmark.spark.rows import conform

PLAN = p.RuntimePlan(
    spec=WindowSpec(windows.Tumbling(10), aggregates.several(n=aggregates.count(), lo=aggregates.min("v"))),
    key_columns=("k", "id"),
    key_types=(StringType(), LongType()),
    result_types=(("n", LongType()), ("lo", DoubleType())),
    numeric_fields=("v",),
    user_columns=("ts", "k", "id", "v"),
    max_future_skew_ms=None,
)


def row_form(panes: int) -> pd.DataFrame:
    """``panes`` pane rows (None keys, null ids and NaN minimums among them), a late record and a gauge."""
    return conform(list(row_form_parts(panes)), PLAN.output_schema())


def row_form_parts(panes: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """:func:`row_form`'s late record, panes and gauge, each a frame with only its own columns."""
    ids = [None if i % 7 == 3 else i for i in range(panes)]
    pane_rows = pd.DataFrame(
        {
            "fm_kind": p.PANE,
            "k": [None if i % 5 == 1 else f"key{i}" for i in range(panes)],
            "id": pd.array(ids, dtype="Int64"),
            "window_start": np.arange(panes, dtype=np.int64) * 10,
            "window_end": np.arange(panes, dtype=np.int64) * 10 + 10,
            "pane_timestamp": np.arange(panes, dtype=np.int64) * 10 + 9,
            "timing": "ON_TIME",
            "pane_index": np.zeros(panes, dtype=np.int64),
            "nonspeculative_index": np.zeros(panes, dtype=np.int64),
            "is_last": np.arange(panes) % 2 == 0,
            "n": np.arange(panes, dtype=np.int64) + 1,
            "lo": [np.nan if i % 4 == 0 else i / 2 for i in range(panes)],
        }
    )
    late = pd.DataFrame(
        [{"fm_kind": p.LATE, "k": "x", "id": 2**63 - 1, "window_start": 0, "window_end": 10, "event_time": 2**63 - 1}]
    )
    gauge = pd.DataFrame([{"fm_kind": p.GAUGE, "fm_bucket": 0, "fm_pane_count": panes}])
    return late, pane_rows, gauge


def through_spark_conversion(frame: pd.DataFrame, schema: StructType) -> pa.RecordBatch:
    """``frame`` as Spark 4.3's ``applyInPandasWithState`` worker turns it into Arrow (``construct_record_batch``)."""
    with warnings.catch_warnings():  # pandas' notice about that empty padding frame (see spark/processor.py)
        warnings.simplefilter("ignore", FutureWarning)
        padded = pd.concat([frame, pd.DataFrame(dict.fromkeys(schema.names), index=[])], ignore_index=True)
    batch = PandasToArrowConversion.convert(
        [padded],
        StructType([StructField("_1", schema)]),
        timezone="UTC",
        safecheck=True,
        arrow_cast=True,
        assign_cols_by_name=True,
        int_to_decimal_coercion_enabled=False,
    )
    return pa.RecordBatch.from_struct_array(batch.column(0))


def packed_parts(panes: int, pane_frames: int) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """:func:`pack`'s two inputs for :func:`row_form_parts`: its last ``pane_frames`` panes as a pane frame (the
    columnar operator's panes), the others as rows among the late record and the gauge."""
    late, pane_rows, gauge = row_form_parts(panes)
    split = panes - pane_frames
    return [late, pane_rows[:split], gauge], [pane_rows[split:]]


@pytest.mark.parametrize(
    "panes, per_row, pane_frames",
    [(0, 4, 0), (1, 4, 0), (1, 4, 1), (9, 4, 0), (9, 4, 6), (9, 4, 9), (8, 4, 3), (50, 65_536, 50)],
)
def test_packed_panes_come_back_as_the_row_form(monkeypatch, panes, per_row, pane_frames):
    monkeypatch.setattr(pane_blocks, "PANES_PER_ROW", per_row)
    rows = row_form(panes)
    schema = pane_blocks.schema(PLAN)
    packed = pane_blocks.pack(*packed_parts(panes, pane_frames), PLAN, schema)
    assert list(packed.columns) == schema.names
    assert (packed["fm_kind"] == p.PANE).sum() == -(-panes // per_row), "one PANE row per PANES_PER_ROW panes"
    assert not set(PLAN.pane_columns()) - set(PLAN.record_columns()) & set(schema.names), "no pane-only scalars"

    batch = through_spark_conversion(packed, schema)
    blocks = batch.filter(pc.equal(batch.column("fm_kind"), p.PANE))
    exploded = explode_pane_blocks(blocks, PLAN.pane_columns()).to_pydict()
    expected = rows[rows["fm_kind"] == p.PANE]
    for column in PLAN.pane_columns():
        want = [None if pd.isna(v) else v for v in expected[column].tolist()]
        assert exploded[column] == want, column

    if panes:
        first = blocks.column(pane_blocks.PREFIX + "timing").to_pylist()[0]
        assert first == ["ON_TIME"], "a value the whole block shares crosses once"
        assert len(blocks.column(pane_blocks.PREFIX + "k").to_pylist()[0]) == min(panes, per_row)

    others = batch.filter(pc.not_equal(batch.column("fm_kind"), p.PANE)).to_pylist()
    assert [r["fm_kind"] for r in others] == [p.LATE, p.GAUGE]
    assert others[0]["event_time"] == 2**63 - 1 and others[0]["id"] == 2**63 - 1, "longs stay exact"
    assert all(r[pane_blocks.PREFIX + "n"] is None for r in others)


def test_a_block_of_shared_values_nulls_included_comes_back_through_sparks_own_explode(spark):
    rows = row_form(6)
    is_pane = rows["fm_kind"] == p.PANE
    rows.loc[is_pane, "id"] = pd.NA  # a null every pane shares
    rows.loc[is_pane, "lo"] = 1.5
    schema = pane_blocks.schema(PLAN)
    packed = pane_blocks.pack([rows], [], PLAN, schema)
    blocks = packed[packed["fm_kind"] == p.PANE]
    assert [len(blocks[pane_blocks.PREFIX + c].iloc[0]) for c in ("k", "id", "lo", "window_start")] == [6, 1, 1, 6]
    frame = spark.createDataFrame(packed, schema)
    got = pane_blocks.unpack(frame.filter(frame.fm_kind == p.PANE), PLAN).toPandas()
    expected = rows[rows["fm_kind"] == p.PANE][PLAN.pane_columns()].reset_index(drop=True)
    assert got.columns.tolist() == PLAN.pane_columns()
    for column in PLAN.pane_columns():
        want = [None if pd.isna(v) else v for v in expected[column].tolist()]
        assert [None if pd.isna(v) else v for v in got[column].tolist()] == want, column
