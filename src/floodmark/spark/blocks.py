"""How the combiner's rows cross the shuffle: one Arrow IPC block per bucket and input partition.

Python stateful operators hand a group's rows to pandas with per-row work
(Spark 4.3's transformWithStateInPandas: ``itertuples`` and one
``pd.DataFrame(rows)`` per key), which cost ~0.6 s per batch with 100k keys
(~180k partial rows) when floodmark used it. So the combiner ships each bucket's
rows as a single binary value, an Arrow IPC stream of the rows with the
combiner's full schema, and the processor reads it back column by column.
Spark sees a handful of rows per partition, whatever the number of records.

A row of the shuffle is ``(fm_bucket, fm_block)``; the tick rows have no block.
Each block records the input partition it came from (Arrow schema metadata), and
the processor reads a bucket's blocks in partition order: the order in which
blocks reach it varies, and records' arrival order decides which records make a
count-triggered pane, so a replayed batch sees its records in the same order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from floodmark.protocol.wire import BLOCK, BUCKET, HOLD, SHUFFLE_COLUMNS, WINDOW_END, WINDOW_START
from floodmark.spark.plan import spark_fields
from floodmark.spark.rows import spark_like_pandas

SCHEMA = StructType(spark_fields(SHUFFLE_COLUMNS))
"""The schema of the rows the combiner returns to Spark."""
_ARROW_SCHEMA = to_arrow_schema(SCHEMA)


PARTITION_KEY = b"floodmark.partition"
SIDE_KEY = b"floodmark.side"
"""The join side a block's rows are (a join stage reads two inputs into one bucket)."""


def pack(table: pa.Table, partition: int = 0, side: str | None = None) -> pa.RecordBatch:
    """``table`` (rows with an ``fm_bucket`` column) as one ``(fm_bucket, fm_block)`` row per bucket.

    :arg partition: the input partition the rows come from (kept in each block). :arg side: the join side the
        rows are, kept in each block (:func:`unpack_sides`); None: not a join's input.
    """
    ids: list[int] = []
    blocks: list[bytes] = []
    if table.num_rows == 0:
        return pa.RecordBatch.from_pydict({BUCKET: ids, BLOCK: blocks}, schema=_ARROW_SCHEMA)
    buckets = table.column(BUCKET).to_numpy()
    order = np.argsort(buckets, kind="stable")
    sorted_buckets = buckets[order]
    starts = np.flatnonzero(np.r_[True, sorted_buckets[1:] != sorted_buckets[:-1]])
    ordered = table.take(order) if len(starts) > 1 else table
    tags = {PARTITION_KEY: str(partition).encode(), **({} if side is None else {SIDE_KEY: side.encode()})}
    ordered = ordered.replace_schema_metadata({**(table.schema.metadata or {}), **tags})
    ends = [*starts[1:], len(order)]
    for start, end in zip(starts, ends, strict=True):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, ordered.schema) as writer:
            writer.write_table(ordered.slice(int(start), int(end - start)))
        ids.append(int(sorted_buckets[start]))
        blocks.append(sink.getvalue().to_pybytes())
    return pa.RecordBatch.from_pydict({BUCKET: ids, BLOCK: blocks}, schema=_ARROW_SCHEMA)


def unpack(blocks: list[bytes | bytearray]) -> pd.DataFrame:
    """The rows of ``blocks`` as one pandas frame, converted as Spark converts rows for pandas.

    Blocks are taken in input-partition order (stable), whatever order they came in.
    Timestamps become naive local times and integer columns with nulls become
    float64, exactly what the processor received when Spark shipped the rows itself;
    except a partial aggregate's window bounds and hold (:data:`EXACT_COLUMNS`).
    """
    if not blocks:
        return pd.DataFrame()
    return _frame(sorted((pa.ipc.open_stream(block).read_all() for block in blocks), key=_partition))


def unpack_sides(blocks: list[bytes | bytearray]) -> dict[str | None, pd.DataFrame]:
    """The rows of ``blocks`` by the side :func:`pack` tagged them with (None: untagged), each as :func:`unpack`
    gives them."""
    sides: dict[str | None, list[pa.Table]] = {}
    for table in sorted((pa.ipc.open_stream(block).read_all() for block in blocks), key=_partition):
        side = (table.schema.metadata or {}).get(SIDE_KEY)
        sides.setdefault(None if side is None else side.decode(), []).append(table)
    return {side: _frame(tables) for side, tables in sides.items()}


EXACT_COLUMNS = (WINDOW_START, WINDOW_END, HOLD)
"""floodmark's own columns that :func:`unpack` keeps exact, as pandas' nullable Int64 (null in rows of other kinds):
the global window ends at 2**63 - 1 and holds at 2**63 - 2, which float64 rounds to 2**63 (-2**63 once cast back)."""


def _frame(tables: list[pa.Table]) -> pd.DataFrame:
    # A block whose rows have only nulls in a column (a left join's rows without a partner) has it as Arrow's null
    # type: the concatenation takes the other blocks' type.
    table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
    return spark_like_pandas(table, exact_integers=False, exact_columns=EXACT_COLUMNS)


def _partition(table: pa.Table) -> int:
    return int((table.schema.metadata or {}).get(PARTITION_KEY, b"0"))
