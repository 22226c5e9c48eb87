"""Joins of two keyed inputs in event time: the interval join (:mod:`~floodmark.core.join.spec` says what it is,
:mod:`~floodmark.core.join.interval` runs it) and the window join (:mod:`~floodmark.core.join.window_join`)."""

from floodmark.core.join.interval import IntervalJoinOperator, JoinedRow, JoinEmitted, LateRow, restore_interval_join
from floodmark.core.join.spec import IntervalJoinSpec, JoinKind, JoinTime, Side
from floodmark.core.join.window_join import (
    JoinOperator,
    WindowJoinedRow,
    WindowJoinEmitted,
    WindowJoinOperator,
    WindowJoinSpec,
    join_operator,
    restore_window_join,
)

__all__ = [
    "IntervalJoinOperator",
    "IntervalJoinSpec",
    "JoinEmitted",
    "JoinKind",
    "JoinOperator",
    "JoinTime",
    "JoinedRow",
    "LateRow",
    "Side",
    "WindowJoinEmitted",
    "WindowJoinOperator",
    "WindowJoinSpec",
    "WindowJoinedRow",
    "join_operator",
    "restore_interval_join",
    "restore_window_join",
]
