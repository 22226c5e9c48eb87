"""Values leaving numpy/pandas for Python, JSON and Arrow: the one place numpy scalars are unwrapped."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd


def unwrap(value: Any) -> Any:
    """``value`` with a numpy scalar turned into the Python scalar it holds (anything else unchanged)."""
    return value.item() if isinstance(value, np.generic) else value


def object_array(values: Iterable[Any]) -> np.ndarray:
    """``values`` as a 1-d object array, one element each (a list or a tuple stays one element, where
    ``np.array`` would make a 2-d array of equal-length lists)."""
    items = list(values)
    array = np.empty(len(items), dtype=object)
    for i, value in enumerate(items):
        array[i] = value
    return array


def plain(value: Any, integral: bool = False) -> Any:
    """A JSON/Arrow-friendly Python value: numpy scalars unwrapped, NaN/NA/NaT as None.

    :arg integral: the value comes from an integral column that pandas turned into floats (nulls present):
        whole floats become ints again.
    """
    value = unwrap(value)
    if value is pd.NA or value is pd.NaT or (isinstance(value, float) and np.isnan(value)):
        return None
    if integral and isinstance(value, float) and value.is_integer():
        return int(value)
    return value
