"""A column of floodmark's rows: a name and a neutral type, which each engine maps to its own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

LONG = "long"
"""A 64-bit integer (times in ms, counts)."""
INT = "int"
"""A 32-bit integer (bucket labels)."""
DOUBLE = "double"
STRING = "string"
BOOL = "bool"
BINARY = "binary"
TYPES = (LONG, INT, DOUBLE, STRING, BOOL, BINARY)
"""Every neutral type."""


class Column(NamedTuple):
    """One column: its name and neutral type (one of :data:`TYPES`)."""

    name: str
    type: str


def typed(types: Mapping[str, str], names: Iterable[str]) -> tuple[Column, ...]:
    """The columns ``names``, in order, with their types in ``types`` (a module's one declaration of them)."""
    return tuple(Column(name, types[name]) for name in names)


def names(columns: Iterable[Column]) -> tuple[str, ...]:
    """The names of ``columns``, in order."""
    return tuple(column.name for column in columns)
