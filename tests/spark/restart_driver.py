"""A floodmark driver process for the kill -9 restart tests (run as a script).

Usage: restart_driver.py INPUT CHECKPOINT OUTPUT [--cumulate] [--host jvm]
       restart_driver.py --kafka BOOTSTRAP TOPIC CHECKPOINT OUTPUT_PREFIX [--exactly-once [--kill-after-commit N]]
                         [--timeouts-ms MS] [--host jvm]
Runs the bounded input (Parquet files, or everything a Kafka topic holds) to completion from the checkpoint
(starting or resuming); Kafka runs write panes, late records and dead letters to the topics
OUTPUT_PREFIX-panes, -late and -dead, exactly-once (transactional id prefix OUTPUT_PREFIX) with
``--exactly-once``. ``--kill-after-commit N``: kill -9 this driver (and its JVM) right after the Kafka transaction
of the first pane batch >= N has committed, before Spark commits the batch.
``--cumulate``: cumulate windows (2 s steps, 6 s epochs) with the default trigger, and splits idle after 1.5 s.
``--timeouts-ms MS``: the Kafka clients' request, API, blocking and delivery timeouts (source and sinks) at MS
instead of Kafka's defaults (30 s to 2 min), so that an outage outlasts them sooner.
``--host jvm``: the stage on the JVM host (fixed in the checkpoint when it is created); the Python host without.
"""

from __future__ import annotations

import os
import signal
import sys

from floodmark import WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.spark import EventTimeAggregation, Outputs, SourceTime, local_session, read_kafka
from floodmark.spark.outputs.sinks import PANES, KafkaSink, OutputBatch

SCHEMA = "ts LONG, k STRING, p INT, v DOUBLE"


def client_timeouts(ms: int) -> dict[str, str]:
    """``kafka.*`` settings that give up after ``ms``: the consumer's and admin's requests and API calls, the
    producer's blocking calls and deliveries (at least a request's time), Spark's executor-side poll."""
    return {
        "kafka.request.timeout.ms": str(ms),
        "kafka.default.api.timeout.ms": str(ms),
        "kafka.max.block.ms": str(ms),
        "kafka.delivery.timeout.ms": str(2 * ms),
    }


AGGREGATES = {"n": aggregates.count(), "total": aggregates.sum("v")}
TUMBLING = WindowSpec(
    windows.Tumbling(10_000), AGGREGATES, trigger=triggers.AfterWatermark(early=triggers.AfterCount(3))
)
CUMULATE = WindowSpec(windows.Cumulate(2_000, 6_000), AGGREGATES)


def run(
    source, checkpoint: str, output, split: str, known_splits, cumulate: bool = False, host: str | None = None
) -> None:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    agg = EventTimeAggregation(
        source,
        event_time="ts",
        key_by=["k"],
        spec=CUMULATE if cumulate else TUMBLING,
        time=SourceTime(
            strategy.with_idleness(1_500) if cumulate else strategy, split=split, known_splits=known_splits
        ),
        host=host,
    )
    # A trigger interval long enough that the test can kill the driver in the middle of the stream.
    agg.run_to_completion(checkpoint, output, trigger_interval="500 milliseconds", timeout_s=600)


class KillAfterCommit(KafkaSink):
    """A Kafka sink that kills its driver right after a pane batch >= ``kill_at`` is committed to Kafka."""

    kill_at: int = 0

    def write(self, batch: OutputBatch) -> None:
        super().write(batch)
        if batch.kind == PANES and batch.batch_id >= self.kill_at:
            os.killpg(os.getpgrp(), signal.SIGKILL)


def main(args: list[str]) -> None:
    spark = local_session("floodmark-restart", cores=2, shuffle_partitions=2)
    host = args[args.index("--host") + 1] if "--host" in args else None  # None: FLOODMARK_HOST or Python
    if args[0] == "--kafka":
        bootstrap, topic, checkpoint, prefix = args[1:5]
        timeouts = client_timeouts(int(args[args.index("--timeouts-ms") + 1])) if "--timeouts-ms" in args else {}
        poll = {"kafkaConsumer.pollTimeoutMs": timeouts["kafka.request.timeout.ms"]} if timeouts else {}
        source = read_kafka(spark, bootstrap, topic, SCHEMA, options={"maxOffsetsPerTrigger": "10", **timeouts, **poll})
        exactly_once = prefix if "--exactly-once" in args else None
        outputs = Outputs.kafka(
            bootstrap,
            f"{prefix}-panes",
            f"{prefix}-late",
            f"{prefix}-dead",
            transactional_id_prefix=exactly_once,
            options=timeouts,
        )
        if "--kill-after-commit" in args:
            panes = KillAfterCommit(bootstrap, f"{prefix}-panes", transactional_id_prefix=exactly_once)
            panes.kill_at = int(args[args.index("--kill-after-commit") + 1])
            outputs = Outputs(panes, outputs.late, outputs.dead_letter)
        run(source, checkpoint, outputs, "partition", ["0", "1"], host=host)
    else:
        input_dir, checkpoint, output = args[:3]
        source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(input_dir)
        run(source, checkpoint, output, "p", ["0", "1"], cumulate="--cumulate" in args, host=host)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
