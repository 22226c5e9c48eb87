"""Launching a query: what Spark offers its controller (Spark's checkpoint, the tick source's schedule, alignment's
pauses), the start of the Spark query into its ``foreachBatch`` sink, and one run's pieces (:class:`Launched`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from floodmark.driver import checkpoint_files, checkpoint_layout
from floodmark.driver.checkpoint_layout import floodmark_path
from floodmark.driver.controller import Controller, EngineHooks
from floodmark.spark.driver.spark_checkpoint import SparkCheckpoint
from floodmark.spark.sources.backlog import SourcesBacklog
from floodmark.spark.sources.ticks import TickSchedule, schedule_path


def engine_hooks(
    checkpoint: str,
    controller_files: checkpoint_files.CheckpointFiles,
    pause: Callable[[dict[str, frozenset[str]]], None] | None,
    backlog: SourcesBacklog | None = None,
) -> tuple[EngineHooks, SparkCheckpoint]:
    """What Spark offers the controller of the query at ``checkpoint`` (whose control log is on
    ``controller_files``): the first batch it runs and when it planned each batch (Spark's checkpoint), the tick
    source's schedule, ``pause`` (watermark alignment's, or None) and what the sources that say it left unread as
    Spark planned each batch (``backlog``)."""
    spark_checkpoint = SparkCheckpoint(checkpoint_files.join(checkpoint, "spark"), controller_files)
    ticks = TickSchedule(schedule_path(checkpoint))
    hooks = EngineHooks(
        first_batch_id=spark_checkpoint.first_batch_id(),
        planned_at=spark_checkpoint.planned_at,
        reads_no_new_input=spark_checkpoint.reads_no_new_input,
        ticks=ticks,
        pause=pause,
    )
    if backlog is not None:
        hooks = replace(hooks, backlog=lambda batch_id: backlog.for_batch(spark_checkpoint.offsets(batch_id)))
    return hooks, spark_checkpoint


def start_query(
    frame: DataFrame,
    sink: Callable[[DataFrame, int], None],
    controller: Controller,
    spark_checkpoint: SparkCheckpoint,
    trigger_interval: str,
    query_name: str | None,
) -> StreamingQuery:
    """Start ``frame`` into the ``foreachBatch`` ``sink`` with the control entry of its first batch (the
    controller's engine hooks are Spark's: :func:`engine_hooks`)."""
    writer = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", spark_checkpoint.directory)
        .trigger(processingTime=trigger_interval)
    )
    if query_name:
        writer = writer.queryName(query_name)
    if controller.engine.ticks is not None:
        controller.engine.ticks.request(0)  # the first batch runs at once, input or not
    # Every batch's entry, the first's included, is set by the sink on the query's own session as the batch begins.
    return writer.start()


@dataclass(frozen=True)
class EndOfInputRequest:
    """A Spark Connect client's request that the query's controller, in the server, end the input of this run
    (:meth:`~floodmark.spark.driver.query.FloodmarkQuery.finish_when_input_exhausted`): a file under the checkpoint,
    named for one start of the query, so that a later start from the same checkpoint is not bounded by it. Its
    controller checks for it as each batch begins
    (:meth:`~floodmark.driver.controller.Controller.end_input_when_requested`)."""

    path: str

    @classmethod
    def new(cls, checkpoint: str) -> EndOfInputRequest:
        return cls(floodmark_path(checkpoint, checkpoint_layout.END_OF_INPUT, f"{uuid.uuid4().hex}.json"))

    def made(self) -> bool:
        return checkpoint_files.LocalFiles().read_text(self.path) is not None

    def make(self) -> None:
        checkpoint_files.LocalFiles().write_once(self.path, "{}")

    def withdraw(self) -> None:
        checkpoint_files.LocalFiles().delete(self.path)


@dataclass
class Launched:
    """One run of a query: the Spark query, the controller of its batches, Spark's checkpoint of it and where each
    stage runs."""

    query: StreamingQuery
    controller: Controller
    spark_checkpoint: SparkCheckpoint
    hosts: dict[str, str]
