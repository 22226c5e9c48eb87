"""Interval-join advisor: propose an interval join's bounds from observed rows of its two inputs.

An interval join pairs a left row at ``l`` with every right row of its key at ``r`` where
``l + lower <= r <= l + upper`` (:mod:`floodmark.core.join.spec`, Flink's ``between(lower, upper)``). Bounds too
narrow miss partners; too wide, every row waits longer in the join's state and pairs with more rows than it should.
This module measures both on rows you already have (all values ``int`` milliseconds):

* The rows of one side are **measured** (``per``): each is taken to belong to the row of its key on the other side
  nearest in event time. Measure the side whose rows each belong to one row of the other: the clicks of a search
  (``per="right"``, the default: a search has many clicks, a click one search), the shipments of orders (either).
* A measured row's **offset** is ``r - l`` to that nearest row (of two as near, the earlier). A measured row whose
  key has no row on the other side has no offset (*unmatched*).
* For a coverage ``p``, the proposed bounds are the **narrowest** ``[lower, upper]`` holding the offsets of at least
  ``ceil(p * n)`` of the ``n`` measured rows that have one: a measured row's nearest partner then falls within them
  for a share ``p`` of those rows (``kept``, exact on the rows given). ``lower`` and ``upper`` are observed offsets.
* **pairs per row**: how many rows of the other side each measured row would be joined with under those bounds, on
  average (more than one where rows of the other side share it, or the bounds are wide).
* **state**: a buffered row waits until the watermark passes its last possible partner: a left row for ``upper`` ms
  of event time, a right row for ``-lower`` (plus the allowed lateness; :meth:`IntervalJoinSpec.cleanup_time`).

Rows are joined by one key column. Nothing is read in arrival order: only each row's key and event time count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

COVERAGES = (0.5, 0.9, 0.99, 0.999, 1.0)
"""The coverages :func:`advise_join` proposes bounds for."""


@dataclass(frozen=True)
class JoinBounds:
    """Bounds proposed for one coverage.

    :ivar coverage: the share of matched measured rows asked for. :ivar lower, upper: the bounds (ms;
        ``l + lower <= r <= l + upper``). :ivar kept: the share of matched measured rows whose nearest partner is
        within them (``>= coverage``). :ivar pairs_per_row: rows of the other side joined per measured row, on average
        over all measured rows.
    """

    coverage: float
    lower: int
    upper: int
    kept: float
    pairs_per_row: float

    @property
    def left_waits_ms(self) -> int:
        """How long (event time, ms) a left row stays buffered past its own time: ``max(upper, 0)``."""
        return max(self.upper, 0)

    @property
    def right_waits_ms(self) -> int:
        """How long (event time, ms) a right row stays buffered past its own time: ``max(-lower, 0)``."""
        return max(-self.lower, 0)


@dataclass(frozen=True)
class JoinAdvice:
    """What :func:`advise_join` found: the rows of each side, how many measured rows have a partner, and the bounds
    per coverage."""

    per: str
    left_rows: int
    right_rows: int
    measured: int
    matched: int
    bounds: list[JoinBounds]

    def text(self) -> str:
        """The advice as a table (one line per coverage)."""
        share = self.matched / self.measured if self.measured else 0.0
        other = "left" if self.per == "right" else "right"
        lines = [
            f"{self.left_rows:,} left rows, {self.right_rows:,} right rows; {self.matched:,} {self.per} rows "
            f"({share:.2%}) have a {other} row of their key, measured to the nearest",
            f"{'coverage':>9}  {'lower ms':>12}  {'upper ms':>12}  {'kept':>8}  {'pairs/row':>9}  "
            f"{'left waits ms':>13}  {'right waits ms':>14}",
        ]
        for b in self.bounds:
            lines.append(
                f"{_percent(b.coverage):>9}  {b.lower:>12,}  {b.upper:>12,}  {_percent(b.kept):>8}  "
                f"{b.pairs_per_row:>9.2f}  {b.left_waits_ms:>13,}  {b.right_waits_ms:>14,}"
            )
        return "\n".join(lines)


class _Partners:
    """One side's rows, ordered by key, then time, so that a row of the other side finds its partners by binary
    search: each row is one number, its key's code times ``span`` plus its time's rank among the side's times."""

    def __init__(self, codes: np.ndarray, ts: np.ndarray) -> None:
        self.times = np.unique(ts)
        self.span = len(self.times) + 1
        ranked = codes * self.span + np.searchsorted(self.times, ts)
        order = np.argsort(ranked, kind="stable")
        self.ranked, self.codes, self.ts = ranked[order], codes[order], ts[order]

    def _first(self, codes: np.ndarray, ts: np.ndarray, after: bool = False) -> np.ndarray:
        """Per query row, the index of the first row of its key at or after ``ts`` (strictly after: ``after``)."""
        at = codes * self.span + np.searchsorted(self.times, ts, side="right" if after else "left")
        return np.searchsorted(self.ranked, at, side="left")

    def nearest(self, codes: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Per query row, ``partner time - ts`` to its nearest row of the same key (the earlier of two as near);
        NaN where its key has no row."""
        n = len(self.ranked)
        if not n:
            return np.full(len(ts), np.nan)
        # The first row at or after the query's (key, time), and the one before it: the nearest is one of them.
        at = self._first(codes, ts)
        after, before = np.minimum(at, n - 1), np.maximum(at - 1, 0)
        above_ok = (at < n) & (self.codes[after] == codes)
        below_ok = (at > 0) & (self.codes[before] == codes)
        above, below = self.ts[after] - ts, self.ts[before] - ts
        take_below = below_ok & (~above_ok | (-below <= above))
        offsets = np.where(take_below, below, above).astype(np.float64)
        offsets[~(above_ok | below_ok)] = np.nan
        return offsets

    def within(self, codes: np.ndarray, ts: np.ndarray, lower: int, upper: int) -> np.ndarray:
        """Per query row, how many rows of its key lie in ``[ts + lower, ts + upper]`` (none where lower > upper)."""
        counts = self._first(codes, ts + upper, after=True) - self._first(codes, ts + lower)
        return np.maximum(counts, 0)


def _key_codes(left_keys: Sequence[object], right_keys: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    """The keys of both sides as int64 codes, equal keys equal codes."""
    both = pd.concat([pd.Series(list(left_keys), dtype=object), pd.Series(list(right_keys), dtype=object)])
    codes, _ = pd.factorize(both.reset_index(drop=True))
    return codes[: len(left_keys)].astype(np.int64), codes[len(left_keys) :].astype(np.int64)


def nearest_offsets(
    left_keys: Sequence[object], left_ts: np.ndarray, right_keys: Sequence[object], right_ts: np.ndarray
) -> np.ndarray:
    """Each left row's offset to its nearest right row of the same key (``r - l``; the earlier of two as near), as
    float64 with NaN for a left row whose key has no right row."""
    l_codes, r_codes = _key_codes(left_keys, right_keys)
    l_ts, r_ts = np.asarray(left_ts, dtype=np.int64), np.asarray(right_ts, dtype=np.int64)
    return _Partners(r_codes, r_ts).nearest(l_codes, l_ts)


def pairs_within(
    left_keys: Sequence[object],
    left_ts: np.ndarray,
    right_keys: Sequence[object],
    right_ts: np.ndarray,
    lower: int,
    upper: int,
) -> np.ndarray:
    """How many right rows of its key each left row joins with ``[lower, upper]``: ``l + lower <= r <= l + upper``."""
    l_codes, r_codes = _key_codes(left_keys, right_keys)
    l_ts, r_ts = np.asarray(left_ts, dtype=np.int64), np.asarray(right_ts, dtype=np.int64)
    return _Partners(r_codes, r_ts).within(l_codes, l_ts, lower, upper)


def narrowest(offsets: np.ndarray, count: int) -> tuple[int, int]:
    """The narrowest ``[lower, upper]`` of sorted ``offsets`` holding ``count`` of them (the earliest of as narrow)."""
    widths = offsets[count - 1 :] - offsets[: len(offsets) - count + 1]
    at = int(np.argmin(widths))
    return int(offsets[at]), int(offsets[at + count - 1])


def advise_join(
    left_keys: Sequence[object],
    left_ts: np.ndarray,
    right_keys: Sequence[object],
    right_ts: np.ndarray,
    per: Literal["left", "right"] = "right",
    coverages: Sequence[float] = COVERAGES,
) -> JoinAdvice:
    """Bounds for each of ``coverages``, measuring the rows of side ``per`` (the module docstring's definitions).

    :raises ValueError: no measured row has a row of its key on the other side, a coverage outside ``(0, 1]``, or
        ``per`` neither side.
    """
    if per not in ("left", "right"):
        raise ValueError(f"per is 'left' or 'right', not {per!r}")
    l_codes, r_codes = _key_codes(left_keys, right_keys)
    l_ts, r_ts = np.asarray(left_ts, dtype=np.int64), np.asarray(right_ts, dtype=np.int64)
    # The measured rows ask the other side's rows; a sign turns the other side's offsets into r - l.
    if per == "left":
        measured, partners, sign = (l_codes, l_ts), _Partners(r_codes, r_ts), 1
    else:
        measured, partners, sign = (r_codes, r_ts), _Partners(l_codes, l_ts), -1
    offsets = sign * partners.nearest(*measured)
    matched = np.sort(offsets[~np.isnan(offsets)]).astype(np.int64)
    if not len(matched):
        raise ValueError(f"no {per} row has a row of its key on the other side: nothing to size the bounds from")
    bounds = []
    for coverage in coverages:
        if not 0 < coverage <= 1:
            raise ValueError(f"a coverage is a share in (0, 1], got {coverage}")
        lower, upper = narrowest(matched, math.ceil(coverage * len(matched)))
        kept = float(np.mean((matched >= lower) & (matched <= upper)))
        # A right row at r joins the left rows with r - upper <= l <= r - lower.
        low, high = sorted((sign * lower, sign * upper))
        pairs = partners.within(*measured, low, high)
        bounds.append(JoinBounds(coverage, lower, upper, kept, float(pairs.mean())))
    return JoinAdvice(per, len(left_ts), len(right_ts), len(offsets), len(matched), bounds)


def _percent(share: float) -> str:
    return f"{share:.1%}" if share < 0.999 or share == 1.0 else f"{share:.2%}"
