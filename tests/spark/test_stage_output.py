"""A stage's panes, late records and dead letters leave its bucket as one OUTPUT carrier row (an Arrow IPC
block, ``spark/stateful/levels.py``) and come back in the sink as the row form, nulls and exact longs included, through
the conversion Spark's worker applies; the last tests go through Spark in the sink's reader
(``batch_sink.StageRoute``), once with the JVM generator ``fm_unpack`` and once with Python's ``mapInArrow``
(``spark/outputs/unpack.py``)."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.conversion import PandasToArrowConversion
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from floodmark import aggregates, windows
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.protocol.wire import KIND, OUTPUT, STAGE
from floodmark.spark import plan as p
from floodmark.spark.driver.session import EXTENSIONS, with_floodmark_extensions
from floodmark.spark.outputs.batch_sink import StageRoute
from floodmark.spark.outputs.sinks import Outputs
from floodmark.spark.outputs.unpack import UnpackOutput, use_jvm_unpack
from floodmark.spark.rows import conform
from floodmark.spark.stateful.bucket_host import BucketOutput
from floodmark.spark.stateful.levels import CARRIER, StageLevel

PLAN = p.RuntimePlan(
    p.StageSemantics(
        name="s",
        spec=WindowSpec(windows.Tumbling(10), aggregates.several(n=aggregates.count(), lo=aggregates.min("v"))),
        key_columns=("k", "id"),
        key_types=(StringType(), LongType()),
        result_types=(("n", LongType()), ("lo", DoubleType())),
        numeric_fields=("v",),
    ),
    p.InputBinding(user_columns=("ts", "k", "id", "v")),
)


def row_form(panes: int) -> pd.DataFrame:
    """``panes`` pane rows (None keys, null ids and NaN minimums among them), a late record and a gauge."""
    return conform(list(row_form_parts(panes)), PLAN.stage.output_schema())


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
    with warnings.catch_warnings():  # pandas' notice about that empty padding frame (see spark/stateful/levels.py)
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


def bucket_output(panes: int, pane_columns: int) -> BucketOutput:
    """:func:`row_form_parts` as a bucket's output: its last ``pane_columns`` panes as columns (the columnar
    operator's panes), the others as rows among the late record and the gauge."""
    late, pane_rows, gauge = row_form_parts(panes)
    split = panes - pane_columns
    return BucketOutput([late, pane_rows[:split], gauge], [dict(pane_rows[split:].items())])


def unpacked(batch: pa.RecordBatch) -> pd.DataFrame:
    """The OUTPUT rows of carrier ``batch`` unpacked as the sink unpacks them (``UnpackOutput``)."""
    schema = to_arrow(PLAN.stage.emitted_schema())
    return pa.Table.from_batches(list(UnpackOutput("s", None, schema)([batch])), schema=schema).to_pandas(
        types_mapper={pa.int64(): pd.Int64Dtype()}.get
    )


def to_arrow(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema)


@pytest.mark.parametrize("panes, pane_columns", [(0, 0), (1, 0), (1, 1), (9, 0), (9, 6), (9, 9), (50, 50)])
def test_a_buckets_output_comes_back_as_the_row_form(panes, pane_columns):
    rows = row_form(panes)
    level = StageLevel({"s": PLAN}, {}, ["s"])
    carried = level.carry("s", 0, bucket_output(panes, pane_columns))
    assert list(carried.columns) == CARRIER.names
    assert (carried[KIND] == OUTPUT).sum() == 1, "one OUTPUT block per bucket and batch"
    batch = through_spark_conversion(carried, CARRIER)
    assert set(batch.column(STAGE).to_pylist()) == {"s"}

    got = unpacked(batch)
    expected = rows[rows["fm_kind"].isin([p.PANE, p.LATE])].reset_index(drop=True)
    assert got.columns.tolist() == PLAN.stage.emitted_schema().names
    for column in PLAN.stage.emitted_schema().names:
        want = [None if pd.isna(v) else v for v in expected[column].tolist()]
        assert [None if pd.isna(v) else v for v in got[column].tolist()] == want, column
    late = got[got["fm_kind"] == p.LATE].iloc[0]
    assert late["event_time"] == 2**63 - 1 and late["id"] == 2**63 - 1, "longs stay exact"

    small = batch.filter(pc.not_equal(batch.column(KIND), OUTPUT)).to_pylist()
    assert [(r[KIND], r["fm_pane_count"]) for r in small] == [(p.GAUGE, panes)]


@pytest.fixture(params=["jvm", "python"])
def jvm_unpack(request, spark) -> bool:
    """Both of the sink's readers: the JVM generator (registered on the tests' session) and Python's."""
    if request.param == "jvm":
        assert use_jvm_unpack(spark), "the tests' session loads floodmark's jar"
    return request.param == "jvm"


def test_panes_nulls_included_come_back_through_sparks_own_unpacking(spark, jvm_unpack, tmp_path):
    rows = row_form(6)
    is_pane = rows["fm_kind"] == p.PANE
    rows.loc[is_pane, "id"] = pd.NA  # a null every pane shares
    rows.loc[is_pane, "lo"] = 1.5
    level = StageLevel({"s": PLAN}, {}, ["s"])
    carried = level.carry("s", 0, BucketOutput([rows], []))
    frame = spark.createDataFrame(carried, CARRIER)
    route = StageRoute(PLAN.stage, Outputs.of(str(tmp_path)), jvm_unpack)
    got = route.batch(p.PANE, frame, batch_id=0).rows.toPandas()
    expected = rows[is_pane][PLAN.stage.pane_columns()].reset_index(drop=True)
    assert got.columns.tolist() == [*PLAN.stage.pane_columns(), "window_start_time", "window_end_time"]
    for column in PLAN.stage.pane_columns():
        want = [None if pd.isna(v) else v for v in expected[column].tolist()]
        assert [None if pd.isna(v) else v for v in got[column].tolist()] == want, column


def test_window_bounds_become_timestamps_and_the_global_windows_null(spark, jvm_unpack, tmp_path):
    """``window_start_time`` / ``window_end_time`` are the bounds as Spark timestamps; the global window's
    bounds (MIN and MAX ms) lie beyond Spark's timestamp range and are null, not a failed batch."""
    rows = row_form(2)
    is_pane = rows["fm_kind"] == p.PANE
    rows.loc[rows.index[is_pane][1], ["window_start", "window_end"]] = [MIN_TIMESTAMP, MAX_TIMESTAMP]
    carried = StageLevel({"s": PLAN}, {}, ["s"]).carry("s", 0, BucketOutput([rows], []))
    route = StageRoute(PLAN.stage, Outputs.of(str(tmp_path)), jvm_unpack)
    got = route.batch(p.PANE, spark.createDataFrame(carried, CARRIER), batch_id=0).rows.collect()
    first, global_window = sorted(got, key=lambda row: row["window_end"])
    assert first["window_start_time"] == datetime.fromtimestamp(0, UTC).replace(tzinfo=None)
    assert first["window_end_time"] == datetime.fromtimestamp(0.01, UTC).replace(tzinfo=None)
    assert (global_window["window_start"], global_window["window_end"]) == (MIN_TIMESTAMP, MAX_TIMESTAMP)
    assert global_window["window_start_time"] is None and global_window["window_end_time"] is None


def test_both_readers_give_the_same_rows_of_every_kind_in_the_same_order(spark, tmp_path):
    """Panes (nulls, NaN, exact longs), late records and no dead letters, from two buckets' blocks of two stages:
    the JVM generator and Python's ``mapInArrow`` give equal rows, in the same order, with the same types."""
    rows = row_form(40)
    other = row_form(3)
    level = StageLevel({"s": PLAN}, {}, ["s"])
    carried = pd.concat(
        [
            level.carry("s", 0, BucketOutput([rows.iloc[:20]], [])),
            level.carry("s", 1, BucketOutput([rows.iloc[20:]], [])),
            level.carry("s", 2, BucketOutput([other], [])).assign(**{STAGE: "another stage"}),
        ],
        ignore_index=True,
    )
    frame = spark.createDataFrame(carried, CARRIER).coalesce(1)
    assert use_jvm_unpack(spark)
    for kind in (p.PANE, p.LATE, p.BAD):
        jvm = StageRoute(PLAN.stage, Outputs.of(str(tmp_path)), jvm_unpack=True).batch(kind, frame, 0).rows
        python = StageRoute(PLAN.stage, Outputs.of(str(tmp_path)), jvm_unpack=False).batch(kind, frame, 0).rows
        assert jvm.schema == python.schema, kind
        got, want = jvm.collect(), python.collect()
        assert len(got) == int((rows["fm_kind"] == kind).sum()), kind
        assert [r.asDict() for r in got] == [r.asDict() for r in want], kind


def test_the_session_has_floodmarks_functions_from_its_extensions(spark):
    """floodmark's sessions carry ``floodmark.Extensions``: its SQL functions exist from the start, in every session
    of the JVM, without a py4j registration (what a Spark Connect server needs); other extensions are kept."""
    assert EXTENSIONS in spark.conf.get("spark.sql.extensions").split(",")
    fresh = spark.newSession()  # its own function registry: nothing registered on it through py4j
    names = {f.name for f in fresh.catalog.listFunctions() if f.name.startswith("fm_")}
    assert {"fm_unpack", "fm_batch_watermark", "fm_batch_processing_time", "fm_row_position"} <= names
    assert fresh.sql("select fm_try_error(1 / 0) as e").first()["e"].startswith("[DIVIDE_BY_ZERO]")
    delta = "io.delta.sql.DeltaSparkSessionExtension"
    assert with_floodmark_extensions(delta) == f"{delta},{EXTENSIONS}"
    assert with_floodmark_extensions(f"{EXTENSIONS}, {delta}") == f"{EXTENSIONS},{delta}"
    assert with_floodmark_extensions(None) == EXTENSIONS
