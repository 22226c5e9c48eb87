"""A floodmark driver process for the cluster test (run as a script): seed 001's job on a bounded simulator.

Usage: cluster_driver.py MASTER CHECKPOINT OUTPUT [EVENT_LOG_DIR] [--kafka BOOTSTRAP TOPIC PREFIX]

Runs :data:`floodmark.apps.demo.SEED_001` over :data:`CONFIG` (the clickstream simulator, deterministic
batches: every tick available at once, at most :data:`MAX_RECORDS_PER_BATCH` records per batch) to
completion on ``MASTER`` (``spark://...``, with :func:`~floodmark.spark.driver.session.cluster_session`; Spark's
event log in ``EVENT_LOG_DIR`` when given) and writes ``OUTPUT/run.json`` (batches, seconds).
The test runs the same :func:`aggregation` in local mode for the reference. With ``--kafka``: the same job
reading the simulator's records from TOPIC (a partition per split, :func:`kafka_aggregation`) and writing
exactly-once to the topics PREFIX-panes, -late and -dead (:func:`kafka_outputs`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from floodmark.apps.clickstream_source import read_clickstream
from floodmark.apps.demo import SEED_001
from floodmark.apps.kafka_demo import VALUE_SCHEMA
from floodmark.simulator.clickstream import ClickstreamConfig
from floodmark.spark import EventTimeAggregation, Outputs, read_kafka
from floodmark.spark.driver.session import cluster_session

CONFIG = ClickstreamConfig(
    seed=1,
    splits=4,
    records_per_tick_per_split=50,
    tick_ms=5_000,
    ticks=60,  # 5 minutes of simulated processing time: 6-7 one-minute windows x 28 keys
    late_burst_tick=40,
    late_burst_records=30,
    late_burst_age_ms=300_000,
    bad_records_per_tick=1,
)
MAX_RECORDS_PER_BATCH = 1_700  # 8 ticks (1,608 records, + 30 in the burst's batch): 8 batches with records
SHUFFLE_PARTITIONS = 2


def aggregation(spark: SparkSession) -> EventTimeAggregation:
    """Seed 001's job over :data:`CONFIG`; which records each batch reads does not depend on timing."""
    source = read_clickstream(spark, CONFIG, ticks_per_second=float("inf"), max_records_per_batch=MAX_RECORDS_PER_BATCH)
    return SEED_001.aggregation(source)


def kafka_aggregation(spark: SparkSession, bootstrap: str, topic: str) -> EventTimeAggregation:
    """Seed 001's job over :data:`CONFIG`'s records in ``topic`` (split = partition), at most
    :data:`MAX_RECORDS_PER_BATCH` per batch: with every record in the topic before the start, which records each
    batch reads does not depend on timing."""
    options = {"maxOffsetsPerTrigger": str(MAX_RECORDS_PER_BATCH)}
    source = read_kafka(spark, bootstrap, topic, VALUE_SCHEMA, options=options)
    pipeline = SEED_001.model_copy(update={"split": "partition"})
    return pipeline.aggregation(source, known_splits=[str(split) for split in range(CONFIG.splits)])


def kafka_outputs(bootstrap: str, prefix: str) -> Outputs:
    return Outputs.kafka(
        bootstrap, f"{prefix}-panes", f"{prefix}-late", f"{prefix}-dead", transactional_id_prefix=prefix
    )


def event_log_conf(event_log: str | Path) -> dict[str, str]:
    """Spark's event log as one plain JSON-lines file per application in ``event_log`` (the test reads it)."""
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": Path(event_log).resolve().as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


def main(master: str, checkpoint: str, output: str, event_log: str | None = None, *kafka: str) -> None:
    conf = event_log_conf(event_log) if event_log else {}
    spark = cluster_session(master, "floodmark-cluster-test", shuffle_partitions=SHUFFLE_PARTITIONS, conf=conf)
    started = time.monotonic()
    if kafka:
        bootstrap, topic, prefix = kafka[1:4]
        handle = kafka_aggregation(spark, bootstrap, topic).run_to_completion(
            checkpoint, kafka_outputs(bootstrap, prefix), timeout_s=600
        )
    else:
        handle = aggregation(spark).run_to_completion(checkpoint, output, timeout_s=600)
    seconds = time.monotonic() - started
    Path(output).mkdir(parents=True, exist_ok=True)
    Path(output, "run.json").write_text(json.dumps({"batches": len(handle.reports), "seconds": seconds}))
    spark.stop()  # also closes the event log


if __name__ == "__main__":
    main(*sys.argv[1:])
