"""Reading a query's file outputs back as DataFrames: the latest pane of each window, late records and dead
letters with their records parsed.

::

    panes = read_panes(spark, "out/")                 # one row per (key, window): its latest pane
    late = read_late(spark, "out/")                   # + record_fields: the record's JSON, parsed
    dead = read_dead_letters(spark, "out/", "ts LONG, device STRING, t DOUBLE")

A file output (:class:`~floodmark.spark.FileSink`, the default ``output="out/"``) holds ``panes/``, ``late/``
and ``dead_letter/``, one ``batch_id=N`` folder per micro-batch (exactly-once: a replayed batch replaces its
folder). A window can fire several panes (early, on time, late), in several batches: ``pane_index`` counts them
from 0. With ``AccumulationMode.ACCUMULATING`` (or the default trigger, one pane per window unless late records
come) the latest pane is the window's result; with ``DISCARDING`` and several panes each pane holds what came
since the one before: read them all (``latest=False``) and combine.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from floodmark.protocol import output
from floodmark.spark import hadoop_files
from floodmark.spark.outputs.sinks import DEAD_LETTER, LATE, PANES

RECORD_FIELDS = "record_fields"
"""The column :func:`read_late` and :func:`read_dead_letters` add: the ``record`` text parsed as JSON (a struct;
null where the record is not a JSON object of the schema, e.g. an unparsable line)."""


def read_panes(spark: SparkSession, path: str | Path, latest: bool = True) -> DataFrame:
    """The panes under ``path`` (an output root holding ``panes/``, or the ``panes`` folder itself).

    :arg latest: one row per key and window, its latest pane (the highest ``pane_index``: see the module
        docstring for what that is with DISCARDING panes); False: every pane, in every batch.
    :returns: a batch DataFrame: the key columns, :data:`~floodmark.protocol.output.PANE_COLUMNS`, the aggregate
        columns, ``window_start_time``, ``window_end_time`` and ``batch_id``.
    :raises FileNotFoundError: no pane output under ``path``.
    """
    panes = _read(spark, path, PANES)
    if not latest:
        return panes
    names = panes.columns
    keys = names[: names.index(output.WINDOW_START)]  # a pane row: its keys, then the pane columns, in order
    window = Window.partitionBy(*keys, output.WINDOW_START, output.WINDOW_END).orderBy(
        F.col(output.PANE_INDEX).desc(), F.col(output.BATCH_ID).desc()
    )
    return panes.withColumn("fm_rank", F.row_number().over(window)).where("fm_rank = 1").drop("fm_rank")


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


def _read(spark: SparkSession, path: str | Path, kind: str) -> DataFrame:
    root = str(path).rstrip("/")
    files = hadoop_files.files_for(root, spark)
    folder = root if root.rsplit("/", 1)[-1] == kind else f"{root}/{kind}"
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
        schema = rows.sparkSession.read.json(texts.rdd.map(lambda row: row[0])).schema
    parsed = F.from_json(F.col(output.RECORD), schema, {"mode": "PERMISSIVE"})
    return rows.withColumn(RECORD_FIELDS, parsed)
