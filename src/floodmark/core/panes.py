"""Panes: what a window emits each time its trigger fires (Beam's ``PaneInfo``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from floodmark.core.windows import Window


class Timing(enum.StrEnum):
    """When a pane fired relative to the watermark (Beam's ``PaneInfo.Timing``).

    ``EARLY``: before the watermark reached the window's max timestamp.
    ``ON_TIME``: the one pane fired when the watermark reached it.
    ``LATE``: after a non-early pane, or for a window whose records all arrived
    after the watermark had passed its max timestamp.
    """

    EARLY = "EARLY"
    ON_TIME = "ON_TIME"
    LATE = "LATE"


class AccumulationMode(enum.StrEnum):
    """What a pane holds (Beam's ``AccumulationMode``).

    ``ACCUMULATING``: everything the window received so far.
    ``DISCARDING``: only what arrived since the window's previous pane.
    """

    ACCUMULATING = "ACCUMULATING"
    DISCARDING = "DISCARDING"


@dataclass(frozen=True)
class Pane:
    """One firing of one window of one key.

    :ivar key: the grouping key. :ivar window: the window, ``[start, end)``.
    :ivar value: the aggregate's result for the pane.
    :ivar timestamp: the output timestamp in ms (see ``TimestampCombiner``).
    :ivar timing: EARLY, ON_TIME or LATE. :ivar pane_index: 0, 1, ... per window (the ``pane_index``
        column of Spark's output).
    :ivar nonspeculative_index: -1 for EARLY panes, then 0, 1, ... for the
        ON_TIME and LATE panes. :ivar is_last: no further pane will follow for
        this window (its trigger finished or its state was garbage collected).
    """

    key: Any
    window: Window
    value: Any
    timestamp: int
    timing: Timing
    pane_index: int
    nonspeculative_index: int
    is_last: bool

    @property
    def is_first(self) -> bool:
        return self.pane_index == 0
