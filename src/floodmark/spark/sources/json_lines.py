"""JSON text as floodmark input: parsed with a schema, each row keeping the text it came from.

::

    events = read_json_lines(spark, "in/", "ts LONG, channel STRING, behavior STRING")
    EventTimeAggregation(events, event_time="ts", key_by=["channel"], spec=spec, time=time)

Spark's JSON file reader keeps a line's text only when it cannot parse it (its corrupt-record column); a
line that parses but is still not a usable record (a timestamp or an aggregated number missing, out of
range) would reach the dead letters as its parsed columns written back as JSON: other spacing, key order and
number forms, and the fields it lacks added as nulls. Reading the text and parsing it with ``from_json``
keeps every line's own text in :data:`~floodmark.spark.plan.TEXT`, which floodmark writes as the dead
letter's ``record``. :func:`parse_json` is that rule, for files here and for Kafka values
(:func:`floodmark.spark.read_kafka`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from floodmark.spark.connect import client_path
from floodmark.spark.plan import TEXT, corrupt_record_column

_PARSED = "fm_parsed"


def read_json_lines(
    spark: SparkSession, path: str, schema: StructType | str, options: Mapping[str, str] | None = None
) -> DataFrame:
    """A streaming DataFrame of the JSON-lines files under ``path``, one object per line, parsed with ``schema``.

    The columns are ``schema``'s fields, the partition columns of Hive-style folders under ``path``
    (``gateway=g1/``: a column ``gateway`` holding ``g1``, as Spark's file sources give them), Spark's
    corrupt-record column (:func:`corrupt_record_column`: a line's text when it is not an object of the schema:
    broken JSON, a field of the wrong type) and :data:`~floodmark.spark.plan.TEXT` (every line's text, exactly as
    in the file), so that each dead letter's ``record`` is its line as it came. Lines of nothing but whitespace
    are skipped, as Spark's JSON reader skips them.

    Files are read in the order of Spark's file source: by modification time, to the millisecond, files written
    within the same millisecond in the file system's listing order (not by name). When the order matters (a
    replay of history, ``maxFilesPerTrigger``), read them with :func:`~floodmark.spark.read_files_in_order`.

    Partition columns are found when the stream is defined, from the folders under ``path`` then (Spark's
    partition discovery: a folder added later under a new ``key=`` name is not a column). A field of ``schema``
    named as a partition column takes the folder's value, cast to the field's type (a folder value that does
    not cast is null, like a field missing from the line); the others come as Spark infers them.

    :arg schema: the records' fields (a ``StructType`` or DDL string); a field named as the corrupt-record
        column is that column.
    :arg options: options of Spark's text source (``maxFilesPerTrigger``, ``pathGlobFilter``, ``lineSep``, ...).
    """
    lines = spark.readStream.options(**dict(options or {})).text(client_path(spark, path))
    parsed_schema = struct_schema(spark, schema)
    declared = {f.name: f.dataType for f in parsed_schema.fields}
    folders = [c for c in lines.columns if c != "value"]
    lines = lines.select(
        "value", *[F.col(c).try_cast(declared[c]).alias(c) if c in declared else F.col(c) for c in folders]
    )
    fields = StructType([f for f in parsed_schema.fields if f.name not in folders])
    return records_of_lines(lines, fields, folders, "read_json_lines")


def records_of_lines(lines: DataFrame, schema: StructType, keep: Sequence[str], reader: str) -> DataFrame:
    """The JSON lines of ``lines``' string column ``value`` parsed with ``schema`` (:func:`parse_json`), its
    columns ``keep`` kept; lines of nothing but whitespace skipped."""
    return parse_json(lines.where(~F.col("value").rlike(r"^\s*$")), schema, "value", keep, reader)


def struct_schema(spark: SparkSession, schema: StructType | str) -> StructType:
    """``schema`` as a ``StructType`` (a DDL string parsed by ``spark``)."""
    return schema if isinstance(schema, StructType) else spark.createDataFrame([], schema).schema


def parse_json(frame: DataFrame, schema: StructType | str, json: str, keep: Sequence[str], reader: str) -> DataFrame:
    """The JSON objects in ``frame``'s string column ``json`` (one per row) as the columns of ``schema``.

    The result has ``schema``'s fields, ``frame``'s columns ``keep``, Spark's corrupt-record column (the
    row's original text when ``json`` is not an object of the schema, an empty value included; else null)
    and :data:`~floodmark.spark.plan.TEXT` (every row's original text: ``frame``'s own ``TEXT`` column when it
    has one, such as Kafka's ``base64:`` form of bytes that are not UTF-8, else ``json``).

    :arg reader: the public reader's name, for the error on a field that clashes with a column it adds.
    :raises ValueError: a field of ``schema`` is named as one of the columns the result adds.
    """
    spark = frame.sparkSession
    corrupt = corrupt_record_column(spark)
    fields = [f for f in struct_schema(spark, schema).fields if f.name != corrupt]
    clashes = sorted({f.name for f in fields} & {*keep, TEXT})
    if clashes:
        raise ValueError(f"the schema has field(s) {clashes}, which {reader} adds itself")
    parsed = F.from_json(
        F.col(json),
        StructType([*fields, StructField(corrupt, StringType())]),
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": corrupt},
    )
    original = F.col(TEXT) if TEXT in frame.columns else F.col(json)
    # from_json gives no row at all for an empty value: that text is as unparsable as broken JSON. The
    # original text rather than from_json's copy, which has lost what the original form kept (Kafka's bytes).
    unparsed = F.col(_PARSED).isNull() | F.col(_PARSED).getField(corrupt).isNotNull()
    return frame.select(*keep, original.alias(TEXT), parsed.alias(_PARSED)).select(
        *[F.col(_PARSED).getField(f.name).alias(f.name) for f in fields],
        *keep,
        F.when(unparsed, F.col(TEXT)).alias(corrupt),
        TEXT,
    )
