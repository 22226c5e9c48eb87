"""A query's graph on Spark: sources and stages in one streaming query (the game-session pipeline's shape).

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

Planning is :mod:`floodmark.spark.driver.planning` (every plan of the graph, in one pass, and where each stage
runs); the one physical plan, whatever the graph (a single aggregation, :class:`~floodmark.spark.EventTimeAggregation`,
is the graph of one source and one stage), is :mod:`floodmark.spark.driver.physical`; starting the query is
:mod:`floodmark.spark.driver.launch`. The ``foreachBatch`` sink (:mod:`floodmark.spark.outputs.batch_sink`) writes each
stage's panes, late records and dead letters to its outputs and gives the batch's statistics to the
:class:`~floodmark.driver.controller.Controller`, which writes the next control entry with every stage's watermark.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from floodmark.core.join import WindowJoinSpec
from floodmark.core.join.spec import IntervalJoinSpec, JoinKind, JoinTime
from floodmark.core.pipeline import (
    JoinStage,
    ProcessStage,
    WindowedStage,
    stage_named,
)
from floodmark.core.process import KeyedProcessFunction
from floodmark.core.spec import WindowSpec
from floodmark.core.time import Duration, non_negative_millis
from floodmark.core.windows import Window, WindowAssigner
from floodmark.driver import definition_changes
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import NO_ENGINE, Controller, EngineHooks, SourceSettings, aligned_sources
from floodmark.driver.definition import JobDefinition, SourceDefinition, column_or_expression
from floodmark.driver.definition_changes import Change
from floodmark.driver.null_splits import NullSplitWarning
from floodmark.driver.pane_description import PaneDescription
from floodmark.driver.prometheus import PrometheusMetrics
from floodmark.driver.reports import BatchReport
from floodmark.explain.rows import TimeExplanation, explain_time
from floodmark.explain.stage import explain_stage
from floodmark.explain.window import Explanation
from floodmark.spark import hadoop_files
from floodmark.spark import plan as p
from floodmark.spark.connect import client_path, is_connect
from floodmark.spark.driver import arrow_batches, python_workers
from floodmark.spark.driver.checkpoint_records import (
    check_locations,
    check_state_format,
    control_log,
    fixed_bucket_layout,
    metrics_file,
    shuffle_partitions,
    stage_hosts,
)
from floodmark.spark.driver.launch import EndOfInputRequest, Launched, engine_hooks, start_query
from floodmark.spark.driver.physical import carrier_rows
from floodmark.spark.driver.planning import QueryPlan, choose_hosts, plan_query, stage_graph
from floodmark.spark.driver.query import FloodmarkQuery
from floodmark.spark.driver.report_follower import ReportFollower
from floodmark.spark.driver.restarts import Restarts, start_again_when_busy
from floodmark.spark.driver.session import check_session
from floodmark.spark.driver.source_time import Source, SourceTime
from floodmark.spark.driver.spark_checkpoint import SparkCheckpoint
from floodmark.spark.outputs.batch_sink import BatchSink
from floodmark.spark.outputs.sinks import KINDS, FileSink, Outputs
from floodmark.spark.outputs.unpack import use_jvm_unpack
from floodmark.spark.sources.backlog import SourcesBacklog
from floodmark.spark.sources.inputs import MapSide
from floodmark.spark.sources.kafka import PausePartitions, alignment_keys
from floodmark.spark.stateful import jvm_level, state_codec
from floodmark.spark.stateful.jvm_level import Host

_LOG = logging.getLogger("floodmark")


class Pipeline:
    """Sources and windowed stages, run as one streaming query (see the module docstring).

    :arg buckets: state buckets per stage (default: ``spark.sql.shuffle.partitions``, one per partition). A
        bucket is one group of Spark's stateful operator: each costs its own state-store calls and Python call
        in every batch that runs it, so more buckets than partitions only add work (6-7% per batch with 8 on
        2 partitions, ``bench/batches.py``); its state is stored in parts of at most 16 MiB, so a large bucket
        has no size cliff. Fixed when the checkpoint is created.
    :arg map_side: where records are combined before the shuffle (:mod:`floodmark.spark.map_side.jvm_combine`):
        ``"arrow"`` (default) sends every record to Python and combines there with Arrow; ``"jvm"`` lets Spark's
        own partial aggregation combine the records that are good and on time, and sends only those partials and
        the other records to Python: faster with few keys per batch (1.1x-1.2x with 100 keys),
        slower with many keys or sliding windows (``docs/PERFORMANCE.md``). Same panes either way; a stage
        ``"jvm"`` cannot serve (see :func:`~floodmark.spark.map_side.jvm_combine.why_not`) uses Arrow and says why in
        the log.
    :arg host: where the stateful step runs (:mod:`floodmark.spark.stateful.jvm_level`): ``"jvm"`` (the default
        unless the environment variable ``FLOODMARK_HOST`` names another), on Spark's own ``transformWithState``
        with the window operator in floodmark's jar, for the window stages it can host (a spec built into it:
        :func:`~floodmark.spark.stateful.jvm_level.why_not`), the other stages on Python; ``"python"``, every stage
        on ``transformWithStateInPandas``. Same panes, late records and dead letters either way. A stage that stays
        on Python although ``"jvm"`` was named is a warning in the log (an info line when nothing named a host); a
        session without floodmark's extensions or jar, which cannot reach the JVM host, is a warning either way.
        Fixed when the checkpoint is created (recorded there:
        :attr:`FloodmarkQuery.hosts <floodmark.spark.driver.query.FloodmarkQuery.hosts>`); a session that cannot
        reach the JVM host refuses a checkpoint whose stages are on it.
    """

    def __init__(self, buckets: int | None = None, map_side: MapSide = "arrow", host: Host | None = None) -> None:
        if map_side not in ("arrow", "jvm"):
            raise ValueError(f"map_side must be 'arrow' or 'jvm', not {map_side!r}")
        self.host_named = host is not None or bool(os.environ.get(jvm_level.HOST_ENV))
        host = jvm_level.default_host() if host is None else host
        if host not in ("python", "jvm"):
            raise ValueError(f"host must be 'python' or 'jvm', not {host!r}")
        self.sources: dict[str, Source] = {}
        self.stages: dict[str, WindowedStage | JoinStage | ProcessStage] = {}
        self.buckets = buckets
        self.map_side = map_side
        self.host = host

    # ----------------------------------------------------------- definition
    def source(
        self,
        name: str,
        frame: DataFrame,
        event_time: str | Column,
        time: SourceTime,
        max_future_skew: Duration | None = None,
        time_zone: str = "UTC",
    ) -> str:
        """Add a source; returns its name (for ``upstream=``).

        :arg frame: a streaming DataFrame.
        :arg event_time: column name or Column; long = ms since the epoch, timestamp types are converted, text
            is read as ms or as an ISO-8601 date-time (:func:`floodmark.spark.sources.inputs.event_time_ms`); anything
            that cannot be read as ms makes the record a bad record (a dead letter), and so does a value the
            expression throws on.
        :arg time_zone: the zone of event times given without one: text without an offset or zone
            (``2026-01-01 10:00:00``) and ``TIMESTAMP_NTZ`` values (an IANA name, ``Europe/Berlin``, or an offset,
            ``+01:00``); UTC by default, whatever the session's time zone. Text with an offset or zone keeps it.
        :arg time: how the source's watermark is made (:class:`SourceTime`).
        :arg max_future_skew: records whose event time is more than this ahead of processing time go to the
            dead-letter output (one corrupt far-future record must not push the watermark over every window);
            ``None`` disables.
        :raises ValueError: the frame is not streaming, lacks a named column, or its session cannot run floodmark.
        """
        if not frame.isStreaming:
            raise ValueError(f"source {name!r} must be a streaming DataFrame (spark.readStream...)")
        check_session(frame.sparkSession)
        if "/" in name:
            raise ValueError(f"source names must not contain '/', got {name!r}")
        self._check_new(name)
        p.check_columns(
            frame.schema.names,
            event_time=event_time if isinstance(event_time, str) else None,
            split=time.split if isinstance(time.split, str) else None,
        )
        self.sources[name] = Source(name, frame, event_time, time, max_future_skew, time_zone)
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
        stage = WindowedStage(name, upstream, spec, key_by, columns or {})  # type: ignore[arg-type]
        if stage.columns and any(up in self.sources for up in stage.upstream):
            raise ValueError(f"stage {name!r} reads sources: derive columns on the DataFrame instead of columns=")
        return self.add(stage)

    def process(
        self,
        name: str,
        upstream: str | Sequence[str],
        function: KeyedProcessFunction,
        output: Mapping[str, str],
        key_by: str | Sequence[str] = (),
    ) -> str:
        """Add a keyed process function (:class:`~floodmark.core.pipeline.ProcessStage`; the timer rules in
        :mod:`floodmark.core.process.function`); returns its name.

        ``function.process(record, ctx)`` is called with each input row (a dict of its columns) of a key, in arrival
        order, with the key's state (``ctx.state``, a dict kept in the checkpoint); ``function.on_timer(timer,
        ctx)`` when an event-time timer's time is reached by the stage's input watermark (the MIN of its inputs'),
        or a processing-time timer's by the batch's processing time (the driver asks for a batch when one is due,
        input or not). What ``ctx.emit(row)`` emits is a row of the stage's output: the key columns, the
        ``output`` columns (``{"alert": "string", "silent_ms": "long"}``, Spark type names; a row is a dict of them
        or a tuple in order), then ``output_time``, its event time (ms), the event time of a stage that reads this
        one. Pending timers hold the stage's output watermark below their output times.

        A call that raises makes the record (or timer) a dead letter with the error, and what the call did is
        dropped; a row that does not fit the output is a dead letter too. Nothing of the function runs on the
        driver: it is pickled with the plan (cloudpickle), so it must pickle, and so must ``ctx.state``'s values.

        :raises ValueError: unknown inputs, sources and stages together, output columns that clash.
        """
        return self.add(ProcessStage(name, upstream, key_by, function, output))  # type: ignore[arg-type]

    def window_join(
        self,
        name: str,
        left: str,
        right: str,
        on: str | Sequence[str],
        window: WindowAssigner,
        allowed_lateness: Duration = 0,
    ) -> str:
        """Add a window join of two sources, two stages, or a source and a stage (Flink's window join; the rules in
        :mod:`floodmark.core.join.window_join`); returns its name.

        Both inputs' rows are assigned to ``window``'s windows (tumbling, sliding, cumulate, sessions); per key and
        window, every pair of a left and a right row is emitted when the window fires (the watermark, the MIN of
        both inputs', passes its end: an ON_TIME pane), and a row that arrives within ``allowed_lateness`` after
        that is paired with the window's rows in a LATE pane; each pair once. A row later than that goes to the
        late output, once per window it missed. Rows (``<root>/<name>/panes``): the ``on`` columns, ``left_<name>``,
        ``right_<name>``, ``window_start``, ``window_end``, ``timing``, ``pane_index`` and ``join_time`` (the
        window's max timestamp: ``window_end - 1``). Pending windows hold the output watermark.
        """
        return self.add(JoinStage(name, left, right, on, WindowJoinSpec(window, allowed_lateness)))  # type: ignore[arg-type]

    def add(self, stage: WindowedStage | JoinStage | ProcessStage) -> str:
        """Add a stage of any kind, made already (a job definition's, ``floodmark.core.pipeline``'s); the methods
        above make theirs and add them here. Returns its name.

        :raises ValueError: a name taken, unknown inputs (add sources and stages before the stages that read them),
            or a window or process stage reading sources and stages together (a join may read one of each).
        """
        name = stage.name
        self._check_new(name)
        unknown = [up for up in stage.upstream if up not in self.sources and up not in self.stages]
        if unknown:
            raise ValueError(f"stage {name!r} reads {unknown}: add sources and stages before the stages reading them")
        kinds = {up in self.sources for up in stage.upstream}
        if len(kinds) > 1 and not isinstance(stage, JoinStage):
            raise ValueError(
                f"stage {name!r} reads sources and stages; a window or process stage reads either sources or stages "
                "(a join may read one of each)"
            )
        self.stages[name] = stage
        return name

    def _check_new(self, name: str) -> None:
        if name in self.sources or name in self.stages:
            raise ValueError(f"the name {name!r} is taken: sources and stages need distinct names")

    def join(
        self,
        name: str,
        left: str,
        right: str,
        on: str | Sequence[str],
        between: tuple[Duration, Duration],
        how: str | JoinKind = JoinKind.INNER,
        output_time: str | JoinTime = JoinTime.LEFT,
        allowed_lateness: Duration = 0,
    ) -> str:
        """Add an interval join of two sources, two stages, or a source and a stage (:class:`~floodmark.core.pipeline.
        JoinStage`, the rules
        in :mod:`floodmark.core.join.spec`); returns its name.

        A ``left`` row at ``t`` joins the ``right`` rows of its key at ``t + lower .. t + upper`` (``between``, ms or
        timedelta, inclusive). The stage's input watermark is the MIN of both inputs'; every pair of rows that are
        not late is emitted once, as soon as the later of the two arrives; a row's side keeps it until the
        watermark passes the last time a partner can have (plus ``allowed_lateness``), and a row of an outer side
        (``how``: ``"left"``, ``"right"``, ``"outer"``) that found no partner is emitted then, with nulls for the
        other side. A row that arrives when the watermark is at or past its time plus ``allowed_lateness`` goes to
        the late output with its side and lateness.

        Output rows (written where a window stage writes its panes, ``<root>/<name>/panes``): the ``on`` columns,
        every other column of the left row as ``left_<name>`` and of the right row as ``right_<name>``, and
        ``join_time`` (ms): the pair's event time by ``output_time`` (``"LEFT"``, ``"RIGHT"``, ``"EARLIEST"``,
        ``"LATEST"``; an unmatched row's own), the event time of a stage that reads this one. Pending rows hold
        the stage's output watermark below the times they can still be emitted at, so a window over the joined
        rows does not see them late.

        :raises ValueError: an unknown input, the same input twice, or bounds that do not make an interval (when it
            starts: a source and a stage whose key columns differ in type, or are not integers, booleans or strings).
        """
        spec = IntervalJoinSpec(between, how, output_time, allowed_lateness)  # type: ignore[arg-type]
        return self.add(JoinStage(name, left, right, on, spec))  # type: ignore[arg-type]

    # ----------------------------------------------------------------- plans
    def plans(self, spark: SparkSession) -> dict[str, p.RuntimePlan]:
        """Each stage's runtime plan, checked against its input schema (a ``ValueError`` says what cannot run), with
        the state layout of a new checkpoint (:meth:`bucket_count` buckets; :meth:`build` binds the checkpoint's)."""
        return self._plan(spark).stages

    def _plan(self, spark: SparkSession) -> QueryPlan:
        """Every plan of this graph (:func:`~floodmark.spark.driver.planning.plan_query`), for a new checkpoint."""
        layout = p.StateLayout(self.bucket_count(spark))
        return plan_query(self.sources, self.stages, layout, p.corrupt_record_column(spark))

    def bucket_count(self, spark: SparkSession) -> int:
        """The state buckets per stage of a new checkpoint: as asked, else ``spark.sql.shuffle.partitions``."""
        return self.buckets or shuffle_partitions(spark)

    # ---------------------------------------------------------------- running
    def build(
        self, checkpoint: str, spark: SparkSession, earlier: Controller | None = None
    ) -> tuple[
        DataFrame, Controller, dict[str, p.RuntimePlan], SparkCheckpoint, list[StructType | None], dict[str, str]
    ]:
        """The streaming DataFrame of carrier rows (before the sink), its controller (``earlier``: the controller
        of this query's previous run in this process, whose reports carry over), the stages' plans, Spark's
        checkpoint of the query, the rows each of its Python steps reads (None: not known; a source's own
        Python code; :mod:`~floodmark.spark.driver.arrow_batches`) and where each stage runs (``{stage: "python" |
        "jvm"}``, as the checkpoint records it)."""
        unbound = self._plan(spark)  # refuses what the inputs cannot run before anything is written to the checkpoint
        graph = unbound.graph
        log, metrics = control_log(checkpoint, spark)
        layout = fixed_bucket_layout(checkpoint, spark, log, self.buckets, self.bucket_count(spark), graph.order)
        state_format = check_state_format(log.files, checkpoint, existing=log.latest_seq() is not None)
        rows_stages = [n for n, stage in self.stages.items() if not isinstance(stage, WindowedStage)]
        if rows_stages and state_format < state_codec.PARTS_FORMAT:
            raise ValueError(
                f"join and process stages {rows_stages} need state format {state_codec.PARTS_FORMAT}; this checkpoint "
                f"was created with format {state_format}: start the pipeline from a new checkpoint"
            )
        plan = unbound.with_states({n: p.StateLayout(layout.count, layout.of(n), state_format) for n in graph.order})
        existing = log.latest_seq() is not None
        hosts = stage_hosts(
            log.files,
            checkpoint,
            existing,
            lambda: choose_hosts(spark, plan, self.sources, self.stages, self.host, self.host_named),
        )
        on_jvm = [n or "(one)" for n, host in hosts.items() if host == "jvm"]
        unreached = jvm_level.out_of_reach(spark) if on_jvm else None
        if unreached is not None:  # its hint would be dropped: batches that run no stage, their input lost
            raise ValueError(
                f"the checkpoint {checkpoint} runs stages {', '.join(on_jvm)} on the JVM host (fixed when it was "
                f"created), which this session cannot reach: {unreached}"
            )
        engine, spark_checkpoint = engine_hooks(checkpoint, log.files, self._pause(), SourcesBacklog.of(self.sources))
        controller = self._controller(log, metrics, engine, earlier)
        controller.ensure_initial_entry()
        controller.publish_paused()
        rows, python_inputs = carrier_rows(
            spark, checkpoint, plan, self.sources, self.stages, layout, state_format, hosts, self.map_side
        )
        return rows, controller, plan.stages, spark_checkpoint, python_inputs, hosts

    def _pause(self) -> Callable[[dict[str, frozenset[str]]], None] | None:
        """How watermark alignment pauses the Kafka partitions of the sources that ask for it (None: no source
        does); the controller tells it before every batch is planned, the first included (a restart resumes the
        pauses of its last control entry).

        :raises ValueError: an aligned source is not a topic read by ``read_kafka`` with floodmark's jar, or its
            splits are not the Kafka partitions.
        """
        keys: dict[str, list[str]] = {}
        for name in aligned_sources({name: self._settings(source) for name, source in self.sources.items()}):
            source = self.sources[name]
            keys[name] = alignment_keys(source.frame)
            if not keys[name]:
                raise ValueError(
                    f"source {name!r} asks for watermark alignment, which pauses Kafka partitions: read the topic "
                    "with floodmark.spark.read_kafka in a session with floodmark's jar "
                    "(configure_spark_with_floodmark; a Spark Connect server with floodmark's extensions)"
                )
            if source.time.split != "partition":
                raise ValueError(
                    f"source {name!r} asks for watermark alignment: its splits must be the Kafka partitions "
                    f"(SourceTime(split='partition')), not {source.time.split!r}"
                )
        return PausePartitions(keys) if keys else None

    @staticmethod
    def _settings(source: Source) -> SourceSettings:
        time = source.time
        return SourceSettings(time.watermarks, time.periodic_interval, time.percentile, time.known_splits)  # type: ignore[arg-type]

    def _controller(
        self,
        log: ControlLog,
        metrics_path: Path | None = None,
        engine: EngineHooks = NO_ENGINE,
        earlier: Controller | None = None,
    ) -> Controller:
        sources = {name: self._settings(s) for name, s in self.sources.items()}
        upstreams = {s.name: list(s.upstream) for s in self.stages.values()}
        return Controller(log, sources, upstreams, metrics_path=metrics_path, engine=engine, earlier=earlier)

    def explain(
        self, checkpoint: str, key: Any, window: Window, stage: str | None = None, batch: int | None = None
    ) -> Explanation:
        """Why ``key``'s ``window`` of ``stage`` (default: the only stage) had (not) fired at the end of
        ``batch`` (default: the last) of the query at ``checkpoint``, running or stopped, read from its
        control log (:func:`floodmark.explain.stage.explain_stage`; this definition must be the query's).

        :raises ValueError: ``stage`` is not one of this pipeline's. :raises LookupError: the checkpoint has no
            finished batch, or ``batch``'s control entries were pruned.
        """
        stage = stage_named(list(self.stages), stage, "the pipeline")
        spark = next(iter(self.sources.values())).frame.sparkSession
        log, _ = control_log(client_path(spark, checkpoint), spark)
        return explain_stage(self._controller(log), self.stages[stage], key, window, batch)

    def explain_time(
        self,
        checkpoint: str,
        event_time: int,
        stage: str | None = None,
        side: str | None = None,
        batch: int | None = None,
    ) -> TimeExplanation:
        """What waits at ``event_time`` (ms) in ``stage`` (an interval join: a ``side`` row; a process stage: an
        event-time timer) of the query at ``checkpoint``, running or stopped, as of the end of ``batch`` (default:
        the last): :func:`floodmark.explain.rows.explain_time`; this definition must be the query's."""
        stage = stage_named(list(self.stages), stage, "the pipeline")
        spark = next(iter(self.sources.values())).frame.sparkSession
        log, _ = control_log(client_path(spark, checkpoint), spark)
        return explain_time(self._controller(log), self.stages[stage], event_time, side, batch)

    def changes(self, checkpoint: str, output: str | Mapping[str, str | Outputs]) -> list[Change]:
        """What starting this pipeline on ``checkpoint`` with ``output`` (as :meth:`start` takes them) would change
        of the job the checkpoint holds, each change kept or refused (:mod:`floodmark.driver.definition_changes`),
        without starting it. Empty: a new checkpoint, or the same job. ``floodmark explain <checkpoint> --changes
        <definition file>`` says the same from the command line."""
        spark = next(iter(self.sources.values())).frame.sparkSession
        checkpoint = client_path(spark, checkpoint)
        definition = self.definition(self._outputs(output))
        return definition_changes.changes_from(
            hadoop_files.files_for(checkpoint, spark), checkpoint, definition.to_dict()
        )

    def _outputs(self, output: str | Mapping[str, str | Outputs]) -> dict[str, Outputs]:
        """Each stage's outputs, as :meth:`start` takes ``output``, with paths as the client gives them."""
        spark = next(iter(self.sources.values())).frame.sparkSession
        if isinstance(output, str):
            outputs = {name: Outputs.of(f"{output.rstrip('/')}/{name}") for name in self.stages}
        else:
            missing = sorted(set(self.stages) - set(output))
            if missing:
                raise ValueError(f"no output given for stages {missing}")
            outputs = {name: Outputs.of(output[name]) for name in self.stages}
        return {name: each.client_paths(spark) for name, each in outputs.items()}

    def start(
        self,
        checkpoint: str,
        output: str | Mapping[str, str | Outputs],
        trigger_interval: str = "1 second",
        query_name: str | None = None,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
        metrics_port: int | None = None,
        restarts: Restarts | None = None,
    ) -> FloodmarkQuery:
        """Start the streaming query.

        :arg output: a root path (each stage's Parquet under ``<root>/<stage>/panes`` ...) or
            ``{stage: root path or Outputs}`` for every stage.
        :arg listeners: called on the driver with each batch's :class:`~floodmark.driver.reports.BatchReport`.
        :arg metrics_port: serve the query's metrics for Prometheus on this port of the loopback address
            (:class:`~floodmark.driver.prometheus.PrometheusMetrics`, labelled with ``query_name``; 0 picks a
            free port: ``query.metrics_url``); stopped with the query. ``None``: no endpoint.
        :arg restarts: how the handle rides through a Kafka broker out of reach (default
            :class:`~floodmark.spark.driver.restarts.Restarts`: about 12 minutes at Kafka's default timeouts).
        """
        return self._start(checkpoint, output, trigger_interval, query_name, listeners, metrics_port, restarts)

    def _start(
        self,
        checkpoint: str,
        output: str | Mapping[str, str | Outputs],
        trigger_interval: str,
        query_name: str | None,
        listeners: Sequence[Callable[[BatchReport], None]],
        metrics_port: int | None,
        restarts: Restarts | None,
        bounded: bool = False,
    ) -> FloodmarkQuery:
        """:meth:`start`; ``bounded``: the input ends at the first batch that plans none (:meth:`run_to_completion`),
        told to the controller before the query starts (over Spark Connect the controller runs in the server)."""
        spark = next(iter(self.sources.values())).frame.sparkSession
        checkpoint = client_path(spark, checkpoint)  # over Spark Connect a relative path is the client's
        outputs = self._outputs(output)
        check_locations(checkpoint, list(outputs.values()), spark)
        connect = is_connect(spark)
        graph = stage_graph(self.sources, self.stages)
        outputs = {name: outputs[name] for name in graph.order}  # upstream first
        definition, checkpoint_files = self.definition(outputs), hadoop_files.files_for(checkpoint, spark)
        definition_changes.check(checkpoint_files, checkpoint, definition)
        definition.write(checkpoint_files, checkpoint)
        for name, each in outputs.items():  # what read_panes needs to give each window's result
            if isinstance(each.panes, FileSink):
                PaneDescription.of(self.stages[name]).write(
                    hadoop_files.files_for(each.panes.path, spark), each.panes.path
                )
        metrics = None if metrics_port is None else PrometheusMetrics(metrics_port, query=query_name or "floodmark")
        split_columns = {n: s.time.split for n, s in self.sources.items() if s.time.split is not None}
        null_splits = NullSplitWarning({n: str(c) for n, c in split_columns.items()})
        reported = [null_splits, *listeners, *([metrics] if metrics is not None else [])]
        follower = end_request = None
        if connect:  # the controller runs in the server: its reports reach this process through its metrics file
            path = metrics_file(checkpoint)
            assert path is not None  # a URI is refused under Spark Connect (check_locations)
            follower = ReportFollower(path, lambda: handle.controller, reported)
            end_request = EndOfInputRequest.new(checkpoint)

        def launch(earlier: Controller | None = None) -> Launched:
            python_workers.prestart(spark)  # while the query plans (python_workers.py)
            frame, controller, plans, spark_checkpoint, python_inputs, hosts = self.build(checkpoint, spark, earlier)
            time_zone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
            jvm_unpack = use_jvm_unpack(spark)
            if not jvm_unpack:  # the sink unpacks the carrier rows in Python
                python_inputs.append(frame.schema)
            if any(each.sink(kind).runs_your_code for each in outputs.values() for kind in KINDS):
                python_inputs.append(None)
            sink = BatchSink(
                {n: plan.stage for n, plan in plans.items()},
                outputs,
                controller,
                jvm_unpack,
                time_zone,
                spark_checkpoint.query_id,
                arrow_batches.query_settings(spark, python_inputs),
            )
            null_splits.source_of = controller.source_of
            if follower is None:
                sink.listeners.extend(reported)
            if bounded:
                controller.end_input_when(spark_checkpoint.planned_no_new_input)
            elif end_request is not None:
                controller.end_input_when_requested(end_request.made, spark_checkpoint.planned_no_new_input)
            query = start_again_when_busy(
                lambda: start_query(frame, sink, controller, spark_checkpoint, trigger_interval, query_name)
            )
            if follower is not None:
                controller.metrics_path = None  # the server's copy (in the sink) writes the file; this one reads it
                controller.keeps_totals = False  # and the run's totals
            return Launched(query, controller, spark_checkpoint, hosts)

        try:
            launched = launch()
        except BaseException:
            if metrics is not None:
                metrics.close()
            raise
        handle = FloodmarkQuery(
            launched, outputs, dict(self.stages), spark, metrics, launch, restarts, follower, bounded, end_request
        )
        return handle

    def definition(self, outputs: Mapping[str, Outputs] | None = None) -> JobDefinition:
        """This pipeline as data (:mod:`floodmark.driver.definition`), with the paths of its file outputs: what
        ``start`` writes into the checkpoint for ``floodmark explain`` and ``floodmark replay --like``."""
        files = {
            stage: {kind: sink.path for kind in KINDS if isinstance(sink := each.sink(kind), FileSink)}
            for stage, each in (outputs or {}).items()
        }
        sources = {
            name: SourceDefinition(
                self._settings(s),
                column_or_expression(s.event_time),
                None if s.time.split is None else column_or_expression(s.time.split),
                s.time_zone,
                None if s.max_future_skew is None else non_negative_millis(s.max_future_skew, "max_future_skew"),
            )
            for name, s in self.sources.items()
        }
        return JobDefinition(sources, dict(self.stages), files)

    @classmethod
    def from_definition(
        cls, job: JobDefinition, frames: Mapping[str, DataFrame], map_side: MapSide = "arrow"
    ) -> Pipeline:
        """The pipeline ``job`` describes (:meth:`definition`, as a checkpoint keeps it) over ``frames``, a streaming
        DataFrame per source name: what ``floodmark replay --like <checkpoint>`` runs over files. An event time or
        split given as an expression is read back from its SQL text (``F.expr``).

        :raises ValueError: a source of ``job`` without a frame. :raises NotDescribable: code of the job's own that
            cannot be rebuilt here.
        """
        missing = sorted(set(job.sources) - set(frames))
        if missing:
            raise ValueError(f"no input for source(s) {missing} of the job (its sources: {sorted(job.sources)})")
        pipeline = cls(map_side=map_side)
        for name, source in job.sources.items():
            settings = source.settings
            time = SourceTime(
                settings.strategy,
                None if source.split is None else _column(source.split),
                settings.periodic_interval,
                settings.percentile,
                settings.splits,
            )
            event_time = _column(source.event_time)
            pipeline.source(name, frames[name], event_time, time, source.max_future_skew, source.time_zone)
        for stage in job.stages.values():
            pipeline.add(stage)
        return pipeline

    def run_to_completion(
        self,
        checkpoint: str,
        output: str | Mapping[str, str | Outputs],
        trigger_interval: str = "0 seconds",
        timeout_s: float = 3600.0,
        listeners: Sequence[Callable[[BatchReport], None]] = (),
        metrics_port: int | None = None,
        restarts: Restarts | None = None,
    ) -> FloodmarkQuery:
        """Run bounded sources to the end: after the end of input every stage, upstream first, gets watermark
        MAX (one batch per level), and the query stops once the last level has had it."""
        handle = self._start(
            checkpoint, output, trigger_interval, None, listeners, metrics_port, restarts, bounded=True
        )
        handle.finish_when_input_exhausted(timeout_s)
        return handle


def _column(described: Mapping[str, str]) -> Any:
    """A column name, or a Column from an expression's SQL text
    (:func:`~floodmark.driver.definition.column_or_expression`)."""
    return described["column"] if "column" in described else F.expr(described["expression"])
