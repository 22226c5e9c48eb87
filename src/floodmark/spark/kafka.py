"""Kafka topics as floodmark inputs: Spark's own Kafka source, values parsed, bad values kept as text.

::

    events = read_kafka(spark, "broker:9092", "clicks", schema="ts LONG, channel STRING, behavior STRING")
    time = SourceTime(strategy, split="partition",
                      known_splits=topic_partitions(spark, "broker:9092", "clicks"))
    EventTimeAggregation(events, event_time="ts", key_by=["channel"], spec=spec, time=time)

A partition is a split (Flink's per-partition watermarks; seed 000). Listing the topic's partitions as
``known_splits`` makes a partition that has not sent anything yet hold the watermark back (as Flink's Kafka
source does for the partitions it is assigned), until idleness releases it.

The source is Spark's (``spark-sql-kafka-0-10``: offsets in the query's checkpoint, exactly-once reading
across restarts); it must be on the classpath (``local_session()`` adds it when ``scripts/setup.sh`` has
fetched it; see :func:`floodmark.spark.session.kafka_connector_jars`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from floodmark.spark.json_lines import parse_json
from floodmark.spark.plan import TEXT

METADATA_COLUMNS = ("partition", "offset", "kafka_timestamp", "kafka_key")
"""What :func:`read_kafka` adds to the value's fields: the record's partition (int), offset (long), Kafka
timestamp (timestamp) and key (text)."""

VALUE_FORMATS = ("json", "text")


def read_kafka(
    spark: SparkSession,
    bootstrap_servers: str,
    topic: str,
    schema: StructType | str | None = None,
    value_format: str = "json",
    starting_offsets: str = "earliest",
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """A streaming DataFrame of ``topic``'s records, values parsed, plus :data:`METADATA_COLUMNS`.

    :arg schema: the value's fields (a ``StructType`` or DDL string) for ``value_format="json"``.
    :arg value_format: ``"json"``: one JSON object per value, parsed with ``schema``
        (:func:`floodmark.spark.json_lines.parse_json`); each value keeps its original text in
        :data:`~floodmark.spark.plan.TEXT` (bytes that are not UTF-8 as ``base64:<the bytes in base64>``), the
        ``record`` of its dead letter whatever made it bad, and a value that is not such an object (broken
        JSON, a field of the wrong type, an empty value) has that text in the corrupt-record column too
        (:func:`~floodmark.spark.plan.corrupt_record_column`). ``"text"``: the value as a ``value`` string
        column (invalid UTF-8 replaced by U+FFFD), to parse yourself.
    :arg starting_offsets: Spark's ``startingOffsets`` for a new query (a restart resumes from its checkpoint).
    :arg options: more source options (``kafka.*`` client settings, ``maxOffsetsPerTrigger``, ...).
    """
    if value_format not in VALUE_FORMATS:
        raise ValueError(f"value_format must be one of {VALUE_FORMATS}, not {value_format!r}")
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
    )
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    raw = reader.load()
    # Spark's cast of bytes to a string does not check UTF-8, and Python cannot decode what is not UTF-8.
    cast = F.col("value").cast("string")
    text = F.make_valid_utf8(cast)
    metadata = [
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("string").alias("kafka_key"),
    ]
    if value_format == "text":
        return raw.select(text.alias("value"), *metadata)
    if schema is None:
        raise ValueError("value_format='json' needs the value's schema")
    original = F.when(F.is_valid_utf8(cast), text).otherwise(F.concat(F.lit("base64:"), F.base64(F.col("value"))))
    values = raw.select(text.alias("value"), original.alias(TEXT), *metadata)
    return parse_json(values, schema, "value", METADATA_COLUMNS, "read_kafka")


def topic_partitions(
    spark: SparkSession, bootstrap_servers: str, topic: str, options: Mapping[str, str] | None = None
) -> list[str]:
    """The partitions of ``topic`` as split labels (``"0"``, ``"1"``, ...), from the broker's metadata.

    Uses the Kafka client on the driver's classpath (the connector's ``kafka-clients``). ``kafka.*`` entries
    of ``options`` are passed to the client (security settings, as for :func:`read_kafka`).

    :raises ValueError: the topic does not exist.
    """
    jvm = spark._jvm  # type: ignore[attr-defined]
    properties = jvm.java.util.Properties()
    properties.put("bootstrap.servers", bootstrap_servers)
    for key, value in (options or {}).items():
        if key.startswith("kafka."):
            properties.put(key.removeprefix("kafka."), value)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(properties)
    try:
        topics = admin.listTopics().names().get(30, jvm.java.util.concurrent.TimeUnit.SECONDS)
        if not topics.contains(topic):
            raise ValueError(f"Kafka topic {topic!r} does not exist at {bootstrap_servers}")
        described = admin.describeTopics(jvm.java.util.List.of(topic)).allTopicNames()
        description = described.get(30, jvm.java.util.concurrent.TimeUnit.SECONDS).get(topic)
        return [str(p) for p in sorted(info.partition() for info in description.partitions())]
    finally:
        admin.close()
