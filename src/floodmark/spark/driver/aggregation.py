"""The user entry point for one windowed aggregation on Spark: a query of one source and one stage.

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

Three parts, each with one reason to change: the :class:`~floodmark.core.spec.WindowSpec` (what to compute),
the :class:`~floodmark.spark.driver.source_time.SourceTime` (how the input's watermark is made: per-split generators,
idleness, percentile), and the binding to a DataFrame (``event_time``, ``key_by``) with runtime options
(``max_future_skew``, ``buckets``). The definition is checked against the input's schema when the aggregation
is created.

It is a thin facade: the query is the :class:`~floodmark.spark.driver.pipeline.Pipeline` of one source
(:data:`SOURCE`) and one stage (:data:`STAGE`), with that stage's outputs directly under ``output``; everything
about running it (the map-side combiner, the ticks, the stateful operator, the sink, the controller, the
query handle) is the pipeline's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame

from floodmark.core.spec import WindowSpec
from floodmark.core.time import Duration
from floodmark.core.windows import Window
from floodmark.driver.controller import AGGREGATION_SOURCE, AGGREGATION_STAGE
from floodmark.driver.definition_changes import Change
from floodmark.driver.reports import BatchReport
from floodmark.explain.window import Explanation
from floodmark.spark import plan as p
from floodmark.spark.driver.pipeline import Pipeline
from floodmark.spark.driver.query import FloodmarkQuery
from floodmark.spark.driver.restarts import Restarts
from floodmark.spark.driver.source_time import SourceTime
from floodmark.spark.outputs.sinks import Outputs
from floodmark.spark.sources.inputs import MapSide
from floodmark.spark.stateful.jvm_level import Host

SOURCE, STAGE = AGGREGATION_SOURCE, AGGREGATION_STAGE
"""The names of an aggregation's source and stage in its query's graph (``BatchReport.stages`` has the stage)."""


class EventTimeAggregation:
    """A keyed, windowed aggregation with floodmark's event-time semantics (see the module docstring).

    :arg source: a streaming DataFrame.
    :arg event_time: column name or Column; long = ms since the epoch, timestamp types are converted, text is
        read as ms or an ISO-8601 date-time; anything that cannot be read as ms makes the record a bad record.
    :arg key_by: the key column's name, or several names (at least one).
    :arg spec: the windowed aggregation; its aggregate is named: ``{output column: aggregate}`` (numeric
        aggregates read their ``field`` column).
    :arg time: how the input's watermark is made (:class:`SourceTime`).
    :arg max_future_skew: records whose event time is more than this ahead of processing time go to the
        dead-letter output (one corrupt far-future record must not push the watermark over every window);
        ``None`` disables.
    :arg buckets: number of state buckets (default: ``spark.sql.shuffle.partitions``; see ``Pipeline``).
    :arg map_side: ``"arrow"`` (default) or ``"jvm"``: where records are combined before the shuffle (see
        :class:`~floodmark.spark.driver.pipeline.Pipeline`; ``"jvm"`` pays off with few keys per batch).
    :arg host: ``"jvm"`` (the default unless ``FLOODMARK_HOST`` names another; the stage runs on Python where the
        JVM cannot host it) or ``"python"``: where the stateful step runs (see
        :class:`~floodmark.spark.driver.pipeline.Pipeline`).
    :arg time_zone: the zone of event times given without one (text, ``TIMESTAMP_NTZ``); UTC by default (see
        :meth:`Pipeline.source <floodmark.spark.driver.pipeline.Pipeline.source>`).
    :raises ValueError: for a definition the input cannot run, or a session floodmark cannot run in.
    """

    def __init__(
        self,
        source: DataFrame,
        event_time: str | Column,
        key_by: str | Sequence[str],
        spec: WindowSpec,
        time: SourceTime,
        max_future_skew: Duration | None = None,
        buckets: int | None = None,
        map_side: MapSide = "arrow",
        time_zone: str = "UTC",
        host: Host | None = None,
    ) -> None:
        if not key_by:
            raise ValueError("key_by needs at least one column")
        self.spec = spec
        self.pipeline = Pipeline(buckets=buckets, map_side=map_side, host=host)
        self.pipeline.source(SOURCE, source, event_time, time, max_future_skew, time_zone)
        self.pipeline.stage(STAGE, SOURCE, spec, key_by=key_by)
        self.plan: p.RuntimePlan = self.pipeline.plans(source.sparkSession)[STAGE]
        """The stage's runtime plan, checked against the input's schema."""

    def start(
        self,
        checkpoint: str,
        output: str | Outputs,
        trigger_interval: str = "1 second",
        query_name: str | None = None,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
        metrics_port: int | None = None,
        restarts: Restarts | None = None,
    ) -> FloodmarkQuery:
        """Start the streaming query.

        :arg output: where panes, late records and dead letters go: a root path (Parquet under
            ``panes/``, ``late/``, ``dead_letter/``, exactly-once) or :class:`~floodmark.spark.outputs.sinks.Outputs`
            (files in any format, tables, Kafka topics, your function; each sink states its guarantee).
        :arg listeners, metrics_port, restarts: as for :meth:`Pipeline.start
            <floodmark.spark.driver.pipeline.Pipeline.start>`.
        """
        return self.pipeline.start(
            checkpoint, {STAGE: output}, trigger_interval, query_name, listeners, metrics_port, restarts
        )

    def changes(self, checkpoint: str, output: str | Outputs) -> list[Change]:
        """What starting this aggregation on ``checkpoint`` with ``output`` would change of the job the checkpoint
        holds, each change kept or refused, without starting it (:meth:`Pipeline.changes
        <floodmark.spark.driver.pipeline.Pipeline.changes>`)."""
        return self.pipeline.changes(checkpoint, {STAGE: output})

    def explain(self, checkpoint: str, key: Any, window: Window, batch: int | None = None) -> Explanation:
        """Why ``key``'s ``window`` had (not) fired at the end of ``batch`` (default: the last) of the query at
        ``checkpoint``, running or stopped (:meth:`Pipeline.explain
        <floodmark.spark.driver.pipeline.Pipeline.explain>`)."""
        return self.pipeline.explain(checkpoint, key, window, STAGE, batch)

    def run_to_completion(
        self,
        checkpoint: str,
        output: str | Outputs,
        trigger_interval: str = "0 seconds",
        timeout_s: float = 3600.0,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
        metrics_port: int | None = None,
        restarts: Restarts | None = None,
    ) -> FloodmarkQuery:
        """Run a bounded input (files already in place) to the end, then fire everything.

        Once a batch reads no new input rows, the next control entry carries watermark MAX (end of input, as
        in Flink); the query stops after that batch. Returns the stopped query (reports, outputs).
        """
        return self.pipeline.run_to_completion(
            checkpoint, {STAGE: output}, trigger_interval, timeout_s, listeners, metrics_port, restarts
        )
