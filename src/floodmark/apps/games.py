"""The game-session pipeline (*Streaming Systems*, Examples 3-1..3-3), shared by the demo and the tests.

Per-user sessions (gap 1 minute) over the mobile and over the console source, each pane a session whose
length is ``window_end - window_start``; both flattened into fixed 2-minute windows computing the global
mean session length. The session stages' output timestamps are END_OF_WINDOW or EARLIEST: with EARLIEST,
sessions still open hold the mean stage's watermark back (Figure 3-10).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from floodmark.apps.batch_files import write_batch_files
from floodmark.core import aggregates, windows
from floodmark.core.pipeline import WindowedStage
from floodmark.core.spec import WindowSpec
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.driver.controller import SourceSettings
from floodmark.simulator import games

GAP_MS = 60_000
WINDOW_MS = 120_000
SOURCES = ("mobile", "console")
DEMO_MARKER = "floodmark-games-demo"
"""The file ``floodmark demo games`` leaves in its output directory (its runs are in ``END_OF_WINDOW/`` and
``EARLIEST/`` beside it)."""
SCHEMA = "ts LONG, user STRING, score LONG, split LONG"
"""The Spark schema of the input files (:func:`write_input`)."""


def game_stages(combiner: TimestampCombiner) -> list[WindowedStage]:
    """The three stages: ``mobile_sessions``, ``console_sessions`` (keyed by user) and ``means`` (global)."""
    sessions = [
        WindowedStage(
            f"{name}_sessions",
            name,
            WindowSpec(windows.Sessions(GAP_MS), {"events": aggregates.count()}, timestamp_combiner=combiner),
            key_by="user",
        )
        for name in SOURCES
    ]
    means = WindowedStage(
        "means",
        tuple(s.name for s in sessions),
        WindowSpec(
            windows.Tumbling(WINDOW_MS), {"mean_length": aggregates.mean("length"), "sessions": aggregates.count()}
        ),
        columns={"length": "window_end - window_start"},
    )
    return [*sessions, means]


def write_input(records: dict[str, pd.DataFrame], directory: Path) -> int:
    """Each source's records as one Parquet file per batch under ``directory/<source>/`` (empty batches
    included, so both sources have the same batches); returns the number of batches."""
    return write_batch_files(records, directory, dict.fromkeys(records, games.COLUMNS))


BOUND_MS = 60_000
"""Each source's out-of-orderness bound (per split)."""
PERIODIC_MS = 1
"""Each source's periodic watermark interval: emitted at every batch, so the watermarks do not depend on how long
a batch took."""


def game_source_settings(bound_ms: int = BOUND_MS) -> dict[str, SourceSettings]:
    """How each source's watermark is made (what ``floodmark explain`` restores the sources with)."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(bound_ms)
    return {name: SourceSettings(strategy, PERIODIC_MS) for name in SOURCES}


def game_pipeline(spark, directory: Path, combiner: TimestampCombiner, bound_ms: int = BOUND_MS, buckets: int = 2):
    """The pipeline on Spark over :func:`write_input`'s files, one file per source and batch, the sources'
    watermarks as :func:`game_source_settings` says."""
    from floodmark.spark import Pipeline, SourceTime

    pipeline = Pipeline(buckets=buckets)
    for name, settings in game_source_settings(bound_ms).items():
        frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(directory / name))
        time_of = SourceTime(settings.strategy, split="split", periodic_interval=settings.periodic_interval)
        pipeline.source(name, frame, "ts", time_of)
    for stage in game_stages(combiner):
        pipeline.stage(stage.name, stage.upstream, stage.spec, stage.key_by, stage.columns)
    return pipeline


def straight_means(records: dict[str, pd.DataFrame], combiner: TimestampCombiner) -> dict[int, float]:
    """The means computed straight from every record (what the pipeline gives when nothing is late)."""
    timestamp = "end" if combiner is TimestampCombiner.END_OF_WINDOW else "earliest"
    sessions = pd.concat([games.session_lengths(records[name], GAP_MS, timestamp) for name in records])
    return games.mean_session_lengths(sessions, WINDOW_MS)
