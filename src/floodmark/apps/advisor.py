"""Lateness advisor: size the out-of-orderness bound and allowed lateness from observed data.

*Streaming Systems*' percentile watermark trades completeness for latency on purpose; this module applies the same
idea to *configuration*: from the records of a run, it says which
``WatermarkStrategy.for_bounded_out_of_orderness(bound)`` and which ``allowed_lateness`` give a chosen
fraction of late and of dropped records, and what each choice costs.

Definitions (all values ``int`` milliseconds):

* A record's **out-of-orderness** is ``max(0, M - ts)`` where ``ts`` is its event time and ``M`` the highest
  event time seen on *its split* before it (a split's first record: 0). It is exactly what a bounded
  watermark must cover: Flink's watermark is ``M - bound - 1`` and a record is late when
  ``ts <= watermark``, i.e. when ``out_of_orderness > bound``. A record exactly ``bound`` behind is on
  time (the ``- 1``).
* With allowed lateness ``L`` a window ``[start, end)`` is dropped when ``end - 1 + L <= watermark``. The
  worst case for a record is to sit on its window's last millisecond (``end - 1 == ts``), so a record with
  ``out_of_orderness <= bound + L`` is never dropped (it makes a LATE pane instead), whatever the windows.
* Costs, in event time: the ON_TIME pane of ``[start, end)`` fires once every active split has seen
  ``end + bound`` (``M - bound - 1 >= end - 1``), so results come ``bound`` ms later than with a perfect
  watermark (``latency_ms``); a window's state is kept until ``end + bound + L`` (``retention_ms`` after
  its end).

The numbers are conservative (upper limits for the late and dropped fractions) for the floodmark runtime:
the analysis assumes the split's watermark follows every record at once, while periodic emission and
micro-batches update it later (fewer records late), and the operator compares with the MIN over splits,
which is never above a split's own watermark. A record is counted late in the *Streaming Systems* sense
(behind the watermark at arrival); it produces a LATE pane only if its window has already fired, which
depends on where in the window it falls. Not covered: lateness across splits after a split was idle (the
combined watermark moved on without it; see ``docs/semantics.md``).

Summary (``LatenessProfile``): an HDR-style log-linear histogram of out-of-orderness values, exact (one
bin per ms) below ``2 ** (PRECISION_BITS + 1)`` = 256 ms and with ``2 ** PRECISION_BITS`` = 128 bins per
power of two above, so a bin is at most 1/128 (0.78 %) of its values wide. Each bin also keeps the
smallest and largest value that fell into it. Every recommended bound is therefore a value that was
actually observed, the late fraction reported for it is exact, and the smallest bound meeting the target
is known to lie in ``[bound_floor_ms, bound_ms]`` (equal whenever the bin held one distinct value, always
below 256 ms). Memory is fixed (7,296 bins), independent of the number of records; per split, only the
highest event time is kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, Duration, event_time_of, positive_millis
from floodmark.core.values import unwrap
from floodmark.protocol.files import detect_format, list_files, partition_values

PRECISION_BITS = 7
"""Bins per power of two = ``2 ** PRECISION_BITS``: relative bin width <= 1/128 (0.78 %)."""

_EXACT_LIMIT = 1 << (PRECISION_BITS + 1)  # values below this have one bin per ms (256)
_SUB_BINS = 1 << PRECISION_BITS
# Out-of-orderness is clamped to MAX_TIMESTAMP (< 2**63), so the highest power of two is 2**62.
NUM_BINS = _EXACT_LIMIT + (62 - PRECISION_BITS) * _SUB_BINS
_SNAPSHOT_VERSION = 1

DEFAULT_FRACTIONS: tuple[float, ...] = (0.5, 0.1, 0.05, 0.01, 0.001, 0.0)


# --------------------------------------------------------------------------------------------------------
# histogram layout


def bin_index(values: ArrayLike) -> np.ndarray:
    """The histogram bin of each out-of-orderness value (``int64`` in ``[0, MAX_TIMESTAMP]``).

    Values below 256 have their own bin; above, bin edges are ``m * 2 ** (e - 7)`` for ``m`` in
    ``[128, 256)``, where ``2 ** e <= value < 2 ** (e + 1)``.
    """
    v = np.asarray(values, dtype=np.int64)
    if v.size and int(v.min()) < 0:
        raise ValueError("out-of-orderness values must not be negative")
    # bit_length - 1 by binary search: numpy has no integer log2, and float log2 rounds up near 2**k for
    # values above 2**53. Every shift stays <= 62, so it is defined for int64.
    e = np.zeros(v.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        candidate = e + step
        ok = candidate <= 62
        shifted = np.right_shift(v, np.where(ok, candidate, 0))
        e = np.where(ok & (shifted > 0), candidate, e)
    shift = np.maximum(e - PRECISION_BITS, 0)
    log_bins = _EXACT_LIMIT + (e - PRECISION_BITS - 1) * _SUB_BINS + (np.right_shift(v, shift) - _SUB_BINS)
    return np.where(v < _EXACT_LIMIT, v, log_bins)


def bin_edges(index: int) -> tuple[int, int]:
    """Smallest and largest value (both inclusive, ms) that fall into bin ``index``."""
    if not 0 <= index < NUM_BINS:
        raise ValueError(f"bin index out of range: {index}")
    if index < _EXACT_LIMIT:
        return index, index
    octave, sub = divmod(index - _EXACT_LIMIT, _SUB_BINS)
    width_bits = octave + 1  # e - PRECISION_BITS with e = octave + PRECISION_BITS + 1
    low = (sub + _SUB_BINS) << width_bits
    return low, low + (1 << width_bits) - 1


# --------------------------------------------------------------------------------------------------------
# per-record out-of-orderness


def _event_times(event_times: ArrayLike) -> np.ndarray:
    ts = np.asarray(event_times)
    if ts.ndim != 1:
        raise ValueError("event_times must be one-dimensional")
    if ts.size == 0:
        return ts.astype(np.int64)
    if ts.dtype.kind not in "iu":
        # Same rule as time.to_millis: floats are refused, they are usually seconds.
        raise TypeError(f"event times must be integer milliseconds, got dtype {ts.dtype}")
    if ts.dtype.kind == "u" and int(ts.max()) > MAX_TIMESTAMP:
        raise ValueError("event times above MAX_TIMESTAMP")
    return ts.astype(np.int64, copy=False)


def _split_codes(splits: ArrayLike | None, n: int) -> tuple[np.ndarray, list[Hashable]]:
    if splits is None:
        return np.zeros(n, dtype=np.int64), [0] if n else []
    if isinstance(splits, np.ndarray | pd.Series | pd.Index):
        values = np.asarray(splits)
    else:
        # fromiter keeps tuple ids (e.g. (topic, partition)) as one object each; asarray would unpack them.
        values = np.fromiter(splits, dtype=object)
    if values.ndim != 1 or len(values) != n:
        raise ValueError(f"splits must be one-dimensional with one entry per record ({n}), got shape {values.shape}")
    # pandas' hash factorisation: O(n), any hashable, codes in order of first appearance.
    codes, uniques = pd.factorize(values, sort=False, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), [unwrap(u) for u in uniques]


def _out_of_orderness(
    codes: np.ndarray, ts: np.ndarray, carried: np.ndarray, has_carried: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per-record out-of-orderness and the new per-split maximum, vectorised over all splits.

    ``codes`` are split codes ``0..k-1`` (each present), ``carried``/``has_carried`` the maximum seen per
    split in earlier batches. Returns ``(ooo, new_max)`` with ``ooo`` in arrival order.
    """
    n = len(ts)
    if n == 0:
        return np.empty(0, dtype=np.int64), carried.copy()
    order = np.argsort(codes, kind="stable")  # stable: arrival order within a split is kept
    c = codes[order]
    t = ts[order]
    # Running maximum per split in one pass: replace each time by its rank among all times, offset by
    # split so that every key of split g+1 is above every key of split g; the running maximum over the
    # split-sorted keys then restarts at each split boundary by itself.
    uniq, rank = np.unique(t, return_inverse=True)
    r = len(uniq)
    running = np.maximum.accumulate(c * r + rank)
    starts = np.ones(n, dtype=bool)
    starts[1:] = c[1:] != c[:-1]
    before = np.full(n, MIN_TIMESTAMP, dtype=np.int64)
    before[1:] = uniq[running[:-1] % r]
    before[starts] = MIN_TIMESTAMP  # the previous key belongs to another split
    has_before = ~starts | has_carried[c]
    before = np.maximum(before, carried[c])
    behind = has_before & (before > t)
    # before - t can exceed int64 (e.g. MIN vs MAX) but always fits uint64; clamp to MAX_TIMESTAMP.
    diff = before.view(np.uint64) - t.view(np.uint64)
    diff = np.minimum(diff, np.uint64(MAX_TIMESTAMP)).astype(np.int64)
    ooo_sorted = np.where(behind, diff, 0)
    ooo = np.empty(n, dtype=np.int64)
    ooo[order] = ooo_sorted
    group_starts = np.flatnonzero(starts)
    new_max = np.maximum.reduceat(t, group_starts)
    new_max = np.where(has_carried, np.maximum(new_max, carried), new_max)
    return ooo, new_max


def out_of_orderness(splits: ArrayLike | None, event_times: ArrayLike) -> np.ndarray:
    """Each record's out-of-orderness (ms, ``>= 0``): how far it trails its split's earlier maximum.

    :arg splits: the split (partition) of each record, any hashable values; ``None``: one split.
    :arg event_times: integer ms event times, in arrival order (order within a split matters, order
        across splits does not).
    :returns: ``int64`` array, same order as the input. Within a split, ``ooo[i] > bound`` exactly when
        Flink's bounded watermark ``max - bound - 1`` (updated after every record) makes record ``i`` late.
    """
    ts = _event_times(event_times)
    codes, uniques = _split_codes(splits, len(ts))
    k = len(uniques)
    ooo, _ = _out_of_orderness(codes, ts, np.full(k, MIN_TIMESTAMP, dtype=np.int64), np.zeros(k, dtype=bool))
    return ooo


# --------------------------------------------------------------------------------------------------------
# the profile


class LatenessProfile:
    """Mergeable, fixed-size summary of the out-of-orderness of a stream (see the module docstring).

    Feed batches in arrival order with :meth:`observe`; the highest event time per split is carried over
    so that a record is compared with everything its split delivered before, in any batch. Stateful:
    :meth:`snapshot` / :meth:`restore` (JSON-compatible when the split ids are ``str`` or ``int``).
    """

    def __init__(self) -> None:
        self.counts = np.zeros(NUM_BINS, dtype=np.int64)
        # Observed min / max per bin; meaningful only where counts > 0.
        self.mins = np.full(NUM_BINS, MAX_TIMESTAMP, dtype=np.int64)
        self.maxs = np.zeros(NUM_BINS, dtype=np.int64)
        self.split_max: dict[Hashable, int] = {}

    # -- feeding ---------------------------------------------------------------------------------------

    def observe(self, splits: ArrayLike | None, event_times: ArrayLike) -> np.ndarray:
        """Add a batch of records (in arrival order) and return their out-of-orderness (ms).

        :arg splits: split id per record (any hashable), or ``None`` for a single split (id ``0``).
        :arg event_times: integer ms event times.
        """
        ts = _event_times(event_times)
        codes, uniques = _split_codes(splits, len(ts))
        if len(ts) == 0:
            return np.empty(0, dtype=np.int64)
        carried = np.array([self.split_max.get(s, MIN_TIMESTAMP) for s in uniques], dtype=np.int64)
        has_carried = np.array([s in self.split_max for s in uniques], dtype=bool)
        ooo, new_max = _out_of_orderness(codes, ts, carried, has_carried)
        for split, value in zip(uniques, new_max.tolist(), strict=True):
            self.split_max[split] = value
        self.add_values(ooo)
        return ooo

    def add_values(self, ooo: ArrayLike) -> None:
        """Add already computed out-of-orderness values (ms, ``>= 0``) to the histogram."""
        values = np.asarray(ooo, dtype=np.int64)
        if values.size == 0:
            return
        bins = bin_index(values)
        self.counts += np.bincount(bins, minlength=NUM_BINS)
        np.minimum.at(self.mins, bins, values)
        np.maximum.at(self.maxs, bins, values)

    def merge(self, other: LatenessProfile) -> LatenessProfile:
        """A new profile holding both histograms; per-split maxima combine by max.

        Exact (equal to observing the concatenation) when the two profiles saw disjoint sets of splits,
        e.g. partitions read by different tasks. For consecutive batches of the *same* split, call
        :meth:`observe` on one profile instead: a merge cannot compare the second batch's records with
        the first batch's maximum.
        """
        merged = LatenessProfile()
        merged.counts = self.counts + other.counts
        merged.mins = np.minimum(self.mins, other.mins)
        merged.maxs = np.maximum(self.maxs, other.maxs)
        merged.split_max = dict(self.split_max)
        for split, value in other.split_max.items():
            merged.split_max[split] = max(value, merged.split_max.get(split, value))
        return merged

    # -- queries ---------------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Number of records observed."""
        return int(self.counts.sum())

    @property
    def max_out_of_orderness(self) -> int:
        """The largest out-of-orderness observed (ms); 0 when empty."""
        nonzero = np.flatnonzero(self.counts)
        return int(self.maxs[nonzero[-1]]) if len(nonzero) else 0

    def late_count(self, bound_ms: int) -> int:
        """Records with out-of-orderness ``> bound_ms`` (late under a ``bound_ms`` bounded watermark).

        Exact unless ``bound_ms`` falls strictly inside the observed ``[min, max)`` of a bin wider than
        1 ms; then that bin is counted as late, so the result is an upper limit.
        """
        nonzero = self.counts > 0
        return int(self.counts[nonzero & (self.maxs > bound_ms)].sum())

    def late_fraction(self, bound_ms: int) -> float:
        """:meth:`late_count` / :attr:`count` (0.0 when empty)."""
        n = self.count
        return self.late_count(bound_ms) / n if n else 0.0

    def smallest_bound(self, target_fraction: float) -> tuple[int, int]:
        """``(bound, floor)``: the smallest observed value ``bound`` with ``late_count(bound) <= target * n``.

        No bound below ``floor`` meets the target, so the exact optimum is in ``[floor, bound]``
        (``floor == bound`` below 256 ms). ``target_fraction`` in ``[0, 1]``; equality counts as met.
        :raises ValueError: if nothing was observed.
        """
        n = self.count
        if n == 0:
            raise ValueError("no records observed: cannot recommend a bound")
        limit = _allowed_count(target_fraction, n)
        nonzero = np.flatnonzero(self.counts)
        # late[i] = records in bins after nonzero[i] = records with value > maxs[nonzero[i]] (exact).
        late = n - np.cumsum(self.counts[nonzero])
        if n - int(self.counts[0]) <= limit:
            return 0, 0  # candidate 0 (even when no record had out-of-orderness 0)
        first = int(np.argmax(late <= limit))  # the last bin always qualifies (late == 0)
        chosen = nonzero[first]
        return int(self.maxs[chosen]), int(self.mins[chosen])

    # -- state -----------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Sparse, JSON-compatible state: the non-empty bins ``[index, count, min, max]`` and split maxima."""
        nonzero = np.flatnonzero(self.counts)
        return {
            "version": _SNAPSHOT_VERSION,
            "precision_bits": PRECISION_BITS,
            "bins": [[int(i), int(self.counts[i]), int(self.mins[i]), int(self.maxs[i])] for i in nonzero.tolist()],
            "split_max": [[split, value] for split, value in self.split_max.items()],
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Replace this profile's state with a :meth:`snapshot`."""
        if state.get("version") != _SNAPSHOT_VERSION or state.get("precision_bits") != PRECISION_BITS:
            raise ValueError(
                f"incompatible lateness profile snapshot (version {state.get('version')}, "
                f"precision {state.get('precision_bits')})"
            )
        fresh = LatenessProfile()
        for index, count, low, high in state["bins"]:
            fresh.counts[index] = count
            fresh.mins[index] = low
            fresh.maxs[index] = high
        # JSON turns tuples into lists; split ids must be hashable again.
        fresh.split_max = {
            (tuple(split) if isinstance(split, list) else split): int(value) for split, value in state["split_max"]
        }
        self.counts, self.mins, self.maxs, self.split_max = fresh.counts, fresh.mins, fresh.maxs, fresh.split_max

    @classmethod
    def from_snapshot(cls, state: Mapping[str, Any]) -> LatenessProfile:
        """A new profile restored from :meth:`snapshot`."""
        profile = cls()
        profile.restore(state)
        return profile

    def __repr__(self) -> str:
        return f"LatenessProfile(count={self.count}, splits={len(self.split_max)}, max={self.max_out_of_orderness})"


def observe(splits: ArrayLike | None, event_times: ArrayLike) -> LatenessProfile:
    """A new :class:`LatenessProfile` of one batch of records in arrival order (:meth:`LatenessProfile.observe`)."""
    profile = LatenessProfile()
    profile.observe(splits, event_times)
    return profile


def _check_fraction(fraction: float, name: str) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, int | float | np.floating | np.integer):
        raise TypeError(f"{name} must be a number, got {type(fraction).__name__}")
    value = float(fraction)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {fraction}")
    return value


def _allowed_count(fraction: float, n: int) -> int:
    """How many of ``n`` records may exceed the bound: ``floor(fraction * n)``, in exact arithmetic.

    ``Fraction(repr(0.29))`` is 29/100, the number the user typed; float ``0.29 * 100`` is 28.999...
    """
    return math.floor(Fraction(repr(_check_fraction(fraction, "target fraction"))) * n)


# --------------------------------------------------------------------------------------------------------
# recommendations


@dataclass(frozen=True)
class Recommendation:
    """A bounded-out-of-orderness configuration and what it costs, for one target.

    :ivar target_late_fraction: asked: at most this fraction of records late (behind the watermark).
    :ivar target_dropped_fraction: asked: at most this fraction beyond bound + allowed lateness.
    :ivar bound_ms: the out-of-orderness bound (watermark = max - bound - 1); an observed value.
    :ivar bound_floor_ms: no bound below this meets the target (optimum in ``[floor, bound]``).
    :ivar allowed_lateness_ms: extra time late records still update their window (LATE panes).
    :ivar late_fraction: observed fraction with out-of-orderness ``> bound_ms`` (exact).
    :ivar dropped_fraction: observed fraction with out-of-orderness ``> bound_ms + allowed_lateness_ms``.
    :ivar latency_ms: event-time delay of ON_TIME panes compared with a perfect watermark (= bound).
    :ivar retention_ms: how long past its end a window's state is kept (= bound + allowed lateness).
    :ivar records: records the profile holds.
    :ivar window_size_ms: the tumbling window size the next field is for, if given.
    :ivar max_windows_per_key: with ``window_size_ms``: at most this many tumbling windows per key are
        open at once (``1 + ceil(retention / size)``), i.e. the state-size factor.
    """

    target_late_fraction: float
    target_dropped_fraction: float
    bound_ms: int
    bound_floor_ms: int
    allowed_lateness_ms: int
    late_fraction: float
    dropped_fraction: float
    latency_ms: int
    retention_ms: int
    records: int
    window_size_ms: int | None = None
    max_windows_per_key: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for JSON or a table)."""
        return asdict(self)


def recommend(
    profile: LatenessProfile,
    target_late_fraction: float,
    window_size_ms: Duration | None = None,
    target_dropped_fraction: float | None = None,
) -> Recommendation:
    """The smallest bound and allowed lateness meeting the targets on the observed records.

    ``bound_ms`` is the smallest observed out-of-orderness ``b`` (or 0) such that the fraction of records
    with out-of-orderness ``> b`` is ``<= target_late_fraction``; ``allowed_lateness_ms`` is the smallest
    ``L >= 0`` such that the fraction with out-of-orderness ``> b + L`` is ``<= target_dropped_fraction``
    (default ``target_late_fraction / 10``): those records produce LATE panes instead of being dropped.

    :arg target_late_fraction: in ``[0, 1]``; 0 = no late record (bound = the largest observed).
    :arg window_size_ms: tumbling window size (ms or timedelta, > 0), only to express the retention as
        open windows per key.
    :raises ValueError: for an empty profile or fractions outside ``[0, 1]``.
    """
    late_target = _check_fraction(target_late_fraction, "target_late_fraction")
    dropped_target = (
        late_target / 10
        if target_dropped_fraction is None
        else _check_fraction(target_dropped_fraction, "target_dropped_fraction")
    )
    size = None if window_size_ms is None else positive_millis(window_size_ms, "window_size_ms")
    bound, floor = profile.smallest_bound(late_target)
    total, _ = profile.smallest_bound(dropped_target)
    allowed = max(0, total - bound)
    n = profile.count
    retention = bound + allowed
    windows = None if size is None else 1 + -(-retention // size)  # integer ceil
    return Recommendation(
        target_late_fraction=late_target,
        target_dropped_fraction=dropped_target,
        bound_ms=bound,
        bound_floor_ms=floor,
        allowed_lateness_ms=allowed,
        late_fraction=profile.late_count(bound) / n,
        dropped_fraction=profile.late_count(bound + allowed) / n,
        latency_ms=bound,
        retention_ms=retention,
        records=n,
        window_size_ms=size,
        max_windows_per_key=windows,
    )


def tradeoff(
    profile: LatenessProfile,
    fractions: Iterable[float] = DEFAULT_FRACTIONS,
    window_size_ms: Duration | None = None,
) -> list[Recommendation]:
    """One :func:`recommend` per target late fraction (default targets for dropped = fraction / 10)."""
    return [recommend(profile, fraction, window_size_ms=window_size_ms) for fraction in fractions]


_COLUMNS: Sequence[tuple[str, str]] = (
    ("late <=", "target_late_fraction"),
    ("bound ms", "bound_ms"),
    ("allowed lateness ms", "allowed_lateness_ms"),
    ("latency ms", "latency_ms"),
    ("retention ms", "retention_ms"),
    ("late (observed)", "late_fraction"),
    ("dropped (observed)", "dropped_fraction"),
)


def format_tradeoff(rows: Sequence[Recommendation]) -> str:
    """A plain-text table of :func:`tradeoff` rows (fractions as percentages, durations in ms)."""

    def cell(row: Recommendation, field: str) -> str:
        value = getattr(row, field)
        if isinstance(value, float):
            return f"{value * 100:.3g} %"
        return f"{value:,}"

    header = [title for title, _ in _COLUMNS]
    body = [[cell(row, field) for _, field in _COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(text.rjust(width) for text, width in zip(line, widths, strict=True)) for line in [header, *body]]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------
# reading records (``floodmark advise``)

INPUT_SUFFIXES = (".jsonl", ".json", ".parquet")
EVENT_TIME_FORMS = "ms, or an ISO-8601 date-time"


@dataclass(frozen=True)
class ObservedRecords:
    """Records read for the advisor, in arrival order (files by name, lines in order), and what was skipped.

    :ivar event_times: integer ms. :ivar splits: each record's split (``None``: one split).
    :ivar skipped: lines or rows that are not records with an integer event time (the advisor's dead letters).
    :ivar first_skipped: where the first of them is and why (``"<file> line N: <why>"``).
    """

    event_times: np.ndarray
    splits: np.ndarray | None
    skipped: int = 0
    first_skipped: str | None = None

    def skipped_text(self) -> str | None:
        """One line on the skipped input, or None when nothing was skipped."""
        if not self.skipped:
            return None
        total = self.skipped + len(self.event_times)
        return (
            f"skipped {self.skipped:,} of {total:,} input lines/rows that are not records with an event time "
            f"(as dead letters would be); first: {self.first_skipped}"
        )


def read_records(path: Path, event_time: str, split: str | None, time_zone: str = "UTC") -> ObservedRecords:
    """The records of the JSON-lines (``.jsonl``/``.json``) or Parquet file ``path``, or of those files under the
    directory ``path`` and its folders, in path order (:func:`floodmark.protocol.files.list_files`); ``key=value``
    folders give columns (a split among them), as Spark's partition discovery does.

    Event times are read by the runtime's rules (:func:`floodmark.core.time.event_time_of`: ms, ISO text with or
    without an offset, ``time_zone`` for text without one). A line that is not a JSON object, and a line or row
    without an event time the runtime could use, is skipped and counted, never fatal.

    :raises FileNotFoundError: ``path`` does not exist.
    :raises ValueError: ``path`` is a run's output directory, holds no input files or no records, or no record
        has the ``event_time`` (or ``split``) column.
    """
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: give a JSON-lines or Parquet file, or a directory of them")
    if path.is_dir() and (path / "pipeline.json").is_file() and (path / "checkpoint").is_dir():
        raise ValueError(
            f"{path} is the output directory of floodmark demo or replay, not input records: give the "
            "JSON-lines or Parquet files the job read"
        )
    if path.is_file() and path.suffix not in INPUT_SUFFIXES:
        raise ValueError(f"{path} is not a {'/'.join(INPUT_SUFFIXES)} file: give JSON lines or Parquet")
    try:
        files = list_files(path, detect_format(path), "path")
    except (FileNotFoundError, ValueError):
        raise ValueError(
            f"{path} holds no {'/'.join(INPUT_SUFFIXES)} files: give a directory of input records"
        ) from None
    root = path if path.is_dir() else path.parent
    columns = [event_time, *([split] if split else [])]
    times: list[np.ndarray] = []
    splits: list[np.ndarray] = []
    skipped, first, seen = 0, None, set()
    for file in files:
        folders = partition_values(root, file)
        reader = _parquet_records if file.suffix == ".parquet" else _json_records
        ts, parts, bad, why, names = reader(file, event_time, split, time_zone)
        if split in folders:  # the folder's value, as Spark gives partition columns
            parts = np.full(len(ts), folders[split], dtype=object)
        times.append(ts)
        splits.append(parts)
        skipped += bad
        first = first or why
        seen |= names | set(folders)
    missing = [c for c in columns if c not in seen]
    if missing and seen:
        raise ValueError(
            f"no record in {path} has the column(s) {missing} (columns: {sorted(seen)}): give --event-time/--split"
        )
    event_times = np.concatenate(times)
    if not len(event_times):
        why = f"{skipped:,} lines/rows skipped, first: {first}" if skipped else "its files are empty"
        raise ValueError(f"{path} holds no input records ({why}): give JSON lines or Parquet rows with {event_time!r}")
    return ObservedRecords(event_times, np.concatenate(splits) if split else None, skipped, first)


_Read = tuple[np.ndarray, np.ndarray, int, str | None, set[str]]
"""One file's event times, splits, skipped count, first skipped (where and why) and column names."""


def _json_records(file: Path, event_time: str, split: str | None, time_zone: str) -> _Read:
    times, parts, names = [], [], set()
    skipped, first = 0, None
    with file.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                why = None if isinstance(record, dict) else f"not a JSON object: {line.strip()[:80]!r}"
            except ValueError as error:
                record, why = None, f"not JSON ({error}): {line.strip()[:80]!r}"
            if isinstance(record, dict):
                names.update(record)
                ts = record.get(event_time)
                ms = event_time_of(ts, time_zone)
                if ms is not None:
                    times.append(ms)
                    parts.append(record.get(split) if split else None)
                    continue
                why = f"event time {event_time!r} is {ts!r}, not a time ({EVENT_TIME_FORMS})"
            skipped += 1
            first = first or f"{file.name} line {number}: {why}"
    return np.array(times, dtype=np.int64), np.array(parts, dtype=object), skipped, first, names


def _parquet_records(file: Path, event_time: str, split: str | None, time_zone: str) -> _Read:
    import pyarrow.parquet as pq

    names = set(pq.read_schema(file).names)
    wanted = [c for c in dict.fromkeys([event_time, *([split] if split else [])]) if c in names]
    frame = pd.read_parquet(file, columns=wanted, dtype_backend="numpy_nullable")
    if event_time not in frame:
        return np.empty(0, np.int64), np.empty(0, object), len(frame), None, names
    ts = frame[event_time]
    if pd.api.types.is_datetime64_any_dtype(ts):
        naive = ts.dt.tz_convert("UTC").dt.tz_localize(None) if ts.dt.tz is not None else ts
        moments = naive.to_numpy(dtype="datetime64[ms]")
        good, values = ~np.isnat(moments), moments.astype(np.int64)
    elif pd.api.types.is_integer_dtype(ts):
        good, values = ts.notna().to_numpy(dtype=bool), ts.fillna(0).to_numpy(dtype=np.int64)
    else:  # text or fractions: the runtime's rules, value by value
        read = [event_time_of(None if pd.isna(v) else v, time_zone) for v in ts.astype(object)]
        good = np.array([v is not None for v in read], dtype=bool)
        values = np.array([v or 0 for v in read], dtype=np.int64)
    skipped = int((~good).sum())
    first = None
    if skipped:
        row = int(np.flatnonzero(~good)[0])
        value = frame[event_time].iloc[row]
        first = f"{file.name} row {row + 1}: event time {event_time!r} is {value!r}, not a time ({EVENT_TIME_FORMS})"
    parts = frame[split].to_numpy(dtype=object)[good] if split and split in frame else np.full(good.sum(), None)
    return values[good], parts, skipped, first, names
