"""EventTimeAggregation on Spark: definitions refused up front, and a split given as an expression."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F
from spark_helpers import read_output, recorded_hosts, write_batches

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.jvm.settings import ROCKSDB_PROVIDER
from floodmark.spark import EventTimeAggregation, Pipeline, SourceTime
from floodmark.spark.driver.planning import plan_query
from floodmark.spark.plan import StateLayout

pytestmark = pytest.mark.spark

SCHEMA = "ts LONG, k STRING, p INT"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


def definition(events, **overrides):
    arguments = {
        "event_time": "ts",
        "key_by": ["k"],
        "split": "p",
        "watermarks": WatermarkStrategy.for_bounded_out_of_orderness(0),
        "window": windows.Tumbling(1_000),
        "aggregations": {"n": aggregates.count()},
        "known_splits": (),
        "host": None,
    }
    a = {**arguments, **overrides}
    return EventTimeAggregation(
        events,
        event_time=a["event_time"],
        key_by=a["key_by"],
        spec=WindowSpec(a["window"], a["aggregations"]),
        time=SourceTime(a["watermarks"], split=a["split"], known_splits=a["known_splits"]),
        host=a["host"],
    )


@pytest.fixture
def events(spark, tmp_path):
    (tmp_path / "in").mkdir()
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"split": "partition"}, "split column 'partition' is not in the input"),
        ({"event_time": "time"}, "event-time column 'time' is not in the input ['ts', 'k', 'p']: use one of its"),
        ({"key_by": ["key"]}, "key columns ['key'] are not in the input"),
        ({"aggregations": {"k": aggregates.count()}}, "clash"),
        ({"aggregations": {"window_start": aggregates.count()}}, "clash"),
        ({"aggregations": {"total": aggregates.sum("v")}}, "reads 'v', which the input does not have"),
    ],
)
def test_bad_definitions_are_refused_before_the_query_starts(events, overrides, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        definition(events, **overrides)


def test_nested_key_columns_are_refused(events):
    nested = events.withColumn("pair", F.array("k", "k"))
    with pytest.raises(ValueError, match=r"atomic types .*pair \(array<string>\)"):
        definition(nested, key_by=["pair"])


def test_reserved_column_prefix_and_state_store_are_checked(spark, events):
    with pytest.raises(ValueError, match="must not start with 'fm_'"):
        definition(events.withColumnRenamed("p", "fm_part"), split=None)
    spark.conf.set(PROVIDER, "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    try:
        with pytest.raises(ValueError, match="state in RocksDB"):
            definition(events)
    finally:
        spark.conf.set(PROVIDER, ROCKSDB_PROVIDER)


def test_split_given_as_an_expression_holds_the_watermark_per_value(spark, tmp_path, events):
    # Split "1" (odd p) lags split "0" by 10 s; with a 0 s bound only the per-split MIN keeps its records.
    first = pd.DataFrame({"ts": [10_000, 10_500, 100], "k": ["a", "a", "a"], "p": [0, 2, 1]})
    second = pd.DataFrame({"ts": [11_000, 900], "k": ["a", "a"], "p": [2, 3]})
    write_batches(tmp_path / "in", [first.astype({"p": "int32"}), second.astype({"p": "int32"})])
    # What a batch interrupted by the final stop leaves behind (it never runs again): removed at the end.
    (tmp_path / "out" / "late" / "batch_id=999").mkdir(parents=True)
    agg = definition(events, split=F.col("p") % 2, known_splits=["0", "1"])
    handle = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    assert not (tmp_path / "out" / "late" / "batch_id=999").exists()
    assert set(handle.reports[0].splits) == {"0", "1"}
    assert handle.reports[0].split_records == {"0": 2, "1": 1}
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert read_output(spark, tmp_path / "out" / "late").empty
    assert dict(zip(panes["window_start"], panes["n"], strict=True)) == {0: 2, 10_000: 2, 11_000: 1}
    # Only the end-of-input flush emitted panes: batches without panes leave no directory behind.
    flush = handle.reports[-1].batch_id
    assert [d.name for d in (tmp_path / "out" / "panes").glob("batch_id=*")] == [f"batch_id={flush}"]


@pytest.mark.parametrize("host", ["python", "jvm"])
def test_timestamp_event_time_integer_keys_and_text_numbers_keep_their_types(spark, tmp_path, host):
    """Types survive the Arrow map side: timestamps, integer keys, nullable integers, numbers as text. Asked for the
    JVM host, the stage stays on Python: the core parses numbers given as text (a late record holds one)."""

    def at(*seconds):
        stamps = pd.to_datetime([None if s is None else 1_704_067_200 + s for s in seconds], unit="s", utc=True)
        return stamps.astype("datetime64[us, UTC]")  # Spark reads microsecond parquet timestamps, not ns

    first = pd.DataFrame({"ts": at(1, 70), "k": [1, 2], "id": [10, None], "v": ["1.5", "2"]})
    second = pd.DataFrame({"ts": at(5, None, 80), "k": [1, 3, 2], "id": [11, None, 12], "v": ["1", "1", "abc"]})
    write_batches(tmp_path / "in", [first.astype({"id": "Int64"}), second.astype({"id": "Int64"})])
    events = (
        spark.readStream.schema("ts TIMESTAMP, k LONG, id LONG, v STRING")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(tmp_path / "in"))
    )
    agg = definition(
        events,
        split=None,
        window=windows.Tumbling(60_000),
        aggregations={"n": aggregates.count(), "total": aggregates.sum("v")},
        host=host,
    )
    query = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    assert query.hosts == recorded_hosts(tmp_path / "ckpt") == {"aggregation": "python"}
    start = 1_704_067_200_000
    panes = read_output(spark, tmp_path / "out" / "panes").sort_values("window_start")
    assert panes[["k", "window_start", "n", "total"]].values.tolist() == [
        [1, start, 1, 1.5],
        [2, start + 60_000, 1, 2.0],
    ]
    late = read_output(spark, tmp_path / "out" / "late")
    assert late["k"].tolist() == [1]
    assert '"ts": "2024-01-01 00:00:05"' in late["record"].item() and '"id": 11' in late["record"].item()
    dead = read_output(spark, tmp_path / "out" / "dead_letter").sort_values("k")
    assert dead[["k", "reason"]].values.tolist() == [[2, "field 'v' is not a number: 'abc'"], [3, "missing timestamp"]]
    # Dead letters are written on the map side, late records after the shuffle: the same JSON for the same types.
    assert '"ts": "2024-01-01 00:01:20"' in dead["record"].iloc[0] and '"id": 12' in dead["record"].iloc[0]
    assert '"ts": null' in dead["record"].iloc[1] and '"id": null' in dead["record"].iloc[1]


def test_pipeline_sources_check_event_time_and_split_at_definition(events):
    """The same check as EventTimeAggregation's, when the source is added (not when the query starts)."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    pipeline = Pipeline()
    with pytest.raises(ValueError, match=r"event-time column 'time' is not in the input \['ts', 'k', 'p'\]"):
        pipeline.source("clicks", events, event_time="time", time=SourceTime(strategy))
    with pytest.raises(ValueError, match="split column 'partition' is not in the input"):
        pipeline.source("clicks", events, event_time="ts", time=SourceTime(strategy, split="partition"))
    assert pipeline.source("clicks", events, event_time=F.col("ts"), time=SourceTime(strategy, split="p")) == "clicks"


def test_a_batch_of_mostly_dead_letters_logs_one_warning_with_a_reason(spark, tmp_path, events, caplog):
    rows = pd.DataFrame({"ts": [None, None, None, 1_500], "k": ["a"] * 4, "p": [0] * 4})
    write_batches(tmp_path / "in", [rows.astype({"ts": "Int64", "p": "int32"})])
    with caplog.at_level("WARNING", logger="floodmark"):
        handle = definition(events).run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("floodmark")]
    batch = next(r.batch_id for r in handle.reports if r.bad)
    assert warnings == [
        f"batch {batch}: 3 of 4 rows were dead letters, first reason: missing timestamp; check the input against "
        "the definition (schema, event-time column and unit)"
    ]


def test_each_source_of_a_stage_binds_its_own_split_and_future_skew(events):
    """A stage reading two sources of one schema: each source's map side gets that source's split column and
    ``max_future_skew``; the stage's semantics and state layout are the same for both."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    pipeline = Pipeline(buckets=3)
    pipeline.source("web", events, event_time="ts", time=SourceTime(strategy, split="p"), max_future_skew=1_000)
    pipeline.source("app", events, event_time="ts", time=SourceTime(strategy, split=F.col("k")))
    pipeline.stage("counts", ["web", "app"], WindowSpec(windows.Tumbling(1_000), {"n": aggregates.count()}), "k")
    query = plan_query(pipeline.sources, pipeline.stages, StateLayout(pipeline.bucket_count(events.sparkSession)), None)
    plan = query.stages["counts"]
    assert plan == pipeline.plans(events.sparkSession)["counts"]
    assert [read.source for read in query.reads["counts"]] == ["web", "app"]
    web, app = (read.plan for read in query.reads["counts"])
    assert (web.input.split_column, web.input.max_future_skew_ms, web.input.source) == ("p", 1_000, "web")
    assert (app.input.split_column, app.input.max_future_skew_ms, app.input.source) == ("fm_split_value", None, "app")
    assert web.stage == app.stage == plan.stage and web.state == app.state == plan.state
    assert plan.state.buckets == 3 and plan.stage.key_columns == ("k",)
