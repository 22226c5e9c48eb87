"""Moving values between Spark's Arrow/pandas frames and the core (shared by both sides of the shuffle).

pandas turns integral columns with nulls into floats and Python's ``json``
cannot write numpy scalars: these helpers keep values as the user wrote them
(with :func:`floodmark.core.values.plain`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from floodmark.core.values import plain
from floodmark.spark.plan import SPARK_TYPES


@cache
def numpy_type(kind: str) -> Any:
    """The numpy type of a neutral column type's values without nulls (:mod:`floodmark.protocol.columns`): that
    of its Arrow type, which is its Spark type's."""
    return to_arrow_type(SPARK_TYPES[kind]).to_pandas_dtype()


def pandas_dtype(spark_type: Any) -> Any:
    """The pandas dtype that carries ``spark_type`` with nulls and without loss (object when unsure)."""
    if isinstance(spark_type, LongType):
        return "Int64"
    if isinstance(spark_type, IntegerType):
        return "Int32"
    if isinstance(spark_type, DoubleType):
        return "float64"
    if isinstance(spark_type, BooleanType):
        return "boolean"
    return object


def result_value(value: Any, spark_type: Any) -> Any:
    """An aggregate result as the value of its Spark column (user results travel as JSON text)."""
    if isinstance(spark_type, StringType) and not isinstance(value, str):
        return json.dumps(value, default=str)
    if isinstance(spark_type, ArrayType):
        return [plain(v) for v in value]
    return plain(value)


def records_json(frame: pd.DataFrame, columns: Sequence[str], integral: Sequence[str]) -> list[str]:
    """Each row's ``columns`` as a JSON object (the payload of late and bad records)."""
    integral_set = set(integral)
    return [
        json.dumps({k: plain(v, k in integral_set) for k, v in row.items()}, default=str)
        for row in frame[list(columns)].to_dict("records")
    ]


def conform(parts: Sequence[pd.DataFrame], schema: StructType) -> pd.DataFrame:
    """Concatenate ``parts`` into one frame with exactly ``schema``'s columns, in order, typed for Arrow.

    Missing columns are null. Columns are stacked as numpy
    arrays (values and null masks), part by part: concatenating the frames
    first would turn integer columns that some parts lack into floats or
    objects, and pandas' per-column machinery costs more than the data itself
    for the many small frames of a batch.
    """
    present = [part for part in parts if len(part)]
    sizes = [len(part) for part in present]
    columns: dict[str, Any] = {}
    for field in schema.fields:
        dtype = pandas_dtype(field.dataType)
        pieces = [part.get(field.name) for part in present]
        if all(piece is None for piece in pieces) and isinstance(field.dataType, AtomicType):
            columns[field.name] = _all_null(sum(sizes))
        else:
            columns[field.name] = _stack(pieces, sizes, dtype)
    return pd.DataFrame(columns, copy=False)


_MASKED = {"Int64": (np.int64, pd.arrays.IntegerArray), "Int32": (np.int32, pd.arrays.IntegerArray)}
_MASKED["boolean"] = (np.bool_, pd.arrays.BooleanArray)


def _stack(pieces: list[pd.Series | None], sizes: list[int], dtype: Any) -> Any:
    """One column of ``dtype`` from per-part values (``None``: the part lacks the column: nulls)."""
    if dtype in _MASKED:
        np_type, array_type = _MASKED[dtype]
        values, masks = [np.zeros(0, np_type)], [np.zeros(0, bool)]
        for piece, size in zip(pieces, sizes, strict=True):
            value, mask = _masked(piece, size, dtype, np_type)
            values.append(value)
            masks.append(mask)
        return array_type(np.concatenate(values), np.concatenate(masks))
    if dtype == "float64":
        return np.concatenate(
            [np.zeros(0)]
            + [
                np.full(size, np.nan) if piece is None else piece.to_numpy(dtype=np.float64, na_value=np.nan)
                for piece, size in zip(pieces, sizes, strict=True)
            ]
        )
    return np.concatenate(
        [np.zeros(0, dtype=object)]
        + [
            np.full(size, None, dtype=object) if piece is None else piece.to_numpy(dtype=object)
            for piece, size in zip(pieces, sizes, strict=True)
        ]
    )


def _all_null(size: int) -> pd.api.extensions.ExtensionArray:
    """A column no part has: ``size`` nulls of no type (Arrow's null type, which Spark casts to the field's).

    Not an object array of None: Spark's worker concatenates every returned frame with an empty one
    (``construct_record_batch``), and pandas then checks an all-null object column value by value in Python
    (``JoinUnit._is_valid_na_for``): ~1 us per row and column, 0.3 s of a 100k-pane flush's 0.5 s. Only for
    atomic types: that concatenation turns the nulls into NaN, which Spark's conversion of an array, map or
    struct column does not take for null.
    """
    return pd.arrays.ArrowExtensionArray(pa.nulls(size))


def _masked(piece: pd.Series | None, size: int, dtype: Any, np_type: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(values, null mask)`` of one part's column for a masked (nullable) pandas dtype."""
    if piece is None:
        return np.zeros(size, np_type), np.ones(size, bool)
    # A nullable pandas column (pd.Int64...) would become float64 through to_numpy(): the typed path keeps it exact.
    numpy_typed = piece.dtype.kind in "iufb" and not isinstance(piece.dtype, pd.api.extensions.ExtensionDtype)
    array = piece.to_numpy() if numpy_typed else None
    if array is not None and array.dtype.kind == "f":
        mask = np.isnan(array)
        # An integral column with nulls arrives as float64 (Spark's pandas conversion): a long near 2**63 rounds
        # to 2**63, outside int64, so clip before the cast (the precision is already gone; see STATUS.md).
        info = np.iinfo(np_type)
        top = float(np.nextafter(np.float64(info.max), 0)) if np_type == np.int64 else float(info.max)
        return np.clip(np.where(mask, 0, array), float(info.min), top).astype(np_type), mask
    if array is not None:
        return array.astype(np_type, copy=False), np.zeros(size, bool)
    typed = piece.array if piece.dtype == dtype else pd.array(piece, dtype=dtype)  # nullable or objects: rare
    mask = np.asarray(typed.isna())
    return typed.to_numpy(dtype=np_type, na_value=np_type(0)), mask


def arrow_table(
    parts: Sequence[dict[str, Any]], schema: StructType, like: pa.Schema, nan_is_null: bool = False
) -> pa.Table:
    """Stack ``parts`` into one Arrow table with exactly ``schema``'s columns, in order.

    Each part maps column names to arrays (Arrow, numpy, pandas or lists, all of one
    length) or scalars (repeated); an empty dict is no rows. A column a part
    lacks is null there. With ``nan_is_null`` a float NaN becomes null, as in
    Spark's conversion of a pandas frame (a record's NaN stays NaN without it).
    Columns in ``like`` (the input as Spark gave it) keep their Arrow type, so
    user columns go back to Spark unchanged; the others get the Arrow type of
    their Spark type (Spark reads what the ``mapInArrow`` function returns by
    position and type: an int32 where it expects a long fails).
    """
    types = [
        like.field(f.name).type if f.name in like.names else to_arrow_type(f.dataType, timezone="UTC")
        for f in schema.fields
    ]
    target = pa.schema([pa.field(f.name, t) for f, t in zip(schema.fields, types, strict=True)])
    tables = []
    for part in parts:
        size = next((len(v) for v in part.values() if not _is_scalar(v)), None)
        if size is None or size == 0:
            continue
        columns = []
        for name, dtype in zip(target.names, target.types, strict=True):
            value = part.get(name)
            if value is None:
                columns.append(pa.nulls(size, dtype))
            elif _is_scalar(value):
                columns.append(pa.array(np.full(size, value) if not isinstance(value, str) else [value] * size, dtype))
            elif isinstance(value, pa.Array | pa.ChunkedArray):
                columns.append(value if value.type == dtype else value.cast(dtype))
            else:
                columns.append(pa.array(value, dtype, from_pandas=nan_is_null))
        tables.append(pa.Table.from_arrays(columns, schema=target))
    if not tables:
        return target.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | np.generic)


_NULLABLE_INTS = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype()}
_NULLABLE_INTS.update({pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()})


def spark_like_pandas(table: pa.Table, exact_integers: bool = True, exact_columns: Sequence[str] = ()) -> pd.DataFrame:
    """``table`` as pandas the way Spark's ``mapInPandas`` hands it over: timestamps as naive local time.

    Spark sends timestamps as UTC instants tagged with the session time zone and
    turns them into that zone's wall-clock time, without zone, for pandas; doing
    the same keeps the JSON of bad records (made here) like that of late records
    (made from pandas frames Spark converted). With ``exact_integers`` integer
    columns become nullable pandas integers; without, a column with nulls turns
    into float64, as in Spark's conversion, except the integer ``exact_columns``
    (nullable pandas integers still), each converted once.
    """
    columns = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            column = pc.local_timestamp(column)
        columns[name] = column
    exact = [] if exact_integers else [n for n in table.column_names if n in exact_columns and columns[n].null_count]
    rest = {name: column for name, column in columns.items() if name not in exact}
    frame = pa.table(rest).to_pandas(types_mapper=_NULLABLE_INTS.get if exact_integers else None)
    for name in exact:  # in the table's order: each goes back where it was
        frame.insert(table.column_names.index(name), name, columns[name].to_pandas(types_mapper=_NULLABLE_INTS.get))
    return frame
