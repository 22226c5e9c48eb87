"""A source's rows up to the shuffle: event time in ms, the bucket of each key, the map-side combiner."""

from __future__ import annotations

import logging
from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from floodmark.jvm import missing_jar, why_jar_unloadable
from floodmark.protocol import wire
from floodmark.spark import blocks, plan_hints
from floodmark.spark import plan as p
from floodmark.spark.connect import is_connect
from floodmark.spark.map_side import jvm_combine
from floodmark.spark.map_side.combiner import MapSideCombiner
from floodmark.spark.sql_functions import register_functions
from floodmark.spark.stateful import bucket_layout

_LOG = logging.getLogger(__name__)


def event_time_ms(
    source: DataFrame, event_time: str | Column, time_zone: str = "UTC"
) -> tuple[Column, Column, Column | None]:
    """``(event time in ms as a long, the raw value as text, why the expression failed)`` for ``source``'s
    ``event_time`` column or expression.

    Longs are ms since the epoch; ``TIMESTAMP`` values are instants; ``TIMESTAMP_NTZ`` values are wall-clock times
    in ``time_zone``; whole doubles are taken as ms; text is parsed as a long (ms) or as a date-time as Spark's
    ``to_timestamp`` parses it (ISO-8601: ``2026-01-01T10:00:00.123+01:00``, ``2026-01-01 10:00:00``,
    ``2026-01-01``), whose offset or zone (``Z``, ``+01:00``, ``UTC``, ``Europe/Berlin``) is kept; without one it
    is a wall-clock time in ``time_zone``. Anything else is null (a bad record, whose raw text is kept).

    These conversions cannot fail; a Column expression can (Spark's ANSI mode fails ``to_timestamp`` on text that
    is not a timestamp), so it is evaluated with ``fm_try``: a value it fails on is null, and the third column has
    the error's first line (the dead letter's reason). Without floodmark's jar that column is None and such a value
    fails the batch (a warning says so).
    """
    column = F.col(event_time) if isinstance(event_time, str) else event_time
    dtype = source.select(column).schema.fields[0].dataType
    if isinstance(dtype, TimestampNTZType):
        ms = wall_clock_ms(column, time_zone)
    elif isinstance(dtype, TimestampType):
        ms = F.unix_millis(column)
    elif isinstance(dtype, LongType | IntegerType | ShortType):
        ms = column.cast("long")
    elif isinstance(dtype, DoubleType | FloatType):
        ms = F.when(column == F.floor(column), column.try_cast("long"))
    else:
        text = column.try_cast("string")
        zoned = F.unix_millis(F.try_to_timestamp(text))
        local = wall_clock_ms(text.try_cast(TimestampNTZType()), time_zone)
        ms = F.coalesce(column.try_cast("long"), F.when(text.rlike(ZONED_TEXT), zoned).otherwise(local))
    raw = column.try_cast("string")
    if isinstance(event_time, str):
        return ms, raw, None
    if not register_functions(source.sparkSession):
        missing = None if is_connect(source.sparkSession) else missing_jar()
        _LOG.warning(
            "floodmark: %s: a value the event-time expression fails on fails the batch instead of becoming a dead "
            "letter (%s, or use try_ functions)",
            missing or "this session cannot load floodmark's jar",
            "an installation with floodmark's jar avoids that" if missing else "give the session floodmark's jar",
        )
        return ms, raw, None
    return guarded(ms), guarded(raw), F.call_function(TRY_ERROR, ms)


ZONED_TEXT = (
    r"(?i)\d:\d{2}(:\d{2}([.,]\d+)?)?\s*(z|utc|gmt|ut|(utc|gmt|ut)?[+-]\d{1,2}(:?\d{2}){0,2}|[a-z]+/[a-z0-9_/+-]+)$"
)
"""A date-time text that names its offset or zone after its time (``...10:00Z``, ``...10:00:00+01:00``,
``...10:00 UTC``, ``...10:00 Europe/Berlin``): Spark's parsing keeps it; other text is a wall-clock time in the
source's zone (:func:`wall_clock_ms`)."""


def wall_clock_ms(wall_clock: Column, time_zone: str) -> Column:
    """Milliseconds since the epoch of ``wall_clock`` (a ``TIMESTAMP_NTZ``) read as a time in ``time_zone``, whatever
    the session's time zone (no cast to ``TIMESTAMP``, which would read it in the session's)."""
    utc = F.convert_timezone(F.lit(time_zone), F.lit("UTC"), wall_clock)
    return F.timestamp_diff("MILLISECOND", F.lit(_EPOCH).cast(TimestampNTZType()), utc)


_EPOCH = "1970-01-01 00:00:00"


TRY_VALUE, TRY_ERROR = "fm_try", "fm_try_error"
"""floodmark's SQL functions (``jvm/floodmark``, ``floodmark.input``): an expression's value or null where it throws;
the first line of what it throws."""


def guarded(expression: Column) -> Column:
    """``expression``, null where evaluating it throws (``fm_try``: register floodmark's functions first)."""
    return F.call_function(TRY_VALUE, expression)


MapSide = Literal["arrow", "jvm"]
"""Where records are combined before the shuffle (``Pipeline(map_side=...)``)."""


def combined_input(
    source: DataFrame,
    event_time: str | Column,
    split: str | Column | None,
    plan: p.RuntimePlan,
    map_side: MapSide = "arrow",
    time_zone: str = "UTC",
    direct: bool = False,
    python_inputs: list[StructType | None] | None = None,
) -> DataFrame:
    """``source`` through the map side of ``plan``: ``(fm_bucket, fm_block)`` rows (``blocks.SCHEMA``).

    :arg map_side: ``"arrow"``: every record through the Arrow combiner; ``"jvm"``: Spark's partial aggregation
        for the records that are good and on time (:mod:`floodmark.spark.map_side.jvm_combine`), where the plan allows.
    :arg direct: the stage runs on the JVM host, which reads the JVM map side's rows as they are: where the JVM map
        side serves, its rows (:func:`~floodmark.spark.map_side.jvm_combine.aggregated_in_jvm`, no ``fm_block``
        column) instead of blocks.
    :arg python_inputs: where given, the schema of the rows each Python step of the map side reads is appended
        (:mod:`floodmark.spark.driver.arrow_batches`).
    """
    ms, raw, error = event_time_ms(source, event_time, time_zone)
    # The split travels as the user's own column (no copy, no string per record); only an expression
    # adds a column (null where it throws: one split for those records, which the driver warns about).
    # The combiner labels the few distinct values.
    if isinstance(split, Column) and register_functions(source.sparkSession):
        split = guarded(split)
    split_value = [split.alias(p.SPLIT_VALUE)] if isinstance(split, Column) else []
    ts = [] if plan.input.ts_column != p.TS else [ms.alias(p.TS), F.when(ms.isNull(), raw).alias(p.TS_RAW)]
    if error is not None and plan.input.ts_column == p.TS:
        ts.append(F.when(ms.isNull(), error).alias(p.TS_ERROR))
    bucket = (
        bucket_layout.label_column(
            plan.state.bucket_values,
            F.pmod(F.hash(*[F.col(c) for c in plan.stage.key_columns]), F.lit(plan.state.buckets)),
        )
        if plan.stage.key_columns
        else F.lit(plan.state.bucket_values[0])  # one global key
    )
    data = source.select(
        "*",
        *ts,  # a long column of ms is used as it is; only bad rows need the raw text
        *split_value,
        bucket.alias(wire.BUCKET),
    )
    # The combiner's rows (inside the blocks): every column is nullable, PARTIAL and SPLIT_STATS rows carry
    # no record. The original text is for the combiner's dead letters: records cross the shuffle without it.
    inputs = [
        StructField(f.name, f.dataType, nullable=True) for f in data.schema.fields if f.name != plan.input.text_column
    ]
    combiner = MapSideCombiner(plan, StructType([*inputs, *plan.stage.combiner_fields()]))
    read = python_inputs.append if python_inputs is not None else lambda schema: None
    if map_side == "arrow":
        read(data.schema)
        return data.mapInArrow(combiner, blocks.SCHEMA)
    stage = f"stage {plan.stage.name!r}" if plan.stage.name else "the aggregation"
    why_not = jvm_combine.why_not(plan, data.schema)
    if why_not is None:
        why_not = plan_hints.why_unreachable(data.sparkSession)
    if why_not is None and not register_functions(data.sparkSession):
        why_not = why_jar_unloadable(is_connect(data.sparkSession))
    if why_not is not None:
        _LOG.warning("floodmark: %s combines records in Python (Arrow), not in the JVM: %s", stage, why_not)
        read(data.schema)
        return data.mapInArrow(combiner, blocks.SCHEMA)
    _LOG.info("floodmark: %s combines on-time records in the JVM (Spark's partial aggregation)", stage)
    aggregated = jvm_combine.aggregated_in_jvm(data, plan)
    if direct:
        return aggregated
    read(aggregated.schema)
    return jvm_combine.combined_in_jvm(aggregated, data.columns, combiner)
