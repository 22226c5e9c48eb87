"""A floodmark driver process for the kill -9 restart test (run as a script).

Usage: restart_driver.py INPUT CHECKPOINT OUTPUT
Runs the bounded input to completion from the checkpoint (starting or resuming).
"""

from __future__ import annotations

import sys

from floodmark import WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session


def main(input_dir: str, checkpoint: str, output: str) -> None:
    spark = local_session("floodmark-restart", cores=2, shuffle_partitions=2)
    source = (
        spark.readStream.schema("ts LONG, k STRING, p INT, v DOUBLE").option("maxFilesPerTrigger", 1).parquet(input_dir)
    )
    agg = EventTimeAggregation(
        source,
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(
            windows.Tumbling(10_000),
            {"n": aggregates.count(), "total": aggregates.sum("v")},
            trigger=triggers.AfterWatermark(early=triggers.AfterCount(3)),
        ),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0), split="p", known_splits=["0", "1"]),
    )
    # A trigger interval long enough that the test can kill the driver in the middle of the stream.
    agg.run_to_completion(checkpoint, output, trigger_interval="500 milliseconds", timeout_s=600)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
