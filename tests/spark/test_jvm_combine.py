"""The JVM map side (``spark/map_side/jvm_combine.py``) against the Arrow combiner, on random input, in real Spark.

Both sides take the same input rows and the same control entry (published as the job property, as a query
does) and must ship the same thing: the same partial aggregates per (key, window) once merged, the same split
statistics, the same dead letters with the same reasons, and the same records in the same order. The Arrow
combiner is itself held to the core's ``step`` (``tests/spark/test_processor_unit.py``).
"""

from __future__ import annotations

import math
from collections import defaultdict

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from floodmark import aggregates, windows
from floodmark.core.combine import accumulator_reductions
from floodmark.core.spec import WindowSpec
from floodmark.core.time import EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, MIN_TIMESTAMP
from floodmark.core.timestamps import TimestampCombiner
from floodmark.protocol import wire
from floodmark.protocol.control import ControlEntry
from floodmark.spark import batch_entry, blocks
from floodmark.spark import plan as p
from floodmark.spark.map_side import jvm_combine
from floodmark.spark.sources.inputs import combined_input
from floodmark.spark.sql_functions import register_functions

STAGE = "s"
BASE = 1_000_000
CORRUPT = "_corrupt_record"
SCHEMA = StructType(
    [
        StructField("ts", LongType()),
        StructField("k", StringType()),
        StructField("v", DoubleType()),
        StructField("w", LongType()),
        StructField("part", LongType()),
        StructField(CORRUPT, StringType()),
    ]
)
PARTS = {
    "n": aggregates.count(),
    "total": aggregates.sum("v"),
    "low": aggregates.min("v"),
    "high": aggregates.max("w"),
    "avg": aggregates.mean("w"),
}

timestamps = st.one_of(
    st.integers(BASE - 120, BASE + 120),
    st.sampled_from([EARLIEST_EVENT_TIME - 1, EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, LATEST_EVENT_TIME + 1, None]),
)
numbers = st.one_of(
    st.integers(-5, 5).map(float),
    st.sampled_from([None, math.nan, math.inf, -math.inf, 0.5, -0.0, 1e300]),
)
rows = st.lists(
    st.tuples(
        timestamps,
        st.sampled_from(["a", "b", "c", None]),
        numbers,
        st.one_of(st.integers(-(2**40), 2**40), st.none()),
        st.sampled_from([0, 1, 2, None]),
        st.sampled_from([None] * 9 + ['{"broken'] * 1),
    ),
    max_size=60,
)
window_assigners = st.one_of(
    st.builds(windows.Tumbling, st.sampled_from([7, 10, 60]), st.sampled_from([0, 3])),
    st.builds(windows.Sliding, st.just(20), st.sampled_from([5, 7, 20]), st.sampled_from([0, 2])),
    st.builds(
        lambda steps, offset: windows.Cumulate(*steps, offset),
        st.sampled_from([(5, 20), (7, 21), (10, 10)]),
        st.sampled_from([0, 3]),
    ),
    st.just(windows.Global()),
)


@pytest.fixture(scope="module")
def session(spark):
    if not register_functions(spark):
        pytest.skip("this session cannot load floodmark's jar")
    return spark


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=rows,
    window=window_assigners,
    combiner=st.sampled_from([TimestampCombiner.END_OF_WINDOW, *TimestampCombiner]),
    watermark=st.one_of(st.integers(BASE - 100, BASE + 100), st.just(MIN_TIMESTAMP)),
    at_window_end=st.one_of(st.none(), st.tuples(st.integers(0, 59), st.sampled_from([-1, 0, 0, 1]))),
    skew=st.sampled_from([None, 40]),
    partitions=st.sampled_from([1, 3]),
)
def test_the_jvm_map_side_ships_what_the_arrow_combiner_ships(
    session, data, window, combiner, watermark, at_window_end, skew, partitions
):
    """The watermark often sits at, just below or just above the max timestamp of a record's window (the
    boundary of on time and late)."""
    spec = WindowSpec(window, aggregates.several(**PARTS), timestamp_combiner=combiner)
    on_time = [row[0] for row in data if good(row) and abs(row[0] - BASE) < 1_000]
    if at_window_end is not None and on_time and not isinstance(window, windows.Global):
        which, step = at_window_end
        watermark = window.assign_one(on_time[which % len(on_time)])[0].max_timestamp + step
    plan = p.RuntimePlan.for_input(spec, SCHEMA, ["k"], "ts", "part", False, skew, CORRUPT, STAGE, p.StateLayout(3))
    source = session.createDataFrame(session.sparkContext.parallelize(data, partitions), SCHEMA)  # input order fixed
    assert jvm_combine.why_not(plan, SCHEMA) is None
    entry = ControlEntry(seq=7, watermark=watermark, processing_time=BASE, stage_watermarks={STAGE: watermark})
    jvm = shipped(session, combined_input(source, "ts", "part", plan, "jvm"), entry, combiner)
    arrow = shipped(session, combined_input(source, "ts", "part", plan, "arrow"), entry, combiner)
    assert jvm.keys() == arrow.keys()
    for kind in jvm:
        if kind == "partials":
            assert jvm[kind].keys() == arrow[kind].keys()
            for group, values in jvm[kind].items():
                assert values == pytest.approx(arrow[kind][group], rel=1e-12, nan_ok=True), group
        else:
            assert jvm[kind] == arrow[kind], kind


def good(row: tuple) -> bool:
    ts, _, v, w, _, corrupt = row
    return ts is not None and v is not None and math.isfinite(v) and w is not None and corrupt is None


def shipped(spark, frame, entry: ControlEntry, combiner: TimestampCombiner) -> dict:
    """What the combiner rows of ``frame`` hold, in a form that does not depend on how rows were grouped."""
    context = spark.sparkContext
    context.setLocalProperty(batch_entry.BATCH_ID_PROPERTY, str(entry.seq))
    batch_entry.publish(spark, entry)
    try:
        collected = frame.collect()
    finally:
        batch_entry.publish(spark, None)
        context.setLocalProperty(batch_entry.BATCH_ID_PROPERTY, None)  # type: ignore[arg-type]
    tables = sorted(
        (pa.ipc.open_stream(row[wire.BLOCK]).read_all() for row in collected),
        key=lambda t: int(t.schema.metadata[blocks.PARTITION_KEY]),
    )
    rows = [r for t in tables for r in t.to_pylist()]
    partials: dict = defaultdict(list)
    stats: dict = {}
    bad, raw = [], []
    for row in rows:
        kind = row[wire.ROW]
        if kind == wire.PARTIAL:
            partials[(row["k"], row[wire.BUCKET], row[wire.WINDOW_START], row[wire.WINDOW_END])].append(row)
        elif kind == wire.SPLIT_STATS:
            count, low, high = stats.get(row[wire.SPLIT], (0, math.inf, -math.inf))
            stats[row[wire.SPLIT]] = (count + row[wire.COUNT], min(low, row[wire.MIN_TS]), max(high, row[wire.MAX_TS]))
        elif kind == wire.BAD_INPUT:
            bad.append((row[wire.REASON], row[wire.RECORD]))
        else:
            raw.append(row)
    ordered = any(row[wire.ORDER] is not None for row in raw)
    if ordered:  # the JVM's records cross a shuffle of their own: fm_order restores the input order
        raw.sort(key=lambda row: row[wire.ORDER])
    return {
        "partials": {group: merged(group_rows, combiner) for group, group_rows in partials.items()},
        "stats": stats,
        "bad": sorted(bad, key=repr),
        # A bucket's records in the order its processor takes them (buckets are processed apart).
        "raw": {
            bucket: [(r["ts"], r["k"], r["v"], r["w"], r["part"]) for r in raw if r[wire.BUCKET] == bucket]
            for bucket in {r[wire.BUCKET] for r in raw}
        },
    }


def merged(rows: list[dict], combiner: TimestampCombiner) -> list:
    """One (key, window)'s partial rows merged: pairs, the hold by the timestamp combiner's reduction and each
    accumulator by its reduction (how the operator merges partials)."""
    spec_reductions = accumulator_reductions(WindowSpec(windows.Global(), aggregates.several(**PARTS)))
    hold = [row[wire.HOLD] for row in rows]
    out = [sum(row[wire.COUNT] for row in rows), (min if combiner.reduction == "min" else max)(hold)]
    for i, (_, reduction, _) in enumerate(spec_reductions):
        values = [row[wire.accumulator(i)] for row in rows]
        out.append({"count": sum, "sum": math.fsum, "min": min, "max": max}[reduction](values))
    return out


@pytest.mark.parametrize("watermark, raw", [(BASE + 8, 0), (BASE + 9, 2)])
def test_the_watermark_at_a_windows_max_timestamp_makes_its_records_late_on_both_sides(session, watermark, raw):
    """``[BASE, BASE + 10)`` is reached at ``BASE + 9``: its two records stay records; one ms earlier they combine."""
    plan = p.RuntimePlan.for_input(
        WindowSpec(windows.Tumbling(10), aggregates.several(**PARTS)),
        SCHEMA,
        ["k"],
        "ts",
        "part",
        False,
        None,
        CORRUPT,
        STAGE,
        p.StateLayout(3),
    )
    data = [(BASE + 5, "a", 1.0, 2, 0, None), (BASE + 9, "a", 1.0, 2, 0, None), (BASE + 15, "b", 2.0, 3, 1, None)]
    source = session.createDataFrame(data, SCHEMA)
    entry = ControlEntry(seq=3, watermark=watermark, processing_time=BASE, stage_watermarks={STAGE: watermark})
    eow = TimestampCombiner.END_OF_WINDOW
    jvm = shipped(session, combined_input(source, "ts", "part", plan, "jvm"), entry, eow)
    assert jvm == shipped(session, combined_input(source, "ts", "part", plan, "arrow"), entry, eow)
    assert sum(len(records) for records in jvm["raw"].values()) == raw
    assert sum(values[0] for values in jvm["partials"].values()) == 3 - raw
