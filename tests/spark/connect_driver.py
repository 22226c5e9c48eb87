"""A Spark Connect client running one of ``connect_jobs.JOBS``: ``connect_driver.py <server url> <job> <root>``.

Prints the handle's :func:`connect_jobs.summary` as one JSON line (``SUMMARY {...}``) and every report the
listener got on the client (``REPORT <batch id>``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from connect_jobs import run, summary
from pyspark.sql import SparkSession

if __name__ == "__main__":
    url, job, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    spark = SparkSession.builder.remote(url).getOrCreate()
    query = run(spark, job, root)
    print("SUMMARY " + json.dumps(summary(query, job), default=str), flush=True)
