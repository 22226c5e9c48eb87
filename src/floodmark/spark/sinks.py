"""The ``foreachBatch`` sink: route tagged rows to their outputs, idempotently per batch id.

Each kind goes to its own directory, one sub-directory per batch
(``panes/batch_id=N``, ``late/batch_id=N``, ``dead_letter/batch_id=N``), written
with mode ``overwrite``: when Spark replays batch N after a crash, the replay
replaces what the crashed attempt may have written, so every output is
exactly-once. STATS and GAUGE rows go to the driver's controller.

A batch costs one Spark job in the common case: the pane write runs the whole
micro-batch (combiner, shuffle, stateful processor) and an observation
(``DataFrame.observe``) brings the small STATS and GAUGE rows to the driver in
the same job. Late records and dead letters, rare, are written from the cached
batch only when the gauges count some. A pane directory that turns out empty
is removed, so an idle query does not leave a directory per tick.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from floodmark.driver import checkpoint_files
from floodmark.driver.controller import BatchController, BatchReport
from floodmark.spark import batch_entry
from floodmark.spark import plan as p

KIND_DIRECTORIES = {p.PANE: "panes", p.LATE: "late", p.BAD: "dead_letter"}

PaneHook = Callable[[DataFrame, int], None]


@dataclass
class FileOutputs:
    """Parquet outputs under ``root`` (a path or any URI Spark can write): ``panes/``, ``late/``, ``dead_letter/``.

    :arg on_panes: optional extra hook called with each batch's non-empty pane
        DataFrame (e.g. to also write the seed's text lines).
    """

    root: str
    on_panes: PaneHook | None = None

    def directory(self, kind: str) -> str:
        return checkpoint_files.join(self.root, KIND_DIRECTORIES[kind])

    def remove_batches_after(self, spark: SparkSession, batch_id: int) -> None:
        """Delete the output directories of batches after ``batch_id``.

        For a query that has ended after ``batch_id``: stopping it can interrupt
        the next batch half-way through its write, and since that batch will
        never be replayed, what it left (an empty or partial directory) is removed.
        """
        for directory in KIND_DIRECTORIES.values():
            parent = _hadoop_path(spark, checkpoint_files.join(self.root, directory))
            fs = _file_system(spark, parent)
            if not fs.exists(parent):
                continue
            for status in fs.listStatus(parent):
                number = status.getPath().getName().removeprefix("batch_id=")
                if number.isdigit() and int(number) > batch_id:
                    fs.delete(status.getPath(), True)


class BatchSink:
    """The function given to ``foreachBatch``."""

    def __init__(self, plan: p.RuntimePlan, outputs: FileOutputs, controller: BatchController) -> None:
        self.plan = plan
        self.outputs = outputs
        self.controller = controller
        self.listeners: list[Callable[[BatchReport], None]] = []

    def columns(self, kind: str) -> list:
        if kind == p.PANE:
            names = self.plan.pane_columns()
        elif kind == p.LATE:
            names = self.plan.record_columns()
        else:
            names = [*self.plan.key_columns, "event_time", "reason", "record"]
        extra = []
        if "window_start" in names:
            extra = [
                F.timestamp_millis("window_start").alias("window_start_time"),
                F.timestamp_millis("window_end").alias("window_end_time"),
            ]
        return [*names, *extra]

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        try:
            self._write(frame, batch_id)
        except Py4JJavaError as error:
            interruption = _interruption(error)
            if interruption is None:
                raise
            # query.stop() interrupted this batch. Spark recognises that by matching the Python error's text
            # with a regex whose recursion overflows the stack on a long text (the whole Java stack trace):
            # the stream thread would die with StackOverflowError. A short text in the expected form lets Spark
            # see a clean stop; the batch is not committed either way and runs again after a restart.
            raise BatchInterrupted(
                f"py4j.protocol.Py4JJavaError: An error occurred while calling the floodmark sink.\n: {interruption}"
            ) from None

    def _write(self, frame: DataFrame, batch_id: int) -> None:
        frame = frame.persist()
        try:
            observation = Observation()  # a fresh, uniquely named observation per batch
            kind = F.col("fm_kind")
            small_columns = [f.name for f in p.STATS_META]
            observed = frame.observe(
                observation,
                F.collect_list(F.when(kind.isin(p.STATS, p.GAUGE), F.struct(kind, *small_columns))).alias("small"),
            )
            panes_path = f"{self.outputs.directory(p.PANE)}/batch_id={batch_id}"
            observed.filter(kind == p.PANE).select(*self.columns(p.PANE)).write.mode("overwrite").parquet(panes_path)
            small = [row.asDict() for row in observation.get["small"]]
            gauges = [r for r in small if r["fm_kind"] == p.GAUGE]
            # Each bucket reports what it emitted, so no extra Spark job is needed to count.
            counts = {
                row_kind: sum(int(g[column] or 0) for g in gauges)
                for row_kind, column in ((p.PANE, "fm_pane_count"), (p.LATE, "fm_late_count"), (p.BAD, "fm_bad_count"))
            }
            if counts[p.PANE]:
                if self.outputs.on_panes is not None:
                    self.outputs.on_panes(frame.filter(kind == p.PANE).select(*self.columns(p.PANE)), batch_id)
            else:
                _delete(frame.sparkSession, panes_path)
            for row_kind in (p.LATE, p.BAD):
                if counts[row_kind]:
                    rows = frame.filter(kind == row_kind).select(*self.columns(row_kind))
                    rows.write.mode("overwrite").parquet(f"{self.outputs.directory(row_kind)}/batch_id={batch_id}")
            stats = [r for r in small if r["fm_kind"] == p.STATS]
            report = self.controller.on_batch(batch_id, stats, gauges, counts)
        finally:
            frame.unpersist()
        # Last: every job of this batch has been submitted with entry N; the next batch's carry entry N+1.
        batch_entry.publish(frame.sparkSession.sparkContext, self.controller.next_entry)
        for listener in self.listeners:
            listener(report)


INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""What Spark's StreamExecution takes as a stop's interruption of a Python foreachBatch (SPARK-39218)."""


class BatchInterrupted(RuntimeError):
    """The batch was interrupted by ``query.stop()`` (not a failure)."""


def _interruption(error: Py4JJavaError) -> str | None:
    """The interruption exception's class name if ``error`` is one, else None."""
    head = str(error)[:1_000]
    return next((name for name in INTERRUPTIONS if f": {name}" in head), None)


def _delete(spark: SparkSession, path: str) -> None:
    """Remove ``path`` through Hadoop's FileSystem (works for any scheme the session can write)."""
    hadoop_path = _hadoop_path(spark, path)
    _file_system(spark, hadoop_path).delete(hadoop_path, True)


def _hadoop_path(spark: SparkSession, path: str):
    return spark._jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[attr-defined]


def _file_system(spark: SparkSession, hadoop_path):
    return hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
