"""The stateful operators of a query: each hosts the stages of one *level* of its graph, on carrier rows.

A stage's level is 1 + the longest path from a source to it. Every level runs on ``transformWithStateInPandas``
(:class:`LevelStatefulProcessor`), its buckets stored in parts (state format 2:
:mod:`floodmark.spark.stateful.bucket_state`); in a checkpoint created with format 1, level 1 runs on
``applyInPandasWithState`` (Spark 4.3 refuses two of those in one query: ``bench/chained_stateful_probe.py``) with
one value per bucket. Each groups by ``(fm_stage, fm_bucket)``: one operator hosts every stage of its level, with
its state per stage and bucket. A single aggregation is the one-stage case: level 1 only.

Between levels, and into the sink, travel *carrier* rows (:data:`CARRIER`, the Spark form of
``floodmark.protocol.wire.CARRIER_COLUMNS``), whose ``fm_kind`` says what they are:

* IN: a block of a stage's input rows (the map-side combiner's rows, or an upstream stage's panes as rows);
* TICK: one per stage, bucket and batch the driver asks for, so that every bucket runs without input;
* OUTPUT: a block of one bucket's panes, late records and dead letters (Arrow IPC, in the stage's
  :meth:`~floodmark.spark.plan.StageSemantics.emitted_schema`), unpacked in the sink
  (:mod:`floodmark.spark.outputs.unpack`);
* STATS and GAUGE: what the driver needs (``floodmark.protocol.wire.REPORT_COLUMNS``), one row per split
  statistics or bucket.

A level passes the rows of other levels' stages through unchanged. A stage's panes reach the next level in
the same batch.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import StructType

from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.protocol import wire
from floodmark.protocol.columns import names
from floodmark.spark import blocks
from floodmark.spark import plan as p
from floodmark.spark.rows import arrow_table, conform, numpy_type, spark_like_pandas
from floodmark.spark.stateful.bucket_host import BucketHost, BucketKind, BucketOutput
from floodmark.spark.stateful.bucket_state import BlobState, BucketState
from floodmark.spark.stateful.join_bucket import JoinBucket
from floodmark.spark.stateful.process_bucket import ProcessBucket
from floodmark.spark.stateful.spark_hash import spark_hash
from floodmark.spark.stateful.window_bucket import WindowBucket

Stage = WindowedStage | JoinStage | ProcessStage
"""A stage's definition, of any kind."""

CARRIER = StructType(p.spark_fields(wire.CARRIER_COLUMNS))
"""The rows between levels and into the sink (see the module docstring)."""

_SMALL = [wire.KIND, *names(wire.REPORT_COLUMNS)]
_BUCKET_TYPE = numpy_type(wire.TYPES[wire.BUCKET])

# Spark 4.3's applyInPandasWithState pads the frames a task returns with an empty, untyped frame before it
# converts them to Arrow (pyspark/worker.py, construct_record_batch), and pandas 2.x warns about the dtypes
# of that concatenation (pandas GH#39122), once per Python worker: 82 lines in one demo run. The frames are
# typed on purpose; returning object columns instead would silence pandas at a cost per row. So only that
# message, raised from Spark's worker, is ignored.
warnings.filterwarnings(
    "ignore",
    message="The behavior of DataFrame concatenation with empty or all-NA entries",
    category=FutureWarning,
    module=r"pyspark\.worker",
)


class StageLevel:
    """Hosts the stages of one level: a bucket's batch per ``(stage, bucket)`` group, other groups passed on.

    The function given to level 1's ``applyInPandasWithState`` in a checkpoint of state format 1 (state
    :data:`~floodmark.spark.stateful.level_processor.BLOB_SCHEMA`, no timeout);
    :class:`~floodmark.spark.stateful.level_processor.LevelStatefulProcessor` wraps it otherwise.

    :arg plans: this level's stages. :arg downstream: for every stage, the plans and definitions of the stages
        that read it. :arg order: every stage, upstream first (fixes the order of forwarded blocks).
    :arg stages: this level's join and process stages' definitions (a process stage's function runs here); a stage
        not in it is a window stage.
    """

    def __init__(
        self,
        plans: dict[str, p.RuntimePlan],
        downstream: dict[str, list[tuple[p.RuntimePlan, Stage]]],
        order: list[str],
        stages: Mapping[str, Stage] | None = None,
    ) -> None:
        self.processors = {name: BucketHost(_kind(plan, (stages or {}).get(name))) for name, plan in plans.items()}
        self.downstream = downstream
        self.order = order
        self.emitted_schemas = {name: plan.stage.emitted_schema() for name, plan in plans.items()}
        self.state_value_bytes = next(iter(plans.values())).state.state_value_bytes
        # Read here, on the driver: the level travels to the Python workers with it.
        self.output_block_rows = wire.OUTPUT_BLOCK_ROWS
        self.arrow_schemas = {name: to_arrow_schema(schema) for name, schema in self.emitted_schemas.items()}

    def __call__(self, key: Any, rows: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        """``applyInPandasWithState`` form (level 1)."""
        stage, bucket = key
        frame = self.frame(rows)
        stored = state.getOption  # a property: None when the bucket has no state yet
        blob = BlobState(None if stored is None else stored[0])
        out = self.run(str(stage), bucket, frame, blob)
        if blob.new_value is not None:
            state.update((blob.new_value,))
        yield out

    @staticmethod
    def frame(rows: Iterator[pd.DataFrame]) -> pd.DataFrame:
        """A group's carrier rows as one frame."""
        return pd.concat(list(rows), ignore_index=True)

    def run(self, stage: str, bucket: Any, frame: pd.DataFrame, state: BucketState) -> pd.DataFrame:
        """One group's carrier rows -> carrier rows out; ``state`` (the group's) is read and written."""
        processor = self.processors.get(stage)
        if processor is None:
            return conform([frame], CARRIER)
        bucket = int(bucket)
        kinds = frame[wire.KIND].to_numpy()
        out = processor.run(bucket, frame.loc[kinds == wire.IN, wire.BLOCK].tolist(), state)
        return self.carry(stage, bucket, out)

    def carry(self, stage: str, bucket: int, out: BucketOutput) -> pd.DataFrame:
        """A bucket's output as carrier rows: its STATS and GAUGE rows, its OUTPUT blocks, and its panes as IN
        blocks of the stages that read ``stage``."""
        plan = self.processors[stage].plan
        rows = conform(out.rows, plan.stage.output_schema())
        kinds = rows[wire.KIND].to_numpy()
        small = rows.loc[np.isin(kinds, wire.REPORT_KINDS), _SMALL]
        # STATS rows carry the bucket too: every carrier row belongs to a (stage, bucket) group downstream.
        parts = [small.assign(**{wire.STAGE: stage, wire.BUCKET: _BUCKET_TYPE(bucket)})]
        table = self._emitted_table(stage, rows.loc[np.isin(kinds, wire.EMITTED_KINDS)], out.pane_columns)
        if table.num_rows:
            blocks = output_blocks(table, self.output_block_rows)
            parts.append(
                pd.DataFrame(
                    {
                        wire.STAGE: stage,
                        wire.KIND: wire.OUTPUT,
                        wire.BUCKET: _BUCKET_TYPE(bucket),
                        wire.BLOCK: [ipc_bytes(block) for block in blocks],
                    }
                )
            )
            parts += forwarded(stage, plan, bucket, table, self.downstream.get(stage, []), self.order)
        return conform(parts, CARRIER)

    def _emitted_table(self, stage: str, rows: pd.DataFrame, pane_columns: list[dict[str, Any]]) -> pa.Table:
        """A bucket's panes, late records and dead letters as one Arrow table of the stage's emitted schema:
        ``rows`` through pandas, the columnar panes straight from their arrays."""
        schema, arrow_schema = self.emitted_schemas[stage], self.arrow_schemas[stage]
        tables = [arrow_table(pane_columns, schema, like=arrow_schema, nan_is_null=True)]
        if len(rows):
            tables.insert(0, pa.Table.from_pandas(conform([rows], schema), schema=arrow_schema, preserve_index=False))
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def forwarded(
    stage: str,
    plan: p.RuntimePlan,
    bucket: int,
    emitted: pa.Table,
    targets: list[tuple[p.RuntimePlan, Stage]],
    order: list[str],
) -> list[pd.DataFrame]:
    """The panes in ``emitted`` (bucket ``bucket``'s OUTPUT table of ``stage``, whose plan is ``plan``) as carrier IN
    rows of each stage of ``targets`` that reads it, one block per target bucket (a join's tagged with the side
    ``stage`` is). ``order`` (every stage, upstream first) and the bucket fix the blocks' input partition, so a
    target bucket's blocks are ordered the same way on every replay."""
    if not targets:
        return []
    is_pane = pc.equal(emitted.column(wire.KIND), wire.PANE)
    panes = spark_like_pandas(emitted.filter(is_pane).select(plan.stage.pane_columns()))
    if not len(panes):
        return []
    parts = []
    for target_plan, target in targets:
        rows, keys, side = target.input_rows(panes), target.key_columns, target.input_side(stage)
        state = target_plan.state
        labels = np.asarray(state.bucket_values, dtype=_BUCKET_TYPE)
        if keys and target_plan.spark_hash_types:  # the target reads sources too: as Spark buckets their rows
            values = rows[list(keys)].astype(object).itertuples(index=False, name=None)
            types = target_plan.spark_hash_types
            buckets = labels[[spark_hash(row, types) % state.buckets for row in values]]
        elif keys:
            hashes = pd.util.hash_pandas_object(rows[list(keys)], index=False).to_numpy()
            buckets = labels[hashes % np.uint64(state.buckets)]
        else:
            buckets = np.full(len(rows), state.bucket_values[0], dtype=_BUCKET_TYPE)
        rows = rows.assign(**{wire.ROW: wire.RAW, wire.BUCKET: buckets})
        partition = order.index(stage) * state.buckets + plan.state.bucket_values.index(bucket)
        table = pa.Table.from_pandas(rows, preserve_index=False)
        packed = blocks.pack(table, partition, None if side is None else side.value)
        parts.append(
            pd.DataFrame(
                {
                    wire.STAGE: target.name,
                    wire.KIND: wire.IN,
                    wire.BUCKET: packed.column(wire.BUCKET).to_numpy(),
                    wire.BLOCK: packed.column(wire.BLOCK).to_pylist(),
                }
            )
        )
    return parts


class ForwardedPanes:
    """The step after a level the JVM hosts (``mapInArrow``, carrier rows in and out) for its stages that other
    stages read: every row passes on, and each OUTPUT row of such a stage is followed by its panes as IN rows of
    the stages that read it (:func:`forwarded`, what :class:`StageLevel` does for the stages it hosts).

    :arg plans: the level's stages that others read. :arg downstream: for every stage (these among them), the plans
        and definitions of the stages that read it. :arg order: every stage, upstream first.
    """

    def __init__(
        self,
        plans: Mapping[str, p.RuntimePlan],
        downstream: Mapping[str, list[tuple[p.RuntimePlan, Stage]]],
        order: list[str],
    ) -> None:
        self.plans = dict(plans)
        self.downstream = downstream
        self.order = order

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # A bucket's output may come in several OUTPUT blocks (in order, in this partition: its level's task), in
        # one Arrow batch or more: its panes are forwarded once, after the partition's last batch, so that each
        # target bucket gets one block per upstream bucket in the order the Python host gives (`forwarded`).
        emitted: dict[tuple[str, int], list[pa.Table]] = {}
        for batch in batches:
            yield batch
            kinds = batch.column(wire.KIND).to_pylist()
            stages = batch.column(wire.STAGE).to_pylist()
            for i, (kind, stage) in enumerate(zip(kinds, stages, strict=True)):
                if kind != wire.OUTPUT or stage not in self.plans:
                    continue
                block = batch.column(wire.BLOCK)[i].as_py()
                bucket = int(batch.column(wire.BUCKET)[i].as_py())
                emitted.setdefault((stage, bucket), []).append(pa.ipc.open_stream(block).read_all())
        parts: list[pd.DataFrame] = []
        for (stage, bucket), tables in emitted.items():
            table = pa.concat_tables(tables)
            parts += forwarded(stage, self.plans[stage], bucket, table, self.downstream[stage], self.order)
        if parts:
            carrier = to_arrow_schema(CARRIER)
            yield pa.RecordBatch.from_pandas(conform(parts, CARRIER), schema=carrier, preserve_index=False)


def _kind(plan: p.RuntimePlan, stage: Stage | None) -> BucketKind:
    """What the bucket host runs for ``stage``: the one place a host tells the kinds of stage apart."""
    if isinstance(stage, JoinStage):
        return JoinBucket(plan)
    if isinstance(stage, ProcessStage):
        return ProcessBucket(plan, stage)
    return WindowBucket(plan)


def output_blocks(table: pa.Table, rows: int) -> list[pa.Table]:
    """``table`` (a bucket's emitted rows) cut into OUTPUT blocks of at most ``rows`` rows, in order
    (:data:`~floodmark.protocol.wire.OUTPUT_BLOCK_ROWS`)."""
    return [table.slice(start, rows) for start in range(0, table.num_rows, rows)]


def ipc_bytes(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream (what an OUTPUT row's block holds)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
