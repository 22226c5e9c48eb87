"""The JVM map side (``map_side="jvm"``): Spark's own partial aggregation combines the records that are good and
on time; only those partials and the other records cross to Python.

The Arrow combiner (:class:`~floodmark.spark.map_side.combiner.MapSideCombiner`, the default map side) gets every record
of a batch in Python. Here the combiner's decisions are Spark expressions over the input rows, built from the
core's concepts:

* **good** (:func:`good_record`): the combiner's record rules, as a test that may be stricter, never looser: no
  corrupt text, an event time in ``[EARLIEST_EVENT_TIME, LATEST_EVENT_TIME]``, at most ``max_future_skew``
  ahead of the batch's processing time, every numeric aggregate input a finite number;
* **windows** (:class:`WindowColumns`): a record's windows (tumbling, sliding, cumulate, global) from the
  assigner's own ``size`` / ``slide`` / ``step`` / ``offset``, with ``core/windows.py``'s arithmetic (``start = ts -
  floor_mod(ts - offset, slide)``); sliding and cumulate windows become one row per (record, window) (``explode``);
* **on time** (:func:`direct_records`): the watermark has not reached the record's earliest window
  (:func:`~floodmark.core.windows.window_reached`: ``watermark >= end - 1`` is late), and, for EARLIEST/LATEST
  output times, no output time at or behind it (:func:`~floodmark.core.combine.open_window_pairs`'s rule);
* **partials**: per partition and (key, bucket, split, window): (record, window) pairs, the output-time hold
  (the timestamp combiner's MIN or MAX), each accumulator's count / sum / min / max over doubles
  (:func:`~floodmark.core.combine.accumulator_reductions`), and the split statistics (records, lowest and
  highest event time).

The batch's watermark and processing time reach the expressions as ``fm_batch_watermark(stage)`` and
``fm_batch_processing_time()`` (floodmark's jar, ``floodmark.batch.BatchEntryValue``): the control entry that
the driver publishes as the job property, read once per task: what the Python side reads.

The aggregation is ``floodmark.combine.PartialAggregate`` (asked for by a hint, :mod:`floodmark.spark.plan_hints`), a
logical node that floodmark's planner strategy plans as the partial half of Spark's own aggregation
(``HashAggregateExec`` in Partial mode, generated code):
a ``groupBy`` would not do, since in a streaming query it is a stateful aggregation across batches. It groups
on every column of the input, which is null for the records it combines, so a record it must not combine (bad,
late, or held by an output time) is a group of its own (``fm_order``, its place in the input:
``fm_row_position()``) that passes through whole. One ``mapInArrow`` step after it
(:class:`~floodmark.spark.map_side.combiner.AggregatedInJvm`) turns the groups into PARTIAL and SPLIT_STATS rows and
hands those records, in input order, to the Arrow combiner, which finds their reasons and keeps them RAW.
``tests/spark/test_jvm_combine.py`` holds both map sides equal on random input.

Measured (``docs/PERFORMANCE.md``): faster with few keys and large batches (the Python side gets a few partials
instead of every record), slower with many keys or sliding windows (as many partials as records, then through
Python anyway; Arrow's group-by in Python is faster than Spark's with many groups). So it is chosen by the user.
:func:`why_not` says when a stage cannot use it (a spec that does not combine: sessions, count triggers, the
general operator; an assigner of your own; numeric inputs that are text or decimals, which the core parses
value by value; floating-point keys, which the JVM's grouping tells apart at -0.0 and 0.0; map or variant
columns, which cannot be grouped on): the stage then uses the Arrow combiner and the log says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructType,
    VariantType,
)

from floodmark.core.combine import accumulator_reductions
from floodmark.core.time import EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, MAX_DURATION
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.windows import GLOBAL_WINDOW, Cumulate, Global, Sliding, Tumbling
from floodmark.protocol import wire
from floodmark.spark import blocks, plan_hints
from floodmark.spark import plan as p
from floodmark.spark.map_side.combiner import AggregatedInJvm, MapSideCombiner

WATERMARK = "fm_batch_watermark"
PROCESSING_TIME = "fm_batch_processing_time"

_NUMBERS = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, BooleanType)
_FLOATS = (FloatType, DoubleType)
_DIRECT, _LATEST, _HOLD, _TS, _ONE = "fm_j_direct", "fm_j_latest", "fm_j_hold", "fm_j_ts", "fm_j_one"
_WINDOW_INDEX = "fm_window_index"


def why_not(plan: p.RuntimePlan, schema: StructType) -> str | None:
    """Why ``plan`` over input rows of ``schema`` needs the Arrow combiner (None: the JVM map side can run)."""
    if not plan.stage.combines:
        return "the spec ships records, not partials (sessions, count triggers or the general policy)"
    window = plan.stage.spec.window
    if type(window) not in (Tumbling, Sliding, Cumulate, Global):
        return f"the window assigner {type(window).__name__} has no Spark expression"
    if isinstance(window, Tumbling | Sliding) and window.size > MAX_DURATION:
        return "windows longer than the event-time range"
    types = {f.name: f.dataType for f in schema.fields}
    parsed = parsed_by_the_core(plan, schema)
    if parsed is not None:
        return parsed
    floats = [c for c in plan.stage.key_columns if isinstance(types[c], _FLOATS)]
    if floats:
        return f"floating-point key columns {floats} (the JVM's grouping tells -0.0 from 0.0)"
    grouped_on = [f.name for f in schema.fields if _has_map(f.dataType)]
    if grouped_on:
        return f"map or variant columns {grouped_on} (the JVM side groups on a record's columns)"
    return None


def parsed_by_the_core(plan: p.RuntimePlan, schema: StructType) -> str | None:
    """Why an aggregate input of ``plan`` over rows of ``schema`` must be read by Python (None: every one is a number
    or a boolean the JVM reads as it is). Text and decimals are parsed value by value by the core's rule
    (``core/assign.py``'s ``_one_number``: Python's ``float``), which has no JVM copy: the JVM map side and the JVM
    host leave such a stage to Python."""
    types = {f.name: f.dataType for f in schema.fields}
    for name in plan.stage.numeric_fields:
        if name in types and not isinstance(types[name], _NUMBERS):
            return f"the aggregate input {name!r} is {types[name].simpleString()}: the core parses it value by value"
    return None


def _has_map(dtype: DataType) -> bool:
    if isinstance(dtype, MapType | VariantType):
        return True
    if isinstance(dtype, ArrayType):
        return _has_map(dtype.elementType)
    if isinstance(dtype, StructType):
        return any(_has_map(f.dataType) for f in dtype.fields)
    return False


def good_record(plan: p.RuntimePlan) -> Column:
    """True for a record the Arrow combiner would find good (see the module docstring); may be stricter."""
    ts = F.col(plan.input.ts_column)
    good = ts.isNotNull() & (ts >= F.lit(EARLIEST_EVENT_TIME)) & (ts <= F.lit(LATEST_EVENT_TIME))
    if plan.input.corrupt_column is not None:
        good &= F.col(plan.input.corrupt_column).isNull()
    if plan.input.max_future_skew_ms is not None:
        good &= ts <= F.call_function(PROCESSING_TIME) + F.lit(plan.input.max_future_skew_ms)
    for name in plan.stage.numeric_fields:
        value = F.col(name).cast("double")
        good &= value.isNotNull() & ~F.isnan(value) & (F.abs(value) != F.lit(float("inf")))
    return good


@dataclass(frozen=True)
class WindowColumns:
    """A record's windows as Spark columns over its event time ``ts`` (ms), by ``core/windows.py``'s arithmetic
    (``_window_start``: ``ts - floor_mod(ts - offset, slide)``).

    :ivar earliest_end: the end (exclusive) of the earliest window holding the record.
    :ivar count: how many windows hold it (None: one).
    :ivar start: the start of window ``i`` (:data:`_WINDOW_INDEX`; 0 is the latest window), or of the one window.
    :ivar end: its end (exclusive).
    :ivar step: the distance from the end of the previous window of the record (sliding: the slide; cumulate: the
        step; None: windows that do not overlap).
    """

    earliest_end: Column
    count: Column | None
    start: Column
    end: Column
    step: int | None

    def output_time(self, ts: Column, end: Column) -> Column:
        """A record's output time in the window ending at ``end`` (``WindowAssigner.output_times``: the event time,
        or for overlapping windows at least the previous window's end, ``max(ts, end - step)``)."""
        return ts if self.step is None else F.greatest(ts, end - F.lit(self.step))


def window_columns(plan: p.RuntimePlan) -> WindowColumns:
    """The windows of each record of ``plan``'s input (its ``ts_column``)."""
    window, ts = plan.stage.spec.window, F.col(plan.input.ts_column)
    if isinstance(window, Tumbling):
        start = ts - F.pmod(ts - F.lit(window.offset), F.lit(window.size))
        end = start + F.lit(window.size)
        return WindowColumns(end, None, start, end, None)
    if isinstance(window, Sliding):
        # Window ends lie on offset + size + k * slide: the earliest window holding ts ends at the first above ts.
        slide = F.lit(window.slide)
        earliest = ts - F.pmod(ts - F.lit(window.offset + window.size), slide) + slide
        last_start = ts - F.pmod(ts - F.lit(window.offset), slide)
        count = ((last_start + F.lit(window.size) - earliest) / slide).cast("long") + F.lit(1)
        start = last_start - F.col(_WINDOW_INDEX) * slide
        return WindowColumns(earliest, count, start, start + F.lit(window.size), window.slide)
    if isinstance(window, Cumulate):
        # The epoch [start, start + max_size) holds ts; its windows end on the step grid, the earliest at the first
        # step boundary above ts, the latest at the epoch's end.
        step = F.lit(window.step)
        start = ts - F.pmod(ts - F.lit(window.offset), F.lit(window.max_size))
        earliest = ts - F.pmod(ts - F.lit(window.offset), step) + step
        last_end = start + F.lit(window.max_size)
        count = ((last_end - earliest) / step).cast("long") + F.lit(1)
        return WindowColumns(earliest, count, start, last_end - F.col(_WINDOW_INDEX) * step, window.step)
    return WindowColumns(F.lit(GLOBAL_WINDOW.end), None, F.lit(GLOBAL_WINDOW.start), F.lit(GLOBAL_WINDOW.end), None)


def direct_records(plan: p.RuntimePlan, windows: WindowColumns) -> Column:
    """True for a record the JVM aggregates: good, every window open, and (EARLIEST/LATEST) no held output time."""
    watermark = F.call_function(WATERMARK, F.lit(plan.stage.name))
    direct = good_record(plan) & (windows.earliest_end - F.lit(1) > watermark)
    if plan.stage.spec.timestamp_combiner is not TimestampCombiner.END_OF_WINDOW:
        # The lowest output time over the record's windows: the earliest window's.
        direct &= windows.output_time(F.col(plan.input.ts_column), windows.earliest_end) > watermark
    return direct


def combined_in_jvm(aggregated: DataFrame, record_columns: list[str], combiner: MapSideCombiner) -> DataFrame:
    """:func:`aggregated_in_jvm`'s rows of an input with ``record_columns`` -> ``(fm_bucket, fm_block)`` rows, as
    :func:`~floodmark.spark.sources.inputs.combined_input` makes them with the Arrow combiner alone."""
    return aggregated.mapInArrow(AggregatedInJvm(combiner, record_columns), blocks.SCHEMA)


def aggregated_in_jvm(data: DataFrame, plan: p.RuntimePlan) -> DataFrame:
    """``data`` (the input with ``fm_bucket``, the event time in ms and the split) -> the partial aggregation's
    rows: one per (key, bucket[, split], window) of the records it combined (``fm_order`` null; ``fm_row_count``,
    ``fm_min_ts``, ``fm_max_ts``: their records, lowest and highest event time), and every record it left alone,
    whole (``fm_order``: its place in the input). The JVM host reads these rows as they are
    (``floodmark.host.DirectInput``)."""
    windows = window_columns(plan)
    record_columns = data.columns
    ts, on = F.col(plan.input.ts_column), F.col(_DIRECT)
    flagged = data.select("*", direct_records(plan, windows).alias(_DIRECT))
    latest = on  # a record's latest window: it counts the record once in the split statistics
    if windows.count is not None:  # one row per (record, window); a record the JVM leaves alone stays one row
        each = F.when(on, F.sequence(F.lit(0), windows.count - F.lit(1))).otherwise(F.array(F.lit(0)))
        flagged = flagged.select("*", F.explode(each).alias(_WINDOW_INDEX))
        latest = on & (F.col(_WINDOW_INDEX) == F.lit(0))
    group = [*plan.stage.key_columns, wire.BUCKET]
    if plan.input.split_column is not None and plan.input.split_stats:
        group.append(plan.input.split_column)
    out_time = windows.output_time(ts, windows.end)
    reductions = accumulator_reductions(plan.stage.spec)
    accumulators = zip(reductions, plan.stage.accumulator_columns(), strict=True)
    values = {field: f"fm_j_{i}" for i, field in enumerate(dict.fromkeys(f for _, _, f in reductions if f))}
    one = F.lit(1)
    inputs = flagged.select(
        # A record's own columns travel only with the records the JVM leaves alone (grouped on: they are null for
        # the others, and a record left alone is a group of its own through fm_order).
        *[F.col(c) if c in group else F.when(~on, F.col(c)).alias(c) for c in record_columns],
        F.when(on, windows.start).alias(wire.WINDOW_START),
        F.when(on, windows.end).alias(wire.WINDOW_END),
        F.when(~on, F.call_function("fm_row_position")).alias(wire.ORDER),
        one.alias(_ONE),
        F.when(latest, one).alias(_LATEST),
        out_time.alias(_HOLD),
        ts.alias(_TS),
        *[F.col(field).cast("double").alias(name) for field, name in values.items()],
    )
    aggregates = [
        f"{wire.COUNT}=count:{_ONE}",
        f"{wire.HOLD}={plan.stage.spec.timestamp_combiner.reduction}:{_HOLD}",
        f"{AggregatedInJvm.RECORDS}=count:{_LATEST}",
        f"{wire.MIN_TS}=min:{_TS}",
        f"{wire.MAX_TS}=max:{_TS}",
        *[f"{c.name}={reduction}:{values.get(field, _ONE)}" for (_, reduction, field), (_, c) in accumulators],
    ]
    grouped = [*record_columns, wire.WINDOW_START, wire.WINDOW_END, wire.ORDER]
    # Resolved by floodmark's session extensions, on a classic session and over Spark Connect alike.
    return plan_hints.hinted(inputs, plan_hints.PARTIAL_AGGREGATE, grouped, aggregates)
