"""A running query's event time as Prometheus metrics: a batch listener that serves them from the driver.

:class:`PrometheusMetrics` is a batch listener (``start(..., listeners=[metrics])``): after each micro-batch it
sets its metrics from the :class:`~floodmark.driver.reports.BatchReport`, and an HTTP server on the driver
(``prometheus_client``'s, on the listener's own :class:`~prometheus_client.CollectorRegistry`, bound to the
loopback address by default) serves them at ``/metrics`` in the Prometheus text format.

Units follow Prometheus' conventions: times and durations are **seconds** (floats; floodmark's are ms), counters
end in ``_total``. Every series has a ``query`` label (given at construction), the per-split ones a ``split``
label (``"0"`` for a query with one source, ``"<source>/<split>"`` with several), the per-stage ones a ``stage``
label (a single aggregation's stage is ``aggregation``).

=============================================== ======= ===============================================
metric                                          labels  what
=============================================== ======= ===============================================
``floodmark_split_watermark_seconds``           split   the split's watermark after the batch
``floodmark_split_idle``                        split   1 while the split is idle (ignored), else 0
``floodmark_split_records_total``               split   good records read from the split
``floodmark_split_unread``                      split   left unread by its source as it planned the batch
                                                        (Kafka records, files read in order; NaN: not said)
``floodmark_stage_input_watermark_seconds``     stage   the watermark the stage's last batch ran with
``floodmark_stage_output_watermark_seconds``    stage   the stage's output watermark after the batch
``floodmark_stage_event_time_lag_seconds``      stage   processing time - output watermark
``floodmark_stage_processing_time_lag_seconds`` stage   how long the oldest record not yet emitted waits
``floodmark_stage_open_windows``                stage   windows the stage holds open
``floodmark_stage_panes_total``                 stage   panes emitted
``floodmark_stage_late_records_total``          stage   records too late for their windows
``floodmark_stage_dead_letters_total``          stage   records refused (dead letters)
``floodmark_stage_accepted_total``              stage   (record, window) pairs added to windows
``floodmark_stage_pane_latency_seconds``        stage   histogram: from a batch's watermark to its panes
``floodmark_batches_total``                     -       batches run
``floodmark_input_rows_total``                  -       rows read: good records + dead letters
``floodmark_dead_letters_total``                -       dead letters of every stage
``floodmark_last_batch_id``                     -       the id of the latest batch
``floodmark_last_batch_timestamp_seconds``      -       when the latest batch ran (processing time)
=============================================== ======= ===============================================

The extremes of a watermark are not numbers a dashboard can use, so they are exported as: ``MIN_TIMESTAMP``
("no watermark yet") -> NaN, and NaN for the event-time lag measured from it; ``MAX_TIMESTAMP`` ("end of
input") -> +Inf, and an event-time lag of 0 (nothing is left to wait for).

Counters count each batch once: a batch reported again (a replay after a failure, with the same batch id, in this
process or, ``BatchReport.replayed``, after a restart) sets the gauges but adds nothing, and a report older than
the latest one seen is ignored. A listener counts from zero
when it is created (Prometheus' ``rate()`` and ``increase()`` take counter resets in their stride): use one per
run of a query.

Pane latency is what floodmark adds once the watermark has passed a window: the processing time from the batch's
control entry (when the watermark that fires its panes was fixed) to the end of the batch that wrote them,
observed once per batch in which the stage emitted panes. How long the watermark itself trails the records (the
out-of-orderness bound, idleness, an upstream stage's pending panes) is the event-time lag; a report carries how
many panes a stage emitted, not which windows, so a pane's delay from its window's end is not measured per pane.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import weakref
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP

if TYPE_CHECKING:
    from types import TracebackType
    from wsgiref.simple_server import WSGIServer

    from floodmark.driver.reports import BatchReport

_LOG = logging.getLogger(__name__)

PANE_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, math.inf)
"""Upper bounds (seconds) of the pane latency histogram's buckets: a batch takes from ~0.1 s to minutes."""

DEFAULT_QUERY = "floodmark"
"""The ``query`` label of a :class:`PrometheusMetrics` not given one."""


def watermark_seconds(ms: int) -> float:
    """A watermark (ms) as Prometheus seconds: NaN for MIN_TIMESTAMP (no watermark yet), +Inf for MAX_TIMESTAMP
    (end of input)."""
    if ms <= MIN_TIMESTAMP:
        return math.nan
    if ms >= MAX_TIMESTAMP:
        return math.inf
    return ms / 1000


def lag_seconds(now: int, watermark: int) -> float:
    """How far ``watermark`` trails processing time ``now`` (ms), in seconds: NaN when there is no watermark
    yet (MIN_TIMESTAMP), 0 at the end of input (MAX_TIMESTAMP)."""
    if watermark <= MIN_TIMESTAMP:
        return math.nan
    if watermark >= MAX_TIMESTAMP:
        return 0.0
    return (now - watermark) / 1000


class _Families:
    """The metrics of one registry; every :class:`PrometheusMetrics` on it sets its own ``query``'s series."""

    def __init__(self, registry: CollectorRegistry) -> None:
        split, stage, query = ("query", "split"), ("query", "stage"), ("query",)

        def gauge(name: str, help_text: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, help_text, labels, registry=registry)

        def counter(name: str, help_text: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, help_text, labels, registry=registry)  # exported with the suffix _total

        self.split_watermark = gauge(
            "floodmark_split_watermark_seconds", "Split watermark (NaN: none yet, +Inf: end of input)", split
        )
        self.split_idle = gauge("floodmark_split_idle", "1 while the split is idle (ignored by the watermark)", split)
        self.split_records = counter("floodmark_split_records", "Good records read from the split", split)
        self.split_unread = gauge(
            "floodmark_split_unread", "Left unread by the split's source as it planned the batch (NaN: not said)", split
        )
        self.stage_input = gauge(
            "floodmark_stage_input_watermark_seconds",
            "Input watermark the stage's latest batch ran with (NaN: none yet, +Inf: end of input)",
            stage,
        )
        self.stage_output = gauge(
            "floodmark_stage_output_watermark_seconds",
            "Output watermark of the stage after its latest batch (NaN: none yet, +Inf: end of input)",
            stage,
        )
        self.event_time_lag = gauge(
            "floodmark_stage_event_time_lag_seconds",
            "Processing time minus the stage's output watermark (NaN: no watermark yet, 0: end of input)",
            stage,
        )
        self.processing_time_lag = gauge(
            "floodmark_stage_processing_time_lag_seconds",
            "How long the oldest record the stage took in and has not emitted has waited (0: none pending)",
            stage,
        )
        self.open_windows = gauge("floodmark_stage_open_windows", "Windows the stage holds open", stage)
        self.panes = counter("floodmark_stage_panes", "Panes the stage emitted", stage)
        self.late = counter("floodmark_stage_late_records", "Records too late for their windows", stage)
        self.bad = counter("floodmark_stage_dead_letters", "Records the stage refused (dead letters)", stage)
        self.accepted = counter(
            "floodmark_stage_accepted", "(record, window) pairs added to the stage's windows", stage
        )
        self.pane_latency = Histogram(
            "floodmark_stage_pane_latency_seconds",
            "Processing time from a batch's watermark (its control entry) to the end of the batch that wrote the "
            "panes it fired; once per batch with panes",
            stage,
            buckets=PANE_LATENCY_BUCKETS,
            registry=registry,
        )
        self.batches = counter("floodmark_batches", "Batches the query ran", query)
        self.restarts = counter(
            "floodmark_restarts",
            "Times the query handle started the failed query again from its checkpoint (a busy machine, Kafka out "
            "of reach)",
            query,
        )
        self.rows_in = counter("floodmark_input_rows", "Rows read: good records and dead letters", query)
        self.dead_letters = counter("floodmark_dead_letters", "Dead letters of every stage", query)
        self.last_batch_id = gauge("floodmark_last_batch_id", "Id of the query's latest batch", query)
        self.last_batch_time = gauge(
            "floodmark_last_batch_timestamp_seconds", "Processing time the latest batch ran at", query
        )
        self.queries: set[str] = set()
        """The ``query`` labels of the open listeners on the registry."""

    def per_query(self) -> list[Gauge | Counter]:
        return [self.batches, self.restarts, self.rows_in, self.dead_letters, self.last_batch_id, self.last_batch_time]

    def per_split(self) -> list[Gauge | Counter]:
        return [self.split_watermark, self.split_idle, self.split_records, self.split_unread]

    def per_stage(self) -> list[Gauge | Counter | Histogram]:
        return [
            self.pane_latency,
            self.stage_input,
            self.stage_output,
            self.event_time_lag,
            self.processing_time_lag,
            self.open_windows,
            self.panes,
            self.late,
            self.bad,
            self.accepted,
        ]


_FAMILIES: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()
_FAMILIES_LOCK = threading.Lock()


class PrometheusMetrics:
    """A batch listener that exports each report as Prometheus metrics and serves them over HTTP (see the
    module docstring for the metrics); use as a context manager, or :meth:`close` it.

    :arg port: the HTTP port of ``/metrics`` (0: any free port, see :attr:`port`); None: no server, the
        metrics are only set in ``registry`` (which an endpoint of the application serves).
    :arg host: the address to bind: the loopback address by default, so nothing off the machine reads it;
        ``"0.0.0.0"`` for a Prometheus server elsewhere.
    :arg query: the ``query`` label of every series.
    :arg registry: where the metrics live: a new registry by default (two queries in one process, each with its
        own listener and port, do not clash); several listeners may share one, with different ``query`` labels.
    :raises ValueError: ``registry`` already has an open listener with the same ``query`` label.
    :raises OSError: the port cannot be bound (e.g. in use).
    """

    def __init__(
        self,
        port: int | None,
        host: str = "127.0.0.1",
        *,
        query: str = DEFAULT_QUERY,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.query = query
        self.host = host
        self.registry = registry if registry is not None else CollectorRegistry()
        with _FAMILIES_LOCK:
            families = _FAMILIES.get(self.registry)
            if families is None:
                families = _FAMILIES[self.registry] = _Families(self.registry)
            if query in families.queries:
                raise ValueError(
                    f"the registry already exports a query labelled {query!r}: give each query's listener its "
                    "own query= label"
                )
            families.queries.add(query)
        self._families = families
        self._lock = threading.Lock()
        self._counted = -1
        """The highest batch id whose counts were added."""
        self._shown = -1
        """The highest batch id reported (the gauges show it)."""
        self._splits: set[str] = set()
        self._stages: set[str] = set()
        self._closed = False
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None
        """The bound port (the one chosen when ``port`` was 0); None without a server."""
        if port is not None:
            try:
                self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
            except BaseException:
                self._release()
                raise
            self.port = self._server.server_port
        # Counters exist (at 0) before the first batch: rate() sees the first increase.
        for metric in (families.batches, families.restarts, families.rows_in, families.dead_letters):
            metric.labels(query)

    @property
    def url(self) -> str | None:
        """Where the metrics are served (None without a server)."""
        if self.port is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def __call__(self, report: BatchReport) -> None:
        """Export ``report``. Never raises: a failure is logged, and the query goes on."""
        try:
            self._export(report)
        except Exception:
            _LOG.warning("floodmark: batch %s's metrics were not exported", report.batch_id, exc_info=True)

    def _export(self, report: BatchReport) -> None:
        f, q = self._families, self.query
        with self._lock:
            if self._closed or report.batch_id < self._shown:
                return
            new = report.batch_id > self._counted and not report.replayed
            for split, (watermark, idle) in report.splits.items():
                f.split_watermark.labels(q, split).set(watermark_seconds(watermark))
                f.split_idle.labels(q, split).set(1 if idle else 0)
                f.split_unread.labels(q, split).set(report.split_backlog.get(split, math.nan))
                f.split_records.labels(q, split)  # at 0 until the split reads a record
                self._splits.add(split)
            for name, stage in report.stages.items():
                times = stage.times()
                f.stage_input.labels(q, name).set(watermark_seconds(times.input_watermark))
                f.stage_output.labels(q, name).set(watermark_seconds(times.output_watermark))
                f.event_time_lag.labels(q, name).set(lag_seconds(times.now, times.output_watermark))
                f.processing_time_lag.labels(q, name).set(times.processing_time_lag / 1000)
                f.open_windows.labels(q, name).set(stage.open_windows)
                for counter, count in ((f.panes, stage.panes), (f.late, stage.late), (f.bad, stage.bad)):
                    counter.labels(q, name).inc(count if new else 0)
                f.accepted.labels(q, name).inc(stage.accepted if new else 0)
                if new and stage.panes and report.next_processing_time >= report.processing_time:
                    f.pane_latency.labels(q, name).observe(
                        (report.next_processing_time - report.processing_time) / 1000
                    )
                self._stages.add(name)
            f.last_batch_id.labels(q).set(report.batch_id)
            f.last_batch_time.labels(q).set(report.processing_time / 1000)
            if new:
                for split, count in report.split_records.items():
                    f.split_records.labels(q, split).inc(count)
                    self._splits.add(split)
                f.batches.labels(q).inc()
                f.rows_in.labels(q).inc(report.rows_in)
                f.dead_letters.labels(q).inc(report.bad)
                self._counted = report.batch_id
            self._shown = report.batch_id

    def restarted(self) -> None:
        """Count one restart of the query by its handle (``floodmark.spark.driver.restarts``)."""
        with self._lock:
            if not self._closed:
                self._families.restarts.labels(self.query).inc()

    def close(self) -> None:
        """Stop the HTTP server (its port is free again) and remove this query's series from the registry;
        later reports are ignored. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        f, q = self._families, self.query
        series = [(m, (q,)) for m in f.per_query()]
        series += [(m, (q, split)) for m in f.per_split() for split in self._splits]
        series += [(m, (q, stage)) for m in f.per_stage() for stage in self._stages]
        for metric, labels in series:
            with contextlib.suppress(KeyError):  # never set (e.g. a gauge before the first batch)
                metric.remove(*labels)
        self._release()

    def _release(self) -> None:
        with _FAMILIES_LOCK:
            self._families.queries.discard(self.query)

    def __enter__(self) -> PrometheusMetrics:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.url or "no server"
        return f"PrometheusMetrics(query={self.query!r}, {where}{', closed' if self._closed else ''})"
