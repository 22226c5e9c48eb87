"""Joins of two keyed inputs in event time: the interval join (:mod:`~floodmark.core.join.spec` says what it is,
:mod:`~floodmark.core.join.interval` runs it)."""

from floodmark.core.join.interval import IntervalJoinOperator, JoinedRow, JoinEmitted, LateRow, restore_interval_join
from floodmark.core.join.spec import IntervalJoinSpec, JoinKind, JoinTime, Side

__all__ = [
    "IntervalJoinOperator",
    "IntervalJoinSpec",
    "JoinEmitted",
    "JoinKind",
    "JoinTime",
    "JoinedRow",
    "LateRow",
    "Side",
    "restore_interval_join",
]
