"""Output timestamps of panes (Beam's ``TimestampCombiner``) and the holds they imply."""

from __future__ import annotations

import enum


class TimestampCombiner(enum.StrEnum):
    """Which timestamp a pane carries (and holds the stage's output watermark at).

    * ``END_OF_WINDOW``: the window's max timestamp (``end - 1``), the default.
    * ``EARLIEST``: the earliest output time of the records added since the
      window's previous pane; with overlapping (sliding) windows a record's
      output time in a window is ``max(ts, end - slide)`` (see ``Sliding``).
    * ``LATEST``: the latest such output time.

    As in Beam, only records that arrived before the watermark reached the
    window's max timestamp contribute (late records cannot hold the watermark
    back); a pane without such records, for example an empty ON_TIME pane or a
    LATE pane, carries the window's max timestamp. Timestamps are also capped at
    the max timestamp.
    """

    END_OF_WINDOW = "END_OF_WINDOW"
    EARLIEST = "EARLIEST"
    LATEST = "LATEST"

    def combine(self, current: int | None, low: int, high: int) -> int:
        """Fold a slice of records (output times ``low``..``high``) into ``current``."""
        if self is TimestampCombiner.EARLIEST:
            return low if current is None else min(current, low)
        if self is TimestampCombiner.LATEST:
            return high if current is None else max(current, high)
        return high if current is None else current  # END_OF_WINDOW ignores the value

    def merge(self, holds: list[int]) -> int | None:
        if not holds:
            return None
        return max(holds) if self is TimestampCombiner.LATEST else min(holds)

    def pane_timestamp(self, hold: int | None, max_timestamp: int) -> int:
        if self is TimestampCombiner.END_OF_WINDOW or hold is None:
            return max_timestamp
        return min(hold, max_timestamp)
