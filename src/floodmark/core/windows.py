"""Windows and window assigners: tumbling, sliding, cumulate, sessions, global.

A window is the half-open interval ``[start, end)`` of event time in ms. Its
boundaries against the watermark W are stated once, here, and used by every
operator, the map-side combine and ``explain`` (Flink's convention; see
``docs/semantics.md``):

* :func:`max_timestamp` = ``end - 1``, the last instant the window contains;
* :func:`window_reached`: ``W >= end - 1`` (inclusive): the window fires ON_TIME,
  and a record for it arriving now is late;
* :func:`horizon` = ``end - 1 + allowed_lateness`` (saturating at MAX);
  :func:`window_expired`: ``W >= horizon`` (inclusive): the window's state is
  garbage collected and its records go to the late output (``EXPIRED``).

These work on ints and on ``int64`` arrays alike. Assignment is vectorised:
:meth:`WindowAssigner.assign` takes an ``int64`` array of timestamps and returns,
for every (record, window) pair, the record's position and the window's start
and end. Merging assigners (sessions) also say how windows merge
(:meth:`WindowAssigner.merge`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, Duration, positive_millis, to_millis

Time = TypeVar("Time", int, np.ndarray)

MAX_WINDOWS_PER_RECORD = 100_000
"""The most sliding windows one record may fall in (``ceil(size / slide)``): each is a (record, window) row."""


def max_timestamp(end: Time) -> Time:
    """``end - 1``: the largest timestamp inside ``[start, end)``, the watermark at which it fires ON_TIME."""
    return end - 1


def window_reached(end: Time, watermark: int) -> Time:
    """Has the watermark reached the window's max timestamp (``watermark >= end - 1``, inclusive)?

    From then on the window has fired (or fires) its ON_TIME pane and a record for it is late.
    """
    return max_timestamp(end) <= watermark


def horizon(end: Time, allowed_lateness: int) -> Time:
    """The watermark at which ``[start, end)`` is garbage collected: ``end - 1 + allowed_lateness``.

    Saturates at ``MAX_TIMESTAMP`` (the global window, or a window near the top of the time range, plus any
    lateness would overflow int64). Inclusive: the state goes when ``watermark >= horizon``.
    """
    if isinstance(end, np.ndarray):
        return np.minimum(max_timestamp(end), MAX_TIMESTAMP - allowed_lateness) + allowed_lateness
    return min(max_timestamp(end), MAX_TIMESTAMP - allowed_lateness) + allowed_lateness


def window_expired(end: Time, allowed_lateness: int, watermark: int) -> Time:
    """Has the watermark reached the window's horizon (``watermark >= horizon``, inclusive)?

    From then on the window's state is gone (or goes at this watermark) and a record for it is ``EXPIRED``.
    """
    return horizon(end, allowed_lateness) <= watermark


@dataclass(frozen=True, order=True)
class Window:
    """The event-time interval ``[start, end)`` in ms (``end`` exclusive)."""

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """``end - 1``: the largest timestamp inside the window (see :func:`max_timestamp`)."""
        return max_timestamp(self.end)

    def contains(self, timestamp: int) -> bool:
        return self.start <= timestamp < self.end

    def intersects(self, other: Window) -> bool:
        """True if the intervals overlap; windows that only touch do not (Beam's rule)."""
        return self.start < other.end and other.start < self.end

    def cover(self, other: Window) -> Window:
        """The smallest window containing both."""
        return Window(min(self.start, other.start), max(self.end, other.end))

    def __repr__(self) -> str:
        return f"Window[{self.start}, {self.end})"


GLOBAL_WINDOW = Window(MIN_TIMESTAMP, MAX_TIMESTAMP)


@dataclass(frozen=True)
class Assignment:
    """Vectorised result of assigning windows to a batch of timestamps.

    Row ``i`` says: record ``record_index[i]`` belongs to ``[start[i], end[i])``.
    Rows of one record are consecutive and ordered by window start, then end.
    """

    record_index: np.ndarray
    start: np.ndarray
    end: np.ndarray


class WindowAssigner:
    """Decides which windows a record belongs to. Subclasses are frozen dataclasses."""

    is_merging: bool = False
    """Windows of one key merge (sessions): :meth:`merge` says how."""

    named_by_end: bool = False
    """A key's windows are told apart by their end, not their start: they share starts (:class:`Cumulate`)."""

    def window_ids(self, starts: Time, ends: Time) -> Time:
        """What tells a key's windows apart, per window: the start, or the end when :attr:`named_by_end`."""
        return ends if self.named_by_end else starts

    def assign(self, timestamps: np.ndarray) -> Assignment:
        raise NotImplementedError

    def merge(self, windows: Sequence[Window]) -> list[tuple[Window, list[Window]]]:
        """Group a key's windows into the windows they merge into: ``[(merged, [members...])]``, by start.

        Non-merging assigners never merge: every window is its own group.
        """
        return [(window, [window]) for window in sorted(windows)]

    def merge_into(self, windows: Sequence[Window], new: Window) -> tuple[Window, list[Window]]:
        """The window ``new`` becomes with a key's open ``windows`` (already merged: they do not merge with
        each other), and which of them it absorbs; the incremental form of :meth:`merge`."""
        merged, members = next((m, ws) for m, ws in self.merge([*windows, new]) if new in ws)
        return merged, sorted({w for w in members if w in windows})

    def assign_one(self, timestamp: int) -> list[Window]:
        assigned = self.assign(np.array([timestamp], dtype=np.int64))
        return [Window(int(s), int(e)) for s, e in zip(assigned.start, assigned.end, strict=True)]

    def output_times(self, timestamps: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The times records contribute to their windows' pane timestamps (vectorised)."""
        return timestamps


def _window_start(timestamps: np.ndarray, offset: int, slide: int) -> np.ndarray:
    # Flink's TimeWindow.getWindowStartWithOffset, with floor semantics for negative timestamps.
    return timestamps - np.mod(timestamps - offset, slide)


@dataclass(frozen=True)
class Tumbling(WindowAssigner):
    """Fixed windows ``[k*size + offset, (k+1)*size + offset)`` for integer k.

    :arg size: window length (ms or timedelta, > 0).
    :arg offset: shift of the window grid (ms or timedelta), e.g. a time-zone offset.
    """

    size: int
    offset: int = 0

    def __init__(self, size: Duration, offset: Duration = 0) -> None:
        size_ms = positive_millis(size, "the window size")
        object.__setattr__(self, "size", size_ms)
        object.__setattr__(self, "offset", to_millis(offset) % size_ms)

    def assign(self, timestamps: np.ndarray) -> Assignment:
        timestamps = np.asarray(timestamps, dtype=np.int64)
        start = _window_start(timestamps, self.offset, self.size)
        return Assignment(np.arange(len(timestamps), dtype=np.int64), start, start + self.size)


@dataclass(frozen=True)
class Sliding(WindowAssigner):
    """Overlapping windows of length ``size`` starting every ``slide``.

    A record belongs to ``ceil(size / slide)`` windows (fewer when ``size`` is not
    a multiple of ``slide``). Pane timestamps obey Beam's (and *Streaming
    Systems*') overlapping-window rule: a record's output time in a window is at
    least the end of the previous window (``end - slide``), so window N+1's
    output is never earlier than window N's end and a downstream stage is not
    held back needlessly.

    :arg size: window length (> 0). :arg slide: distance between starts (> 0, <= size).
    :arg offset: shift of the grid.
    """

    size: int
    slide: int
    offset: int = 0

    def __init__(self, size: Duration, slide: Duration, offset: Duration = 0) -> None:
        size_ms = positive_millis(size, "the window size")
        slide_ms = positive_millis(slide, "the window slide")
        if slide_ms > size_ms:
            raise ValueError(f"the slide ({slide_ms} ms) must not exceed the size ({size_ms} ms)")
        if -(-size_ms // slide_ms) > MAX_WINDOWS_PER_RECORD:
            raise ValueError(
                f"size / slide = {size_ms} / {slide_ms} puts every record in more than {MAX_WINDOWS_PER_RECORD:,} "
                "windows; use a longer slide"
            )
        object.__setattr__(self, "size", size_ms)
        object.__setattr__(self, "slide", slide_ms)
        object.__setattr__(self, "offset", to_millis(offset) % slide_ms)

    def assign(self, timestamps: np.ndarray) -> Assignment:
        timestamps = np.asarray(timestamps, dtype=np.int64)
        last_start = _window_start(timestamps, self.offset, self.slide)
        per_record = -(-self.size // self.slide)
        # Candidate starts: last_start, last_start - slide, ...; keep those whose window contains ts.
        steps = np.arange(per_record - 1, -1, -1, dtype=np.int64) * self.slide
        starts = last_start[:, None] - steps[None, :]
        keep = (starts + self.size) > timestamps[:, None]
        record_index = np.broadcast_to(np.arange(len(timestamps), dtype=np.int64)[:, None], starts.shape)
        start = starts[keep]
        return Assignment(record_index[keep], start, start + self.size)

    def output_times(self, timestamps: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        return np.maximum(timestamps, end - self.slide)


@dataclass(frozen=True)
class Cumulate(WindowAssigner):
    """Windows that grow by ``step`` from a fixed start up to ``max_size``: Flink's ``CUMULATE``.

    The time axis is cut into epochs ``[e, e + max_size)`` with ``e = k*max_size + offset``; each epoch has
    ``max_size / step`` windows ``[e, e + j*step)`` for ``j = 1 .. max_size/step``, so with a day's epoch and an
    hour's step, the window ending at 10:00 holds the day's records from midnight to 10:00. A record at ``ts``
    belongs to every window of its epoch that ends after it: ``[e, end)`` for ``end`` from the first step boundary
    above ``ts`` up to ``e + max_size`` (``max_size/step`` windows for a record in the epoch's first step, one for a
    record in its last). Each window fires (and is late, and expires) by its own end, as any window does: the
    window ending at 10:00 fires when the watermark reaches 09:59:59.999, whether records arrived after 09:00 or
    not (a sparse key still gets a pane per step once it has a record in the epoch).

    Pane timestamps follow the overlapping-window rule :class:`Sliding` states: a record's output time in a window
    is at least the end of the epoch's previous window (``max(ts, end - step)``), so the window ending at 10:00
    does not hold a downstream stage back to 00:00.

    :arg step: how much each window is longer than the previous one (ms or timedelta, > 0).
    :arg max_size: the epoch, the longest window (> 0, a whole multiple of ``step``, as Flink requires).
    :arg offset: shift of the epochs (and steps), e.g. a time zone's offset for days in local time.
    """

    step: int
    max_size: int
    offset: int = 0
    named_by_end = True

    def __init__(self, step: Duration, max_size: Duration, offset: Duration = 0) -> None:
        step_ms = positive_millis(step, "the cumulate step")
        size_ms = positive_millis(max_size, "the cumulate max size")
        if size_ms % step_ms:
            raise ValueError(f"the max size ({size_ms} ms) must be a whole multiple of the step ({step_ms} ms)")
        if size_ms // step_ms > MAX_WINDOWS_PER_RECORD:
            raise ValueError(
                f"max size / step = {size_ms} / {step_ms} puts a record in up to {size_ms // step_ms:,} windows "
                f"(at most {MAX_WINDOWS_PER_RECORD:,}); use a longer step"
            )
        object.__setattr__(self, "step", step_ms)
        object.__setattr__(self, "max_size", size_ms)
        object.__setattr__(self, "offset", to_millis(offset) % size_ms)

    def assign(self, timestamps: np.ndarray) -> Assignment:
        timestamps = np.asarray(timestamps, dtype=np.int64)
        epoch = _window_start(timestamps, self.offset, self.max_size)
        # Candidate ends: the epoch's end, then one step earlier each; keep those above ts, in ascending order.
        steps = np.arange(self.max_size // self.step - 1, -1, -1, dtype=np.int64) * self.step
        ends = (epoch + self.max_size)[:, None] - steps[None, :]
        keep = ends > timestamps[:, None]
        record_index = np.broadcast_to(np.arange(len(timestamps), dtype=np.int64)[:, None], ends.shape)
        return Assignment(record_index[keep], np.broadcast_to(epoch[:, None], ends.shape)[keep], ends[keep])

    def output_times(self, timestamps: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        return np.maximum(timestamps, end - self.step)


@dataclass(frozen=True)
class Sessions(WindowAssigner):
    """Per-key sessions: each record opens ``[ts, ts + gap)``; overlapping windows merge.

    Two records of a key are in one session when their timestamps are strictly
    less than ``gap`` apart (Beam's rule; Flink also merges windows that only
    touch, i.e. records exactly ``gap`` apart). A late record can bridge two
    sessions into one.

    :arg gap: the inactivity gap (ms or timedelta, > 0).
    """

    gap: int
    is_merging = True

    def __init__(self, gap: Duration) -> None:
        object.__setattr__(self, "gap", positive_millis(gap, "the session gap"))

    def merge(self, windows: Sequence[Window]) -> list[tuple[Window, list[Window]]]:
        """Overlapping windows merge into their cover (see :func:`merge_windows`)."""
        return merge_windows(windows)

    def merge_into(self, windows: Sequence[Window], new: Window) -> tuple[Window, list[Window]]:
        """``new`` absorbs the open windows it overlaps and becomes their cover (as :meth:`merge` would)."""
        members = sorted(w for w in windows if w.intersects(new))
        merged = new
        for window in members:
            merged = merged.cover(window)
        return merged, members

    def assign(self, timestamps: np.ndarray) -> Assignment:
        timestamps = np.asarray(timestamps, dtype=np.int64)
        return Assignment(np.arange(len(timestamps), dtype=np.int64), timestamps, timestamps + self.gap)


@dataclass(frozen=True)
class Global(WindowAssigner):
    """One window for all time: ``[MIN_TIMESTAMP, MAX_TIMESTAMP)``.

    It fires on time only when the watermark reaches its max timestamp, i.e. at
    the end of a bounded input; use a count or processing-time trigger for
    results before that.
    """

    def assign(self, timestamps: np.ndarray) -> Assignment:
        n = len(timestamps)
        return Assignment(
            np.arange(n, dtype=np.int64),
            np.full(n, GLOBAL_WINDOW.start, dtype=np.int64),
            np.full(n, GLOBAL_WINDOW.end, dtype=np.int64),
        )


def merge_windows(windows: Sequence[Window]) -> list[tuple[Window, list[Window]]]:
    """Merge overlapping windows (sessions): ``[(merged, [constituents...]), ...]``.

    Sorted by start; a window joins the current group when it starts strictly
    before the group's end (Beam's ``Sessions.merge``).
    """
    groups: list[tuple[Window, list[Window]]] = []
    for window in sorted(windows):
        if groups and window.start < groups[-1][0].end:
            merged, members = groups[-1]
            groups[-1] = (merged.cover(window), [*members, window])
        else:
            groups.append((window, [window]))
    return groups


def merge_groups(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`merge_windows` for many keys at once, vectorised: which windows merge with which.

    ``codes`` says whose window each one is (an int per key), ``[starts, ends)``
    its bounds in ms. Returns ``(order, group)``: ``order`` sorts the windows by
    (key, start), arrival order kept among equal starts; ``group[i]`` numbers the
    merged window that the ``i``-th window in that order belongs to (0, 1, ...,
    ascending). The rule is :func:`merge_windows`'s: a window joins its key's
    current group when it starts strictly before the group's end (the running MAX
    of the ends so far), so windows that only touch stay apart.
    """
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    low, span = int(starts.min()), int(starts.max()) - int(starts.min()) + 1
    if span * (int(codes.max()) + 1) < 2**62:  # one int64 sort key: twice as fast as lexsort
        order = np.argsort(codes.astype(np.int64) * span + (starts - low), kind="stable")
    else:
        order = np.lexsort((np.arange(len(codes)), starts, codes))
    codes, starts, ends = codes[order], starts[order], ends[order]
    reach = pd.Series(ends).groupby(codes, sort=False).cummax().to_numpy()
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (codes[1:] != codes[:-1]) | (starts[1:] >= reach[:-1])
    return order, np.cumsum(new_group) - 1
