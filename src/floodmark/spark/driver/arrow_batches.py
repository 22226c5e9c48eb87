"""The Arrow batches of a query's Python steps: sized by rows alone where the row limit already bounds the bytes.

Spark cuts the rows a Python step reads (``mapInArrow``, pandas UDFs, the Python stateful operators) into Arrow
batches of at most ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default) and
``spark.sql.execution.arrow.maxBytesPerBatch`` bytes (64 MiB). To keep to the bytes it sizes the batch after every
row it writes (``BatchedPythonArrowInput``), walking the vectors of every column: in a flight recording of Nexmark
q12 on the JVM host that sizing was 27% of the executors' samples, four times the writing of the rows.
Spark skips it when the byte limit is ``2**31 - 1``.

floodmark sets that limit in its query's own session (the copy Spark takes as a query starts: the ``foreachBatch``
sink sets it on its batch's session, :class:`~floodmark.spark.outputs.batch_sink.BatchSink`; the session you gave
is not changed) only where it changes nothing but the time: every Python step of the query reads rows of
fixed-width columns, so a batch of ``maxRecordsPerBatch`` rows holds at most that many times the row's width
(:func:`row_bytes`), and that is within the byte limit, which therefore could never cut a batch first. A text,
binary or nested column, a Python host level (its rows carry binary blocks), Python code in a source or an output
that is your function (their inputs are not known here), a row limit of zero (none) or a Spark Connect session keep
Spark's sizing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StructType,
    TimestampNTZType,
    TimestampType,
    YearMonthIntervalType,
)

from floodmark.spark.connect import is_connect

_LOG = logging.getLogger(__name__)

MAX_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
UNSIZED = str(2**31 - 1)
"""The byte limit at which Spark writes a batch without sizing it after each row."""

# Bytes per value in Arrow: a decimal is 16 whatever its precision; a boolean is a bit, counted as a byte.
_WIDTHS: dict[type[DataType], int] = {
    NullType: 0,
    BooleanType: 1,
    ByteType: 1,
    ShortType: 2,
    IntegerType: 4,
    DateType: 4,
    YearMonthIntervalType: 4,
    FloatType: 4,
    LongType: 8,
    DoubleType: 8,
    TimestampType: 8,
    TimestampNTZType: 8,
    DayTimeIntervalType: 8,
    DecimalType: 16,
}

_PYTHON_IN_PLAN = ("Python", "InPandas", "InArrow", "InPySpark")
"""What the class names of Spark's plan nodes and expressions that run Python hold (``PythonUDF``, ``MapInPandas``,
``MapInArrow``, ``TransformWithStateInPySpark``, ``PythonUDTF``, Python data sources, ...)."""


def row_bytes(schema: StructType) -> int | None:
    """An upper bound of one row's bytes in an Arrow batch of ``schema`` (each value, a validity byte per column
    and one for the row's struct), or None when a column is not of fixed width (text, binary, nested)."""
    total = 1
    for field in schema.fields:
        width = _WIDTHS.get(type(field.dataType))
        if width is None:
            return None
        total += width + 1
    return total


def runs_python(frame: DataFrame) -> bool:
    """Whether ``frame``'s plan may run Python: its analyzed plan as JSON, which names the class of every node and
    expression, names one of Python's; True too when the plan cannot be read (over Spark Connect: not from here)."""
    if is_connect(frame.sparkSession):
        return True
    try:
        plan = str(frame._jdf.queryExecution().analyzed().toJSON())
    except Exception:  # a plan Spark cannot write as JSON: its steps are not known
        return True
    return any(name in plan for name in _PYTHON_IN_PLAN)


def query_settings(spark: SparkSession, python_inputs: Sequence[StructType | None]) -> Mapping[str, str]:
    """The settings for the query's own session: ``{MAX_BYTES: UNSIZED}`` where the row limit bounds every batch of
    ``python_inputs`` (the rows each Python step of the query reads; None: rows not known, such as a source's own
    Python steps: :func:`runs_python`) within the byte limit, else none."""
    widest = 0  # bytes; stays 0 without a Python step
    for schema in python_inputs:
        width = None if schema is None else row_bytes(schema)
        if width is None:
            return {}
        widest = max(widest, width)
    if not widest:
        return {}
    # A classic session here: over Spark Connect a source's rows are not known (runs_python).
    conf = spark._jsparkSession.sessionState().conf()
    max_rows, max_bytes = int(conf.arrowMaxRecordsPerBatch()), int(conf.arrowMaxBytesPerBatch())
    if max_rows <= 0 or max_bytes >= int(UNSIZED) or widest * max_rows > max_bytes:
        return {}
    _LOG.info(
        "floodmark: the query's Python steps read fixed-width rows: Spark cuts their Arrow batches by rows (%d), "
        "not sizing each row (%s)",
        max_rows,
        MAX_BYTES,
    )
    return {MAX_BYTES: UNSIZED}
