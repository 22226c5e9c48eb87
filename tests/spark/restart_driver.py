"""A floodmark driver process for the kill -9 restart tests (run as a script).

Usage: restart_driver.py INPUT CHECKPOINT OUTPUT
       restart_driver.py --kafka BOOTSTRAP TOPIC CHECKPOINT OUTPUT_PREFIX
Runs the bounded input (Parquet files, or everything a Kafka topic holds) to completion from the checkpoint
(starting or resuming); Kafka runs write panes, late records and dead letters to the topics
OUTPUT_PREFIX-panes, -late and -dead.
"""

from __future__ import annotations

import sys

from floodmark import WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.spark import EventTimeAggregation, Outputs, SourceTime, local_session, read_kafka

SCHEMA = "ts LONG, k STRING, p INT, v DOUBLE"


def run(source, checkpoint: str, output, split: str, known_splits) -> None:
    agg = EventTimeAggregation(
        source,
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(
            windows.Tumbling(10_000),
            {"n": aggregates.count(), "total": aggregates.sum("v")},
            trigger=triggers.AfterWatermark(early=triggers.AfterCount(3)),
        ),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0), split=split, known_splits=known_splits),
    )
    # A trigger interval long enough that the test can kill the driver in the middle of the stream.
    agg.run_to_completion(checkpoint, output, trigger_interval="500 milliseconds", timeout_s=600)


def main(args: list[str]) -> None:
    spark = local_session("floodmark-restart", cores=2, shuffle_partitions=2)
    if args[0] == "--kafka":
        bootstrap, topic, checkpoint, prefix = args[1:5]
        source = read_kafka(spark, bootstrap, topic, SCHEMA, options={"maxOffsetsPerTrigger": "10"})
        outputs = Outputs.kafka(bootstrap, f"{prefix}-panes", f"{prefix}-late", f"{prefix}-dead")
        run(source, checkpoint, outputs, "partition", ["0", "1"])
    else:
        input_dir, checkpoint, output = args[:3]
        source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(input_dir)
        run(source, checkpoint, output, "p", ["0", "1"])
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
