"""Output timestamps of panes (Beam's ``TimestampCombiner``) and the holds they imply."""

from __future__ import annotations

import enum

import numpy as np

from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP


class TimestampCombiner(enum.StrEnum):
    """Which timestamp a pane carries (and holds the stage's output watermark at).

    * ``END_OF_WINDOW``: the window's max timestamp (``end - 1``), the default.
    * ``EARLIEST``: the earliest output time of the records added since the
      window's previous pane; with overlapping (sliding) windows a record's
      output time in a window is ``max(ts, end - slide)`` (see ``Sliding``).
    * ``LATEST``: the latest such output time.

    As in Beam, only records that arrived before the watermark reached the
    window's max timestamp contribute (late records cannot hold the watermark
    back), and only with an output time not behind the stage's output watermark
    at their arrival (:meth:`element_holds`); a pane without such records, for
    example an empty ON_TIME pane or a LATE pane, carries the window's max
    timestamp. Timestamps are also capped at the max timestamp. So an EARLY or
    ON_TIME pane is never timestamped behind the output watermark.

    A window's hold is an ``int64`` ms value; :attr:`empty_hold` means "no record
    holds" (it is the identity of :meth:`fold`). Every method works on ``int64``
    arrays (both window operators and the map-side combine call them) and on ints.
    """

    END_OF_WINDOW = "END_OF_WINDOW"
    EARLIEST = "EARLIEST"
    LATEST = "LATEST"

    @property
    def empty_hold(self) -> int:
        """The hold of a window no record holds: MAX for EARLIEST (and END_OF_WINDOW), MIN for LATEST."""
        return MIN_TIMESTAMP if self is TimestampCombiner.LATEST else MAX_TIMESTAMP

    @property
    def reduction(self) -> str:
        """How holds combine, by name (``"max"`` for LATEST, else ``"min"``), for engines that reduce by name
        (Arrow's group-by): the rule :meth:`fold`, :meth:`reduce` and :meth:`reduce_at` apply. END_OF_WINDOW's
        holds do not set its panes' timestamps (:meth:`pane_timestamps`), but they hold the output watermark at
        the earliest."""
        return "max" if self is TimestampCombiner.LATEST else "min"

    def fold(self, holds, times):
        """Holds after adding records (or partial holds) with output times ``times``: min, max, or unchanged."""
        if self is TimestampCombiner.EARLIEST:
            return np.minimum(holds, times)
        if self is TimestampCombiner.LATEST:
            return np.maximum(holds, times)
        return holds  # END_OF_WINDOW: the pane carries the max timestamp whatever the records

    def element_holds(self, output_times: np.ndarray, output_watermark: int) -> np.ndarray:
        """The hold each record adds to its window: its output time, or :attr:`empty_hold` (none) when that
        time is at or behind the stage's output watermark at the record's arrival.

        Java Beam's ``WatermarkHold.addElementHold``: a hold behind the output watermark could not hold it
        (it has passed), and a pane timestamped there would be late downstream because of a record that was
        itself already behind. "At" counts as behind: a row at a watermark is late (Flink's boundary: the
        window whose max timestamp it is has fired), so the stage's output watermark stays one below a hold.
        Such a record's pane falls back on the end-of-window hold (the window's max timestamp) unless other
        records hold it. The other half of Beam's rule, no hold once the watermark
        has reached the window's max timestamp, is applied when the records are added
        (``WindowTable.add_arrivals``). END_OF_WINDOW holds at the max timestamp, which an open window's
        output watermark never passes: unchanged.
        """
        if self is TimestampCombiner.END_OF_WINDOW:
            return output_times
        return np.where(output_times <= output_watermark, self.empty_hold, output_times)

    def reduce(self, times: np.ndarray) -> int:
        """The one hold a slice of output times (or of holds) makes: min, max, or empty for END_OF_WINDOW."""
        if self is TimestampCombiner.END_OF_WINDOW or not len(times):
            return self.empty_hold
        return int(_NUMPY[self.reduction].reduce(times))

    def reduce_at(self, times: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """One hold per group of ``times`` (sorted by group; groups start at ``bounds``)."""
        if self is TimestampCombiner.END_OF_WINDOW:
            return np.full(len(bounds), self.empty_hold, dtype=np.int64)
        if not len(times):
            return times
        return _NUMPY[self.reduction].reduceat(times, bounds)

    def pane_timestamps(self, holds, max_timestamps):
        """The output timestamp of panes: the hold capped at the max timestamp, or the max timestamp itself
        (END_OF_WINDOW, or no record holds)."""
        if self is TimestampCombiner.END_OF_WINDOW:
            return max_timestamps
        return np.where(np.equal(holds, self.empty_hold), max_timestamps, np.minimum(holds, max_timestamps))


_NUMPY = {"min": np.minimum, "max": np.maximum}
""":attr:`TimestampCombiner.reduction` as a numpy ufunc."""
