"""The user entry point on Spark: a windowed event-time aggregation as a streaming query.

::

    from floodmark.spark import EventTimeAggregation
    agg = EventTimeAggregation(
        events,                                   # any streaming DataFrame
        event_time="ts",                          # long ms, timestamp, or a Column
        key_by=["channel", "behavior"],
        split="partition",                        # Kafka's partition; default: one split
        watermarks=WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=50))
                                    .with_idleness(timedelta(seconds=30)),
        window=windows.Tumbling(timedelta(minutes=1)),
        aggregations={"count": aggregates.count()},
    )
    query = agg.start(checkpoint="/tmp/ckpt", output="/tmp/out", trigger_interval="1 second")

The query is a normal :class:`~pyspark.sql.streaming.StreamingQuery` (exposed
as ``query.query``) with the floodmark pieces around it: a tick per bucket and
trigger (Spark's ``rate-micro-batch`` source) unioned with the input, a
bucketed ``applyInPandasWithState`` hosting the core window operator (state in RocksDB),
and a ``foreachBatch`` sink that writes panes, late records and dead letters
and runs the coordinator. Before the shuffle, a
map-side combiner validates records and aggregates the on-time ones per
(key, window), as native Spark's partial aggregation does. :meth:`run_to_completion`
runs a bounded input (files) and ends with watermark MAX, so every window fires.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from floodmark.core import aggregates as agg
from floodmark.core.explain import Explanation, explain_window
from floodmark.core.panes import AccumulationMode
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP, Duration, non_negative_millis, positive_millis
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.triggers import Default, Trigger
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.core.windows import Window, WindowAssigner
from floodmark.driver import checkpoint_files
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import BatchController, BatchReport
from floodmark.spark import batch_entry, blocks, hadoop_files
from floodmark.spark import plan as p
from floodmark.spark.combiner import MapSideCombiner
from floodmark.spark.processor import STATE_SCHEMA, WindowBucketProcessor
from floodmark.spark.session import ROCKSDB_PROVIDER
from floodmark.spark.sinks import BatchSink, FileOutputs

NUMERIC = (agg.Sum, agg.Min, agg.Max, agg.Mean)


@dataclass
class EventTimeAggregation:
    """A keyed, windowed aggregation with floodmark's event-time semantics (see module docstring).

    :arg source: a streaming DataFrame. :arg event_time: column name or Column;
        long = ms since the epoch, timestamp types are converted; anything that
        cannot be read as ms makes the record a bad record.
    :arg key_by: key column names. :arg split: the split column (Kafka's
        ``partition``); ``None`` = one split for the whole input.
    :arg aggregations: ``{output column: aggregate}``; numeric aggregates read
        their ``field`` column.
    :arg max_future_skew: records whose event time is more than this ahead of
        processing time go to the dead-letter output (one corrupt far-future
        record must not push the watermark over every window); ``None`` disables.
    :arg buckets: number of state buckets (default: max(8, ``spark.sql.shuffle.partitions``)).
    """

    source: DataFrame
    event_time: str | Column
    key_by: Sequence[str]
    window: WindowAssigner
    aggregations: dict[str, agg.Aggregate]
    watermarks: WatermarkStrategy
    split: str | Column | None = None
    trigger: Trigger = field(default_factory=Default)
    allowed_lateness: Duration = 0
    accumulation: AccumulationMode = AccumulationMode.DISCARDING
    timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW
    max_future_skew: Duration | None = None
    buckets: int | None = None
    periodic_interval: Duration = 200
    percentile: float = 100.0
    known_splits: Iterable[str] = ()

    def __post_init__(self) -> None:
        if not self.source.isStreaming:
            raise ValueError("source must be a streaming DataFrame (spark.readStream...)")
        problem = batch_entry.session_problem(self.source.sparkSession)
        if problem:
            raise ValueError(problem)
        provider = self.source.sparkSession.conf.get("spark.sql.streaming.stateStore.providerClass", None)
        if provider != ROCKSDB_PROVIDER:
            raise ValueError(
                f"floodmark keeps its state in RocksDB (with changelog checkpointing), but this session's "
                f"state store provider is {provider!r}: build the session with "
                f"floodmark.spark.session.required_conf() (local_session() does)"
            )
        if not self.key_by:
            raise ValueError("key_by needs at least one column")
        missing = [c for c in self.key_by if c not in self.source.columns]
        if missing:
            raise ValueError(f"key columns {missing} are not in the input {self.source.columns}")
        if isinstance(self.split, str) and self.split not in self.source.columns:
            raise ValueError(f"split column {self.split!r} is not in the input {self.source.columns}")
        grouped = {*self.key_by, *([self.split] if isinstance(self.split, str) else [])}
        nested = [
            f"{f.name} ({f.dataType.simpleString()})"
            for f in self.source.schema.fields
            if f.name in grouped and isinstance(f.dataType, ArrayType | MapType | StructType)
        ]
        if nested:
            raise ValueError(f"key and split columns must be of atomic types (they are grouped on), not {nested}")
        if not self.aggregations:
            raise ValueError("aggregations must name at least one aggregate")
        for name, aggregate in self.aggregations.items():
            if aggregate.field is not None and aggregate.field not in self.source.columns:
                raise ValueError(f"aggregation {name!r} reads {aggregate.field!r}, which the input does not have")
        self.spark: SparkSession = self.source.sparkSession
        self.spec = WindowSpec(
            window=self.window,
            aggregate=agg.several(**self.aggregations),
            trigger=self.trigger,
            allowed_lateness=self.allowed_lateness,
            accumulation=self.accumulation,
            timestamp_combiner=self.timestamp_combiner,
        )
        skew = None if self.max_future_skew is None else non_negative_millis(self.max_future_skew, "max_future_skew")
        # Several buckets per partition keep each bucket's state blob small: the blob travels between the
        # JVM and Python every batch (~20 ms per MiB) and a single value is capped near 1 GiB.
        self.bucket_count = self.buckets or max(8, int(self.spark.conf.get("spark.sql.shuffle.partitions") or "2"))
        types = {f.name: f.dataType for f in self.source.schema.fields}
        self.plan = p.RuntimePlan(
            spec=self.spec,
            key_columns=tuple(self.key_by),
            key_types=tuple(types[c] for c in self.key_by),
            result_types=tuple((name, p.result_type(a, types)) for name, a in self.aggregations.items()),
            numeric_fields=tuple(
                sorted({a.field for a in self.aggregations.values() if isinstance(a, NUMERIC) and a.field})
            ),
            user_columns=tuple(self.source.columns),
            max_future_skew_ms=skew,
            integral_columns=tuple(
                f.name for f in self.source.schema.fields if isinstance(f.dataType, LongType | IntegerType | ShortType)
            ),
            ts_column=self.event_time
            if isinstance(self.event_time, str) and isinstance(types.get(self.event_time), LongType)
            else p.TS,
            buckets=self.bucket_count,
            split_column=None if self.split is None else self.split if isinstance(self.split, str) else p.SPLIT_VALUE,
        )
        outputs = [*self.key_by, *self.aggregations]
        reserved = {f.name for f in [*p.PANE_META, *p.RECORD_META]} | {
            "batch_id",
            "window_start_time",
            "window_end_time",
        }
        taken = sorted({n for n in outputs if n in reserved or outputs.count(n) > 1})
        if taken:
            raise ValueError(
                f"output column name(s) {taken} clash: key and aggregation names must be distinct and not one of "
                f"{sorted(reserved)}"
            )
        clashes = [c for c in self.source.columns if c.startswith("fm_")]
        if clashes:
            raise ValueError(f"input columns must not start with 'fm_' (reserved for floodmark): {clashes}")
        self.periodic_ms = positive_millis(self.periodic_interval, "periodic_interval")

    # --------------------------------------------------------------- building
    def _event_time_ms(self) -> tuple[Column, Column]:
        column = F.col(self.event_time) if isinstance(self.event_time, str) else self.event_time
        dtype = self.source.select(column).schema.fields[0].dataType
        if isinstance(dtype, TimestampType | TimestampNTZType):
            ms = F.unix_millis(column.cast(TimestampType()))
        elif isinstance(dtype, LongType | IntegerType | ShortType):
            ms = column.cast("long")
        elif isinstance(dtype, DoubleType | FloatType):
            ms = F.when(column == F.floor(column), column.cast("long"))
        else:
            as_long = column.try_cast("long")
            ms = F.coalesce(as_long, F.unix_millis(F.try_to_timestamp(column.cast("string"))))
        return ms, column.cast("string")

    def build(self, checkpoint: str) -> tuple[DataFrame, BatchController]:
        """The transformed streaming DataFrame (before the sink) and its controller."""
        files = hadoop_files.files_for(checkpoint, self.spark)
        # A local file to append to; object stores cannot append (listeners and reports have it all).
        remote = checkpoint_files.has_scheme(checkpoint)
        local_metrics = None if remote else Path(checkpoint, "floodmark", "metrics.jsonl")
        controller = BatchController(
            ControlLog(checkpoint_files.join(checkpoint, "floodmark", "control"), files),
            self.watermarks,
            periodic_interval=self.periodic_ms,
            percentile=self.percentile,
            splits=self.known_splits,
            metrics_path=local_metrics,
        )
        controller.ensure_initial_entry()
        # One tick row per bucket and batch, from Spark's own rate-micro-batch source: it has a new offset at
        # every trigger (so the query runs when the input is idle: seed 000's lone last window) and makes every
        # bucket's processor run. The values the batch needs come from control entry N, a job property (batch_entry).
        ticks = (
            self.spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", self.bucket_count)
            .option("numPartitions", 1)
            .load()
            .select((F.col("value") % self.bucket_count).cast("int").alias(p.BUCKET))
        )
        ms, raw = self._event_time_ms()
        # The split travels as the user's own column (no copy, no string per record); only an expression
        # adds a column. The combiner labels the few distinct values.
        split = [self.split.alias(p.SPLIT_VALUE)] if isinstance(self.split, Column) else []
        event_time = [] if self.plan.ts_column != p.TS else [ms.alias(p.TS), F.when(ms.isNull(), raw).alias(p.TS_RAW)]
        data = self.source.select(
            "*",
            *event_time,  # a long column of ms is used as it is; only bad rows need the raw text
            *split,
            F.pmod(F.hash(*[F.col(c) for c in self.key_by]), F.lit(self.bucket_count)).cast("int").alias(p.BUCKET),
        )
        # The combiner's rows (inside the blocks): every column is nullable, PARTIAL and SPLIT_STATS rows carry
        # no record.
        inputs = [StructField(f.name, f.dataType, nullable=True) for f in data.schema.fields]
        combined_schema = StructType([*inputs, *self.plan.combiner_fields()])
        combined = data.mapInArrow(MapSideCombiner(self.plan, combined_schema), blocks.SCHEMA)
        unioned = combined.unionByName(ticks, allowMissingColumns=True)
        # applyInPandasWithState rather than transformWithStateInPandas: same RocksDB state, one value per
        # bucket and no timers needed, while the latter adds a driver-side Python pre-init at every query
        # start (~0.7 s) and ~15 ms per batch (bench/batch_floor.py; docs/architecture.md).
        output = unioned.groupBy(p.BUCKET).applyInPandasWithState(
            WindowBucketProcessor(self.plan),
            outputStructType=self.plan.output_schema(),
            stateStructType=STATE_SCHEMA,
            outputMode="append",
            timeoutConf="NoTimeout",
        )
        return output, controller

    # ---------------------------------------------------------------- running
    def start(
        self,
        checkpoint: str,
        output: str | FileOutputs,
        trigger_interval: str = "1 second",
        query_name: str | None = None,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
    ) -> FloodmarkQuery:
        """Start the streaming query; outputs are exactly-once per batch id across restarts."""
        outputs = output if isinstance(output, FileOutputs) else FileOutputs(output)
        frame, controller = self.build(checkpoint)
        sink = BatchSink(self.plan, outputs, controller)
        sink.listeners.extend(listeners)
        spark_checkpoint = checkpoint_files.join(checkpoint, "spark")
        writer = (
            frame.writeStream.foreachBatch(sink)
            .option("checkpointLocation", spark_checkpoint)
            .trigger(processingTime=trigger_interval)
        )
        if query_name:
            writer = writer.queryName(query_name)
        # The query's thread inherits this thread's job properties when it is created: that is how the first
        # batch it runs (0, or the one after the last committed batch on a restart) gets its entry.
        first = first_batch_id(controller.log.files, spark_checkpoint)
        controller.first_batch_id = first
        context = self.spark.sparkContext
        previous = context.getLocalProperty(batch_entry.ENTRY_PROPERTY)
        batch_entry.publish(context, controller.entry_for_batch(first))
        try:
            query = writer.start()
        finally:
            context.setLocalProperty(batch_entry.ENTRY_PROPERTY, previous)  # type: ignore[arg-type]
        return FloodmarkQuery(query, controller, outputs, self.spec, self.spark)

    def run_to_completion(
        self,
        checkpoint: str,
        output: str | FileOutputs,
        trigger_interval: str = "0 seconds",
        timeout_s: float = 3600.0,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
    ) -> FloodmarkQuery:
        """Run a bounded input (files already in place) to the end, then fire everything.

        Once a batch reads no new input rows, the next control entry carries
        watermark MAX (end of input, as in Flink); the query stops after that
        batch. Returns the stopped query (reports, outputs).
        """
        handle = self.start(checkpoint, output, trigger_interval, listeners=listeners)
        handle.finish_when_input_exhausted(timeout_s)
        return handle


def first_batch_id(files: checkpoint_files.CheckpointFiles, spark_checkpoint: str) -> int:
    """The micro-batch a query started on ``spark_checkpoint`` runs first: the one after the last commit.

    Spark writes ``commits/N`` once batch N's sink returned; on a restart it re-runs the batch after the
    last commit (whether or not its offsets were logged) and a new query starts at batch 0.
    """
    committed = [
        int(name) for name in files.list_names(checkpoint_files.join(spark_checkpoint, "commits")) if name.isdigit()
    ]
    return max(committed) + 1 if committed else 0


class FloodmarkQuery:
    """A running floodmark query: the Spark query, its controller and outputs."""

    def __init__(
        self, query, controller: BatchController, outputs: FileOutputs, spec: WindowSpec, spark: SparkSession
    ) -> None:
        self.query = query
        self.controller = controller
        self.outputs = outputs
        self.spec = spec
        self.spark = spark

    def explain(self, key: Any, window: Window) -> Explanation:
        """Why ``key``'s ``window`` has (not) fired, from the coordinator after the latest batch.

        The window operators' state lives in the executors, so the trigger's state is not included; the
        pane output says whether the window fired (``floodmark explain`` shows both).
        """
        return explain_window(self.spec, key, window, self.controller.watermarks_at())

    @property
    def reports(self) -> list[BatchReport]:
        return self.controller.reports

    def stop(self) -> None:
        self.query.stop()

    def await_batches(self, count: int, timeout_s: float = 120.0) -> None:
        """Wait until ``count`` more batches have completed."""
        target = len(self.reports) + count
        deadline = time.monotonic() + timeout_s
        while len(self.reports) < target:
            self._check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(self.reports)} of {target} batches completed in {timeout_s} s")
            time.sleep(0.05)

    def finish_when_input_exhausted(
        self, timeout_s: float = 3600.0, exhausted: Callable[[], bool] | None = None
    ) -> None:
        """End the input after the next batch that reads no records, then stop after the flush.

        Every input row is either a good record or a dead letter, so a batch with
        neither read nothing. The controller decides at the end of that batch and
        the very next batch runs with watermark MAX (every window fires). The first
        batch after a restart does not count: Spark may replay offsets it planned
        before the restart, when newer input did not exist yet.

        :arg exhausted: also required before ending (e.g. "the source has served its last offset"): a
            paced source can have batches without records before it is done. Called on the driver from
            the batch's sink.
        """
        self.controller.end_when_exhausted = exhausted or (lambda: True)
        deadline = time.monotonic() + timeout_s
        while not any(report.watermark == MAX_TIMESTAMP for report in self.reports[-1:]):
            self._check()
            if time.monotonic() > deadline:
                self.query.stop()
                raise TimeoutError("the bounded run did not finish in time")
            time.sleep(0.05)
        self.query.stop()
        # The trigger after the flush may have started before the stop: it had nothing to emit, and what its
        # interrupted write left behind would never be replaced by a replay.
        self.outputs.remove_batches_after(self.spark, self.reports[-1].batch_id)

    def _check(self) -> None:
        error = self.query.exception()
        if error is not None:
            raise RuntimeError(f"the floodmark query failed: {error}") from None
