"""Kafka topics as floodmark inputs: Spark's own Kafka source, values parsed, bad values kept as text.

::

    events = read_kafka(spark, "broker:9092", "clicks", schema="ts LONG, channel STRING, behavior STRING")
    time = SourceTime(strategy, split="partition",
                      known_splits=topic_partitions(spark, "broker:9092", "clicks"))
    EventTimeAggregation(events, event_time="ts", key_by=["channel"], spec=spec, time=time)

A partition is a split (Flink's per-partition watermarks). With floodmark's jar on the driver, the topic
is read through :data:`ALIGNED_SOURCE`, Spark's own source wrapped so that watermark alignment
(``WatermarkStrategy.with_watermark_alignment``) can pause a partition that runs ahead (every read is still the
connector's); without it, through Spark's source directly. Listing the topic's partitions as
``known_splits`` makes a partition that has not sent anything yet hold the watermark back (as Flink's Kafka
source does for the partitions it is assigned), until idleness releases it.

The source is Spark's (``spark-sql-kafka-0-10``: offsets in the query's checkpoint, exactly-once reading
across restarts); it must be on the classpath (``local_session()`` adds it when ``scripts/setup.sh`` has
fetched it; see :func:`floodmark.spark.driver.session.kafka_connector_jars`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from floodmark.jvm import missing_data_source
from floodmark.spark import plan_hints
from floodmark.spark.connect import is_connect
from floodmark.spark.plan import TEXT, corrupt_record_column
from floodmark.spark.source_options import option_values
from floodmark.spark.sources.json_lines import parse_json

METADATA_COLUMNS = ("partition", "offset", "kafka_timestamp", "kafka_key")
"""What :func:`read_kafka` adds to the value's fields: the record's partition (int), offset (long), Kafka
timestamp (timestamp) and key (text)."""

VALUE_FORMATS = ("json", "text", "avro", "confluent-avro")
ALIGNED_SOURCE = "floodmark.kafka.AlignedKafkaSource"
"""The JVM class of the Kafka source that can pause partitions (``jvm/floodmark``; wraps Spark's connector)."""
ALIGNMENT_KEY_OPTION = "floodmark.alignment.key"
"""The source option that names a :data:`ALIGNED_SOURCE` (for :func:`pause_partitions`)."""
CONFLUENT_MAGIC_BYTE = 0
"""The first byte of a value in Confluent's wire format (then the schema id in 4 bytes, then the Avro body)."""


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

    :arg schema: ``value_format="json"``: the value's fields (a ``StructType`` or DDL string); ``"avro"`` and
        ``"confluent-avro"``: the writer's Avro schema as JSON text (a record: its fields become the columns).
    :arg value_format: ``"json"``: one JSON object per value, parsed with ``schema``
        (:func:`floodmark.spark.sources.json_lines.parse_json`); each value keeps its original text in
        :data:`~floodmark.spark.plan.TEXT` (bytes that are not UTF-8 as ``base64:<the bytes in base64>``), the
        ``record`` of its dead letter whatever made it bad, and a value that is not such an object (broken
        JSON, a field of the wrong type, an empty value) has that text in the corrupt-record column too
        (:func:`~floodmark.spark.plan.corrupt_record_column`). ``"avro"``: Avro binary (no header), decoded with
        Spark's ``from_avro`` (:func:`parse_avro`; needs the ``spark-avro`` jar, which ``scripts/setup.sh``
        fetches beside the connector); ``"confluent-avro"``: Confluent's wire format (a zero byte, the schema id
        in 4 bytes, then Avro binary), as Confluent's serializers write it; the schema id is not checked (no
        schema registry is asked). A value that does not decode goes to the dead letters, its ``record`` its
        bytes as ``base64:...``. ``"text"``: the value as a ``value`` string column (invalid UTF-8 replaced by
        U+FFFD), to parse yourself.
    :arg starting_offsets: Spark's ``startingOffsets`` for a new query (a restart resumes from its checkpoint).
    :arg options: more source options (``kafka.*`` client settings, ``maxOffsetsPerTrigger``, ...).
    """
    if value_format not in VALUE_FORMATS:
        raise ValueError(f"value_format must be one of {VALUE_FORMATS}, not {value_format!r}")
    reader = spark.readStream.format("kafka")
    if _aligned_source_loadable(spark):
        reader = spark.readStream.format(ALIGNED_SOURCE).option(ALIGNMENT_KEY_OPTION, uuid.uuid4().hex)
    reader = (
        reader.option("kafka.bootstrap.servers", bootstrap_servers)
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
        raise ValueError(f"value_format={value_format!r} needs the value's schema")
    if value_format in ("avro", "confluent-avro"):
        if not isinstance(schema, str):
            raise ValueError(f"value_format={value_format!r} takes the Avro schema as JSON text")
        values = raw.select(F.col("value"), *metadata)
        return parse_avro(values, schema, value_format == "confluent-avro", METADATA_COLUMNS, "read_kafka")
    original = F.when(F.is_valid_utf8(cast), text).otherwise(F.concat(F.lit("base64:"), F.base64(F.col("value"))))
    values = raw.select(text.alias("value"), original.alias(TEXT), *metadata)
    return parse_json(values, schema, "value", METADATA_COLUMNS, "read_kafka")


def parse_avro(frame: DataFrame, schema: str, confluent: bool, keep: Sequence[str], reader: str) -> DataFrame:
    """The Avro records in ``frame``'s binary column ``value`` (one per row) as the columns of their record schema.

    The result has the record's fields, ``frame``'s columns ``keep``, Spark's corrupt-record column (the value's
    bytes as ``base64:<base64>`` when it does not decode: Avro that does not match ``schema``, an empty value,
    and with ``confluent`` a value without Confluent's header; else null) and :data:`~floodmark.spark.plan.TEXT`
    (every value's bytes in that form: a dead letter's ``record``).

    :arg schema: the writer's Avro schema, JSON text; a record. :arg confluent: values are in Confluent's wire
        format (:data:`CONFLUENT_MAGIC_BYTE`, a 4-byte schema id, the Avro body).
    :raises ValueError: the schema is not a record, or has a field named as a column the result adds.
    """
    from pyspark.sql.avro.functions import from_avro

    writer = json.loads(schema)
    if not isinstance(writer, dict) or writer.get("type") != "record":
        raise ValueError(f"{reader} needs an Avro record schema (its fields become columns), not {schema[:80]}")
    fields = [field["name"] for field in writer.get("fields", [])]
    spark = frame.sparkSession
    corrupt = corrupt_record_column(spark)
    clashes = sorted(set(fields) & {*keep, TEXT, corrupt, _DECODED})
    if clashes:
        raise ValueError(f"the Avro schema has field(s) {clashes}, which {reader} adds itself")
    # In PERMISSIVE mode (FAILFAST, the default, would fail the batch) a value that does not decode becomes a
    # record of nulls, which a record of nullable fields can also be. Read with the writer's schema plus a field
    # that only Avro's schema resolution fills in (its default, true): null exactly when decoding failed.
    resolved = {**writer, "fields": [*writer.get("fields", []), {"name": _DECODED, "type": "boolean", "default": True}]}
    body = F.col("value")
    if confluent:
        framed = F.expr(f"length(value) >= 5 AND substring(value, 1, 1) = X'{CONFLUENT_MAGIC_BYTE:02X}'")
        body = F.when(framed, F.expr("substring(value, 6)"))
    decoded = from_avro(body, schema, {"mode": "PERMISSIVE", "avroSchema": json.dumps(resolved)})
    original = F.concat(F.lit("base64:"), F.base64(F.col("value")))
    failed = F.col(_DECODED).getField(_DECODED).isNull()
    return frame.select(*keep, original.alias(TEXT), decoded.alias(_DECODED)).select(
        *[F.col(_DECODED).getField(name).alias(name) for name in fields],
        *keep,
        F.when(failed, F.col(TEXT)).alias(corrupt),
        TEXT,
    )


_DECODED = "fm_decoded"


def _aligned_source_loadable(spark: SparkSession) -> bool:
    """Whether the session's driver can load :data:`ALIGNED_SOURCE` (in floodmark's jar; over Spark Connect: the
    server was started with floodmark's extensions, which come from the same jar)."""
    if is_connect(spark):
        return plan_hints.why_unreachable(spark) is None
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(ALIGNED_SOURCE))


def alignment_keys(frame: DataFrame) -> list[str]:
    """The names of the :data:`ALIGNED_SOURCE` sources ``frame`` reads (none: it reads no Kafka topic through
    :func:`read_kafka` with floodmark's jar): the :data:`ALIGNMENT_KEY_OPTION` of each source in its plan."""
    if not _aligned_source_loadable(frame.sparkSession):
        return []
    return sorted(set(option_values(frame, ALIGNMENT_KEY_OPTION)))


def pause_partitions(spark: SparkSession, key: str, partitions: Iterable[str]) -> None:
    """From the next batch Spark plans, source ``key`` reads nothing more of ``partitions`` (partition numbers,
    as split labels) and reads again every partition not listed: through floodmark's data source :data:`PAUSES`,
    run on the driver (a classic session's, or a Spark Connect server's)."""
    listed = ",".join(sorted(partitions, key=int))
    spark.range(0).write.format(PAUSES).mode("append").option("key", key).option("partitions", listed).save()


def planned_backlog(spark: SparkSession, keys: Sequence[str], offsets: Sequence[object]) -> dict[str, int]:
    """``{partition: records unread}`` as the :data:`ALIGNED_SOURCE` sources ``keys`` planned the batch whose
    offsets are ``offsets`` (each source's, as Spark logged them), through floodmark's data source :data:`BACKLOG`
    run on the driver; the partitions of a source that planned another batch last (one planned by an earlier run)
    are left out."""
    found: dict[str, int] = {}
    rows = spark.read.format(BACKLOG).option("keys", ",".join(keys)).load().collect()
    for row in rows:
        if json.loads(row["end"]) in offsets:
            found[str(row["partition"])] = found.get(str(row["partition"]), 0) + int(row["unread"])
    return found


BACKLOG = "floodmark.kafka.Backlog"
"""floodmark's batch data source (in its jar) of what each :data:`ALIGNED_SOURCE` planned last: per partition, the
records beyond the planned batch's end."""
PAUSES = "floodmark.kafka.Pauses"
"""floodmark's data source (in its jar) that sets which partitions of an :data:`ALIGNED_SOURCE` are paused."""


class PausePartitions:
    """Watermark alignment's hook (:class:`~floodmark.driver.controller.EngineHooks` ``pause``): pauses the
    partitions the controller names, ``{source: splits}``, in the :data:`ALIGNED_SOURCE` sources each source reads
    (``keys``: :func:`alignment_keys`). Called as each batch begins, in the process that runs the query's
    ``foreachBatch`` (the driver, or a Spark Connect server's Python process), on the batch's session; tells Spark
    only what changed since its last call."""

    def __init__(self, keys: Mapping[str, list[str]]) -> None:
        self.keys = dict(keys)
        self._told: dict[str, frozenset[str]] = {}

    def __call__(self, paused: Mapping[str, frozenset[str]]) -> None:
        for name, splits in paused.items():
            for key in self.keys[name]:
                if self._told.get(key) != splits:
                    spark = SparkSession.getActiveSession()
                    assert spark is not None, "called inside the query's foreachBatch, whose session is active"
                    pause_partitions(spark, key, splits)
                    self._told[key] = splits


def topic_partitions(
    spark: SparkSession, bootstrap_servers: str, topic: str, options: Mapping[str, str] | None = None
) -> list[str]:
    """The partitions of ``topic`` as split labels (``"0"``, ``"1"``, ...), from the broker's metadata.

    Asked by the Kafka client on the driver's classpath (the connector's ``kafka-clients``) through floodmark's data
    source :data:`TOPIC_PARTITIONS`: the same call on a classic session and over Spark Connect. ``kafka.*``
    entries of ``options`` are passed to the client (security settings, as for :func:`read_kafka`).

    :raises ValueError: the topic does not exist.
    :raises ConnectionError: the broker cannot be reached or refuses the client (Kafka's error and its cause).
    :raises RuntimeError: the session's driver lacks floodmark's jar.
    """
    reader = spark.read.format(TOPIC_PARTITIONS).option("topic", topic)
    reader = reader.option("kafka.bootstrap.servers", bootstrap_servers)
    for key, value in (options or {}).items():
        if key.startswith("kafka."):
            reader = reader.option(key, value)
    try:
        rows = reader.load().collect()
    except Exception as error:  # py4j's or Spark Connect's error: the data source's one line is in its text
        text = str(error)
        line = next((x for x in text.splitlines() if _TOPIC_FAILURE in x), None)
        if line is None:
            if missing_data_source(error):
                raise RuntimeError(
                    f"topic_partitions needs floodmark's jar on the driver ({TOPIC_PARTITIONS}); or give the topic's "
                    "partitions as SourceTime(known_splits=...) yourself"
                ) from None
            raise
        reason = line[line.index(_TOPIC_FAILURE) + len(_TOPIC_FAILURE) :].strip()
        raise (ValueError if "does not exist at" in reason else ConnectionError)(reason) from None
    return [str(p) for p in sorted(row["partition"] for row in rows)]


TOPIC_PARTITIONS = "floodmark.kafka.TopicPartitions"
"""floodmark's batch data source of a topic's partitions (in its jar): one row per partition."""
_TOPIC_FAILURE = "[floodmark topic_partitions]"
"""What starts the data source's one line of a failure (``TopicPartitions.Marker``)."""
