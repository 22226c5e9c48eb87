"""The Arrow batches of a query's Python steps (``floodmark.spark.driver.arrow_batches``): Spark sizes them by rows
alone only in the query's own session, only where every Python step reads fixed-width rows whose row limit keeps
a batch within the byte limit, and never in the session the user gave."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType
from spark_helpers import write_batches

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, FunctionSink, Outputs, SourceTime
from floodmark.spark.driver.arrow_batches import MAX_BYTES, UNSIZED, query_settings, row_bytes, runs_python

pytestmark = pytest.mark.spark

MAX_RECORDS = "spark.sql.execution.arrow.maxRecordsPerBatch"
NUMBERS = StructType([StructField("ts", LongType()), StructField("k", IntegerType()), StructField("v", DoubleType())])


def test_only_fixed_width_rows_within_the_byte_limit_are_sized_by_rows(spark):
    assert row_bytes(NUMBERS) == 1 + 9 + 5 + 9
    assert query_settings(spark, [NUMBERS, NUMBERS]) == {MAX_BYTES: UNSIZED}
    with_text = StructType([*NUMBERS.fields, StructField("name", StringType())])
    assert row_bytes(with_text) is None
    assert query_settings(spark, [NUMBERS, with_text]) == {}, "a text column keeps Spark's sizing"
    assert query_settings(spark, [NUMBERS, None]) == {}, "rows not known keep it"
    assert query_settings(spark, []) == {}, "no Python step: nothing to set"
    # 64 MiB / 24 bytes a row: 2,796,202 rows fit; one more row per batch could pass the byte limit first.
    for rows, sized_by_rows in ((2_796_202, True), (2_796_203, False), (0, False)):
        spark.conf.set(MAX_RECORDS, str(rows))
        try:
            assert (query_settings(spark, [NUMBERS]) == {MAX_BYTES: UNSIZED}) is sized_by_rows, rows
        finally:
            spark.conf.unset(MAX_RECORDS)


def test_a_source_that_runs_python_keeps_sparks_sizing(spark):
    frame = spark.range(3).select(F.col("id").alias("ts"), F.lit(1).alias("k"))
    assert not runs_python(frame)

    def doubled(batches):
        for batch in batches:
            yield pa.record_batch({"ts": pa.compute.multiply(batch.column(0), 2), "k": batch.column(1)})

    assert runs_python(frame.mapInArrow(doubled, "ts long, k int"))
    assert runs_python(frame.select(F.pandas_udf(lambda s: s + 1, "long")("ts").alias("ts")))


@pytest.mark.parametrize(
    ("host", "function", "sized_by_rows"), [("jvm", False, True), ("python", False, False), ("jvm", True, False)]
)
def test_the_setting_reaches_the_querys_session_only(spark, tmp_path, host, function, sized_by_rows):
    """The JVM host over numbers: the map side's rows are all the Python reads. The Python host reads carrier rows
    (binary blocks), and a function as an output may run Python of its own on late records' text: Spark's sizing
    stays."""
    batches = [
        pd.DataFrame({"ts": [b * 10_000 + i * 500 for i in range(20)], "k": [i % 3 for i in range(20)]})
        for b in range(3)
    ]
    write_batches(tmp_path / "in", batches)
    source = spark.readStream.schema("ts LONG, k LONG").option("maxFilesPerTrigger", 1)
    source = source.parquet(str(tmp_path / "in"))
    job = EventTimeAggregation(
        source,
        "ts",
        ["k"],
        WindowSpec(windows.Tumbling(10_000), {"n": aggregates.count()}),
        SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(1_000)),
        host=host,
    )
    output = Outputs.files(str(tmp_path / "out"))
    if function:
        output = replace(output, late=FunctionSink(lambda rows, batch_id: None))
    handle = job.run_to_completion(str(tmp_path / "ckpt"), output, timeout_s=300)
    # The session Spark copied for the query as it started and ran its batches in.
    own = handle.query._jsq.streamingQuery().sparkSessionForStream().conf()
    assert (own.get(MAX_BYTES, None) == UNSIZED) is sized_by_rows
    assert spark.conf.get(MAX_BYTES, None) is None, "the session the job was given is not changed"
    counts = spark.read.parquet(str(tmp_path / "out" / "panes")).agg(F.sum("n")).first()[0]
    assert counts == 60
