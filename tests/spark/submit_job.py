"""The cluster test's job as a user submits it (run by ``spark-submit``, not by the test's interpreter).

Usage: ``spark-submit --py-files cluster_driver.py [...] submit_job.py CHECKPOINT OUTPUT``

The session comes from ``SparkSession.builder`` through
:func:`~floodmark.spark.driver.session.configure_spark_with_floodmark`, the master and every other setting from
``spark-submit``. The job is :func:`cluster_driver.aggregation` (shipped with ``--py-files``), run to
completion. ``OUTPUT/run.json`` holds the batches, the seconds, where the driver imported floodmark from, and
where each executor's Python workers did (``spark.pyspark.python``: the test ships a packed virtualenv with
``--archives``), and which tick source ran.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from cluster_driver import SHUFFLE_PARTITIONS, aggregation
from pyspark.sql import SparkSession

import floodmark
from floodmark.spark import configure_spark_with_floodmark
from floodmark.spark.sources.ticks import jvm_source_loadable


def where_executors_import_floodmark(spark: SparkSession) -> list[str]:
    """``floodmark.__file__`` as the executors' Python workers see it, one entry per distinct path."""

    def where(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import floodmark

        for _ in batches:
            yield pd.DataFrame({"path": [floodmark.__file__]})

    rows = spark.range(0, 4, numPartitions=4).mapInPandas(where, "path string").collect()
    return sorted({row.path for row in rows})


def main(checkpoint: str, output: str) -> None:
    builder = SparkSession.builder.appName("floodmark-submit-test")
    builder = builder.config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
    spark = configure_spark_with_floodmark(builder).getOrCreate()
    executors = where_executors_import_floodmark(spark)
    started = time.monotonic()
    handle = aggregation(spark).run_to_completion(checkpoint, output, timeout_s=600)
    summary = {
        "batches": len(handle.reports),
        "seconds": time.monotonic() - started,
        "driver": floodmark.__file__,
        "executors": executors,
        "jvm_ticks": jvm_source_loadable(spark),
    }
    Path(output, "run.json").write_text(json.dumps(summary))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
