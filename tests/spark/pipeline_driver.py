"""A driver process running seed 003's game pipeline, for the kill -9 restart test (run as a script).

Usage: pipeline_driver.py INPUT CHECKPOINT OUTPUT COMBINER
Runs the files under INPUT (``floodmark.apps.games.write_input``) to completion from CHECKPOINT (starting or
resuming), each stage's outputs under OUTPUT/<stage>.
"""

from __future__ import annotations

import sys
from pathlib import Path

from floodmark.apps.games import game_pipeline
from floodmark.core.timestamps import TimestampCombiner
from floodmark.spark import local_session


def main(input_dir: str, checkpoint: str, output: str, combiner: str) -> None:
    spark = local_session("floodmark-pipeline-restart", cores=2, shuffle_partitions=2)
    pipeline = game_pipeline(spark, Path(input_dir), TimestampCombiner[combiner])
    # A trigger interval long enough that the test can kill the driver in the middle of the stream.
    pipeline.run_to_completion(checkpoint, output, trigger_interval="500 milliseconds", timeout_s=600)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
