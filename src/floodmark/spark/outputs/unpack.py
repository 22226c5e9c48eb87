"""How the sink reads a stage's rows out of the carrier: the OUTPUT blocks unpacked into an output's columns.

A bucket returns its panes, late records and dead letters as OUTPUT blocks (Arrow IPC streams in its stage's
:meth:`~floodmark.spark.plan.StageSemantics.emitted_schema`, :mod:`floodmark.spark.stateful.levels`). For each output
the sink
keeps the blocks of one stage, the rows of one kind (``fm_kind``: PANE, LATE or BAD) and the output's columns:
emitted columns by name, and ``window_start_time`` / ``window_end_time``, the window bounds (ms) as timestamps,
null beyond Spark's timestamp range (the global window's bounds).

Two implementations of this one step, chosen once per query (:func:`use_jvm_unpack`) and said in the log:

* **JVM** (:data:`~floodmark.spark.sql_functions.JVM_FUNCTIONS`, in floodmark's jar): the SQL generator
  ``fm_unpack(block, kind_column, kind, schema, times)`` (the kind column's name sent, as every protocol name)
  reads the blocks with Spark's own ``ArrowColumnVector`` and copies each kept row once. It runs inside the
  batch's JVM tasks: no Python worker, no Arrow -> row conversion of a Python result.
* **Python** (:class:`UnpackOutput`, a ``mapInArrow`` function), for a session that cannot load the jar (your
  own session built without :func:`~floodmark.spark.driver.session.configure_spark_with_floodmark`, ``spark-submit``
  without ``--jars``). Measured against it on a 100-key stream, the JVM step made a batch ~15% shorter
  (docs/PERFORMANCE.md); ``FLOODMARK_PYTHON_UNPACK=1`` chooses it where the jar loads (to test it).

Both give the same rows in the same order (``tests/spark/test_stage_output.py`` runs each case on both).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from floodmark.protocol import output, wire
from floodmark.spark.sql_functions import FUNCTION, JVM_FUNCTIONS, register_functions

_LOG = logging.getLogger(__name__)

PYTHON_UNPACK_ENV = "FLOODMARK_PYTHON_UNPACK"
"""Set to ``1`` to unpack in Python even where the JVM generator loads (to test it)."""

WINDOW_TIMES = {output.WINDOW_START_TIME: output.WINDOW_START, output.WINDOW_END_TIME: output.WINDOW_END}
"""Timestamp columns of the outputs -> the window bound (ms since the epoch) they show."""

MILLIS_RANGE = (-(2**63) // 1000 + 1, (2**63 - 1) // 1000)
"""The ms that Spark's timestamps (us since the epoch, a long) can hold, bounds included."""


class OutputReader:
    """One stage's rows of one kind out of a batch's carrier rows, in an output's columns.

    :arg stage: the stage. :arg kind: ``fm_kind`` of the rows (PANE, LATE or BAD). :arg schema: the output's
        columns (emitted columns and :data:`WINDOW_TIMES` columns). :arg jvm: unpack with the JVM generator
        (registered on the query's session, :func:`use_jvm_unpack`), else with :class:`UnpackOutput`.
    :arg time_zone: the session's time zone (Spark's Arrow form of a timestamp column carries it).
    """

    def __init__(self, stage: str, kind: str, schema: StructType, jvm: bool, time_zone: str = "UTC") -> None:
        self.stage = stage
        self.kind = kind
        self.schema = schema
        self.jvm = jvm
        self.python = UnpackOutput(stage, kind, to_arrow_schema(schema, timezone=time_zone))
        self._column: Column | None = None

    def rows(self, frame: DataFrame) -> DataFrame:
        """The rows of the carrier ``frame`` (one DataFrame operation: each re-analyses the batch's plan)."""
        if not self.jvm:
            return frame.mapInArrow(self.python, self.schema)
        if self._column is None:  # built once per query: every Column operation is several py4j round trips
            mine = (F.col(wire.STAGE) == F.lit(self.stage)) & (F.col(wire.KIND) == F.lit(wire.OUTPUT))
            times = ",".join(f"{name}={source}" for name, source in WINDOW_TIMES.items() if name in self.schema.names)
            block = F.when(mine, F.col(wire.BLOCK))
            arguments = [F.lit(wire.KIND), F.lit(self.kind), F.lit(self.schema.json()), F.lit(times)]
            self._column = F.call_function(FUNCTION, block, *arguments)
        return frame.select(self._column)


def use_jvm_unpack(spark: SparkSession) -> bool:
    """Whether this session's queries unpack in the JVM: registers ``fm_unpack`` on ``spark`` when its driver
    can load :data:`~floodmark.spark.sql_functions.JVM_FUNCTIONS` (and :data:`PYTHON_UNPACK_ENV` does not say no),
    and logs which step runs.
    Call before the query starts: a query runs in a copy of its session taken then."""
    if os.environ.get(PYTHON_UNPACK_ENV) == "1":
        _LOG.info("floodmark: outputs are unpacked in Python (%s=1)", PYTHON_UNPACK_ENV)
        return False
    if not register_functions(spark):
        # The tick source, built first, has warned that the session lacks floodmark's jar and what that costs.
        _LOG.info("floodmark: outputs are unpacked in Python: this session cannot load %s", JVM_FUNCTIONS)
        return False
    _LOG.info("floodmark: outputs are unpacked in the JVM (%s)", FUNCTION)
    return True


class UnpackOutput:
    """``mapInArrow`` function: carrier rows -> one stage's emitted rows (of one kind, or every kind) in the
    columns of ``schema``: the Python form of ``fm_unpack`` (see the module docstring).

    The filter on the carrier rows, the unpacking of the OUTPUT blocks and the projection to an output's columns
    happen in this one Python step, so an output costs its sink one DataFrame operation.

    :arg stage: the stage whose OUTPUT blocks to unpack. :arg kind: ``fm_kind`` of the rows to keep (None:
        every kind). :arg schema: the columns to return, in order: emitted columns and :data:`WINDOW_TIMES`.
    """

    def __init__(self, stage: str, kind: str | None, schema: pa.Schema) -> None:
        self.stage = stage
        self.kind = kind
        self.schema = schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            mine = pc.and_(
                pc.equal(batch.column(wire.STAGE), self.stage), pc.equal(batch.column(wire.KIND), wire.OUTPUT)
            )
            for block in batch.filter(mine).column(wire.BLOCK).to_pylist():
                table = pa.ipc.open_stream(block).read_all()
                if self.kind is not None:
                    table = table.filter(pc.equal(table.column(wire.KIND), self.kind))
                if table.num_rows:
                    yield from self._project(table).to_batches()

    def _project(self, table: pa.Table) -> pa.Table:
        columns = []
        for field in self.schema:
            source = WINDOW_TIMES.get(field.name)
            if source is None:
                column = table.column(field.name)
                columns.append(column if column.type == field.type else column.cast(field.type))
            else:
                columns.append(_timestamp_from_millis(table.column(source), field.type))
        return pa.Table.from_arrays(columns, schema=self.schema)


def _timestamp_from_millis(millis: pa.ChunkedArray, arrow_type: pa.DataType) -> pa.ChunkedArray:
    """``millis`` (ms since the epoch) as Spark timestamps; null where Spark's range ends (the global window)."""
    low, high = MILLIS_RANGE
    inside = pc.and_(pc.greater_equal(millis, low), pc.less_equal(millis, high))
    micros = pc.multiply(pc.if_else(inside, millis, None), 1000)
    return micros.cast(pa.timestamp("us")).cast(arrow_type)
