"""Search queries and the clicks that follow them: *Streaming Systems*' example of a join ("you join a stream of queries
to the stream of clicks for those queries", *Streaming Systems* ch. 3).

Users issue queries; a query is clicked (once) with probability ``click_rate``, ``0 .. max_click_delay_ms`` after
it. Records are ``queries(ts, user, query, split)`` and ``clicks(ts, user, url, split)``: ``ts`` is the event time
in ms since the epoch, ``split`` the source split (a Kafka partition) that carries the user's records, ``query``
a query's text and ``url`` what its click opened (``<query>/<n>``, so a test can tell a click's query).

Time model. A record *arrives* at ``ts + delay``, ``delay`` uniform on ``[0, max_delay_ms]`` (out of order within
a split), except a ``late_fraction`` of the clicks, which arrive ``late_delay_ms`` later still (behind any
watermark of bound ``max_delay_ms``). The run is cut into micro-batches of ``batch_ms`` of processing time: batch
``b`` holds the records that arrive in ``[start + b * batch_ms, start + (b + 1) * batch_ms)``. The clicks of split
``quiet_split`` stop after ``quiet_after_ms`` of event time (a partition that goes idle).

Determinism: everything comes from one numpy Generator seeded with ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from floodmark.simulator.clickstream import DEFAULT_START_MS

QUERY_COLUMNS: tuple[str, ...] = ("ts", "user", "query", "split")
CLICK_COLUMNS: tuple[str, ...] = ("ts", "user", "url", "split")
WORDS = ("shoes", "socks", "boots", "laces", "hats", "gloves", "scarves", "coats")


@dataclass(frozen=True)
class SearchConfig:
    """The simulated run (all times in ms).

    :arg users: users (spread over ``splits`` splits in both sources). :arg duration_ms: event time covered by
        the queries. :arg queries_per_s: queries per second of event time, all users together.
    :arg click_rate: the share of queries that are clicked. :arg max_click_delay_ms: the most a click follows its
        query. :arg max_delay_ms: the most a record arrives after its event time (uniform from 0).
    :arg late_fraction, late_delay_ms: the clicks that arrive ``late_delay_ms`` more behind.
    :arg quiet_split, quiet_after_ms: the clicks' split that goes quiet, and when (``None``: none does).
    :arg batch_ms: processing time per micro-batch.
    """

    users: int = 20
    splits: int = 3
    duration_ms: int = 120_000
    queries_per_s: float = 2.0
    click_rate: float = 0.7
    max_click_delay_ms: int = 15_000
    max_delay_ms: int = 3_000
    late_fraction: float = 0.03
    late_delay_ms: int = 25_000
    quiet_split: int | None = 2
    quiet_after_ms: int = 60_000
    batch_ms: int = 10_000
    start_ms: int = DEFAULT_START_MS
    seed: int = 11

    def __post_init__(self) -> None:
        if self.batch_ms <= 0 or self.duration_ms <= 0 or self.users <= 0 or self.splits <= 0:
            raise ValueError("batch_ms, duration_ms, users and splits must be positive")


def generate(config: SearchConfig) -> dict[str, pd.DataFrame]:
    """Both sources' records (``queries``, ``clicks``) with the ``arrival`` time (ms) and the ``batch`` each is read
    in, in arrival order; every source has the same batches (some may be empty)."""
    rng = np.random.default_rng(config.seed)
    count = max(1, int(config.duration_ms / 1_000 * config.queries_per_s))
    ts = np.sort(rng.integers(0, config.duration_ms, count)) + config.start_ms
    users = rng.integers(0, config.users, count)
    words = rng.integers(0, len(WORDS), count)
    queries = pd.DataFrame(
        {
            "ts": ts.astype(np.int64),
            "user": [f"u{u}" for u in users],
            "query": [f"{WORDS[w]} {i}" for i, w in enumerate(words)],
            "split": (users % config.splits).astype(np.int64),
        }
    )
    clicked = np.flatnonzero(rng.random(count) < config.click_rate)
    click_ts = ts[clicked] + rng.integers(0, config.max_click_delay_ms + 1, len(clicked))
    clicks = pd.DataFrame(
        {
            "ts": click_ts.astype(np.int64),
            "user": queries["user"].to_numpy()[clicked],
            "url": [f"{queries['query'].iat[i]}/{n}" for n, i in enumerate(clicked)],
            "split": queries["split"].to_numpy()[clicked],
        }
    )
    if config.quiet_split is not None:
        quiet = (clicks["split"] == config.quiet_split) & (clicks["ts"] >= config.start_ms + config.quiet_after_ms)
        clicks = clicks[~quiet].reset_index(drop=True)
    out = {}
    for name, frame in (("queries", queries), ("clicks", clicks)):
        delay = rng.integers(0, config.max_delay_ms + 1, len(frame))
        if name == "clicks":
            delay = delay + np.where(rng.random(len(frame)) < config.late_fraction, config.late_delay_ms, 0)
        arrival = frame["ts"].to_numpy() + delay
        frame = frame.assign(arrival=arrival, batch=(arrival - config.start_ms) // config.batch_ms)
        out[name] = frame.sort_values(["arrival", "ts"], kind="stable").reset_index(drop=True)
    return out
