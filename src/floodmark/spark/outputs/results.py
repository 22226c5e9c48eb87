"""Reading a query's file outputs back as DataFrames: the latest pane of each window, late records and dead
letters with their records parsed.

::

    panes = read_panes(spark, "out/")                 # one row per (key, window): its latest pane
    late = read_late(spark, "out/")                   # + record_fields: the record's JSON, parsed
    dead = read_dead_letters(spark, "out/", "ts LONG, device STRING, t DOUBLE")

A file output (:class:`~floodmark.spark.FileSink`, the default ``output="out/"``) holds ``panes/``, ``late/``
and ``dead_letter/``, one ``batch_id=N`` folder per micro-batch (exactly-once: a replayed batch replaces its
folder). A window can fire several panes (early, on time, late), in several batches: ``pane_index`` counts them
from 0. With ``AccumulationMode.ACCUMULATING`` the latest pane is the window's result; with ``DISCARDING`` (the
default) each pane holds what came since the one before, and :func:`read_panes` combines them by the rules of
:mod:`floodmark.core.window_results`, from the description the query writes beside its panes
(:mod:`floodmark.driver.pane_description`).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from pyspark.sql.window import WindowSpec

from floodmark.core.window_results import LATEST, WEIGHTED_MEAN, ResultFromPanes
from floodmark.driver.pane_description import ROWS, PaneDescription
from floodmark.protocol import output
from floodmark.spark import hadoop_files
from floodmark.spark.connect import client_path
from floodmark.spark.outputs.sinks import DEAD_LETTER, LATE, PANES

RECORD_FIELDS = "record_fields"
"""The column :func:`read_late` and :func:`read_dead_letters` add: the ``record`` text parsed as JSON (a struct;
null where the record is not a JSON object of the schema, e.g. an unparsable line)."""


def read_panes(spark: SparkSession, path: str | Path, latest: bool = True) -> DataFrame:
    """The panes under ``path`` (an output root holding ``panes/``, or the ``panes`` folder itself).

    :arg latest: one row per key and window holding the window's result as of its latest pane: that pane's
        metadata (``timing``, ``pane_index``, ``is_last``...) and each result column's window value, which for
        DISCARDING panes is the panes combined (:mod:`floodmark.core.window_results`: counts and sums added, min
        and max taken, lists concatenated, means weighted by a ``count()`` column). A join or process stage's rows
        are each a result: all are returned. False: every pane, in every batch, as written.
    :returns: a batch DataFrame: the key columns, :data:`~floodmark.protocol.output.PANE_COLUMNS`, the aggregate
        columns, ``window_start_time``, ``window_end_time`` and ``batch_id``.
    :raises FileNotFoundError: no pane output under ``path``.
    :raises ValueError: DISCARDING panes of a column that cannot be combined (a user-defined aggregate, a mean
        without a count) where some window fired more than one pane: the reason, and ``latest=False`` to read
        every pane.
    """
    folder = _folder(spark, path, PANES)
    panes = _read(spark, path, PANES)
    if not latest:
        return panes
    description = PaneDescription.read(hadoop_files.files_for(folder, spark), folder)
    if description is not None and description.kind == ROWS:
        return panes
    names = panes.columns
    keys = names[: names.index(output.WINDOW_START)]  # a pane row: its keys, then the pane columns, in order
    window = [*keys, output.WINDOW_START, output.WINDOW_END]
    newest_first = Window.partitionBy(*window).orderBy(F.col(output.PANE_INDEX).desc(), F.col(output.BATCH_ID).desc())
    # A pane written again by a later batch (a replay that landed in a new batch id) counts once: its last copy.
    panes = (
        panes.withColumn(
            "fm_copy",
            F.row_number().over(Window.partitionBy(*window, output.PANE_INDEX).orderBy(F.col(output.BATCH_ID).desc())),
        )
        .where("fm_copy = 1")
        .drop("fm_copy")
    )
    results = {} if description is None else description.results
    combined = {name: result for name, result in results.items() if result.combine not in (None, LATEST)}
    refused = {name: result.reason for name, result in results.items() if result.combine is None}
    if refused:
        several = panes.groupBy(*window).count().where("count > 1").limit(1).count()
        if several:
            reasons = "; ".join(f"{name}: {reason}" for name, reason in refused.items())
            raise ValueError(
                f"the panes under {folder} cannot be combined into each window's result ({reasons}): read every "
                "pane with read_panes(..., latest=False), or use AccumulationMode.ACCUMULATING"
            )
    every_pane = (
        Window.partitionBy(*window)
        .orderBy(output.PANE_INDEX)
        .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    )
    values = {name: _window_value(result, name, every_pane) for name, result in combined.items()}
    if values:  # none (ACCUMULATING panes, a latest value): Spark Connect's withColumns refuses an empty mapping
        panes = panes.withColumns(values)
    return panes.withColumn("fm_rank", F.row_number().over(newest_first)).where("fm_rank = 1").drop("fm_rank")


def _window_value(result: ResultFromPanes, name: str, panes: WindowSpec) -> Column:
    """Column ``name``'s window value over ``panes`` (every pane of its window) by ``result``'s rule."""
    column = F.col(name)
    if result.combine == "sum":
        return F.sum(column).over(panes)
    if result.combine == "min":
        return F.min(column).over(panes)
    if result.combine == "max":
        return F.max(column).over(panes)
    if result.combine == "concat":
        return F.flatten(F.collect_list(column).over(panes))
    if result.combine == WEIGHTED_MEAN:
        weight = F.col(str(result.weight))
        weighed = F.when(column.isNotNull(), weight)
        return F.sum(column * weight).over(panes) / F.sum(weighed).over(panes)
    raise ValueError(f"unknown combination {result.combine!r} of column {name!r}")


def read_late(spark: SparkSession, path: str | Path, schema: StructType | str | None = None) -> DataFrame:
    """The late records under ``path`` (an output root holding ``late/``, or that folder), each with
    :data:`RECORD_FIELDS`: its ``record`` parsed with ``schema`` (None: the schema Spark infers from the records).

    :raises FileNotFoundError: no late output under ``path`` (no batch had a late record: a batch writes its
        folder only when it has some).
    """
    return _parsed(_read(spark, path, LATE), schema)


def read_dead_letters(spark: SparkSession, path: str | Path, schema: StructType | str | None = None) -> DataFrame:
    """The dead letters under ``path`` (an output root holding ``dead_letter/``, or that folder), each with its
    ``reason`` and :data:`RECORD_FIELDS` (see :func:`read_late`; null for a record that is not JSON of ``schema``).

    :raises FileNotFoundError: no dead-letter output under ``path`` (no batch had a dead letter).
    """
    return _parsed(_read(spark, path, DEAD_LETTER), schema)


def _folder(spark: SparkSession, path: str | Path, kind: str) -> str:
    """The ``kind`` folder of the output at ``path`` (a root or the folder itself), as ``spark`` must be given it
    (:func:`~floodmark.spark.connect.client_path`: over Spark Connect a relative path is the client's)."""
    root = client_path(spark, path).rstrip("/")
    return root if root.rsplit("/", 1)[-1] == kind else f"{root}/{kind}"


def _read(spark: SparkSession, path: str | Path, kind: str) -> DataFrame:
    folder = _folder(spark, path, kind)
    files = hadoop_files.files_for(folder, spark)
    names = files.list_names(folder)
    batches = [name for name in names if name.startswith(f"{output.BATCH_ID}=")]
    if not batches:
        raise FileNotFoundError(
            f"no {kind} output in {folder}: no batch wrote any (a batch_id=N folder per micro-batch that had some)"
        )
    parts = [name for batch in batches for name in files.list_names(f"{folder}/{batch}")]
    file_format = "json" if any(name.endswith(".json") for name in parts) else "parquet"
    return spark.read.format(file_format).load(folder)


def _parsed(rows: DataFrame, schema: StructType | str | None) -> DataFrame:
    if schema is None:  # Spark's JSON schema inference over the records that are JSON objects
        texts = rows.select(output.RECORD).where(F.ltrim(F.col(output.RECORD)).startswith("{"))
        # A DataFrame of texts (pyspark >= 4.2), not an RDD: a Spark Connect session has no RDD API.
        schema = rows.sparkSession.read.json(texts).schema
    parsed = F.from_json(F.col(output.RECORD), schema, {"mode": "PERMISSIVE"})
    return rows.withColumn(RECORD_FIELDS, parsed)
