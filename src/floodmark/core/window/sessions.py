"""Merging windows (sessions), one record at a time: the step both firing policies take.

A record of a merging assigner brings its own window (``[ts, ts + gap)`` for sessions). Against its key's open
windows, in this order (Flink's ``WindowOperator.processElement``: ``MergingWindowSet.addWindow``, then
``isWindowLate`` of the window the record ends up in):

1. a record whose window overlaps a window whose trigger finished (closed, not yet garbage collected) goes to the
   late output (``WINDOW_CLOSED``): the closed window refuses it, and nothing merges;
2. its window merges with the open windows it overlaps (the assigner's ``merge_into``): the first of them (by
   start) keeps its row and becomes the merged window, the others are folded into it and released;
3. only then lateness is decided, on the merged window: if the watermark has reached the merged window's horizon
   (max timestamp + allowed lateness) the record goes to the late output (``EXPIRED``) and no window changes.
   A record whose own window is past its horizon but which overlaps a live session therefore joins that session
   (and extends it backwards) instead of being lost: nothing in it is late for the window it belongs to.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from floodmark.core.records import LateReason
from floodmark.core.spec import WindowSpec
from floodmark.core.window.table import WindowTable
from floodmark.core.windows import Window


@dataclass(frozen=True)
class SessionStep:
    """Where one record went.

    :ivar row: the table row of the window it joined (None when refused).
    :ivar window: the window it joined, or the one that refused it.
    :ivar absorbed: the open windows merged into ``window`` (their rows are released; ``row`` is the first's).
    :ivar opened: ``row`` is new (the record overlaps no open window): the policy starts its state.
    :ivar refused: why it went to the late output, or None.
    """

    row: int | None
    window: Window
    absorbed: tuple[Window, ...] = ()
    opened: bool = False
    refused: LateReason | None = None


def merge_record(
    spec: WindowSpec,
    table: WindowTable,
    windows: Mapping[Window, int],
    key: Hashable,
    proto: Window,
    watermark: int,
    before_merge: Callable[[int, list[int], Window], None],
) -> SessionStep:
    """Add the window ``proto`` of one record of ``key`` to the key's open ``windows`` (``{window: row}``, not
    modified here) in the module docstring's order, at ``watermark``.

    ``before_merge(row, others, merged)`` lets the policy fold its own per-window state (trigger state, firing
    flags) of the rows ``others`` into ``row`` before the table merges them into the window ``merged``.
    """
    closed = sorted(w for w, r in windows.items() if table.cols["closed"][r] and w.intersects(proto))
    if closed:
        return SessionStep(None, closed[0], refused=LateReason.WINDOW_CLOSED)
    merged, touching = spec.window.merge_into(list(windows), proto)
    if spec.expired(merged, watermark):
        return SessionStep(None, merged, refused=LateReason.EXPIRED)
    if not touching:
        return SessionStep(table.open(key, proto), proto, opened=True)
    if touching == [merged]:
        return SessionStep(windows[merged], merged)
    row, *others = [windows[w] for w in touching]
    before_merge(row, others, merged)
    table.merge_into(row, merged, others)
    return SessionStep(row, merged, tuple(touching))
