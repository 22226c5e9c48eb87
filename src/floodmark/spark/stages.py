"""Pipelines of several windowed stages on Spark, in one streaming query (seed 003).

::

    from floodmark.spark import Pipeline, SourceTime
    pipeline = Pipeline()
    pipeline.source("mobile", mobile_events, event_time="ts", time=SourceTime(strategy, split="partition"))
    pipeline.source("console", console_events, event_time="ts", time=SourceTime(strategy, split="partition"))
    for name in ("mobile", "console"):
        pipeline.stage(f"{name}_sessions", upstream=name, key_by="user",
                       spec=WindowSpec(windows.Sessions(timedelta(minutes=1)), {"events": aggregates.count()}))
    pipeline.stage("means", upstream=["mobile_sessions", "console_sessions"],       # Flatten
                   spec=WindowSpec(windows.Tumbling(timedelta(minutes=2)), {"mean": aggregates.mean("length")}),
                   columns={"length": "window_end - window_start"})              # global: no key_by
    query = pipeline.start(checkpoint="/tmp/ckpt", output="/tmp/out")            # /tmp/out/<stage>/panes ...

The semantics are the core's :class:`~floodmark.core.pipeline.MicroBatchPipeline` (the reference this
runtime is tested against): a stage's input rows are its upstream's panes as rows with ``pane_timestamp``
as event time, and its input watermark for batch N+1 is the MIN of its upstreams' output watermarks after
batch N (:class:`~floodmark.core.watermarks.graph.StageGraph`): one trigger of event-time latency per stage.

Physical plan. Spark 4.3 refuses two ``applyInPandasWithState`` in one query (``bench/chained_stateful_probe.py``),
so stages are hosted by *level* (1 + the longest path from a source): level 1 (the stages that read
sources) on ``applyInPandasWithState``, every later level on ``transformWithStateInPandas``; each groups
by ``(fm_stage, fm_bucket)``, so one operator hosts every stage of its level with a state value per stage
and bucket. Between levels travel *carrier* rows (:data:`CARRIER`): IN (a block of a stage's input rows),
TICK (one per stage and bucket and batch, so every bucket runs), OUTPUT (a block of a stage's panes, late
records and dead letters, in that stage's output schema), STATS and GAUGE (what the driver needs). A level
passes the rows of other levels through unchanged. The sink unpacks each stage's OUTPUT blocks
(``mapInArrow``) into that stage's sinks, and :class:`~floodmark.driver.controller.PipelineController`
writes the next control entry with every stage's watermark.

A stage's panes reach the next level in the same batch; every sink, late and dead-letter output and the
exactly-once restart work per stage as for one :class:`~floodmark.spark.EventTimeAggregation`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from floodmark.core.explain import Explanation
from floodmark.core.pipeline import EVENT_TIME, WindowedStage, stage_input_rows
from floodmark.core.spec import WindowSpec
from floodmark.core.time import Duration, non_negative_millis
from floodmark.core.watermarks.graph import StageGraph
from floodmark.core.windows import Window
from floodmark.driver import checkpoint_files
from floodmark.driver.controller import BatchReport, PipelineController, SourceSettings
from floodmark.spark import batch_entry, blocks, bucket_layout, python_workers
from floodmark.spark import plan as p
from floodmark.spark.batch_sink import OUTPUT_KINDS, BatchSink
from floodmark.spark.pipeline import (
    FloodmarkQuery,
    SourceTime,
    check_locations,
    combined_input,
    control_log,
    fixed_bucket_layout,
    shuffle_partitions,
    start_query,
)
from floodmark.spark.processor import STATE_SCHEMA, WindowBucketProcessor
from floodmark.spark.rows import conform, pandas_dtype
from floodmark.spark.session import check_session
from floodmark.spark.sinks import PANES, Outputs
from floodmark.spark.ticks import schedule_path, tick_rows

STAGE = "fm_stage"
KIND = "fm_kind"
IN, TICK, OUTPUT = "IN", "TICK", "OUTPUT"
CARRIER = StructType(
    [
        StructField(STAGE, StringType()),
        StructField(KIND, StringType()),
        StructField(blocks.BLOCK, BinaryType()),
        *p.STATS_META,  # fm_bucket among them
    ]
)
"""The rows between levels and into the sink (see the module docstring)."""

_PANDAS_TO_SPARK: dict[str, DataType] = {"i": LongType(), "u": LongType(), "f": DoubleType(), "b": BooleanType()}


@dataclass(frozen=True)
class Source:
    """A streaming DataFrame read by a pipeline, with its event time and its watermarks."""

    name: str
    frame: DataFrame
    event_time: str | Column
    time: SourceTime
    max_future_skew: Duration | None = None


class Pipeline:
    """Sources and windowed stages, run as one streaming query (see the module docstring).

    :arg buckets: state buckets per stage (default: max(8, ``spark.sql.shuffle.partitions``)).
    """

    def __init__(self, buckets: int | None = None) -> None:
        self.sources: dict[str, Source] = {}
        self.stages: dict[str, WindowedStage] = {}
        self.buckets = buckets

    # ----------------------------------------------------------- definition
    def source(
        self,
        name: str,
        frame: DataFrame,
        event_time: str | Column,
        time: SourceTime,
        max_future_skew: Duration | None = None,
    ) -> str:
        """Add a source; returns its name (for ``upstream=``). Arguments as for ``EventTimeAggregation``."""
        if not frame.isStreaming:
            raise ValueError(f"source {name!r} must be a streaming DataFrame (spark.readStream...)")
        if "/" in name:
            raise ValueError(f"source names must not contain '/', got {name!r}")
        self._check_new(name)
        p.check_columns(
            frame.schema.names,
            event_time=event_time if isinstance(event_time, str) else None,
            split=time.split if isinstance(time.split, str) else None,
        )
        self.sources[name] = Source(name, frame, event_time, time, max_future_skew)
        return name

    def stage(
        self,
        name: str,
        upstream: str | Sequence[str],
        spec: WindowSpec,
        key_by: str | Sequence[str] = (),
        columns: Mapping[str, str] | None = None,
    ) -> str:
        """Add a windowed stage (:class:`~floodmark.core.pipeline.WindowedStage`); returns its name."""
        self._check_new(name)
        stage = WindowedStage(name, upstream, spec, key_by, columns or {})  # type: ignore[arg-type]
        kinds = {up in self.sources for up in stage.upstream}
        unknown = [up for up in stage.upstream if up not in self.sources and up not in self.stages]
        if unknown:
            raise ValueError(f"stage {name!r} reads {unknown}: add sources and stages before the stages reading them")
        if len(kinds) > 1:
            raise ValueError(f"stage {name!r} reads sources and stages; a stage reads either sources or stages")
        if stage.columns and True in kinds:
            raise ValueError(f"stage {name!r} reads sources: derive columns on the DataFrame instead of columns=")
        self.stages[name] = stage
        return name

    def _check_new(self, name: str) -> None:
        if name in self.sources or name in self.stages:
            raise ValueError(f"the name {name!r} is taken: sources and stages need distinct names")

    # ----------------------------------------------------------------- plans
    def plans(self, spark: SparkSession) -> dict[str, p.RuntimePlan]:
        """Each stage's runtime plan, checked against its input schema (a ``ValueError`` says what cannot run)."""
        if not self.stages:
            raise ValueError("a pipeline needs at least one stage")
        graph = StageGraph(list(self.sources), {s.name: s.upstream for s in self.stages.values()})
        buckets = self.buckets or max(8, shuffle_partitions(spark))
        corrupt = p.corrupt_record_column(spark)
        plans: dict[str, p.RuntimePlan] = {}
        for name in graph.order:
            stage = self.stages[name]
            if stage.upstream[0] in self.sources:
                sources = [self.sources[s] for s in stage.upstream]
                first = sources[0]
                for other in sources[1:]:
                    if other.frame.schema != first.frame.schema or str(other.event_time) != str(first.event_time):
                        raise ValueError(
                            f"stage {name!r} reads sources {stage.upstream} of different schemas or event times; "
                            "select the same columns from each"
                        )
                schema, event_time, skew = first.frame.schema, first.event_time, first.max_future_skew
            else:
                schemas = {up: _input_schema(plans[up], stage) for up in stage.upstream}
                schema = schemas[stage.upstream[0]]
                if any(s != schema for s in schemas.values()):
                    raise ValueError(f"stage {name!r} unions upstreams whose pane rows differ: {schemas}")
                event_time, skew = EVENT_TIME, None
            plans[name] = p.RuntimePlan.for_input(
                stage.spec,
                schema,
                stage.key_by,
                event_time=event_time if isinstance(event_time, str) else None,
                split=None,
                split_is_expression=False,
                max_future_skew_ms=None if skew is None else non_negative_millis(skew, "max_future_skew"),
                buckets=buckets,
                corrupt_column=corrupt,
                stage=name,
            )
        return plans

    # ---------------------------------------------------------------- running
    def build(self, checkpoint: str, spark: SparkSession) -> tuple[DataFrame, PipelineController, dict]:
        """The streaming DataFrame of carrier rows (before the sink), its controller and the stages' plans."""
        for source in self.sources.values():
            check_session(source.frame.sparkSession)
        plans = self.plans(spark)
        graph = StageGraph(list(self.sources), {s.name: s.upstream for s in self.stages.values()})
        log, metrics = control_log(checkpoint, spark)
        layout = fixed_bucket_layout(
            checkpoint, spark, log, self.buckets, next(iter(plans.values())).buckets, graph.order
        )
        plans = {n: replace(plan, buckets=layout.count, bucket_labels=layout.of(n)) for n, plan in plans.items()}
        controller = PipelineController(
            log,
            {
                name: SourceSettings(
                    s.time.watermarks, s.time.periodic_interval, s.time.percentile, s.time.known_splits
                )
                for name, s in self.sources.items()
            },
            {s.name: list(s.upstream) for s in self.stages.values()},
            metrics_path=metrics,
        )
        controller.ensure_initial_entry()
        order = graph.order
        bucket_count = layout.count
        names = F.array(*[F.lit(n) for n in order])
        # Tick i is bucket i % B of stage i // B.
        ticks = tick_rows(spark, schedule_path(checkpoint), len(order) * bucket_count).select(
            F.element_at(names, (F.col("tick") / bucket_count).cast("int") + 1).alias(STAGE),
            F.lit(TICK).alias(KIND),
            bucket_layout.label_column([v for n in order for v in layout.of(n)], F.col("tick")).alias(p.BUCKET),
        )
        inputs = [ticks]
        reporting: set[str] = set()  # a source read by several stages reports its statistics once
        for name in order:
            if graph.levels[name] != 1:
                continue
            for source_name in self.stages[name].upstream:
                source = self.sources[source_name]
                split = source.time.split
                combiner_plan = replace(
                    plans[name],
                    source=source_name,
                    split_stats=source_name not in reporting,
                    split_column=split if isinstance(split, str) else p.SPLIT_VALUE if split is not None else None,
                )
                reporting.add(source_name)
                combined = combined_input(source.frame, source.event_time, split, combiner_plan)
                inputs.append(combined.select(F.lit(name).alias(STAGE), F.lit(IN).alias(KIND), p.BUCKET, blocks.BLOCK))
        rows = inputs[0]
        for more in inputs[1:]:
            rows = rows.unionByName(more, allowMissingColumns=True)
        levels = sorted(set(graph.levels.values()))
        for level in levels:
            host = StageLevel(
                {n: plans[n] for n in order if graph.levels[n] == level},
                {n: [(plans[d], self.stages[d]) for d in graph.downstream(n)] for n in order},
                order,
            )
            grouped = rows.groupBy(STAGE, p.BUCKET)
            if level == 1:
                rows = grouped.applyInPandasWithState(host, CARRIER, STATE_SCHEMA, "append", "NoTimeout")
            else:
                rows = grouped.transformWithStateInPandas(LevelStatefulProcessor(host), CARRIER, "Append", "None")
        return rows, controller, plans

    def start(
        self,
        checkpoint: str,
        output: str | Mapping[str, str | Outputs],
        trigger_interval: str = "1 second",
        query_name: str | None = None,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
    ) -> PipelineQuery:
        """Start the streaming query.

        :arg output: a root path (each stage's Parquet under ``<root>/<stage>/panes`` ...) or
            ``{stage: root path or Outputs}`` for every stage.
        """
        spark = next(iter(self.sources.values())).frame.sparkSession
        if isinstance(output, str):
            outputs = {name: Outputs.of(f"{output.rstrip('/')}/{name}") for name in self.stages}
        else:
            missing = sorted(set(self.stages) - set(output))
            if missing:
                raise ValueError(f"no output given for stages {missing}")
            outputs = {name: Outputs.of(output[name]) for name in self.stages}
        check_locations(checkpoint, list(outputs.values()))
        python_workers.prestart(spark)  # while the query plans (python_workers.py)
        frame, controller, plans = self.build(checkpoint, spark)
        outputs = {name: outputs[name] for name in plans}  # in the stages' order
        sink = PipelineSink(plans, outputs, controller)
        sink.listeners.extend(listeners)
        query = start_query(frame, sink, controller, checkpoint, trigger_interval, query_name)
        handle = PipelineQuery(query, controller, outputs, self.stages, spark)
        handle.spark_checkpoint = checkpoint_files.join(checkpoint, "spark")
        return handle

    def run_to_completion(
        self,
        checkpoint: str,
        output: str | Mapping[str, str | Outputs],
        trigger_interval: str = "0 seconds",
        timeout_s: float = 3600.0,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
    ) -> PipelineQuery:
        """Run bounded sources to the end: after the end of input every stage, upstream first, gets watermark
        MAX (one batch per level), and the query stops once the last level has had it."""
        handle = self.start(checkpoint, output, trigger_interval, listeners=listeners)
        handle.finish_when_input_exhausted(timeout_s)
        return handle


def _input_schema(upstream: p.RuntimePlan, stage: WindowedStage) -> StructType:
    """The schema of ``stage``'s input rows read from ``upstream``'s panes: pane columns + derived columns."""
    pane_fields = {f.name: f for f in upstream.output_schema().fields}
    fields = [StructField(c, pane_fields[c].dataType) for c in upstream.pane_columns()]
    if stage.columns:
        sample = pd.DataFrame({f.name: pd.Series([1], dtype=pandas_dtype(f.dataType)) for f in fields})
        derived = stage_input_rows(sample, stage)
        fields += [StructField(c, _PANDAS_TO_SPARK.get(derived[c].dtype.kind, StringType())) for c in stage.columns]
    return StructType(fields)


class StageLevel:
    """Hosts the stages of one level: a bucket's batch per ``(stage, bucket)`` group, other groups passed on.

    :arg plans: this level's stages. :arg downstream: for every stage, the plans and definitions of the stages
        that read it. :arg order: every stage, upstream first (fixes the order of forwarded blocks).
    """

    def __init__(
        self,
        plans: dict[str, p.RuntimePlan],
        downstream: dict[str, list[tuple[p.RuntimePlan, WindowedStage]]],
        order: list[str],
    ) -> None:
        self.processors = {name: WindowBucketProcessor(plan) for name, plan in plans.items()}
        self.downstream = downstream
        self.order = order
        self.output_schemas = {name: to_arrow_schema(plan.output_schema()) for name, plan in plans.items()}

    def __call__(self, key: Any, rows: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        """``applyInPandasWithState`` form (level 1)."""
        stage, bucket = key
        frame = pd.concat(list(rows), ignore_index=True)
        stored = state.getOption
        out, new_state = self.run(str(stage), bucket, frame, None if stored is None else stored[0])
        if new_state is not None:
            state.update((new_state,))
        yield out

    def run(self, stage: str, bucket: Any, frame: pd.DataFrame, stored: bytes | None) -> tuple[pd.DataFrame, Any]:
        """One group's carrier rows -> carrier rows out and the new state (None: leave it)."""
        processor = self.processors.get(stage)
        if processor is None:
            return conform([frame], CARRIER), None
        bucket = int(bucket)
        kinds = frame[KIND].to_numpy()
        out, new_state = processor.process(bucket, frame.loc[kinds == IN, blocks.BLOCK].tolist(), stored)
        return self._carry(stage, bucket, processor.plan, out), new_state

    def _carry(self, stage: str, bucket: int, plan: p.RuntimePlan, out: pd.DataFrame) -> pd.DataFrame:
        kinds = out["fm_kind"].to_numpy()
        small = out[np.isin(kinds, [p.STATS, p.GAUGE])]
        # STATS rows carry the bucket too: every carrier row belongs to a (stage, bucket) group downstream.
        parts = [
            small[[f.name for f in p.STATS_META]].assign(
                **{STAGE: stage, KIND: small["fm_kind"].to_numpy(), p.BUCKET: np.int32(bucket)}
            )
        ]
        emitted = out[np.isin(kinds, [p.PANE, p.LATE, p.BAD])].reset_index(drop=True)
        if len(emitted):
            table = pa.Table.from_pandas(emitted, schema=self.output_schemas[stage], preserve_index=False)
            parts.append(
                pd.DataFrame({STAGE: [stage], KIND: [OUTPUT], p.BUCKET: [bucket], blocks.BLOCK: [_ipc(table)]})
            )
        panes = emitted[emitted["fm_kind"].to_numpy() == p.PANE][plan.pane_columns()].reset_index(drop=True)
        if len(panes):
            for target_plan, target in self.downstream.get(stage, []):
                parts.append(self._forward(stage, bucket, panes, target_plan, target))
        return conform(parts, CARRIER)

    def _forward(
        self, stage: str, bucket: int, panes: pd.DataFrame, plan: p.RuntimePlan, target: WindowedStage
    ) -> pd.DataFrame:
        """``panes`` as IN blocks of ``target``, one per target bucket."""
        rows = stage_input_rows(panes, target)
        if target.key_by:
            hashes = pd.util.hash_pandas_object(rows[list(target.key_by)], index=False).to_numpy()
            buckets = np.asarray(plan.bucket_values, dtype=np.int32)[hashes % np.uint64(plan.buckets)]
        else:
            buckets = np.full(len(rows), plan.bucket_values[0], dtype=np.int32)
        rows = rows.assign(**{p.ROW: p.RAW, p.BUCKET: buckets})
        # The block's partition orders a target bucket's blocks the same way on every replay.
        partition = self.order.index(stage) * plan.buckets + self.processors[stage].plan.bucket_values.index(bucket)
        packed = blocks.pack(pa.Table.from_pandas(rows, preserve_index=False), partition)
        return pd.DataFrame(
            {
                STAGE: target.name,
                KIND: IN,
                p.BUCKET: packed.column(p.BUCKET).to_numpy(),
                blocks.BLOCK: packed.column(blocks.BLOCK).to_pylist(),
            }
        )


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


class LevelStatefulProcessor(StatefulProcessor):
    """``transformWithStateInPandas`` form of a :class:`StageLevel` (levels 2 and later)."""

    def __init__(self, level: StageLevel) -> None:
        self.level = level

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("blob", STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        stage, bucket = key
        frame = pd.concat(list(rows), ignore_index=True)
        stored = self.state.get()[0] if self.state.exists() else None
        out, new_state = self.level.run(str(stage), bucket, frame, stored)
        if new_state is not None:
            self.state.update((new_state,))
        yield out

    def close(self) -> None:
        pass


class UnpackOutput:
    """``mapInArrow`` function: a stage's OUTPUT blocks -> its rows in its output schema."""

    def __init__(self, schema: StructType) -> None:
        self.schema = schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for block in batch.column(blocks.BLOCK).to_pylist():
                yield from pa.ipc.open_stream(block).read_all().to_batches()


class PipelineSink(BatchSink):
    """The ``foreachBatch`` function of a pipeline: each stage's rows to its sinks, the batch to the controller.

    One Spark job computes the batch (collecting the small STATS and GAUGE rows) into the cache; each stage's
    panes, late records and dead letters are then written from it, only when its gauges count some.
    """

    def __init__(self, plans: dict[str, p.RuntimePlan], outputs: dict[str, Outputs], controller: PipelineController):
        first = next(iter(plans))
        super().__init__(plans[first], outputs[first], controller)  # type: ignore[arg-type]
        self.routes = {
            name: BatchSink(plan, outputs[name], controller, panes_in_blocks=False)  # type: ignore[arg-type]
            for name, plan in plans.items()
        }
        self.pipeline_controller = controller

    small_row_columns = (STAGE, *BatchSink.small_row_columns)

    # Built once per query, as the routes' projections (batch_sink.OutputProjection says why).
    @cached_property
    def _stage_output(self) -> dict[str, Column]:
        """Each stage's OUTPUT rows."""
        return {name: F.expr(f"{STAGE} = '{name}' AND {KIND} = '{OUTPUT}'") for name in self.routes}

    def _stage_rows(self, frame: DataFrame, name: str) -> DataFrame:
        """Stage ``name``'s rows of the batch (panes, late records, dead letters) in its output schema."""
        schema = self.routes[name].plan.output_schema()
        return frame.filter(self._stage_output[name]).select(blocks.BLOCK).mapInArrow(UnpackOutput(schema), schema)

    @cached_property
    def _leading_stage(self) -> str | None:
        """The stage whose pane write runs the whole batch (the first whose pane sink can), if any."""
        return next((name for name, route in self.routes.items() if route.outputs.panes.runs_the_batch), None)

    def _write(self, frame: DataFrame, batch_id: int) -> None:
        # Before any job of the batch: its entry, with the processing time Spark planned it at.
        batch_entry.publish(frame.sparkSession.sparkContext, self.pipeline_controller.begin_batch(batch_id))
        frame = frame.persist()
        try:
            # One job computes the batch into the cache and, when a stage's pane sink can, writes that
            # stage's panes on the way (an empty write is discarded below); the other writes read the cache.
            leader = self._leading_stage
            if leader is None:
                self.doing = "computing the batch"
                small = self._run_observed(frame, None)
            else:
                route = self.routes[leader]
                self.doing = f"computing the batch and writing stage {leader!r}'s panes to {route.outputs.panes!r}"
                small = self._run_observed(
                    frame,
                    lambda rows: route.outputs.panes.write(
                        route._batch(p.PANE, self._stage_rows(rows, leader), batch_id)
                    ),
                )
            stats = [r for r in small if r[KIND] == p.STATS]
            gauges: dict[str, list[dict[str, Any]]] = {name: [] for name in self.routes}
            for row in small:
                if row[KIND] == p.GAUGE:
                    gauges[row[STAGE]].append(row)
            counts = {
                name: {
                    kind: sum(int(g[column] or 0) for g in rows)
                    for kind, column in ((p.PANE, "fm_pane_count"), (p.LATE, "fm_late_count"), (p.BAD, "fm_bad_count"))
                }
                for name, rows in gauges.items()
            }
            for name, route in self.routes.items():
                if name == leader and not counts[name][p.PANE]:
                    route.outputs.panes.discard_empty(frame.sparkSession, PANES, batch_id)
                # The leader's panes went out with the job that ran the batch.
                kinds = [kind for kind in OUTPUT_KINDS if counts[name][kind] and (name, kind) != (leader, p.PANE)]
                if not kinds:
                    continue
                stage_rows = self._stage_rows(frame, name)
                for kind in kinds:
                    sink = route.outputs.sink(OUTPUT_KINDS[kind])
                    self.doing = f"writing stage {name!r}'s {OUTPUT_KINDS[kind]} to {sink!r}"
                    sink.write(route._batch(kind, stage_rows, batch_id))

            def first_dead_letter() -> str | None:
                stage = next((name for name in self.routes if counts[name][p.BAD]), None)
                if stage is None:
                    return None
                return self.routes[stage].first_dead_letter(self._stage_rows(frame, stage), batch_id)

            report = self.pipeline_controller.on_batch(batch_id, stats, gauges, counts, first_dead_letter)
        finally:
            frame.unpersist()
        self._publish_and_notify(frame, report)


class PipelineQuery(FloodmarkQuery):
    """A running pipeline: the Spark query, its controller and each stage's outputs."""

    def __init__(
        self,
        query,
        controller: PipelineController,
        outputs: dict[str, Outputs],
        stages: dict[str, WindowedStage],
        spark: SparkSession,
    ) -> None:
        super().__init__(query, controller, next(iter(outputs.values())), next(iter(stages.values())).spec, spark)
        self.stage_outputs = outputs
        self.stages = stages

    def explain(self, key: Any, window: Window) -> Explanation:
        raise NotImplementedError("explain() covers single-stage queries; a pipeline's stages report in reports")

    def _discard_after(self, batch_id: int) -> None:
        for outputs in self.stage_outputs.values():
            outputs.discard_after(self.spark, batch_id)
