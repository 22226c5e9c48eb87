"""Queries joined to the clicks that follow them, then windows over the joined rows (seed 003's example of output
times), shared by the demo and the tests.

The join ``clicked`` pairs a query with its user's clicks up to :data:`CLICK_WITHIN_MS` after it; the window stage
``click_through`` counts the joined rows of each 30-second window (``rows``) and those with a click (``clicks``),
each row in the window of the time the join gives it: the click's (``RIGHT``, the default here) or the query's
(``LEFT``). With ``how="left"`` every query is kept, clicked or not (its click columns null when it found none):
``clicks / rows`` is then the click-through rate of the queries of the window.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from floodmark.apps.batch_files import write_batch_files
from floodmark.core import aggregates, windows
from floodmark.core.join import IntervalJoinSpec
from floodmark.core.pipeline import JoinStage, WindowedStage
from floodmark.core.spec import WindowSpec
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.driver.controller import SourceSettings
from floodmark.simulator import searches

CLICK_WITHIN_MS = 10_000
"""A click joins the queries of its user up to 10 s before it (bounds ``(0, 10 s)``)."""
WINDOW_MS = 30_000
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


def search_stages(how: str = "inner", output_time: str = "RIGHT") -> list[JoinStage | WindowedStage]:
    """The two stages: the join ``clicked`` and the windows ``click_through`` over its rows."""
    join = JoinStage(
        "clicked", "queries", "clicks", ("user",), IntervalJoinSpec((0, CLICK_WITHIN_MS), how, output_time)
    )
    click_through = WindowedStage(
        "click_through",
        ("clicked",),
        WindowSpec(windows.Tumbling(WINDOW_MS), {"rows": aggregates.count(), "clicks": aggregates.sum("clicked")}),
        columns={"clicked": "right_url.notna()"},  # false where the query found no click
    )
    return [join, click_through]


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
    join, click_through = search_stages(how, output_time)
    assert isinstance(join, JoinStage) and isinstance(click_through, WindowedStage)
    spec = join.spec
    pipeline.join(join.name, join.left, join.right, join.on, (spec.lower, spec.upper), spec.how, spec.output_time)
    pipeline.stage(
        click_through.name, click_through.upstream, click_through.spec, click_through.key_by, click_through.columns
    )
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
