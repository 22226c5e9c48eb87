"""What a join or process stage's plan refuses before a query starts, and the columns it gives (no query runs)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from floodmark import windows
from floodmark.core.join import IntervalJoinSpec, WindowJoinSpec
from floodmark.spark import plan as p

pytestmark = pytest.mark.spark

QUERIES = StructType([StructField("ts", LongType()), StructField("user", StringType()), StructField("q", StringType())])
CLICKS = StructType(
    [StructField("ts", LongType()), StructField("user", StringType()), StructField("url", StringType())]
)


def test_a_join_names_its_columns_by_side_and_a_window_join_adds_the_pane():
    interval = p.JoinSemantics.of("j", IntervalJoinSpec((0, 10)), ["user"], QUERIES, CLICKS)
    assert interval.pane_columns() == ["user", "left_ts", "left_q", "right_ts", "right_url", "join_time"]
    assert interval.record_columns()[:3] == ["user", "side", "event_time"]
    window = p.JoinSemantics.of("w", WindowJoinSpec(windows.Tumbling(10)), ["user"], QUERIES, CLICKS)
    assert window.pane_columns()[-5:] == ["window_start", "window_end", "timing", "pane_index", "join_time"]


def test_a_join_refuses_keys_of_two_types_and_names_that_clash():
    ints = StructType([StructField("ts", LongType()), StructField("user", IntegerType())])
    with pytest.raises(ValueError, match="one type on both sides"):
        p.JoinSemantics.of("j", IntervalJoinSpec((0, 10)), ["user"], QUERIES, ints)
    with pytest.raises(ValueError, match="not in the input"):
        p.JoinSemantics.of("j", IntervalJoinSpec((0, 10)), ["session"], QUERIES, CLICKS)
    clash = StructType([*QUERIES.fields, StructField("left_q", StringType())])
    keyed = StructType([*CLICKS.fields, StructField("left_q", StringType())])
    with pytest.raises(ValueError, match=r"clash"):
        p.JoinSemantics.of("j", IntervalJoinSpec((0, 10)), ["user", "left_q"], clash, keyed)


def test_a_process_stage_refuses_an_unknown_type_and_names_that_clash(spark):
    semantics = p.ProcessSemantics.of("s", ["user"], QUERIES, {"n": "long", "why": "string"})
    assert semantics.pane_columns() == ["user", "n", "why", "output_time"]
    assert [f.dataType for f in semantics.emitted_schema().fields if f.name in ("n", "why")] == [
        LongType(),
        StringType(),
    ]
    with pytest.raises(ValueError, match="has no Spark type 'lnog'"):
        p.ProcessSemantics.of("s", ["user"], QUERIES, {"n": "lnog"})
    with pytest.raises(ValueError, match="clash"):
        p.ProcessSemantics.of("s", ["user"], QUERIES, {"pane_index": "long"})
