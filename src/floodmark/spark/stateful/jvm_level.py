"""The JVM host of a level of window stages: ``floodmark.host.WindowLevel`` in floodmark's jar.

Spark's own ``transformWithState`` with a Scala processor that runs ``floodmark.window.WindowOperator`` (the core's
semantics in Java, held equal to :mod:`floodmark.core` by ``tests/core/test_jvm_window_operator.py``) per bucket, in
the carrier protocol the Python host speaks (:mod:`floodmark.spark.stateful.levels`): the driver, the sinks, the
reports and reconciliation read its rows alike. No Python worker runs on the stateful side.

:func:`why_not` says which stages it cannot host yet; :func:`level_plan` writes what it needs to know of a level's
stages (every rule about columns stays here, on the Python side); :func:`jvm_level` applies it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal, cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from floodmark.core import segments
from floodmark.core.built_in_spec import built_in_form
from floodmark.core.time import EARLIEST_EVENT_TIME, LATEST_EVENT_TIME
from floodmark.protocol import output, wire
from floodmark.spark import plan as p
from floodmark.spark import plan_hints
from floodmark.spark.map_side import jvm_combine
from floodmark.spark.map_side.combiner import AggregatedInJvm
from floodmark.spark.sql_functions import register_functions

Host = Literal["python", "jvm"]
"""Where a stage's stateful step runs (``Pipeline(host=...)``)."""

HOST_ENV = "FLOODMARK_HOST"
"""The host of a pipeline that names none: ``jvm`` unless this is set (``FLOODMARK_HOST=python`` runs the test suite
on the Python host)."""


def default_host() -> Host:
    """The host of a pipeline built without ``host=``: :data:`HOST_ENV`'s value, else ``"jvm"`` (a stage the JVM
    cannot host runs on Python all the same: :func:`why_not`).

    :raises ValueError: the variable names neither host.
    """
    host = os.environ.get(HOST_ENV) or "jvm"
    if host not in ("python", "jvm"):
        raise ValueError(f"{HOST_ENV} must be 'python' or 'jvm', not {host!r}")
    return cast(Host, host)


def out_of_reach(spark: SparkSession) -> str | None:
    """Why ``spark`` cannot run the JVM host (None: it can): its ``spark.sql.extensions`` lack floodmark's (the hint
    would be dropped), or it cannot load floodmark's jar (a session can name the extensions and still lack the jar:
    Spark then skips them with a warning of its own)."""
    unreached = plan_hints.why_unreachable(spark)
    if unreached is None and not register_functions(spark):
        unreached = "this session cannot load floodmark's jar"
    return unreached


JSON_TYPES = (
    StringType,
    LongType,
    IntegerType,
    ShortType,
    ByteType,
    DoubleType,
    FloatType,
    BooleanType,
    DateType,
    TimestampType,
    TimestampNTZType,
)
"""The column types whose values the JVM host writes into a late record's JSON as the Python host does
(``floodmark.host.PythonJson``)."""


def why_not(plan: p.RuntimePlan, schema: StructType) -> str | None:
    """Why the stage of ``plan`` (a window stage over input rows of ``schema``: a source's, or the rows its
    upstream stages' panes make) stays on the Python host; None: the JVM can host it. Its panes reach the stages
    that read it through :class:`~floodmark.spark.stateful.levels.ForwardedPanes`."""
    semantics = plan.stage
    if not isinstance(semantics, p.StageSemantics):
        return "joins and process stages run on the Python host"
    if built_in_form(semantics.spec) is None:
        return "its spec is not built into the JVM operator (a composite trigger, collect_list or your own aggregate)"
    parsed = jvm_combine.parsed_by_the_core(plan, schema)
    if parsed is not None:
        return parsed
    types: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    other = [
        f"{name} ({types[name].simpleString()})"
        for name in (*plan.input.user_columns, *semantics.key_columns)
        if name in types and not isinstance(types[name], JSON_TYPES)
    ]
    if other:
        return f"columns {sorted(set(other))} have no JSON form in the JVM host"
    return None


def direct_input(plan: p.RuntimePlan, spark: SparkSession) -> dict[str, Any]:
    """What the JVM host needs to read the JVM map side's rows of ``plan`` (a source's map-side plan) itself
    (``floodmark.host.DirectInput``): the combiner's columns and record rules' parameters."""
    binding = plan.input
    return {
        "split": binding.split_column,
        "source": binding.source,
        "split_stats": binding.split_stats,
        "corrupt": binding.corrupt_column,
        "text": binding.text_column,
        "ts_raw": p.TS_RAW,
        "ts_error": p.TS_ERROR,
        "numeric": list(plan.stage.numeric_fields),
        "records": AggregatedInJvm.RECORDS,
        "earliest": EARLIEST_EVENT_TIME,
        "latest": LATEST_EVENT_TIME,
        "max_future_skew": binding.max_future_skew_ms,
        "time_zone": spark.conf.get("spark.sql.session.timeZone"),
    }


def level_plan(plans: Mapping[str, p.RuntimePlan], direct: Mapping[str, dict[str, Any]] | None = None) -> str:
    """What ``floodmark.host.LevelPlan`` reads: the level's stages (each hostable: :func:`why_not`; ``direct``: the
    :func:`direct_input` of those that read the JVM map side's rows), the carrier rows' schema and the largest state
    value."""
    from floodmark.spark.stateful.levels import CARRIER

    stages = []
    for name, plan in plans.items():
        semantics = plan.stage
        assert isinstance(semantics, p.StageSemantics)
        layout = semantics.spec.columnar_layout
        assert layout is not None  # a spec with a built-in form has one
        accumulators = dict(semantics.accumulator_columns())
        stages.append(
            {
                "name": name,
                "spec": built_in_form(semantics.spec),
                "keys": list(semantics.key_columns),
                "ts": plan.input.ts_column,
                "values": [field or "" for field in layout.value_fields],
                "accumulators": [accumulators[column.name].name for column in layout.columns] if accumulators else [],
                "user_columns": list(plan.input.user_columns),
                "emitted": semantics.emitted_schema().json(),
                "direct": (direct or {}).get(name),
            }
        )
    state_bytes = next(iter(plans.values())).state.state_value_bytes
    return json.dumps(
        {
            "stages": stages,
            "carrier": CARRIER.json(),
            "state_value_bytes": state_bytes,
            "output_block_rows": wire.OUTPUT_BLOCK_ROWS,
            "segment_limits": {"defer_above": segments.DEFER_ABOVE, "fanout": segments.FANOUT},
            "wire": wire_names(),
        }
    )


def wire_names() -> dict[str, Any]:
    """The protocol's names as the JVM host reads them from its level plan (``floodmark.host.Wire``), which restates
    none: ``carrier``, every text constant of :mod:`floodmark.protocol.wire` by its name; ``emitted``, every text
    constant of :mod:`floodmark.protocol.output`; ``gauges``, :data:`~floodmark.protocol.wire.GAUGES` in order."""

    def texts(module: Any) -> dict[str, str]:
        return {name: value for name, value in vars(module).items() if name.isupper() and isinstance(value, str)}

    return {"carrier": texts(wire), "emitted": texts(output), "gauges": list(wire.GAUGES)}


def jvm_level(rows: DataFrame, plan: str) -> DataFrame:
    """``rows`` (carrier rows) through the JVM host of the level ``plan`` (:func:`level_plan`) describes: a hint that
    floodmark's session extensions resolve (:mod:`floodmark.spark.plan_hints`), on a classic session and over Spark
    Connect alike."""
    return plan_hints.hinted(rows, plan_hints.WINDOW_LEVEL, plan)
