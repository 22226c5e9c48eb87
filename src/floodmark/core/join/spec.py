"""What an interval join is: its bounds, kind, output time and lateness (config, apart from the operator).

A left row at ``t`` and a right row of the same key at ``s`` form a pair when ``t + lower <= s <= t + upper``
(both bounds inclusive, in ms; Flink's ``between(lower, upper)``). Seen from the right row, its left partners lie
in ``[s - upper, s - lower]``. The arithmetic every rule below uses:

* a row's **last match time**: the latest event time a partner can have, ``t + upper`` for a left row and
  ``s - lower`` for a right row;
* **late** (the late output, never joined): a row at ``ts`` that arrives when the stage's input watermark
  ``W >= ts + allowed_lateness``. With lateness 0 that is ``ts <= W``: Flink's watermark contract ("no event at
  or before the watermark follows it"), the same boundary a window's max timestamp has;
* **cleanup**: a buffered row is dropped once ``W >= last match time + allowed_lateness`` (an unmatched row of an
  outer side is emitted with nulls for the other side then).

The two rules use the same comparison, so every pair of rows that are not late is emitted, exactly once (when
the later of the two arrives): a partner's cleanup ``last match + lateness`` is never below the arriving row's
``ts + lateness``, and the watermark has not reached that. Flink's ``IntervalJoinOperator`` calls a row at the
watermark on time yet cleans its partner up at ``W >= last match``, so a pair of two on-time rows can be lost
(left@100, right@100, bounds [-5, 0], watermark 100); and its late rows never reach a join. Flink SQL's
``TimeIntervalJoin`` keeps that pair by cleaning up one millisecond later and has no late output at all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from floodmark.core.time import MAX_DURATION, Duration, non_negative_millis, to_millis


class Side(enum.StrEnum):
    """Which input of a join a row came from."""

    LEFT = "LEFT"
    RIGHT = "RIGHT"


class JoinKind(enum.StrEnum):
    """Which rows without a partner are emitted (with nulls for the other side) when they are cleaned up."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    OUTER = "outer"

    def keeps_unmatched(self, side: Side) -> bool:
        """Are ``side``'s rows without a partner emitted?"""
        return self is JoinKind.OUTER or self.value == side.value.lower()


class JoinTime(enum.StrEnum):
    """The event time a joined row carries ("any such timestamp is correct from a watermark standpoint": *Streaming
    Systems*).

    ``LEFT`` / ``RIGHT``: the left or right row's; ``EARLIEST`` / ``LATEST``: the lower or higher of the two
    (Flink's DataStream join gives ``LATEST``). A row emitted without a partner carries its own event time.
    """

    LEFT = "LEFT"
    RIGHT = "RIGHT"
    EARLIEST = "EARLIEST"
    LATEST = "LATEST"

    def timed_by(self, side: Side) -> bool:
        """Can a pair be timed at ``side``'s row (at or below the other's)? LEFT, RIGHT: that side; EARLIEST: both;
        LATEST: neither (a pair is never timed below its later row, which arrives on time)."""
        return self is JoinTime.EARLIEST or self.value == side.value

    def of(self, left: int, right: int) -> int:
        if self is JoinTime.LEFT:
            return left
        if self is JoinTime.RIGHT:
            return right
        return min(left, right) if self is JoinTime.EARLIEST else max(left, right)


@dataclass(frozen=True)
class IntervalJoinSpec:
    """An event-time interval join of two keyed inputs (see the module docstring for the rules).

    :arg between: ``(lower, upper)``: a left row at ``t`` joins right rows at ``t + lower .. t + upper`` (ms or
        timedelta, inclusive, ``lower <= upper``; negative bounds look back in time).
    :arg how: ``"inner"``, ``"left"``, ``"right"`` or ``"outer"``.
    :arg output_time: the joined row's event time (:class:`JoinTime`; default ``LEFT``).
    :arg allowed_lateness: how far behind the watermark a row may arrive and still join every partner (ms).
    """

    lower: int
    upper: int
    how: JoinKind = JoinKind.INNER
    output_time: JoinTime = JoinTime.LEFT
    allowed_lateness: int = 0

    def __init__(
        self,
        between: tuple[Duration, Duration],
        how: str | JoinKind = JoinKind.INNER,
        output_time: str | JoinTime = JoinTime.LEFT,
        allowed_lateness: Duration = 0,
    ) -> None:
        lower, upper = to_millis(between[0]), to_millis(between[1])
        if max(abs(lower), abs(upper)) > MAX_DURATION:
            raise ValueError(
                f"the join's bounds must be at most {MAX_DURATION} ms apart from 0, got ({lower}, {upper})"
            )
        if lower > upper:
            raise ValueError(f"the join's lower bound ({lower} ms) must not exceed its upper bound ({upper} ms)")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "how", JoinKind(how))
        object.__setattr__(self, "output_time", JoinTime(output_time))
        object.__setattr__(self, "allowed_lateness", non_negative_millis(allowed_lateness, "the allowed lateness"))

    def partners(self, side: Side, ts: int) -> tuple[int, int]:
        """The event times ``[low, high]`` (inclusive) of the other side's rows a row of ``side`` at ``ts`` joins."""
        if side is Side.LEFT:
            return ts + self.lower, ts + self.upper
        return ts - self.upper, ts - self.lower

    def last_match(self, side: Side, ts: int) -> int:
        """The latest event time a partner of a row of ``side`` at ``ts`` can have."""
        return self.partners(side, ts)[1]

    def is_late(self, ts: int, watermark: int) -> bool:
        """A row at ``ts`` arriving at ``watermark`` is late: ``watermark >= ts + allowed_lateness``."""
        return watermark >= ts + self.allowed_lateness

    def cleanup_time(self, side: Side, ts: int) -> int:
        """The watermark at which a row of ``side`` at ``ts`` leaves the buffer: last match + allowed lateness."""
        return self.last_match(side, ts) + self.allowed_lateness
