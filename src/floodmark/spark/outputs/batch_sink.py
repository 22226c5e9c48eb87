"""The ``foreachBatch`` function: route each stage's rows to its outputs, report the batch to the controller.

Each stage's panes, late records and dead letters go to the :class:`~floodmark.spark.outputs.sinks.Outputs` it was
started with (files by default: exactly-once per batch id; see :mod:`floodmark.spark.outputs.sinks` for each
sink's guarantee). STATS and GAUGE rows go to the driver's :class:`~floodmark.driver.controller.Controller`.

A batch costs one Spark job in the common case: the first stage's pane write (files, a table, at-least-once
Kafka: a sink that ``runs_the_batch``) runs the whole micro-batch (combiner, shuffle, stateful operators) and an
observation (``DataFrame.observe``) brings the small STATS and GAUGE rows to the driver in the same job. Other
outputs (late records and dead letters, rare; other stages' panes) are written from the cached batch only when
the gauges count some. A pane sink that is a user function (which may run no Spark action) or exactly-once
Kafka (written through the driver) runs after a no-op write that computes the batch.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, TimestampType

from floodmark.driver.controller import Controller
from floodmark.driver.reports import BatchReport
from floodmark.protocol import output, wire
from floodmark.protocol.columns import names
from floodmark.spark import batch_entry
from floodmark.spark import plan as p
from floodmark.spark.outputs.sinks import DEAD_LETTER, LATE, PANES, OutputBatch, Outputs
from floodmark.spark.outputs.unpack import OutputReader

OUTPUT_KINDS = {wire.PANE: PANES, wire.LATE: LATE, wire.BAD: DEAD_LETTER}
"""Row kind (``fm_kind``) -> output."""


class StageRoute:
    """Where one stage's rows of a batch go: each kind's rows unpacked from the stage's OUTPUT blocks in its
    output's columns (:class:`~floodmark.spark.outputs.unpack.OutputReader`, one DataFrame operation per output) and
    written to its sink (:class:`~floodmark.spark.outputs.sinks.Outputs`).

    :arg jvm_unpack: unpack with floodmark's JVM generator (:func:`~floodmark.spark.outputs.unpack.use_jvm_unpack` said
        so), else in Python. :arg time_zone: the session's time zone.
    """

    def __init__(self, stage: p.StageSemantics, outputs: Outputs, jvm_unpack: bool, time_zone: str = "UTC") -> None:
        self.stage = stage
        self.outputs = outputs
        self.readers = {
            kind: OutputReader(stage.name, kind, self.schema(kind), jvm_unpack, time_zone) for kind in OUTPUT_KINDS
        }

    def schema(self, kind: str) -> StructType:
        """``kind``'s output columns: the emitted columns it shows, then the window bounds as timestamps."""
        if kind == wire.PANE:
            selected = self.stage.pane_columns()
        elif kind == wire.LATE:
            selected = self.stage.record_columns()
        else:
            selected = self.stage.dead_letter_columns()
        emitted = self.stage.emitted_schema()
        fields = [emitted[name] for name in selected]
        if output.WINDOW_START in selected:
            fields += [
                StructField(output.WINDOW_START_TIME, TimestampType()),
                StructField(output.WINDOW_END_TIME, TimestampType()),
            ]
        return StructType(fields)

    def batch(self, kind: str, frame: DataFrame, batch_id: int, query_id: str = "") -> OutputBatch:
        """The rows of ``kind`` of this stage in the batch ``frame`` (carrier rows), in their output columns;
        ``query_id``: Spark's id of the query."""
        values = tuple(self.stage.result_names) if kind == wire.PANE else ()
        rows = self.readers[kind].rows(frame)
        key_columns = tuple(self.stage.key_columns)
        return OutputBatch(OUTPUT_KINDS[kind], rows, batch_id, key_columns, values, self.stage.name, query_id)

    def first_dead_letter(self, frame: DataFrame, batch_id: int) -> str | None:
        """The reason of one of the batch's dead letters: a Spark job on the cached batch, so asked for only
        when a warning needs it (:func:`~floodmark.driver.reports.dead_letter_warning`)."""
        row = self.batch(wire.BAD, frame, batch_id).rows.select(output.REASON).first()
        return None if row is None else row[output.REASON]


class BatchSink:
    """The function given to ``foreachBatch``: each stage's rows to its outputs, the batch to the controller.

    One Spark job computes the batch and collects its small STATS and GAUGE rows (an observation) into the
    cache; when a stage's pane sink can run the whole batch (files, tables, at-least-once Kafka), that job writes
    that stage's panes on the way (what an empty write leaves is discarded). Every other output is then written
    from the cache, only when the gauges count some rows for it.

    :arg stages: ``{stage: what it emits}``, upstream first. :arg outputs: ``{stage: Outputs}``.
    :arg jvm_unpack, time_zone: see :class:`StageRoute`. :arg query_id: Spark's id of the query, asked for as
        batches are written (:meth:`~floodmark.spark.driver.spark_checkpoint.SparkCheckpoint.query_id`).
    :arg session_settings: SQL settings for the query's own session (the copy of the session Spark takes as the
        query starts, which runs its batches), set before the first batch's jobs
        (:func:`~floodmark.spark.driver.arrow_batches.query_settings`).
    """

    def __init__(
        self,
        stages: dict[str, p.StageSemantics],
        outputs: dict[str, Outputs],
        controller: Controller,
        jvm_unpack: bool,
        time_zone: str = "UTC",
        query_id: Callable[[], str] = str,
        session_settings: Mapping[str, str] | None = None,
    ) -> None:
        self.session_settings = dict(session_settings or {})
        self.routes = {name: StageRoute(stage, outputs[name], jvm_unpack, time_zone) for name, stage in stages.items()}
        self.controller = controller
        self.query_id = query_id
        self.listeners: list[Callable[[BatchReport], None]] = []
        self.doing = "computing the batch"
        """What the batch was doing, for the error message if it fails."""
        # The stage whose pane write runs the whole batch (the first whose pane sink can), if any.
        self.leader = next((name for name, route in self.routes.items() if route.outputs.panes.runs_the_batch), None)
        logging.getLogger("py4j.clientserver").addFilter(QUIET_FAILURES)  # once: the same filter is not added twice

    def _owner(self, stage: str) -> str:
        """Whose output a message is about: ``its`` in a query of one stage, else the stage by name."""
        return f"stage {stage!r}'s" if len(self.routes) > 1 else "its"

    small_row_columns: tuple[str, ...] = (wire.STAGE, wire.KIND, *names(wire.REPORT_COLUMNS))
    """The columns of the STATS and GAUGE rows the driver reads."""

    @cached_property
    def _small_rows(self) -> Column:
        """The STATS and GAUGE rows, collected by the batch's observation."""
        fields = ", ".join(self.small_row_columns)
        kinds = ", ".join(f"'{kind}'" for kind in wire.REPORT_KINDS)
        return F.expr(f"collect_list(CASE WHEN {wire.KIND} IN ({kinds}) THEN struct({fields}) END) AS small")

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

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        self.doing = "computing the batch"
        try:
            self._write(frame, batch_id)
        except Exception as error:  # a Spark job's, or Python's own (a FunctionSink's function that raised)
            interruption = _interruption(error)
            if interruption is None:
                raise self._failed(batch_id, root_cause(error)) from error
            # query.stop() interrupted this batch. Spark recognises that by matching the Python error's text
            # with a regex whose recursion overflows the stack on a long text (the whole Java stack trace):
            # the stream thread would die with StackOverflowError. A short text in the expected form lets Spark
            # see a clean stop; the batch is not committed either way and runs again after a restart.
            raise BatchInterrupted(
                f"py4j.protocol.Py4JJavaError: An error occurred while calling the floodmark sink.\n: {interruption}"
            ) from None

    def _failed(self, batch_id: int, cause: str) -> BatchFailed:
        """The batch's one line: which batch, doing what, why (:data:`NOT_COMMITTED` after it)."""
        return BatchFailed(f"floodmark batch {batch_id} failed while {self.doing}: {cause}.{NOT_COMMITTED}")

    def _write(self, frame: DataFrame, batch_id: int) -> None:
        # Before any job of the batch: its entry, with the processing time Spark planned it at.
        batch_entry.publish(frame.sparkSession, self.controller.begin_batch(batch_id))
        if self.session_settings:  # once: the query's session lasts as long as the query
            for key, value in self.session_settings.items():
                frame.sparkSession.conf.set(key, value)
            self.session_settings = {}
        query_id = self.query_id()
        frame = frame.persist()
        try:
            leader = self.leader
            if leader is None:
                self.doing = "computing the batch"
                small = self._run_observed(frame, None)
            else:
                route = self.routes[leader]
                # The job computes every stage: a failure in it is not the leader's more than another stage's.
                self.doing = (
                    f"computing the batch (the job that writes {self._owner(leader)} panes to {route.outputs.panes!r})"
                )
                small = self._run_observed(
                    frame, lambda rows: route.outputs.panes.write(route.batch(wire.PANE, rows, batch_id, query_id))
                )
            stats = [r for r in small if r[wire.KIND] == wire.STATS]
            gauges: dict[str, list[dict[str, Any]]] = {name: [] for name in self.routes}
            for row in small:
                if row[wire.KIND] == wire.GAUGE:
                    gauges[row[wire.STAGE]].append(row)
            # Each bucket reports what it emitted, so no extra Spark job is needed to count.
            counts = {
                name: {kind: sum(int(g[column] or 0) for g in rows) for kind, column in wire.COUNTS.items()}
                for name, rows in gauges.items()
            }
            for name, route in self.routes.items():
                if name == leader and not counts[name][wire.PANE]:
                    route.outputs.panes.discard_empty(frame.sparkSession, PANES, batch_id)
                # The leader's panes went out with the job that ran the batch.
                kinds = [
                    kind
                    for kind in OUTPUT_KINDS
                    if counts[name][kind]
                    and (name, kind) != (leader, wire.PANE)
                    and not route.outputs.sink(OUTPUT_KINDS[kind]).discards
                ]
                if not kinds:
                    continue
                for kind in kinds:
                    sink = route.outputs.sink(OUTPUT_KINDS[kind])
                    self.doing = f"writing {self._owner(name)} {OUTPUT_KINDS[kind]} output to {sink!r}"
                    sink.write(route.batch(kind, frame, batch_id, query_id))

            def first_dead_letter() -> str | None:
                stage = next((name for name in self.routes if counts[name][wire.BAD]), None)
                return None if stage is None else self.routes[stage].first_dead_letter(frame, batch_id)

            report = self.controller.on_batch(batch_id, stats, gauges, counts, first_dead_letter)
        finally:
            frame.unpersist()
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


NOT_COMMITTED = (
    " The batch was not committed: once the cause is fixed, start the query again from its checkpoint; it resumes "
    "with this batch and replaces what this attempt wrote."
)
"""What ends a failed batch's line: what to do about it (not said when the query handle starts it again itself)."""


class BatchFailed(RuntimeError):
    """A batch failed (a sink that cannot be written, a failed task): what it was doing and the root cause."""


class QuietBatchFailures(logging.Filter):
    """Drops py4j's log record of a ``foreachBatch`` call that raised :class:`BatchFailed` or
    :class:`BatchInterrupted`: the record is the Python traceback (dozens of lines); floodmark says the same in one
    line when the handle raises, and Spark keeps the whole error (``query.exception()``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        while error is not None:
            if isinstance(error, BatchFailed | BatchInterrupted):
                return False
            error = error.__context__
        return True


QUIET_FAILURES = QuietBatchFailures()


KAFKA_ERRORS = "org.apache.kafka.common.errors."
"""The package of Kafka's client errors: a wrapper worth naming beside its cause (an SSL handshake that failed)."""


def root_cause(error: Exception) -> str:
    """The innermost Java exception of ``error`` in one line (e.g. ``java.io.IOException: Mkdirs failed ...``),
    after the Kafka client's error that wraps it, if one does (``...SslAuthenticationException: SSL handshake
    failed; caused by ...: unable to find valid certification path ...``); for a Python exception, its type and
    the first line of its text (``ValueError: the sink is down``)."""
    python = python_worker_cause(str(error))
    if python is not None:
        return python
    if not isinstance(error, Py4JJavaError):
        first_line = (str(error).strip().splitlines() or [""])[0]
        return f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__
    try:
        chain = [error.java_exception]
        while chain[-1].getCause() is not None and chain[-1].getCause() != chain[-1] and len(chain) < 50:
            chain.append(chain[-1].getCause())
        texts = [str(cause.toString()) for cause in chain]
        lines = [(text.strip().splitlines() or [""])[0] for text in texts]
    except Exception:  # the gateway may be going away: the error's own text still names the exception
        texts = []
        lines = [line.removeprefix(": ") for line in str(error).splitlines() if line.startswith(": ")]
        lines = (lines or str(error).strip().splitlines())[:1]
    python = next((cause for text in reversed(texts) if (cause := python_worker_cause(text)) is not None), None)
    if python is not None:
        return python
    if not lines:
        return "unknown error"
    kafka = next((line for line in lines[:-1] if line.startswith(KAFKA_ERRORS)), None)
    return lines[-1] if kafka is None else f"{kafka}; caused by {lines[-1]}"


PYTHON_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b(: .*)?$")


def python_worker_cause(text: str) -> str | None:
    """The exception a Python worker raised (``ModuleNotFoundError: No module named 'jobs'``, the last line of the
    last traceback in ``text``, a Spark ``PythonException``'s message) and where; None when ``text`` holds no
    traceback. Spark's own first line of such an error says only that a Python worker raised."""
    if PYTHON_TRACEBACK not in text:
        return None
    tail = text.rsplit(PYTHON_TRACEBACK, 1)[1]
    line = next((line.strip() for line in reversed(tail.splitlines()) if _EXCEPTION_LINE.match(line.strip())), None)
    return None if line is None else f"{line} (raised in a Python worker)"


def _interruption(error: Exception) -> str | None:
    """The interruption exception's class name if ``error`` is one, else None."""
    head = str(error)[:1_000]
    return next((name for name in INTERRUPTIONS if f": {name}" in head), None)
