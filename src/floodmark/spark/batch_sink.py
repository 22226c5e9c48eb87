"""The ``foreachBatch`` function: route tagged rows to their outputs, report the batch to the controller.

Panes, late records and dead letters go to the :class:`~floodmark.spark.sinks.Outputs` the query was
started with (files by default: exactly-once per batch id; see :mod:`floodmark.spark.sinks` for each
sink's guarantee). STATS and GAUGE rows go to the driver's controller.

A batch costs one Spark job in the common case: the pane write runs the whole
micro-batch (combiner, shuffle, stateful processor) and an observation
(``DataFrame.observe``) brings the small STATS and GAUGE rows to the driver in
the same job. Late records and dead letters, rare, are written from the cached
batch only when the gauges count some. A pane sink that is a user function runs
after a no-op write that computes the batch (the function may run no Spark action).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from floodmark.driver.controller import BatchReport, ControlledBatches
from floodmark.spark import batch_entry, pane_blocks
from floodmark.spark import plan as p
from floodmark.spark.sinks import DEAD_LETTER, LATE, PANES, OutputBatch, Outputs

OUTPUT_KINDS = {p.PANE: PANES, p.LATE: LATE, p.BAD: DEAD_LETTER}
"""Row kind (``fm_kind``) -> output."""


class BatchSink:
    """The function given to ``foreachBatch``.

    :arg panes_in_blocks: the batch's PANE rows carry many panes each (:mod:`floodmark.spark.pane_blocks`,
        a single-stage query); otherwise one pane per row (a pipeline's stage output).
    """

    def __init__(
        self, plan: p.RuntimePlan, outputs: Outputs, controller: ControlledBatches, panes_in_blocks: bool = True
    ) -> None:
        self.plan = plan
        self.panes_in_blocks = panes_in_blocks
        self.outputs = outputs
        self.controller = controller
        self.listeners: list[Callable[[BatchReport], None]] = []
        self.doing = "computing the batch"
        """What the batch was doing, for the error message if it fails."""

    def columns(self, kind: str, column: Callable[[str], str] = p.sql_name) -> list[Column]:
        """``kind``'s output columns, each computed from ``column(name)`` (SQL): the batch's own column by
        default. Parsed from SQL text: one py4j call per column (see :class:`OutputProjection`)."""
        if kind == p.PANE:
            names = self.plan.pane_columns()
        elif kind == p.LATE:
            names = self.plan.record_columns()
        else:
            names = [*self.plan.key_columns, "event_time", "reason", "record"]
        columns = [f"{column(name)} AS {p.sql_name(name)}" for name in names]
        if "window_start" in names:
            columns += [
                f"timestamp_millis({column('window_start')}) AS window_start_time",
                f"timestamp_millis({column('window_end')}) AS window_end_time",
            ]
        return [F.expr(c) for c in columns]

    @cached_property
    def _projections(self) -> dict[str, OutputProjection]:
        projections = {}
        for kind in OUTPUT_KINDS:
            is_kind = f"fm_kind = '{kind}'"
            if kind == p.PANE and self.panes_in_blocks:
                unpacking = pane_blocks.Unpacking(self.plan, only=is_kind)
                projections[kind] = OutputProjection(None, (unpacking.indexing, self.columns(kind, unpacking.element)))
            else:
                projections[kind] = OutputProjection(F.expr(is_kind), (self.columns(kind),))
        return projections

    small_row_columns: tuple[str, ...] = ("fm_kind", *(f.name for f in p.STATS_META))
    """The columns of the STATS and GAUGE rows the driver reads (a pipeline's sink adds the stage)."""

    @cached_property
    def _small_rows(self) -> Column:
        """The STATS and GAUGE rows, collected by the batch's observation."""
        fields = ", ".join(self.small_row_columns)
        return F.expr(
            f"collect_list(CASE WHEN fm_kind IN ('{p.STATS}', '{p.GAUGE}') THEN struct({fields}) END) AS small"
        )

    def _run_observed(self, frame: DataFrame, write: Callable[[DataFrame], None] | None) -> list[dict]:
        """Run the batch once, collecting its STATS and GAUGE rows on the way: ``write(observed)`` when it
        computes the whole batch (a sink that ``runs_the_batch``), else a no-op write."""
        observation = Observation()  # a fresh, uniquely named observation per batch
        observed = frame.observe(observation, self._small_rows)
        if write is None:
            observed.write.format("noop").mode("overwrite").save()
        else:
            write(observed)
        return [row.asDict() for row in observation.get["small"]]

    def _batch(self, row_kind: str, frame: DataFrame, batch_id: int) -> OutputBatch:
        """The rows of ``row_kind`` in ``frame``, in their output columns."""
        rows = self._projections[row_kind](frame)
        values = tuple(self.plan.result_names) if row_kind == p.PANE else ()
        return OutputBatch(OUTPUT_KINDS[row_kind], rows, batch_id, tuple(self.plan.key_columns), values)

    def first_dead_letter(self, frame: DataFrame, batch_id: int) -> str | None:
        """The reason of one of the batch's dead letters: a Spark job on the cached batch, so asked for only
        when a warning needs it (:func:`~floodmark.driver.controller.dead_letter_warning`)."""
        row = self._batch(p.BAD, frame, batch_id).rows.select("reason").first()
        return None if row is None else row["reason"]

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        self.doing = "computing the batch"
        try:
            self._write(frame, batch_id)
        except Py4JJavaError as error:
            interruption = _interruption(error)
            if interruption is None:
                raise BatchFailed(
                    f"floodmark batch {batch_id} failed while {self.doing}: {_root_cause(error)}. The batch was "
                    "not committed: once the cause is fixed, start the query again from its checkpoint; it "
                    "resumes with this batch and replaces what this attempt wrote."
                ) from error
            # query.stop() interrupted this batch. Spark recognises that by matching the Python error's text
            # with a regex whose recursion overflows the stack on a long text (the whole Java stack trace):
            # the stream thread would die with StackOverflowError. A short text in the expected form lets Spark
            # see a clean stop; the batch is not committed either way and runs again after a restart.
            raise BatchInterrupted(
                f"py4j.protocol.Py4JJavaError: An error occurred while calling the floodmark sink.\n: {interruption}"
            ) from None

    def _write(self, frame: DataFrame, batch_id: int) -> None:
        # Before any job of the batch: its entry, with the processing time Spark planned it at.
        batch_entry.publish(frame.sparkSession.sparkContext, self.controller.begin_batch(batch_id))
        frame = frame.persist()
        try:
            pane_sink = self.outputs.panes
            if pane_sink.runs_the_batch:
                self.doing = f"computing the batch and writing its panes to {pane_sink!r}"
                small = self._run_observed(frame, lambda rows: pane_sink.write(self._batch(p.PANE, rows, batch_id)))
            else:
                small = self._run_observed(frame, None)
            gauges = [r for r in small if r["fm_kind"] == p.GAUGE]
            # Each bucket reports what it emitted, so no extra Spark job is needed to count.
            counts = {
                row_kind: sum(int(g[column] or 0) for g in gauges)
                for row_kind, column in ((p.PANE, "fm_pane_count"), (p.LATE, "fm_late_count"), (p.BAD, "fm_bad_count"))
            }
            if not counts[p.PANE] and pane_sink.runs_the_batch:
                pane_sink.discard_empty(frame.sparkSession, PANES, batch_id)
            elif counts[p.PANE] and not pane_sink.runs_the_batch:
                self.doing = f"writing its panes to {pane_sink!r}"
                pane_sink.write(self._batch(p.PANE, frame, batch_id))
            for row_kind in (p.LATE, p.BAD):
                if counts[row_kind]:
                    sink = self.outputs.sink(OUTPUT_KINDS[row_kind])
                    self.doing = f"writing its {OUTPUT_KINDS[row_kind]} records to {sink!r}"
                    sink.write(self._batch(row_kind, frame, batch_id))
            stats = [r for r in small if r["fm_kind"] == p.STATS]
            report = self.controller.on_batch(
                batch_id, stats, gauges, counts, first_dead_letter=lambda: self.first_dead_letter(frame, batch_id)
            )
        finally:
            frame.unpersist()
        self._publish_and_notify(frame, report)

    def _publish_and_notify(self, frame: DataFrame, report: BatchReport) -> None:
        # Last: every job of this batch has been submitted with entry N; the next batch's carry entry N+1.
        batch_entry.publish(frame.sparkSession.sparkContext, self.controller.next_entry)
        for listener in self.listeners:
            listener(report)


@dataclass(frozen=True)
class OutputProjection:
    """How a batch's rows of one kind become that kind's output rows: Column expressions built once per query.

    Why once, and from SQL text: each PySpark Column operation costs several py4j round trips (the call, a
    lookup of Spark's ``functions``, the call site set and cleared for error messages). Built with Column
    operations for every batch, a sink's ~150 expressions took ~1,000 round trips, 0.1-0.3 s of every
    micro-batch's driver time on a busy machine; parsed from SQL, a column is one call. Column expressions are
    unresolved and immutable, so one set serves every batch (each batch's plan resolves them anew). Each
    ``filter`` or ``select`` on the batch analyses its whole plan again, hence as few as possible.
    """

    condition: Column | None
    """The rows of this kind (None: ``selects`` leave the others out themselves)."""
    selects: tuple[list[Column], ...]

    def __call__(self, frame: DataFrame) -> DataFrame:
        rows = frame if self.condition is None else frame.filter(self.condition)
        for columns in self.selects:
            rows = rows.select(*columns)
        return rows


INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""What Spark's StreamExecution takes as a stop's interruption of a Python foreachBatch (SPARK-39218)."""


class BatchInterrupted(RuntimeError):
    """The batch was interrupted by ``query.stop()`` (not a failure)."""


class BatchFailed(RuntimeError):
    """A batch failed (a sink that cannot be written, a failed task): what it was doing and the root cause."""


def _root_cause(error: Py4JJavaError) -> str:
    """The innermost Java exception of ``error`` in one line (e.g. ``java.io.IOException: Mkdirs failed ...``)."""
    try:
        cause = error.java_exception
        while cause.getCause() is not None and cause.getCause() != cause:
            cause = cause.getCause()
        lines = str(cause.toString()).strip().splitlines()
    except Exception:  # the gateway may be going away: the error's own text still names the exception
        lines = [line.removeprefix(": ") for line in str(error).splitlines() if line.startswith(": ")]
        lines = lines or str(error).strip().splitlines()
    return lines[0] if lines else "unknown error"


def _interruption(error: Py4JJavaError) -> str | None:
    """The interruption exception's class name if ``error`` is one, else None."""
    head = str(error)[:1_000]
    return next((name for name in INTERRUPTIONS if f": {name}" in head), None)
