"""The user entry point on Spark: a windowed event-time aggregation as a streaming query.

::

    from floodmark import WindowSpec, WatermarkStrategy, aggregates, windows
    from floodmark.spark import EventTimeAggregation, SourceTime
    agg = EventTimeAggregation(
        events,                                   # any streaming DataFrame
        event_time="ts",                          # long ms, timestamp, or a Column
        key_by=["channel", "behavior"],
        spec=WindowSpec(                          # what to compute: window, trigger, lateness, aggregations...
            window=windows.Tumbling(timedelta(minutes=1)),
            aggregate={"count": aggregates.count()},
        ),
        time=SourceTime(                          # how the input's watermark is made
            WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=50))
            .with_idleness(timedelta(seconds=30)),
            split="partition",                    # Kafka's partition; default: one split
        ),
    )
    query = agg.start(checkpoint="/tmp/ckpt", output="/tmp/out", trigger_interval="1 second")

Three parts, each with one reason to change: the :class:`~floodmark.core.spec.WindowSpec`
(the same object the engine-free core and ``WindowHarness`` run), the
:class:`SourceTime` (per-split generators, idleness, percentile), and the
binding to a DataFrame (``event_time``, ``key_by``) with runtime options
(``max_future_skew``, ``buckets``). The plan (:mod:`floodmark.spark.plan`) checks
the definition against the input's schema when the aggregation is created.

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
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

from floodmark.core.explain import Explanation, explain_window
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP, Duration, non_negative_millis, positive_millis
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.core.windows import Window
from floodmark.driver import checkpoint_files
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import BatchController, BatchReport, ControlledBatches
from floodmark.driver.reconciliation import Reconciliation
from floodmark.spark import batch_entry, blocks, bucket_layout, hadoop_files, pane_blocks, python_workers
from floodmark.spark import plan as p
from floodmark.spark.batch_sink import BatchSink
from floodmark.spark.combiner import MapSideCombiner
from floodmark.spark.processor import STATE_SCHEMA, WindowBucketProcessor
from floodmark.spark.session import check_session
from floodmark.spark.sinks import Outputs
from floodmark.spark.ticks import TickSchedule, schedule_path, tick_rows


@dataclass(frozen=True)
class SourceTime:
    """How an input's watermark is made: one generator per split, combined by MIN (or a percentile).

    :arg watermarks: the strategy (generator, idleness) each split's generator is built from.
    :arg split: the split column (Kafka's ``partition``) or expression; ``None``: one split for the whole input.
    :arg periodic_interval: Flink's auto-watermark interval (ms or timedelta, > 0): how often, in processing
        time, each split's generator is asked for a watermark.
    :arg percentile: 100 (default) combines splits by MIN; lower lets the watermark run ahead of the slowest
        splits (seed 003's percentile watermarks: earlier panes, more late records).
    :arg known_splits: splits that hold the watermark back before their first record (Kafka partitions).
    """

    watermarks: WatermarkStrategy
    split: str | Column | None = None
    periodic_interval: Duration = 200
    percentile: float = 100.0
    known_splits: Iterable[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "periodic_interval", positive_millis(self.periodic_interval, "periodic_interval"))
        object.__setattr__(self, "known_splits", tuple(str(s) for s in self.known_splits))


class EventTimeAggregation:
    """A keyed, windowed aggregation with floodmark's event-time semantics (see the module docstring).

    :arg source: a streaming DataFrame.
    :arg event_time: column name or Column; long = ms since the epoch, timestamp types are converted;
        anything that cannot be read as ms makes the record a bad record.
    :arg key_by: key column names.
    :arg spec: the windowed aggregation; its aggregate is named: ``{output column: aggregate}`` (numeric
        aggregates read their ``field`` column).
    :arg time: how the input's watermark is made (:class:`SourceTime`).
    :arg max_future_skew: records whose event time is more than this ahead of processing time go to the
        dead-letter output (one corrupt far-future record must not push the watermark over every window);
        ``None`` disables.
    :arg buckets: number of state buckets (default: max(8, ``spark.sql.shuffle.partitions``)).
    :raises ValueError: for a definition the input cannot run, or a session floodmark cannot run in.
    """

    def __init__(
        self,
        source: DataFrame,
        event_time: str | Column,
        key_by: Sequence[str],
        spec: WindowSpec,
        time: SourceTime,
        max_future_skew: Duration | None = None,
        buckets: int | None = None,
    ) -> None:
        if not source.isStreaming:
            raise ValueError("source must be a streaming DataFrame (spark.readStream...)")
        check_session(source.sparkSession)
        self.source = source
        self.event_time = event_time
        self.key_by = tuple(key_by)
        self.spec = spec
        self.time = time
        self.spark: SparkSession = source.sparkSession
        # Several buckets per partition keep each bucket's state blob small: the blob travels between the
        # JVM and Python every batch (~20 ms per MiB) and a single value is capped near 1 GiB.
        self.requested_buckets = buckets
        self.bucket_count = buckets or max(8, shuffle_partitions(self.spark))
        skew = None if max_future_skew is None else non_negative_millis(max_future_skew, "max_future_skew")
        self.plan = p.RuntimePlan.for_input(
            spec,
            source.schema,
            self.key_by,
            event_time=event_time if isinstance(event_time, str) else None,
            split=time.split if isinstance(time.split, str) else None,
            split_is_expression=isinstance(time.split, Column),
            max_future_skew_ms=skew,
            buckets=self.bucket_count,
            corrupt_column=p.corrupt_record_column(self.spark),
        )

    # --------------------------------------------------------------- building
    def build(self, checkpoint: str) -> tuple[DataFrame, BatchController]:
        """The transformed streaming DataFrame (before the sink) and its controller."""
        log, local_metrics = control_log(checkpoint, self.spark)
        layout = fixed_bucket_layout(checkpoint, self.spark, log, self.requested_buckets, self.bucket_count)
        self.bucket_count = layout.count
        self.plan = replace(self.plan, buckets=layout.count, bucket_labels=layout.of())
        controller = BatchController(
            log,
            self.time.watermarks,
            periodic_interval=self.time.periodic_interval,
            percentile=self.time.percentile,
            splits=self.time.known_splits,
            metrics_path=local_metrics,
        )
        controller.ensure_initial_entry()
        # One tick row per bucket in the batches the driver asks for (spark/ticks.py): every bucket's processor
        # runs when something can fire without input (seed 000's lone last window), and an idle query sleeps.
        ticks = tick_rows(self.spark, schedule_path(checkpoint), self.bucket_count).select(
            bucket_layout.label_column(self.plan.bucket_values, F.col("tick")).alias(p.BUCKET)
        )
        combined = combined_input(self.source, self.event_time, self.time.split, self.plan)
        unioned = combined.unionByName(ticks, allowMissingColumns=True)
        # applyInPandasWithState rather than transformWithStateInPandas: same RocksDB state, one value per
        # bucket and no timers needed, while the latter adds a driver-side Python pre-init at every query
        # start (~0.7 s) and ~15 ms per batch (bench/batch_floor.py; docs/architecture.md).
        output = unioned.groupBy(p.BUCKET).applyInPandasWithState(
            WindowBucketProcessor(self.plan),
            outputStructType=pane_blocks.schema(self.plan),
            stateStructType=STATE_SCHEMA,
            outputMode="append",
            timeoutConf="NoTimeout",
        )
        return output, controller

    # ---------------------------------------------------------------- running
    def start(
        self,
        checkpoint: str,
        output: str | Outputs,
        trigger_interval: str = "1 second",
        query_name: str | None = None,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
    ) -> FloodmarkQuery:
        """Start the streaming query.

        :arg output: where panes, late records and dead letters go: a root path (Parquet under
            ``panes/``, ``late/``, ``dead_letter/``, exactly-once) or :class:`~floodmark.spark.sinks.Outputs`
            (files in any format, tables, Kafka topics, your function; each sink states its guarantee).
        """
        outputs = Outputs.of(output)
        check_locations(checkpoint, [outputs])
        python_workers.prestart(self.spark)  # while the query plans (python_workers.py)
        frame, controller = self.build(checkpoint)
        sink = BatchSink(self.plan, outputs, controller)
        sink.listeners.extend(listeners)
        query = start_query(frame, sink, controller, checkpoint, trigger_interval, query_name)
        handle = FloodmarkQuery(query, controller, outputs, self.spec, self.spark)
        handle.spark_checkpoint = checkpoint_files.join(checkpoint, "spark")
        return handle

    def run_to_completion(
        self,
        checkpoint: str,
        output: str | Outputs,
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


def event_time_ms(source: DataFrame, event_time: str | Column) -> tuple[Column, Column]:
    """``(event time in ms as a long, the raw value as text)`` for ``source``'s ``event_time`` column or expression.

    Longs are ms since the epoch; timestamps are converted; whole doubles are taken as ms; text is parsed as a
    long or as a timestamp. Anything else is null (a bad record, whose raw text is kept).
    """
    column = F.col(event_time) if isinstance(event_time, str) else event_time
    dtype = source.select(column).schema.fields[0].dataType
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


def combined_input(source: DataFrame, event_time: str | Column, split: str | Column | None, plan: p.RuntimePlan):
    """``source`` through the map-side combiner of ``plan``: ``(fm_bucket, fm_block)`` rows (``blocks.SCHEMA``)."""
    ms, raw = event_time_ms(source, event_time)
    # The split travels as the user's own column (no copy, no string per record); only an expression
    # adds a column. The combiner labels the few distinct values.
    split_value = [split.alias(p.SPLIT_VALUE)] if isinstance(split, Column) else []
    ts = [] if plan.ts_column != p.TS else [ms.alias(p.TS), F.when(ms.isNull(), raw).alias(p.TS_RAW)]
    bucket = (
        bucket_layout.label_column(
            plan.bucket_values, F.pmod(F.hash(*[F.col(c) for c in plan.key_columns]), F.lit(plan.buckets))
        )
        if plan.key_columns
        else F.lit(plan.bucket_values[0])  # one global key
    )
    data = source.select(
        "*",
        *ts,  # a long column of ms is used as it is; only bad rows need the raw text
        *split_value,
        bucket.alias(p.BUCKET),
    )
    # The combiner's rows (inside the blocks): every column is nullable, PARTIAL and SPLIT_STATS rows carry
    # no record. The original text is for the combiner's dead letters: records cross the shuffle without it.
    inputs = [StructField(f.name, f.dataType, nullable=True) for f in data.schema.fields if f.name != plan.text_column]
    combined_schema = StructType([*inputs, *plan.combiner_fields()])
    return data.mapInArrow(MapSideCombiner(plan, combined_schema), blocks.SCHEMA)


def check_locations(checkpoint: str, outputs: Sequence[Outputs]) -> None:
    """Refuse, before anything is written, a checkpoint or file output that cannot be a directory (ValueError)."""
    checkpoint_files.require_directory(checkpoint, "the checkpoint")
    for each in outputs:
        each.check_locations()


def control_log(checkpoint: str, spark: SparkSession) -> tuple[ControlLog, Path | None]:
    """The query's control log under ``checkpoint`` and, for a local checkpoint, its ``metrics.jsonl``."""
    files = hadoop_files.files_for(checkpoint, spark)
    # A local file to append to; object stores cannot append (listeners and reports have it all).
    remote = checkpoint_files.has_scheme(checkpoint)
    metrics = None if remote else Path(checkpoint, "floodmark", "metrics.jsonl")
    return ControlLog(checkpoint_files.join(checkpoint, "floodmark", "control"), files), metrics


def shuffle_partitions(spark: SparkSession) -> int:
    """``spark.sql.shuffle.partitions`` of the session (what a new checkpoint's stateful operators get)."""
    return int(spark.conf.get("spark.sql.shuffle.partitions") or "200")


def fixed_bucket_layout(
    checkpoint: str,
    spark: SparkSession,
    log: ControlLog,
    requested: int | None,
    default: int,
    stages: Sequence[str | None] = (None,),
) -> bucket_layout.BucketLayout:
    """The bucket layout of the query at ``checkpoint``: new, or as stored (:func:`bucket_layout.fixed`)."""
    return bucket_layout.fixed(
        log.files,
        checkpoint,
        requested,
        default,
        shuffle_partitions(spark),
        stages,
        existing=log.latest_seq() is not None,
    )


def start_query(
    frame: DataFrame,
    sink: Callable[[DataFrame, int], None],
    controller: ControlledBatches,
    checkpoint: str,
    trigger_interval: str,
    query_name: str | None,
) -> StreamingQuery:
    """Start ``frame`` into the ``foreachBatch`` ``sink`` with the control entry of its first batch."""
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
    controller.spark_checkpoint = spark_checkpoint
    controller.ticks = TickSchedule(schedule_path(checkpoint))
    controller.ticks.request(0)  # the first batch runs at once, input or not
    context = frame.sparkSession.sparkContext
    previous = context.getLocalProperty(batch_entry.ENTRY_PROPERTY)
    batch_entry.publish(context, controller.entry_for_batch(first))
    try:
        return writer.start()
    finally:
        context.setLocalProperty(batch_entry.ENTRY_PROPERTY, previous)  # type: ignore[arg-type]


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
        self, query, controller: ControlledBatches, outputs: Outputs, spec: WindowSpec, spark: SparkSession
    ) -> None:
        self.query = query
        self.controller = controller
        self.outputs = outputs
        self.spec = spec
        self.spark = spark
        self.spark_checkpoint = ""
        """Spark's checkpoint directory of the query (its offset log says what each batch planned)."""

    def explain(self, key: Any, window: Window) -> Explanation:
        """Why ``key``'s ``window`` has (not) fired, from the coordinator after the latest batch.

        The window operators' state lives in the executors, so the trigger's state is not included; the
        pane output says whether the window fired (``floodmark explain`` shows both).
        """
        return explain_window(self.spec, key, window, self.controller.watermarks_at())

    @property
    def reports(self) -> list[BatchReport]:
        return self.controller.reports

    @property
    def reconciliation(self) -> Reconciliation:
        """Where this run's input rows went (rows in = records + dead letters; pairs = in windows + late)."""
        return Reconciliation.of(self.reports)

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

    @property
    def settled(self) -> bool:
        """The query has read the input available so far and fired everything that can fire without more
        input: the driver only expects its heartbeat batch (``floodmark.driver.next_batch``)."""
        planned = self.controller.next_batch
        status = self.query.status
        busy = status.get("isDataAvailable") or status.get("isTriggerActive")
        return planned is not None and planned.waits_for_input and not busy

    def await_settled(self, timeout_s: float = 120.0) -> None:
        """Wait until :attr:`settled`."""
        deadline = time.monotonic() + timeout_s
        while not self.settled:
            self._check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the query did not settle in {timeout_s} s (plan: {self.controller.next_batch})")
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
            the batch's sink. By default: Spark's progress of the previous batch shows every input source
            read up to its latest offset (an empty file in the middle of the input does not end it).
        """
        self.controller.end_when_exhausted = exhausted or self._sources_drained
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
        self._discard_after(self.reports[-1].batch_id)

    def _discard_after(self, batch_id: int) -> None:
        self.outputs.discard_after(self.spark, batch_id)

    def _sources_drained(self) -> bool:
        """Whether the running batch planned no new input: in Spark's offset log, its offsets and the previous
        batch's differ only in the ticks (an empty file in the middle of the input still moves the file source).

        Called from batch N's sink, when ``offsets/N`` is the newest entry of the log.
        """
        directory = checkpoint_files.join(self.spark_checkpoint, "offsets")
        files = self.controller.log.files
        batches = sorted(int(name) for name in files.list_names(directory) if name.isdigit())
        if len(batches) < 2:
            return True
        newest, previous = (files.read_text(checkpoint_files.join(directory, str(b))) for b in batches[-1:-3:-1])
        if newest is None or previous is None:
            return True
        # Line 1 is the version, line 2 the batch's metadata, then one line per source; the ticks always move.
        changed = [a != b for a, b in zip(newest.splitlines()[2:], previous.splitlines()[2:], strict=False)]
        return sum(changed) <= 1

    def _check(self) -> None:
        error = self.query.exception()
        if error is not None:
            raise RuntimeError(f"the floodmark query failed: {error}") from None
