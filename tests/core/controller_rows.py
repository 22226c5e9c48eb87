"""Rows a controller gets from a batch, made by hand for tests that drive it without Spark."""

from __future__ import annotations

from typing import Any

from floodmark.protocol.wire import DEAD_LETTERS_SPLIT


def gauge_rows(hold: int | None, pending: int | None, open_windows: int, accepted: int = 0) -> list[dict[str, Any]]:
    """One bucket's GAUGE row (bucket 0, no deadlines)."""
    return [
        {
            "fm_bucket": 0,
            "fm_hold": hold,
            "fm_oldest_pending": pending,
            "fm_open_windows": open_windows,
            "fm_next_fire": None,
            "fm_next_timer": None,
            "fm_accepted": accepted,
        }
    ]


def stats(split: str, count: int, lo: int, hi: int) -> dict[str, Any]:
    """One split's STATS row: ``count`` good records with event times ``lo..hi`` (ms)."""
    return {"fm_split": split, "fm_count": count, "fm_min_ts": lo, "fm_max_ts": hi}


def unread(count: int, source: str | None = None) -> dict[str, Any]:
    """The STATS row of ``count`` rows that are no record of their source (``source``: its name, in a graph of
    several sources), as the stage that reports the source's splits sends it."""
    label = DEAD_LETTERS_SPLIT if source is None else f"{source}/{DEAD_LETTERS_SPLIT}"
    return {"fm_split": label, "fm_count": count, "fm_min_ts": 0, "fm_max_ts": 0}
