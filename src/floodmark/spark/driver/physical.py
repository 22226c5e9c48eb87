"""The physical plan of a query's graph: one streaming DataFrame of carrier rows, whatever the graph.

Each source's rows go through the map-side combiner (:mod:`floodmark.spark.sources.inputs`) once per stage that
reads it, are unioned with the tick rows (one per stage and bucket in the batches the driver asks for:
:mod:`floodmark.spark.sources.ticks`), and are grouped by ``(fm_stage, fm_bucket)`` into one stateful operator per
level of the graph: the JVM host's (:mod:`floodmark.spark.stateful.jvm_level`) when every stage of the level runs
there, else the Python host's (:mod:`floodmark.spark.stateful.levels`). A level's panes that later levels read come
back as their ``IN`` rows. The ``foreachBatch`` sink comes after (:mod:`floodmark.spark.outputs.batch_sink`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from floodmark.protocol import wire
from floodmark.spark.driver import arrow_batches
from floodmark.spark.driver.planning import QueryPlan, Stage
from floodmark.spark.driver.source_time import Source
from floodmark.spark.sources.inputs import MapSide, combined_input
from floodmark.spark.sources.ticks import schedule_path, tick_rows
from floodmark.spark.stateful import bucket_layout, jvm_level, state_codec
from floodmark.spark.stateful.level_processor import BLOB_SCHEMA, LevelStatefulProcessor
from floodmark.spark.stateful.levels import CARRIER, ForwardedPanes, StageLevel


def carrier_rows(
    spark: SparkSession,
    checkpoint: str,
    plan: QueryPlan,
    sources: Mapping[str, Source],
    stages: Mapping[str, Stage],
    layout: bucket_layout.BucketLayout,
    state_format: int,
    hosts: Mapping[str, str],
    map_side: MapSide,
) -> tuple[DataFrame, list[StructType | None]]:
    """The streaming DataFrame of carrier rows of the query at ``checkpoint`` (before the sink), and the rows each of
    its Python steps reads (None: not known, a source's own Python code; :mod:`~floodmark.spark.driver.arrow_batches`).

    :arg plan: bound to the checkpoint's ``layout`` and ``state_format``. :arg hosts: where each stage runs.
    """
    graph = plan.graph
    order = graph.order
    bucket_count = layout.count
    names = F.array(*[F.lit(n) for n in order])
    # Tick i is bucket i % B of stage i // B.
    ticks = tick_rows(spark, schedule_path(checkpoint), len(order) * bucket_count).select(
        F.element_at(names, (F.col("tick") / bucket_count).cast("int") + 1).alias(wire.STAGE),
        F.lit(wire.TICK).alias(wire.KIND),
        bucket_layout.label_column([v for n in order for v in layout.of(n)], F.col("tick")).alias(wire.BUCKET),
    )
    inputs = [ticks]
    direct: dict[str, dict[str, Any]] = {}  # the stages whose JVM host reads the JVM map side's rows
    python_inputs: list[StructType | None] = []
    for name, reads in plan.reads.items():
        for read in reads:
            source = sources[read.source]
            if arrow_batches.runs_python(source.frame):
                python_inputs.append(None)
            combined = combined_input(
                source.frame,
                source.event_time,
                source.time.split,
                read.plan,
                map_side,
                source.time_zone,
                # The JVM host reads the JVM map side's rows itself for a stage of one source (the rows name no
                # source; the plan's split column and label are that source's); else the combiner's blocks.
                direct=hosts.get(name) == "jvm" and len(reads) == 1,
                python_inputs=python_inputs,
            )
            stage_columns = [F.lit(name).alias(wire.STAGE), F.lit(wire.IN).alias(wire.KIND)]
            if wire.BLOCK in combined.columns:
                inputs.append(combined.select(*stage_columns, wire.BUCKET, wire.BLOCK))
            else:  # the JVM map side's rows, read as they are by the JVM host
                direct[name] = jvm_level.direct_input(read.plan, spark)
                inputs.append(combined.select(*stage_columns, "*"))
    rows = inputs[0]
    for more in inputs[1:]:
        rows = rows.unionByName(more, allowMissingColumns=True)
    plans = plan.stages
    readers = {n: [(plans[d], stages[d]) for d in graph.downstream(n)] for n in order}
    for level in sorted(set(graph.levels.values())):
        level_stages = [n for n in order if graph.levels[n] == level]
        if all(hosts.get(n) == "jvm" for n in level_stages):
            rows = jvm_level.jvm_level(rows, jvm_level.level_plan({n: plans[n] for n in level_stages}, direct))
            feeding = {n: plans[n] for n in level_stages if readers[n]}
            if feeding:  # their panes become the next levels' IN rows, as the Python host makes them
                python_inputs.append(rows.schema)
                rows = rows.mapInArrow(ForwardedPanes(feeding, readers, order), CARRIER)
            continue
        host = StageLevel({n: plans[n] for n in level_stages}, readers, order, {n: stages[n] for n in level_stages})
        python_inputs.append(rows.schema)
        grouped = rows.groupBy(wire.STAGE, wire.BUCKET)
        if level == 1 and state_format < state_codec.PARTS_FORMAT:
            rows = grouped.applyInPandasWithState(host, CARRIER, BLOB_SCHEMA, "append", "NoTimeout")
        else:
            processor = LevelStatefulProcessor(host, parts=state_format >= state_codec.PARTS_FORMAT)
            rows = grouped.transformWithStateInPandas(processor, CARRIER, "Append", "None")
    return rows, python_inputs
