"""Moving values between Spark's Arrow/pandas frames and the core (shared by both sides of the shuffle).

pandas turns integral columns with nulls into floats and Python's ``json``
cannot write numpy scalars: these helpers keep values as the user wrote them.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql.types import ArrayType, BooleanType, DoubleType, IntegerType, LongType, StringType, StructType


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


def plain(value: Any, integral: bool = False) -> Any:
    """A JSON/Arrow-friendly Python value: numpy scalars unwrapped, NaN/NA/NaT as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is pd.NA or value is pd.NaT or (isinstance(value, float) and np.isnan(value)):
        return None
    if integral and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def result_value(value: Any, spark_type: Any) -> Any:
    """An aggregate result as the value of its Spark column (user results travel as JSON text)."""
    if isinstance(spark_type, StringType) and not isinstance(value, str):
        return json.dumps(value, default=str)
    if isinstance(spark_type, ArrayType):
        return [plain(v) for v in value]
    return plain(value)


def keys_array(frame: pd.DataFrame, key_columns: Sequence[str]) -> np.ndarray:
    """One key per row: the column's value for one key column, a tuple of values for several."""
    if len(key_columns) == 1:
        return frame[key_columns[0]].to_numpy(dtype=object)
    keys = np.empty(len(frame), dtype=object)
    keys[:] = list(zip(*(frame[c].tolist() for c in key_columns), strict=True))
    return keys


def records_json(frame: pd.DataFrame, columns: Sequence[str], integral: Sequence[str]) -> list[str]:
    """Each row's ``columns`` as a JSON object (the payload of late and bad records)."""
    integral_set = set(integral)
    return [
        json.dumps({k: plain(v, k in integral_set) for k, v in row.items()}, default=str)
        for row in frame[list(columns)].to_dict("records")
    ]


def conform(parts: Sequence[pd.DataFrame], schema: StructType, keep: Sequence[str] = ()) -> pd.DataFrame:
    """Concatenate ``parts`` into one frame with exactly ``schema``'s columns, in order, typed for Arrow.

    Missing columns are null. Columns named in ``keep`` keep their pandas dtype
    (user columns, already as Spark gave them). Columns are stacked as numpy
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
        if field.name in keep and any(piece is not None for piece in pieces):
            columns[field.name] = _stack_kept(pieces, sizes, dtype)
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


def _masked(piece: pd.Series | None, size: int, dtype: Any, np_type: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(values, null mask)`` of one part's column for a masked (nullable) pandas dtype."""
    if piece is None:
        return np.zeros(size, np_type), np.ones(size, bool)
    array = piece.to_numpy() if piece.dtype.kind in "iufb" else None
    if array is not None and array.dtype.kind == "f":
        mask = np.isnan(array)
        return np.where(mask, 0, array).astype(np_type), mask
    if array is not None:
        return array.astype(np_type, copy=False), np.zeros(size, bool)
    typed = piece.array if piece.dtype == dtype else pd.array(piece, dtype=dtype)  # nullable or objects: rare
    mask = np.asarray(typed.isna())
    return typed.to_numpy(dtype=np_type, na_value=np_type(0)), mask


def _stack_kept(pieces: list[pd.Series | None], sizes: list[int], dtype: Any) -> pd.Series:
    """A user column: each part's values as Spark gave them, nulls where a part lacks the column."""
    series = [
        pd.Series(_stack([None], [size], dtype)) if piece is None else piece.reset_index(drop=True)
        for piece, size in zip(pieces, sizes, strict=True)
    ]
    if len(series) == 1:
        return series[0]
    with warnings.catch_warnings():
        # pandas warns that all-NA pieces will stop being ignored when finding the common dtype; the null
        # pieces already have the column's schema dtype, so the result is the same either way.
        warnings.simplefilter("ignore", FutureWarning)
        return pd.concat(series, ignore_index=True)
