"""The game-session simulator (*Streaming Systems*, ch. 3): mobile and console score events.

Each source has ``users`` players. A player plays sessions: bursts of score events spaced less than the
session gap apart (``event_spacing_ms``), sessions 2 to 3 gaps apart. Records are
``(ts, user, score, split)``: ``ts`` is the event time in ms since the epoch, ``split`` the source split
(a Kafka partition) that carries the user's events.

Time model. Processing time starts with event time at ``start_ms``; a record *arrives* (is readable) at
``ts + delay``, where ``delay`` is uniform on ``[min_delay_ms, max_delay_ms]`` for its source: the console
source lags (its records arrive 20 to 40 s late, the mobile ones within 5 s), as in the book. The run is
cut into micro-batches of ``batch_ms`` of processing time: batch ``b`` holds the records that arrive in
``[start + b * batch_ms, start + (b + 1) * batch_ms)``, so every source has the same number of batches
(some of them empty).

Determinism: everything comes from one numpy Generator seeded with ``(seed, source index)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from floodmark.core.watermarks.batch_stats import SplitBatchStats
from floodmark.simulator.clickstream import DEFAULT_START_MS

COLUMNS: tuple[str, ...] = ("ts", "user", "score", "split")


@dataclass(frozen=True)
class GameSource:
    """One input of the game pipeline.

    :arg users: players of this source. :arg splits: the source's splits (users are spread over them).
    :arg min_delay_ms: the least and :arg max_delay_ms: the most a record arrives after its event time
        (uniform between the two, both included).
    """

    users: int = 12
    splits: int = 2
    max_delay_ms: int = 5_000
    min_delay_ms: int = 0


@dataclass(frozen=True)
class GamesConfig:
    """The simulated run (all times in ms).

    :arg duration_ms: event time covered by the sessions. :arg gap_ms: the session gap the pipeline uses;
        events of a session are less than ``gap_ms`` apart, sessions 2 to 3 gaps apart.
    :arg batch_ms: processing time per micro-batch.
    """

    sources: Mapping[str, GameSource] = field(
        default_factory=lambda: {
            "mobile": GameSource(max_delay_ms=5_000),
            "console": GameSource(min_delay_ms=20_000, max_delay_ms=40_000),
        }
    )
    duration_ms: int = 10 * 60_000
    gap_ms: int = 60_000
    event_spacing_ms: tuple[int, int] = (2_000, 40_000)
    session_events: tuple[int, int] = (2, 12)
    batch_ms: int = 15_000
    start_ms: int = DEFAULT_START_MS
    seed: int = 3

    def __post_init__(self) -> None:
        if not self.event_spacing_ms[1] < self.gap_ms:
            raise ValueError("events of a session must be spaced less than the session gap")
        if self.batch_ms <= 0 or self.duration_ms <= 0:
            raise ValueError("batch_ms and duration_ms must be positive")


def generate(config: GamesConfig) -> dict[str, pd.DataFrame]:
    """Every source's records, with the ``arrival`` time (ms) and ``batch`` each is read in, by arrival."""
    out = {}
    for index, (name, source) in enumerate(config.sources.items()):
        rng = np.random.default_rng([config.seed, index])
        rows: list[tuple[int, str, int, int]] = []
        for u in range(source.users):
            user = f"{name}-{u:03d}"
            t = config.start_ms + int(rng.integers(0, config.gap_ms * 2))
            while t < config.start_ms + config.duration_ms:
                for _ in range(int(rng.integers(config.session_events[0], config.session_events[1] + 1))):
                    rows.append((t, user, int(rng.integers(0, 1000)), u % source.splits))
                    t += int(rng.integers(config.event_spacing_ms[0], config.event_spacing_ms[1] + 1))
                t += int(rng.integers(2 * config.gap_ms + 1, 3 * config.gap_ms))
        frame = pd.DataFrame(rows, columns=list(COLUMNS))
        frame["arrival"] = frame["ts"] + rng.integers(source.min_delay_ms, source.max_delay_ms + 1, len(frame))
        frame = frame.sort_values(["arrival", "ts", "user"], kind="stable").reset_index(drop=True)
        frame["batch"] = (frame["arrival"] - config.start_ms) // config.batch_ms
        out[name] = frame
    return out


def batch_count(records: Mapping[str, pd.DataFrame]) -> int:
    """How many batches cover every source's records."""
    return int(max(int(f["batch"].max()) for f in records.values() if len(f)) + 1)


def session_lengths(records: pd.DataFrame, gap_ms: int, timestamp: str = "end") -> pd.DataFrame:
    """The straight computation of *Streaming Systems*' Example 3-1: each user's sessions, computed over all records.

    Returns one row per session: ``user``, ``start`` (first event), ``end`` (last event + gap, exclusive),
    ``length = end - start`` and ``timestamp``: ``end - 1`` for ``"end"`` (END_OF_WINDOW) or ``start`` for
    ``"earliest"`` (EARLIEST, when no record was behind the watermark).
    """
    rows = []
    for user, group in records.sort_values("ts").groupby("user", sort=True):
        ts = group["ts"].to_numpy()
        breaks = np.flatnonzero(np.diff(ts) >= gap_ms)
        for first, last in zip(np.r_[0, breaks + 1], np.r_[breaks, len(ts) - 1], strict=True):
            start, end = int(ts[first]), int(ts[last]) + gap_ms
            rows.append((user, start, end, end - start, end - 1 if timestamp == "end" else start))
    return pd.DataFrame(rows, columns=["user", "start", "end", "length", "timestamp"])


def mean_session_lengths(sessions: pd.DataFrame, window_ms: int) -> dict[int, float]:
    """Example 3-2's straight computation: ``{window start: mean session length}`` over fixed windows of the
    sessions' timestamps."""
    starts = sessions["timestamp"] - sessions["timestamp"] % window_ms
    return {int(k): float(v) for k, v in sessions.groupby(starts)["length"].mean().items()}


def split_stats(batch: pd.DataFrame) -> list[SplitBatchStats]:
    """What a source's coordinator hears of ``batch`` (records with ``ts`` and ``split``): one entry per split."""
    return [
        SplitBatchStats(str(split), len(rows), int(rows["ts"].min()), int(rows["ts"].max()))
        for split, rows in batch.groupby("split")
    ]
