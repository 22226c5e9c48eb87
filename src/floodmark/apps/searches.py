"""Queries joined to the clicks that follow them, then windows over the joined rows (*Streaming Systems*'
example of output times), shared by the demo and the tests.

The join ``clicked`` pairs a query with its user's clicks up to :data:`CLICK_WITHIN_MS` after it; the window stage
``click_through`` counts the joined rows of each 30-second window (``rows``) and those with a click (``clicks``),
each row in the window of the time the join gives it: the click's (``RIGHT``, the default here) or the query's
(``LEFT``). With ``how="left"`` every query is kept, clicked or not (its click columns null when it found none):
``clicks / rows`` is then the click-through rate of the queries of the window.

The window join ``same_window`` pairs each query with its user's clicks of the same 30-second window (Flink's
window join), with 30 s of allowed lateness: a click that comes late is paired in a LATE pane.

Beside them, a keyed process function with event-time timers, :class:`AbandonedSearches`: per user, when the
user's queries stop for :data:`QUIET_MS`, one row saying how many queries the search had, timed at its last
query (the timer's output time holds the stage's watermark there); the window stage ``abandoned_per_window``
counts those rows per 30 seconds.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from floodmark.apps.batch_files import write_batch_files
from floodmark.core import aggregates, windows
from floodmark.core.join import IntervalJoinSpec, WindowJoinSpec
from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.core.process import ProcessContext, Timer
from floodmark.core.spec import WindowSpec
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.driver.controller import SourceSettings
from floodmark.simulator import searches

QUIET_MS = 20_000
"""A user's search ends when no query follows for 20 s."""
CLICK_WITHIN_MS = 10_000
"""A click joins the queries of its user up to 10 s before it (bounds ``(0, 10 s)``)."""
WINDOW_MS = 30_000
WINDOW_LATENESS_MS = 30_000
"""The window join's allowed lateness."""
SOURCES = ("queries", "clicks")
COLUMNS = {"queries": searches.QUERY_COLUMNS, "clicks": searches.CLICK_COLUMNS}
SCHEMAS = {
    "queries": "ts LONG, user STRING, query STRING, split LONG",
    "clicks": "ts LONG, user STRING, url STRING, split LONG",
}
"""The Spark schemas of the input files (:func:`write_input`)."""
BOUND_MS = 3_000
"""Each source's out-of-orderness bound (per split): the simulator's ``max_delay_ms``."""
IDLE_MS = 2_000
"""A split without records for this long (processing time) is idle."""


class AbandonedSearches:
    """A keyed process function over the queries (keyed by user): a row ``{"queries", "first_ms", "last_ms"}``
    when a user's queries stop for :data:`QUIET_MS` (an event-time timer at the last query + ``QUIET_MS``, whose
    row is timed at the last query). A query :data:`QUIET_MS` or more after the last one ends the search before it
    right away, whatever the watermark (so the rows do not depend on when the timer fires)."""

    def process(self, record: dict, ctx: ProcessContext) -> None:
        ts = int(record["ts"])
        last = ctx.state.get("last")
        if last is not None and ts >= last + QUIET_MS:
            ctx.delete_event_timer(last + QUIET_MS)
            self._emit(ctx, last)
            last = None
        if last is not None and ts <= last:
            ctx.state["queries"] += 1
            ctx.state["first"] = min(ctx.state["first"], ts)
            return
        if last is not None:
            ctx.delete_event_timer(last + QUIET_MS)
        else:
            ctx.state.update(queries=0, first=ts)
        ctx.state.update(queries=ctx.state["queries"] + 1, last=ts)
        ctx.set_event_timer(ts + QUIET_MS, output_time=ts)

    def on_timer(self, timer: Timer, ctx: ProcessContext) -> None:
        self._emit(ctx, timer.output_time)

    @staticmethod
    def _emit(ctx: ProcessContext, last: int) -> None:
        ctx.emit({"queries": ctx.state["queries"], "first_ms": ctx.state["first"], "last_ms": last}, timestamp=last)
        ctx.state.clear()


ABANDONED_OUTPUT = {"queries": "long", "first_ms": "long", "last_ms": "long"}


def search_stages(how: str = "inner", output_time: str = "RIGHT") -> list[JoinStage | WindowedStage | ProcessStage]:
    """The stages: the join ``clicked`` and the windows ``click_through`` over its rows; the process stage
    ``abandoned`` (:class:`AbandonedSearches`) and the windows ``abandoned_per_window`` over its rows; the window
    join ``same_window``."""
    join = JoinStage(
        "clicked", "queries", "clicks", ("user",), IntervalJoinSpec((0, CLICK_WITHIN_MS), how, output_time)
    )
    click_through = WindowedStage(
        "click_through",
        ("clicked",),
        WindowSpec(windows.Tumbling(WINDOW_MS), {"rows": aggregates.count(), "clicks": aggregates.sum("clicked")}),
        columns={"clicked": "right_url.notna()"},  # false where the query found no click
    )
    abandoned = ProcessStage("abandoned", ("queries",), ("user",), AbandonedSearches(), ABANDONED_OUTPUT)
    per_window = WindowedStage(
        "abandoned_per_window",
        ("abandoned",),
        WindowSpec(windows.Tumbling(WINDOW_MS), {"searches": aggregates.count(), "queries": aggregates.sum("queries")}),
    )
    same_window = JoinStage(
        "same_window", "queries", "clicks", ("user",), WindowJoinSpec(windows.Tumbling(WINDOW_MS), WINDOW_LATENESS_MS)
    )
    return [join, click_through, abandoned, per_window, same_window]


def source_settings() -> dict[str, SourceSettings]:
    """How each source's watermark is made: bounded out-of-orderness per split, idle after :data:`IDLE_MS`, asked
    for at every batch."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(BOUND_MS).with_idleness(IDLE_MS)
    return {name: SourceSettings(strategy, 1) for name in SOURCES}


def write_input(records: dict[str, pd.DataFrame], directory: Path) -> int:
    """Each source's records as one Parquet file per batch under ``directory/<source>/``; the number of batches."""
    return write_batch_files(records, directory, COLUMNS)


def search_pipeline(spark, directory: Path, how: str = "inner", output_time: str = "RIGHT", buckets: int = 2):
    """The pipeline on Spark over :func:`write_input`'s files, one file per source and batch."""
    from floodmark.spark import Pipeline, SourceTime

    pipeline = Pipeline(buckets=buckets)
    for name, settings in source_settings().items():
        frame = spark.readStream.schema(SCHEMAS[name]).option("maxFilesPerTrigger", 1).parquet(str(directory / name))
        time_of = SourceTime(settings.strategy, split="split", periodic_interval=settings.periodic_interval)
        pipeline.source(name, frame, "ts", time_of)
    for stage in search_stages(how, output_time):
        pipeline.add(stage)
    return pipeline


def straight_pairs(records: dict[str, pd.DataFrame], late_clicks: set[str] = frozenset()) -> pd.DataFrame:  # type: ignore[assignment]
    """Every (query, click) pair computed straight from the records: same user, the click 0 to
    :data:`CLICK_WITHIN_MS` after the query; clicks whose ``url`` is in ``late_clicks`` left out. Columns
    ``user, query, url, left_ts, right_ts``."""
    queries = records["queries"][["user", "query", "ts"]].rename(columns={"ts": "left_ts"})
    clicks = records["clicks"][["user", "url", "ts"]].rename(columns={"ts": "right_ts"})
    clicks = clicks[~clicks["url"].isin(late_clicks)]
    pairs = queries.dropna(subset=["left_ts"]).merge(clicks, on="user")
    delay = pairs["right_ts"] - pairs["left_ts"]
    return pairs[(delay >= 0) & (delay <= CLICK_WITHIN_MS)].reset_index(drop=True)


def straight_searches(queries: pd.DataFrame) -> pd.DataFrame:
    """Each user's searches computed straight from the queries: runs of queries less than :data:`QUIET_MS` apart.
    Columns ``user, queries, first_ms, last_ms``."""
    rows = []
    for user, times in queries.dropna(subset=["ts"]).groupby("user")["ts"]:
        ordered = sorted(int(t) for t in times)
        first = previous = ordered[0]
        count = 0
        for ts in ordered:
            if ts >= previous + QUIET_MS:
                rows.append((user, count, first, previous))
                first, count = ts, 0
            count += 1
            previous = ts
        rows.append((user, count, first, previous))
    return pd.DataFrame(rows, columns=["user", "queries", "first_ms", "last_ms"])


def straight_window_pairs(records: dict[str, pd.DataFrame], late: set[str] = frozenset()) -> pd.DataFrame:  # type: ignore[assignment]
    """Every (query, click) pair of one user and one :data:`WINDOW_MS` window, computed straight from the records;
    queries and clicks (by ``query`` / ``url``) in ``late`` left out. Columns ``user, query, url, window_start``."""
    queries = records["queries"].dropna(subset=["ts"])
    queries = queries[~queries["query"].isin(late)].assign(window_start=lambda f: f["ts"] // WINDOW_MS * WINDOW_MS)
    clicks = records["clicks"][~records["clicks"]["url"].isin(late)]
    clicks = clicks.assign(window_start=clicks["ts"] // WINDOW_MS * WINDOW_MS)
    pairs = queries[["user", "query", "window_start"]].merge(clicks[["user", "url", "window_start"]])
    return pairs.reset_index(drop=True)
