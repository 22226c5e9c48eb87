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
    (user columns, already as Spark gave them).
    """
    present = [part for part in parts if len(part)]
    with warnings.catch_warnings():
        # pandas warns that all-NA columns will stop being ignored when inferring dtypes; every column is
        # cast to its schema type below, so the inference does not matter.
        warnings.simplefilter("ignore", FutureWarning)
        combined = pd.concat(present, ignore_index=True) if len(present) > 1 else (present[0] if present else None)
    size = 0 if combined is None else len(combined)
    columns = {}
    for field in schema.fields:
        if combined is not None and field.name in combined:
            values = combined[field.name]
            columns[field.name] = values if field.name in keep else values.astype(pandas_dtype(field.dataType))
        else:
            columns[field.name] = pd.Series([None] * size, dtype=pandas_dtype(field.dataType))
    return pd.DataFrame(columns)
