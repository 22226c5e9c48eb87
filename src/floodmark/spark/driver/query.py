"""A running floodmark query: the handle of the Spark query with its controller and each stage's outputs, and its
watcher, which starts a failed query again when :mod:`floodmark.spark.driver.restarts` says so."""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import signal
import threading
import time
import types
from collections.abc import Callable
from typing import Any, overload

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from floodmark.core.pipeline import WindowedStage, stage_named
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.windows import Window
from floodmark.driver.controller import Controller
from floodmark.driver.prometheus import PrometheusMetrics
from floodmark.driver.reconciliation import Reconciliation, StageReconciliation
from floodmark.driver.reports import BatchReport
from floodmark.explain.rows import TimeExplanation, explain_time
from floodmark.explain.stage import explain_stage
from floodmark.explain.window import Explanation
from floodmark.spark.driver.launch import EndOfInputRequest, Launched
from floodmark.spark.driver.report_follower import ReportFollower
from floodmark.spark.driver.restarts import Restart, Restarts, RestartUnderWay
from floodmark.spark.driver.spark_checkpoint import SparkCheckpoint
from floodmark.spark.outputs.batch_sink import NOT_COMMITTED
from floodmark.spark.outputs.sinks import Outputs

FAILED_BATCH = re.compile(r"BatchFailed: (floodmark batch \d+ failed while .*)")
"""The line of a failed query's error that says which batch failed, while doing what, and why."""


_LOG = logging.getLogger("floodmark")


def first_line(error: object) -> str:
    """The first line of ``error``'s text (Spark's errors go on with the query's plan)."""
    return (str(error).strip().splitlines() or [""])[0]


def cause_line(error: object) -> str:
    """What stopped a query, in one line: floodmark's line when a batch failed (BatchFailed), else the first line of
    Spark's error. Spark's text around floodmark's line is the Python traceback and the query's plan."""
    failed = FAILED_BATCH.search(str(error))
    return failed.group(1) if failed else first_line(error)


def restart_cause(error: object) -> str:
    """:func:`cause_line` as a restart's log line and status say it (without "not committed" and the stop)."""
    return cause_line(error).removesuffix(NOT_COMMITTED).rstrip(".")


def failure_line(error: object) -> str:
    """:func:`cause_line`, saying where the whole error is when it is Spark's."""
    failed = FAILED_BATCH.search(str(error))
    return cause_line(error) if failed else f"{first_line(error)} (query.exception() has Spark's whole error)"


_STILL_RESTARTING = object()
"""What :meth:`FloodmarkQuery._settle_restart` returns when its deadline came while the watcher restarts."""

_ctrl_c = False
"""Ctrl-C came during one of the handle's waits in the main thread (set by :func:`_mark_ctrl_c`)."""


def _mark_ctrl_c(signum: int, frame: object) -> None:
    """SIGINT's handler during a handle's wait in the main thread: marks it, and the wait raises
    KeyboardInterrupt at its next look (:class:`_Wait`)."""
    global _ctrl_c
    _ctrl_c = True


def _marking_ctrl_c() -> bool:
    """This thread is the main one and Ctrl-C is marked, not raised (a handle's wait is under way)."""
    return threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is _mark_ctrl_c


def _check_ctrl_c() -> None:
    """Raise KeyboardInterrupt in the main thread when Ctrl-C came during the wait (:func:`_mark_ctrl_c`)."""
    if _ctrl_c and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt


def _pause(seconds: float) -> None:
    """Sleep in one of the handle's waits, then raise KeyboardInterrupt if Ctrl-C came meanwhile."""
    time.sleep(seconds)
    _check_ctrl_c()


def _interruptible(call: Callable[[], Any], default: Any = None) -> Any:
    """``call()`` (a wait in the JVM, through py4j), or ``default`` when it raises (its error is the query's
    ``exception()``). In the main thread during a handle's wait it runs on a thread of its own while this one
    looks for Ctrl-C every 0.1 s: a KeyboardInterrupt raised inside a py4j call makes py4j log page-long
    tracebacks about the connection it leaves behind."""
    if not _marking_ctrl_c():
        try:
            return call()
        except Exception:
            return default
    result = [default]
    done = threading.Event()

    def wait() -> None:
        try:
            result[0] = call()
        except Exception:
            pass
        finally:
            done.set()

    threading.Thread(target=wait, name="floodmark-query-wait", daemon=True).start()
    while not done.wait(0.1):
        _check_ctrl_c()
    return result[0]


def _replaceable(handler: object) -> bool:
    """``handler`` is SIGINT's as Python or PySpark set it (raise KeyboardInterrupt; PySpark's first cancels every
    job, through py4j), not one of the program's own."""
    return handler is signal.default_int_handler or getattr(handler, "__module__", "").startswith("pyspark.")


class _Wait:
    """One of the handle's waits (:meth:`FloodmarkQuery.awaitTermination`, ``processAllAvailable``, the
    waits of ``await_batches``, ``await_settled`` and ``run_to_completion``), which Ctrl-C ends by stopping the
    query.

    In the main thread, while SIGINT's handler is Python's or PySpark's, Ctrl-C only marks the wait
    (:func:`_mark_ctrl_c`): PySpark's handler cancels every job and raises KeyboardInterrupt in the middle of
    the py4j call that waits, and py4j then logs some 90 lines of tracebacks. The wait looks for the mark
    outside py4j (:func:`_pause`, :func:`_interruptible`) and raises KeyboardInterrupt; a wait left with
    KeyboardInterrupt (from whichever handler) stops the query (:meth:`FloodmarkQuery._stop_interrupted`) and
    the KeyboardInterrupt goes on. Nested waits share the outermost one's handler."""

    def __init__(self, handle: FloodmarkQuery) -> None:
        self.handle = handle
        self.previous: Any = None

    def __enter__(self) -> None:
        global _ctrl_c
        if threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGINT)
            if _replaceable(handler):
                self.previous = handler
                _ctrl_c = False
                signal.signal(signal.SIGINT, _mark_ctrl_c)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        global _ctrl_c
        if self.previous is None:  # not the outermost wait, or not in the main thread
            if kind is not None and issubclass(kind, KeyboardInterrupt) and not _marking_ctrl_c():
                self.handle._stop_interrupted()
            return
        pressed, _ctrl_c = _ctrl_c, False
        try:
            interrupted = kind is not None and issubclass(kind, KeyboardInterrupt)
            if interrupted or (kind is None and pressed):  # Ctrl-C just as the wait ended: the same
                self.handle._stop_interrupted()
        finally:
            signal.signal(signal.SIGINT, self.previous)
        if interrupted and isinstance(trace, types.TracebackType):
            trace.tb_next = None  # its traceback ends in the wait that was interrupted, not in how it looked
        if kind is None and pressed:
            raise KeyboardInterrupt


class FloodmarkQuery:
    """A running floodmark query: PySpark's ``StreamingQuery`` (the same names, delegated to :attr:`query`), plus
    floodmark's own: :attr:`reports`, :attr:`reconciliation`, :meth:`explain` of a window, :meth:`await_batches`.

    A failed query raises floodmark's one line (``RuntimeError: the floodmark query failed: floodmark batch N
    failed while ...``) from :meth:`awaitTermination`, :meth:`processAllAvailable` and the waits; Spark's whole
    error is :meth:`exception`.

    A busy machine or a Kafka broker out of reach delays a query, it does not stop it: the handle starts the
    query again from its checkpoint (exactly-once: the batch that failed runs again), at once after a Python
    worker that did not start in time, after a growing delay while Kafka does not answer, as its
    :class:`~floodmark.spark.driver.restarts.Restarts` says, and logs one line each time (:attr:`restarts` counts
    them). :attr:`query` is then the new Spark query. Meanwhile the floodmark query is running, recovering:
    :attr:`isActive` is True, :meth:`exception` None and :attr:`status` says ``restarting after ...``; once the
    handle gives up (its restarts in a row spent, a failure it does not restart after), they say why it stopped.

    Ctrl-C in the main thread while it waits in one of the handle's waits stops the query, says so in one line and
    raises KeyboardInterrupt, without py4j's tracebacks (:class:`_Wait`); a start from the checkpoint resumes it.

    :ivar stage_outputs: ``{stage: Outputs}``, upstream first. :ivar stages: ``{stage: its definition}``.
    """

    def __init__(
        self,
        launched: Launched,
        stage_outputs: dict[str, Outputs],
        stages: dict[str, WindowedStage],
        spark: SparkSession,
        metrics: PrometheusMetrics | None = None,
        relaunch: Callable[[Controller], Launched] | None = None,
        restart_policy: Restarts | None = None,
        follower: ReportFollower | None = None,
        bounded: bool = False,
        end_request: EndOfInputRequest | None = None,
    ) -> None:
        self._launched = launched
        self._follower = follower
        """Over Spark Connect: brings :attr:`controller` (this process's copy) up to date with the server's."""
        self._bounded = bounded
        self._end_request = end_request
        self.stage_outputs = stage_outputs
        self.stages = stages
        self.spark = spark
        self.metrics = metrics
        """The query's Prometheus endpoint (``start(metrics_port=...)``), closed when the query stops."""
        self.restarts = 0
        """How many times the handle started the query again (see the class docstring)."""
        self.restart_policy = restart_policy or Restarts()
        self._relaunch = relaunch
        self._stopping = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        """Guards the watcher's decision (:attr:`_restarting`, :attr:`_watching`, the counts in a row) against
        the readers of the handle's state (:meth:`_restart_under_way`)."""
        self._restarting: RestartUnderWay | None = None
        """The restart the watcher is making (waiting its delay or starting the query), or None."""
        self._watching = relaunch is not None
        """The watcher still decides about the query's end: False once it has given up or the query ended."""
        self._in_a_row = 0
        self._reports_at_restart = 0
        self._watcher: threading.Thread | None = None
        if relaunch is not None:
            self._watcher = threading.Thread(target=self._watch, name="floodmark-query-watcher", daemon=True)
            self._watcher.start()
        if follower is not None:
            follower.start()

    def _follow(self) -> None:
        """Over Spark Connect: record the reports the server's controller wrote since the last call."""
        if self._follower is not None:
            self._follower.poll()

    @property
    def query(self) -> StreamingQuery:
        """The Spark query (a new one after a restart)."""
        return self._launched.query

    @property
    def controller(self) -> Controller:
        return self._launched.controller

    @property
    def hosts(self) -> dict[str, str]:
        """Where each stage's stateful step runs, ``{stage: "jvm" | "python"}`` (an ``EventTimeAggregation``'s one
        stage is ``"aggregation"``): as the checkpoint recorded it when it was created, whatever ``host`` a later
        start names. Every stage is ``"python"`` in a checkpoint created before hosts were recorded."""
        return {name: self._launched.hosts.get(name, "python") for name in self.stages}

    @property
    def spark_checkpoint(self) -> SparkCheckpoint:
        """Spark's checkpoint of the query (its offset log says what each batch planned)."""
        return self._launched.spark_checkpoint

    def _restarts_in_a_row(self) -> int:
        """Restarts since the last batch that completed."""
        return self._in_a_row if self.controller.batches_reported <= self._reports_at_restart else 0

    def _restart(self, error: object) -> Restart | None:
        """When the watcher starts the query again after ``error``; None: it does not."""
        if self._relaunch is None or self._stopping:
            return None
        return self.restart_policy.decide(error, self._restarts_in_a_row())

    def _watch(self) -> None:
        """Wait for the query to end; start it again when :attr:`restart_policy` says so (see the class)."""
        try:
            while self._watch_one():
                pass
        finally:
            with self._lock:
                self._watching = False

    def _watch_one(self) -> bool:
        """Wait for the current query to end and start it again if it failed with an error to restart after:
        whether the watcher goes on (False: the query stopped, ended or failed for good)."""
        launched = self._launched
        with contextlib.suppress(Exception):
            launched.query.awaitTermination()
        if not self._stopping and launched.query.isActive:
            # The wait broke off (a py4j call that failed) while the query runs on: had the watcher ended
            # here, the query's next failure would stop the handle with no restart.
            _LOG.debug("floodmark: the wait for the query ended while it runs; waiting again")
            time.sleep(0.5)
            return True
        error = None if self._stopping else launched.query.exception()
        with self._lock:  # decided and made known at once: the readers see a restart or none, never half of one
            restart = None if error is None else self._restart(error)
            if restart is None:
                self._watching = False
                return False
            in_a_row = self._restarts_in_a_row() + 1
            self._restarting = RestartUnderWay(
                restart_cause(error), restart.why, in_a_row, restart.limit, time.monotonic() + restart.delay_s
            )
            self._in_a_row = in_a_row
            self._reports_at_restart = launched.controller.batches_reported
            self.restarts += 1
        try:
            if self.metrics is not None:
                self.metrics.restarted()
            _LOG.warning(
                "floodmark: %s (%s): starting the query again from its checkpoint%s (%d of %d)",
                restart_cause(error),
                restart.why,
                f" in {restart.delay_s:.1f} s" if restart.delay_s else "",
                in_a_row,
                restart.limit,
            )
            if self._stopped.wait(restart.delay_s):
                return False
            try:
                again = self._relaunch(launched.controller)  # type: ignore[misc]  # reports, end condition carry over
            except Exception as failure:  # the handle's waits raise the first error; say why this one came
                _LOG.warning("floodmark: the query could not start again: %s", first_line(failure))
                with self._lock:
                    self._watching = False
                return False
            self._launched = again
            if self._stopping:  # stop() came while the query started again: it stops this one too
                with contextlib.suppress(Exception):
                    again.query.stop()
                return False
            return True
        finally:
            with self._lock:
                self._restarting = None

    def _restart_under_way(self, error: object) -> RestartUnderWay | None:
        """The restart the watcher makes (or is about to make: it has not yet seen the failure) after ``error``,
        the current query's; None when it makes none (no error, stopped, given up, a failure it does not
        restart)."""
        if error is None or self._stopping:
            return None
        with self._lock:
            if not self._watching:
                return None
            if self._restarting is not None:
                return self._restarting
            restart = self._restart(error)
            if restart is None:
                return None
            return RestartUnderWay(
                restart_cause(error),
                restart.why,
                self._restarts_in_a_row() + 1,
                restart.limit,
                time.monotonic() + restart.delay_s,
            )

    def _settle_restart(self, deadline: float | None = None) -> Any:
        """While a failed query is being started again by the watcher, wait until it has been (or has not); a
        started query that fails in turn (a broker still down) is waited for the same way.

        :returns: the error that stopped the current query for good, or None (it runs, or it ended without
            one); :data:`_STILL_RESTARTING` when ``deadline`` (``time.monotonic()``) came first. The error is
            read once and decided on: a second read could see a failure the first did not and raise it while
            the watcher is about to start the query again."""
        while True:
            launched = self._launched
            error = launched.query.exception()
            while self._launched is launched and self._restart_under_way(error) is not None:
                if deadline is not None and time.monotonic() >= deadline:
                    return _STILL_RESTARTING
                _pause(0.05)
            if self._launched is launched:
                return error

    # ------------------------------------------------------------ PySpark's StreamingQuery
    @property
    def id(self) -> str:
        """The query's id, kept across restarts from its checkpoint (``StreamingQuery.id``)."""
        return self.query.id

    @property
    def runId(self) -> str:  # PySpark's names, camel case
        """This run's id, new at every start (``StreamingQuery.runId``)."""
        return self.query.runId

    @property
    def name(self) -> str | None:
        """The ``query_name`` given to ``start()``, or None."""
        return self.query.name

    @property
    def isActive(self) -> bool:
        """Whether the query is running: also while the handle starts it again after a failure (it recovers);
        False once it has stopped, ended, or failed for good (:meth:`exception` then says why)."""
        while True:
            launched = self._launched
            active = launched.query.isActive or self._restart_under_way(launched.query.exception()) is not None
            if self._launched is launched:
                return active

    @property
    def status(self) -> dict[str, Any]:
        """Spark's status of the query: ``message``, ``isDataAvailable``, ``isTriggerActive``; while the handle
        starts the query again, its own: ``restarting after <why>: attempt 2 of 10 in 1.5 s``."""
        while True:
            launched = self._launched
            restarting = None if launched.query.isActive else self._restart_under_way(launched.query.exception())
            if self._launched is launched:
                break
        return launched.query.status if restarting is None else restarting.status(time.monotonic())

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        """Spark's progress report of the last batch, or None (floodmark's own: ``reports[-1]``)."""
        return self.query.lastProgress

    @property
    def recentProgress(self) -> list[dict[str, Any]]:
        """Spark's recent progress reports, oldest first."""
        return self.query.recentProgress

    def exception(self) -> Any:
        """The error that stopped the query (PySpark's ``StreamingQueryException``), or None: None too while the
        handle starts the query again after a failure (:attr:`status` says so), the error once it gives up."""
        while True:
            launched = self._launched
            error = launched.query.exception()
            restarting = self._restart_under_way(error) is not None
            if self._launched is launched:
                return None if restarting else error

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        """Wait until the query stops (or ``timeout`` seconds: then whether it has stopped), as PySpark's; a failed
        query raises floodmark's one line instead of Spark's pages. A query started again (see the class) is
        waited for in turn: it has not stopped. Ctrl-C stops the query and raises KeyboardInterrupt (see the
        class)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with _Wait(self):
            while True:
                launched = self._launched
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                # Its error is the query's exception(), raised below.
                wait = launched.query.awaitTermination
                ended = _interruptible(wait if left is None else functools.partial(wait, left), True)
                if left is not None and not ended:
                    return False
                if not self._check(deadline):  # raises a failure the watcher does not restart; waits while it
                    return False  # restarts one (until the deadline)
                if self._launched is launched:
                    return True if timeout is not None else None

    def processAllAvailable(self) -> None:
        """Block until the input available now has been processed (PySpark's; for tests)."""
        with _Wait(self):
            while True:
                launched = self._launched
                _interruptible(launched.query.processAllAvailable)  # its error is the query's exception()
                self._check()
                if self._launched is launched:
                    return

    # ------------------------------------------------------------ floodmark's own
    @overload
    def explain(self, key: Any, window: Window, stage: str | None = None, batch: int | None = None) -> Explanation: ...

    @overload
    def explain(self, key: bool = False, *, extended: bool = False) -> None: ...

    @property
    def metrics_url(self) -> str | None:
        """The address of the query's Prometheus endpoint (``start(metrics_port=...)``), or None."""
        return None if self.metrics is None else self.metrics.url

    def explain(
        self,
        key: Any = None,
        window: Window | None = None,
        stage: str | None = None,
        batch: int | None = None,
        extended: bool = False,
    ) -> Explanation | None:
        """Why ``key``'s ``window`` of ``stage`` (default: the only stage) has (not) fired, as of the end of
        ``batch`` (default: the latest finished): the status follows the watermark that batch ran with (the one
        its panes were fired with; MAX after the end of a bounded input). A stage reading one source is
        explained from its splits, any other from its upstreams (:mod:`floodmark.explain.stage`).

        The window operators' state lives in the executors, so the trigger's state is not included; the
        pane output says whether the window fired (``floodmark explain`` shows both).

        Without a window (``query.explain()``, ``query.explain(True)``) it prints Spark's plan of the query, as
        PySpark's ``StreamingQuery.explain(extended)`` does, and returns None.

        :raises ValueError: ``stage`` is not one of the query's. :raises LookupError: no batch has finished,
            or ``batch``'s control entries were pruned.
        """
        if window is None:
            self.query.explain(extended or key is True)
            return None
        return explain_stage(self.controller, self.stages[self._stage(stage)], key, window, batch)

    def explain_time(
        self, event_time: int, stage: str | None = None, side: str | None = None, batch: int | None = None
    ) -> TimeExplanation:
        """What waits at ``event_time`` (ms) in ``stage``, an interval join or a process stage, as of the end of
        ``batch`` (default: the latest finished): a ``side`` row's partners, cleanup and lateness (``"left"`` or
        ``"right"``), or an event-time timer (a process stage), and the upstream that holds the input watermark
        (:func:`floodmark.explain.rows.explain_time`). A window join's windows: :meth:`explain`.

        :raises ValueError: ``stage`` is not one of the query's, has windows, or ``side`` does not fit it.
            :raises LookupError: no batch has finished, or ``batch``'s control entries were pruned.
        """
        return explain_time(self.controller, self.stages[self._stage(stage)], event_time, side, batch)

    def _stage(self, stage: str | None) -> str:
        return stage_named(list(self.stages), stage, "the query")

    @property
    def reports(self) -> list[BatchReport]:
        """The reports of the latest batches, oldest first: every batch's up to
        :data:`~floodmark.driver.controller.REPORTS_KEPT` (1,000), then the latest 1,000 (a local checkpoint's
        ``floodmark/metrics.jsonl`` keeps tens of thousands; :attr:`batches_completed` counts every batch). A batch
        that Spark replays after a failure is reported once, by its last attempt."""
        self._follow()
        return list(self.controller.reports)

    @property
    def batches_completed(self) -> int:
        """How many batches this handle has seen complete (restarts included; a replayed batch counts once)."""
        self._follow()
        return self.controller.batches_reported

    @property
    def reconciliation(self) -> Reconciliation:
        """Where the checkpoint's input rows went (rows in = records + dead letters; pairs = in windows + late),
        over every stage and every batch, this handle's and those of the runs before it on the same checkpoint;
        :meth:`stage_reconciliation` for one stage."""
        self._follow()
        return self.controller.totals.run

    def stage_reconciliation(self, stage: str | None = None) -> StageReconciliation:
        """Where ``stage``'s (default: the only stage's) input rows went: its sources' rows or its upstream
        stages' panes = records + dead letters; (record, window) pairs = in windows + late."""
        self._follow()
        return self.controller.totals.stages[self._stage(stage)]

    def stop(self) -> None:
        """Stop the query (and its Prometheus endpoint); it is not started again."""
        self._stopping = True
        self._stopped.set()
        self.query.stop()
        if self._follower is not None:
            self._follower.stop()
        if self._end_request is not None:
            self._end_request.withdraw()
        if self.metrics is not None:
            self.metrics.close()

    def await_batches(self, count: int, timeout_s: float = 120.0) -> None:
        """Wait until ``count`` more batches have completed."""
        target = self.batches_completed + count
        deadline = time.monotonic() + timeout_s
        with _Wait(self):
            while self.batches_completed < target:
                self._check()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {self.batches_completed} of {target} batches completed in {timeout_s} s")
                _pause(0.05)

    @property
    def settled(self) -> bool:
        """The query has read the input available so far and fired everything that can fire without more
        input: the driver only expects its heartbeat batch (``floodmark.driver.next_batch``; over Spark Connect as
        the latest report says)."""
        self._follow()
        planned = self.controller.next_batch
        status = self.query.status
        busy = status.get("isDataAvailable") or status.get("isTriggerActive")
        return planned is not None and planned.waits_for_input and not busy

    def await_settled(self, timeout_s: float = 120.0) -> None:
        """Wait until :attr:`settled`."""
        deadline = time.monotonic() + timeout_s
        with _Wait(self):
            while not self.settled:
                self._check()
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the query did not settle in {timeout_s} s (plan: {self.controller.next_batch})"
                    )
                _pause(0.05)

    def finish_when_input_exhausted(
        self, timeout_s: float = 3600.0, exhausted: Callable[[], bool] | None = None
    ) -> None:
        """End the input at the first batch Spark plans without new input, then stop after the flush.

        That batch (its offsets and the previous batch's differ only in the ticks) runs as the flush itself:
        every source's watermark is MAX for it, decided as it begins and logged before its tasks run
        (``Controller.begin_batch``); every stage, upstream first, gets it (one batch per level), and every
        window fires. Otherwise (the first batch of a restarted run: Spark may replay offsets it planned
        before the restart, when newer input did not exist yet) a batch that read no good record and no
        dead letter ends the input and the next batch flushes. After the flush no batch is asked for
        (nothing can fire): the query stops once Spark has committed the flush and its trigger has ended.

        :arg exhausted: also required before ending (e.g. "the source has served its last offset"): a
            paced source can have batches without records before it is done. Called on the driver from
            the batch's sink. By default: Spark's offset log shows the batch planned no new input (only the
            ticks moved; an empty file in the middle of the input still moves its source).
        """
        if self._follower is not None and exhausted is not None:
            raise ValueError(
                "over Spark Connect the query's controller runs in the server: it cannot call a function of the "
                "client's; finish_when_input_exhausted() ends the input at the first batch that plans none"
            )
        with _Wait(self):
            self.controller.end_input_when(exhausted or self.spark_checkpoint.planned_no_new_input)
            if self._end_request is not None and not self._bounded:  # tell the server's controller, then wake it
                self._end_request.make()
                if self.controller.engine.ticks is not None:
                    self.controller.engine.ticks.request(0)
            deadline = time.monotonic() + timeout_s
            while (last := self._last_report()) is None or last.watermark != MAX_TIMESTAMP:
                self._check()
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError("the bounded run did not finish in time")
                _pause(0.05)
            # The report comes from the flush's sink, before Spark commits the batch: stop once the trigger has
            # ended, so that the flush is committed and no write is interrupted.
            while self.query.status.get("isTriggerActive") and time.monotonic() < deadline:
                self._check()
                _pause(0.02)
            self.stop()
            # A trigger that started anyway before the stop (a source's own batch) had nothing to emit, and what its
            # interrupted write left behind would never be replaced by a replay.
            for outputs in self.stage_outputs.values():
                outputs.discard_after(self.spark, last.batch_id)

    def _last_report(self) -> BatchReport | None:
        self._follow()
        reports = self.controller.reports  # the controller of the latest start (a restart makes a new one)
        return reports[-1] if reports else None

    def _check(self, deadline: float | None = None) -> bool:
        """Raise floodmark's line for a failure the watcher does not restart; wait while it restarts one, until
        ``deadline`` (``time.monotonic()``): False when it still restarts then."""
        error = self._settle_restart(deadline)
        if error is _STILL_RESTARTING:
            return False
        if error is not None:
            raise RuntimeError(f"the floodmark query failed: {failure_line(error)}") from None
        return True

    def _stop_interrupted(self) -> None:
        """Stop the query after Ctrl-C in one of the handle's waits (:class:`_Wait`), saying so in one line. The
        session's other queries and jobs go on (PySpark's handler would cancel every job). A second Ctrl-C gives
        up waiting for the stop (a batch under way ends first): the KeyboardInterrupt goes on at once, and the
        JVM ends with the process."""
        _LOG.warning("floodmark: interrupted: stopping the query (starting it again from its checkpoint resumes it)")
        try:
            _interruptible(self.stop)
        except KeyboardInterrupt:
            _LOG.warning("floodmark: interrupted again: not waiting for the query to stop")
