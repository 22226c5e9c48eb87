"""A pipeline built in a session with floodmark's required settings and jar but without its session extensions
(no ``spark.sql.extensions=floodmark.Extensions``), as ``spark-submit --jars ...`` without floodmark's ``--conf``
makes one.

Usage: ``python plain_session_job.py INPUT NEW_CHECKPOINT JVM_CHECKPOINT``: builds :func:`counts` on a new checkpoint
and on ``JVM_CHECKPOINT`` (created on the JVM host by a session with floodmark's settings) and prints, as JSON, the
new checkpoint's hosts, floodmark's log lines and why the second build was refused (None: it was not).
"""

from __future__ import annotations

import json
import logging
import sys

from pyspark.sql import SparkSession

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.jvm import spark_jars
from floodmark.jvm.settings import required_conf
from floodmark.spark import Pipeline, SourceTime


def counts(spark: SparkSession, directory: str) -> Pipeline:
    """Tumbling 10 s counts per ``k`` of the Parquet files under ``directory``, on the default host."""
    frame = spark.readStream.schema("ts LONG, k STRING").parquet(directory)
    pipeline = Pipeline()
    pipeline.source("events", frame, "ts", SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(1_000)))
    pipeline.stage("counts", "events", WindowSpec(windows.Tumbling(10_000), {"n": aggregates.count()}), key_by="k")
    return pipeline


class Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelname, record.getMessage()))


if __name__ == "__main__":
    directory, new, recorded = sys.argv[1:4]
    said = Said()
    logging.getLogger("floodmark").addHandler(said)
    logging.getLogger("floodmark").setLevel(logging.INFO)
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    for key, value in {**required_conf(), "spark.jars": spark_jars()}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    *_, hosts = counts(spark, directory).build(new, spark)
    try:
        counts(spark, directory).build(recorded, spark)
        refused = None
    except ValueError as error:
        refused = str(error)
    spark.stop()
    print(json.dumps({"hosts": hosts, "said": said.lines, "refused": refused}))
