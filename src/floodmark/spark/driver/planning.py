"""Planning a query's graph: one pass from its sources and stages to every plan the physical build runs, and where
each stage of a new checkpoint runs.

A stage's plan (:class:`~floodmark.spark.plan.RuntimePlan`) says what the stage emits and how its input rows bind
to it; a stage that reads sources has, besides, one plan per source it reads (:class:`SourceRead`: what the map
side runs on that source's rows, labelled by the source when the graph has several, the source's split statistics
reported by the first stage that reads it). :func:`plan_query` makes them all with one state layout and checks them
against the inputs' schemas before anything is written to the checkpoint; :meth:`QueryPlan.with_states` binds the
layout the checkpoint fixes (buckets and state format), which changes no plan's meaning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd
from pyspark.sql import Column, SparkSession
from pyspark.sql.types import BooleanType, DataType, DoubleType, LongType, StringType, StructField, StructType

from floodmark.core.join.spec import Side
from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.core.time import non_negative_millis
from floodmark.core.watermarks.graph import StageGraph
from floodmark.spark import plan as p
from floodmark.spark.driver.source_time import Source
from floodmark.spark.rows import pandas_dtype
from floodmark.spark.stateful import jvm_level
from floodmark.spark.stateful.jvm_level import Host
from floodmark.spark.stateful.spark_hash import HASHED_TYPES

_LOG = logging.getLogger("floodmark")

_PANDAS_TO_SPARK: dict[str, DataType] = {"i": LongType(), "u": LongType(), "f": DoubleType(), "b": BooleanType()}

Stage = WindowedStage | JoinStage | ProcessStage


@dataclass(frozen=True)
class SourceRead:
    """A source that a stage reads, and the plan the map side runs on that source's rows for the stage."""

    source: str
    plan: p.RuntimePlan


@dataclass(frozen=True)
class QueryPlan:
    """Every plan of a query's graph.

    :ivar graph: the stages' levels and order (upstream first). :ivar stages: each stage's plan. :ivar reads: for
        each stage that reads sources (the first level), one :class:`SourceRead` per source, in its upstream order.
    """

    graph: StageGraph
    stages: dict[str, p.RuntimePlan]
    reads: dict[str, list[SourceRead]]

    def with_states(self, states: Mapping[str, p.StateLayout]) -> QueryPlan:
        """The same plans over each stage's state layout as the checkpoint fixes it."""
        return QueryPlan(
            self.graph,
            {n: replace(plan, state=states[n]) for n, plan in self.stages.items()},
            {n: [replace(r, plan=replace(r.plan, state=states[n])) for r in reads] for n, reads in self.reads.items()},
        )


def stage_graph(sources: Mapping[str, Source], stages: Mapping[str, Stage]) -> StageGraph:
    """The graph of ``stages`` over ``sources`` (levels, order; a ``ValueError`` names a cycle)."""
    return StageGraph(list(sources), {s.name: s.upstream for s in stages.values()})


def plan_query(
    sources: Mapping[str, Source], stages: Mapping[str, Stage], state: p.StateLayout, corrupt_column: str | None
) -> QueryPlan:
    """Every plan of the graph of ``stages`` over ``sources``, each with the layout ``state``.

    :arg corrupt_column: the name Spark gives the corrupt-record column (:func:`~floodmark.spark.plan.
        corrupt_record_column`). :raises ValueError: a query without stages, or an input a stage cannot run (the
        sources of one stage of different schemas or event times, upstreams whose pane rows differ, columns that
        clash: the message names the stage).
    """
    if not stages:
        raise ValueError("a query needs at least one stage")
    graph = stage_graph(sources, stages)
    plans: dict[str, p.RuntimePlan] = {}
    reads: dict[str, list[SourceRead]] = {}
    reporting: set[str] = set()  # a source read by several stages reports its split statistics once
    for name in graph.order:
        stage = stages[name]
        if isinstance(stage, JoinStage) and len({up in sources for up in stage.upstream}) > 1:
            plans[name], reads[name] = _mixed_join_plan(stage, sources, plans, stages, state, corrupt_column, reporting)
            continue
        if stage.upstream[0] in sources:
            read = [sources[s] for s in stage.upstream]
            plans[name] = _source_stage_plan(stage, read, plans, state, corrupt_column)
            reads[name] = []
            for source in read:
                label = source.name if len(sources) > 1 else None  # Controller.split_label
                first_read = source.name not in reporting
                plan = _read_plan(stage, source, plans[name], state, corrupt_column, label, first_read)
                reads[name].append(SourceRead(source.name, plan))
                reporting.add(source.name)
            continue
        schemas = {up: input_schema(plans[up].stage, stage) for up in stage.upstream}
        if isinstance(stage, JoinStage):
            plans[name] = _join_plan(stage, schemas, stages, state)
            continue
        schema = schemas[stage.upstream[0]]
        if any(s != schema for s in schemas.values()):
            raise ValueError(f"stage {name!r} unions upstreams whose pane rows differ: {schemas}")
        event_time = stages[stage.upstream[0]].output_event_time
        if isinstance(stage, ProcessStage):
            semantics = p.ProcessSemantics.of(name, stage.key_by, schema, stage.output)
            binding = p.InputBinding.of(schema, event_time, None, False, None)
            plans[name] = p.RuntimePlan(semantics, binding, state)
            continue
        plans[name] = p.RuntimePlan.for_input(
            stage.spec, schema, stage.key_by, event_time, None, False, None, corrupt_column, name, state
        )
    return QueryPlan(graph, plans, reads)


def _source_stage_plan(
    stage: Stage,
    read: list[Source],
    plans: Mapping[str, p.RuntimePlan],
    state: p.StateLayout,
    corrupt_column: str | None,
) -> p.RuntimePlan:
    """The plan of ``stage``, which reads the sources ``read``: its first source's (they must agree)."""
    if isinstance(stage, JoinStage):
        schemas = {s.name: s.frame.schema for s in read}
        return _join_plan(stage, schemas, {}, state, {s.name: s for s in read}, corrupt_column)
    first = read[0]
    for other in read[1:]:
        if other.frame.schema != first.frame.schema or str(other.event_time) != str(first.event_time):
            raise ValueError(
                f"stage {stage.name!r} reads sources {list(stage.upstream)} of different schemas or event times; "
                "select the same columns from each"
            )
    if isinstance(stage, ProcessStage):
        semantics = p.ProcessSemantics.of(stage.name, stage.key_by, first.frame.schema, stage.output)
        return p.RuntimePlan(semantics, binding(first, corrupt_column), state)
    return _read_plan(stage, first, None, state, corrupt_column, None, True)


def _read_plan(
    stage: Stage,
    source: Source,
    stage_plan: p.RuntimePlan | None,
    state: p.StateLayout,
    corrupt_column: str | None,
    label: str | None,
    split_stats: bool,
) -> p.RuntimePlan:
    """What the map side of ``stage`` runs on ``source``'s rows (``stage_plan``: a join or process stage's own, whose
    semantics the read shares; a window stage's read plan is its own window plan over the source).

    :arg label: the source's name in split labels (a graph of several sources). :arg split_stats: whether this map
        side reports the source's split statistics.
    """
    if not isinstance(stage, WindowedStage):
        assert stage_plan is not None
        side = stage.input_side(source.name)
        return p.RuntimePlan(stage_plan.stage, binding(source, corrupt_column, side, label, split_stats), state)
    event_time, split, skew = source.event_time, source.time.split, source.max_future_skew
    return p.RuntimePlan.for_input(
        stage.spec,
        source.frame.schema,
        stage.key_by,
        event_time=event_time if isinstance(event_time, str) else None,
        split=split if isinstance(split, str) else None,
        split_is_expression=isinstance(split, Column),
        max_future_skew_ms=None if skew is None else non_negative_millis(skew, "max_future_skew"),
        corrupt_column=corrupt_column,
        stage=stage.name,
        state=state,
        source=label,
        split_stats=split_stats,
    )


def _mixed_join_plan(
    stage: JoinStage,
    sources: Mapping[str, Source],
    plans: Mapping[str, p.RuntimePlan],
    stages: Mapping[str, Stage],
    state: p.StateLayout,
    corrupt_column: str | None,
    reporting: set[str],
) -> tuple[p.RuntimePlan, list[SourceRead]]:
    """The plan of a join of a source and a stage, and the read of its source side. Spark buckets the source's rows
    by ``functions.hash`` of the key columns; the stage's panes are forwarded in Python and bucketed the same way
    (:attr:`~floodmark.spark.plan.RuntimePlan.spark_hash_types`), which needs the key columns of one Spark type on
    both sides, each a type that hash is restated for. ``reporting``: the sources whose split statistics a read
    reports already (this one is added).

    :raises ValueError: a key column of different types on the two sides, or of a type not restated.
    """
    (source,) = [sources[up] for up in stage.upstream if up in sources]
    (upstream,) = [up for up in stage.upstream if up not in sources]
    schemas = {source.name: source.frame.schema, upstream: input_schema(plans[upstream].stage, stage)}
    for column in stage.on:
        kinds = {up: schema[column].dataType.simpleString() for up, schema in schemas.items() if column in schema.names}
        if len(set(kinds.values())) > 1:
            raise ValueError(
                f"join {stage.name!r} reads key column {column!r} as {kinds}: cast one side so that both have one type"
            )
        kind = next(iter(kinds.values()), None)
        if kind is not None and kind not in HASHED_TYPES:
            raise ValueError(
                f"join {stage.name!r} of a source and a stage keys on {column!r} of type {kind}: use a key of "
                f"type {', '.join(sorted(HASHED_TYPES))} (cast it on the source and in the stage)"
            )
    plan = _join_plan(stage, schemas, stages, state, {source.name: source}, corrupt_column)
    types = tuple(source.frame.schema[c].dataType.simpleString() for c in stage.on)
    plan = replace(plan, spark_hash_types=types)
    label = source.name if len(sources) > 1 else None  # Controller.split_label
    read = _read_plan(stage, source, plan, state, corrupt_column, label, source.name not in reporting)
    reporting.add(source.name)
    return plan, [SourceRead(source.name, read)]


def _join_plan(
    stage: JoinStage,
    schemas: Mapping[str, StructType],
    stages: Mapping[str, Stage],
    state: p.StateLayout,
    sources: Mapping[str, Source] | None = None,
    corrupt_column: str | None = None,
) -> p.RuntimePlan:
    """``stage``'s plan: what it emits, and both sides' inputs (``schemas``: each upstream's rows; ``sources``: the
    upstreams that are sources, bound as sources; the others are stages, bound by their output event time)."""
    bindings = []
    for upstream in stage.upstream:
        side = stage.side_of(upstream)
        if sources and upstream in sources:
            bindings.append(binding(sources[upstream], corrupt_column, side))
        else:
            event_time = stages[upstream].output_event_time
            bindings.append(p.InputBinding.of(schemas[upstream], event_time, None, False, None, side=side))
    left, right = (schemas[up] for up in stage.upstream)
    semantics = p.JoinSemantics.of(stage.name, stage.spec, stage.on, left, right, (bindings[0], bindings[1]))
    return p.RuntimePlan(semantics, bindings[0], state, right_input=bindings[1])


def binding(
    source: Source,
    corrupt_column: str | None,
    side: Side | None = None,
    label: str | None = None,
    split_stats: bool = True,
) -> p.InputBinding:
    """How ``source``'s rows feed a join or process stage (``side``: a join's)."""
    event_time, split, skew = source.event_time, source.time.split, source.max_future_skew
    p.check_columns(
        source.frame.schema.names,
        event_time=event_time if isinstance(event_time, str) else None,
        split=split if isinstance(split, str) else None,
    )
    return p.InputBinding.of(
        source.frame.schema,
        event_time if isinstance(event_time, str) else None,
        split if isinstance(split, str) else None,
        isinstance(split, Column),
        None if skew is None else non_negative_millis(skew, "max_future_skew"),
        corrupt_column,
        label,
        split_stats,
        side,
    )


def input_schema(upstream: p.StageSemantics | p.JoinSemantics | p.ProcessSemantics, stage: Stage) -> StructType:
    """The schema of ``stage``'s input rows read from ``upstream``'s panes (or joined rows): their columns + the
    columns the stage derives from them (:meth:`~floodmark.core.pipeline.StageKind.input_rows`)."""
    pane_fields = {f.name: f for f in upstream.output_schema().fields}
    fields = [StructField(c, pane_fields[c].dataType) for c in upstream.pane_columns()]
    sample = pd.DataFrame({f.name: pd.Series([1], dtype=pandas_dtype(f.dataType)) for f in fields})
    derived = stage.input_rows(sample)
    added = [c for c in derived.columns if c not in sample.columns]
    fields += [StructField(c, _PANDAS_TO_SPARK.get(derived[c].dtype.kind, StringType())) for c in added]
    return StructType(fields)


def choose_hosts(
    spark: SparkSession,
    plan: QueryPlan,
    sources: Mapping[str, Source],
    stages: Mapping[str, Stage],
    host: Host,
    host_named: bool,
) -> dict[str, str]:
    """Where each stage of a new checkpoint runs (``{stage: "python" | "jvm"}``): on the JVM where ``host`` is
    ``"jvm"`` and every stage of its level can (:func:`~floodmark.spark.stateful.jvm_level.why_not`), else on Python.
    The log says why a stage stays on Python: a warning when ``host_named`` (the user or the environment asked for a
    host) or when the session cannot reach the JVM host, else an info line."""
    graph = plan.graph
    if host == "python":
        return {n: "python" for n in graph.order}
    reasons: dict[str, str | None] = {}
    for name in graph.order:
        stage = stages[name]
        read = [up for up in stage.upstream if up in sources]
        # The sources of one stage share a schema (plan_query).
        schema = sources[read[0]].frame.schema if read else input_schema(plan.stages[stage.upstream[0]].stage, stage)
        reasons[name] = jvm_level.why_not(plan.stages[name], schema)
    unreached = None
    if any(reason is None for reason in reasons.values()):
        unreached = jvm_level.out_of_reach(spark)
        if unreached is not None:
            # A setting of the session, not a property of a spec: a warning whether or not a host was named.
            hostable = [n or "(one)" for n, reason in reasons.items() if reason is None]
            _LOG.warning(
                "floodmark: stages %s run on the Python host (slower), not the JVM host: %s",
                ", ".join(hostable),
                unreached,
            )
            reasons = {n: reason or unreached for n, reason in reasons.items()}
    for name in graph.order:
        level = graph.levels[name]
        blocked = [n for n in graph.order if graph.levels[n] == level and reasons[n] is not None]
        if reasons[name] is None and blocked:
            reasons[name] = f"it shares a level of the graph with {blocked}, which run on the Python host"
    say = _LOG.warning if host_named else _LOG.info
    for name, reason in reasons.items():
        if reason is not None and reason != unreached:
            say("floodmark: stage %s runs on the Python host, not the JVM: %s", name or "(one)", reason)
    return {n: "python" if reasons[n] else "jvm" for n in graph.order}
