"""A driver process running the searches pipeline (queries joined to clicks, windows over the pairs), for the
kill -9 restart test (run as a script).

Usage: join_driver.py INPUT CHECKPOINT OUTPUT HOW OUTPUT_TIME
Runs the files under INPUT (``floodmark.apps.searches.write_input``) to completion from CHECKPOINT (starting or
resuming), each stage's outputs under OUTPUT/<stage>.
"""

from __future__ import annotations

import sys
from pathlib import Path

from floodmark.apps.searches import search_pipeline
from floodmark.spark import local_session


def main(input_dir: str, checkpoint: str, output: str, how: str, output_time: str) -> None:
    spark = local_session("floodmark-join-restart", cores=2, shuffle_partitions=2)
    pipeline = search_pipeline(spark, Path(input_dir), how, output_time)
    # A trigger interval long enough that the test can kill the driver in the middle of the stream.
    pipeline.run_to_completion(checkpoint, output, trigger_interval="500 milliseconds", timeout_s=600)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
