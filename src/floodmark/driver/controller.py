"""The driver side: after each batch, the sources' and stages' watermarks for the next one.

:class:`Controller` is called from the ``foreachBatch`` sink with the STATS and GAUGE rows of batch N. It
restores every source's :class:`SourceWatermarks` and the :class:`~floodmark.core.watermarks.graph.StageGraph`
from control entry N (the one batch N consumed), feeds the sources the batch's per-split statistics, advances
processing time to now (periodic emits, idleness), advances the graph with the stages' holds, and writes entry
N+1 for the next batch. A single aggregation is the graph of one source and one stage: no other rule. The
driver holds per-split and per-bucket state only: its memory does not grow with the number of keys.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from floodmark.core.clock import Clock, SystemClock
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.core.watermarks import SourceWatermarks, SplitBatchStats, WatermarkStrategy
from floodmark.core.watermarks.graph import StageGraph
from floodmark.driver.control_log import ControlLog
from floodmark.driver.end_of_input import EndOfInput
from floodmark.driver.next_batch import NextBatch, next_batch
from floodmark.driver.reconciliation import RunTotals
from floodmark.driver.reports import BatchReport, StageReport, dead_letter_warning
from floodmark.protocol import wire
from floodmark.protocol.control import BucketGauges, ControlEntry


class TickRequests(Protocol):
    """Where the driver asks for the next batch (``floodmark.spark.sources.ticks.TickSchedule``)."""

    def request(self, delay_ms: int) -> None: ...


_LOG = logging.getLogger(__name__)

AGGREGATION_SOURCE = "input"
"""The source of a single aggregation's graph (``floodmark.spark.EventTimeAggregation``)."""
AGGREGATION_STAGE = "aggregation"
"""The stage of a single aggregation's graph: its key in ``BatchReport.stages``, its control entries and gauges."""

KEPT_ENTRIES = 100
"""Control entries kept behind the newest (for replays, ``explain --batch`` and inspection)."""

REPORTS_KEPT = 1_000
"""Batch reports a controller keeps in memory, the latest (Spark keeps 100 progress reports): a query that runs for
months must not grow with its batches (a report is ~2 KB). The run's reconciliation is kept as totals
(:class:`~floodmark.driver.reconciliation.RunTotals`)."""

METRICS_FILE_BYTES = 64 * 1024 * 1024
"""When the metrics file (``<checkpoint>/floodmark/metrics.jsonl``, a JSON line per batch) reaches this size, it
becomes ``metrics.jsonl.1`` (replacing an older one) and a new file starts: the latest 64 to 128 MiB of reports
(some 30,000 to 60,000 batches) stay on disk, not every batch's of a query that runs for months."""


def _not_known(batch_id: int) -> int | None:
    return None


def _not_said(batch_id: int) -> bool:
    return False


def _no_backlog(batch_id: int) -> dict[str, dict[str, int]]:
    return {}


@dataclass(frozen=True)
class EngineHooks:
    """What the engine running a query offers its controller, given at construction (the defaults: an engine
    that says nothing and asks for nothing, as in tests and ``floodmark explain``).

    :ivar first_batch_id: the first batch this run of the query executes: 0, or the one after the last
        committed batch on a restart (see :meth:`Controller.ends_input`), as the engine said when the query was
        built; the first batch the controller begins replaces it (over Spark Connect the run before may still
        commit batches until the new one's start stops it).
    :ivar planned_at: when the engine planned a batch (ms), if it says (Spark's offset log).
    :ivar reads_no_new_input: whether the engine planned a batch to read no new input (only the ticks moved in
        Spark's offset log), once it has planned it; False when it does not say.
    :ivar ticks: where the next batch without input is asked for (the tick source's schedule), or None.
    :ivar pause: told, before each batch is planned, which splits of each aligned source watermark alignment
        pauses (``{source: splits}``); None when the engine cannot pause splits.
    :ivar backlog: for a batch the engine planned, ``{source: {split: records it left unread}}`` as it planned the
        batch (``SplitBatchStats.unread``: a split with unread records is never idle), for the sources and splits
        it knows that of; empty when it does not say (a batch planned by an earlier run).
    """

    first_batch_id: int = 0
    planned_at: Callable[[int], int | None] = _not_known
    reads_no_new_input: Callable[[int], bool] = _not_said
    ticks: TickRequests | None = None
    pause: Callable[[dict[str, frozenset[str]]], None] | None = None
    backlog: Callable[[int], dict[str, dict[str, int]]] = _no_backlog


NO_ENGINE = EngineHooks()
"""An engine that says nothing and asks for nothing (tests, ``floodmark explain``)."""


def merge_split_stats(stats: Iterable[dict[str, Any]]) -> dict[str, tuple[int, int, int]]:
    """The STATS rows of a batch (one per split, partition and bucket) as ``{split: (count, min ts, max ts)}``,
    without the rows that count dead letters (:func:`unread_rows`)."""
    merged: dict[str, list[int]] = {}
    for row in stats:
        if _counts_unread(row):
            continue
        low, high = row[wire.MIN_TS], row[wire.MAX_TS]
        acc = merged.setdefault(str(row[wire.SPLIT]), [0, low, high])
        acc[0] += int(row[wire.COUNT])
        acc[1] = min(acc[1], int(low))
        acc[2] = max(acc[2], int(high))
    return {split: (c, lo, hi) for split, (c, lo, hi) in sorted(merged.items())}


def unread_rows(stats: Iterable[dict[str, Any]], source_of: Callable[[str], str]) -> dict[str, int]:
    """The batch's rows that are no record of their source, by source (``source_of``: a split label's source),
    from the STATS rows labelled :data:`~floodmark.protocol.wire.DEAD_LETTERS_SPLIT`."""
    unread: dict[str, int] = {}
    for row in stats:
        if _counts_unread(row):
            source = source_of(str(row[wire.SPLIT]))
            unread[source] = unread.get(source, 0) + int(row[wire.COUNT])
    return dict(sorted(unread.items()))


def _counts_unread(row: dict[str, Any]) -> bool:
    return str(row[wire.SPLIT]).rpartition("/")[2] == wire.DEAD_LETTERS_SPLIT


def aligned_sources(sources: dict[str, SourceSettings]) -> list[str]:
    """The names of ``sources`` whose watermark strategy asks for watermark alignment."""
    return [name for name, settings in sources.items() if settings.strategy.alignment is not None]


@dataclass(frozen=True)
class SourceSettings:
    """How one source's watermark is made (see ``floodmark.spark.SourceTime``)."""

    strategy: WatermarkStrategy
    periodic_interval: int = 200
    percentile: float = 100.0
    splits: tuple[str, ...] = ()

    def build(self, start_processing_time: int) -> SourceWatermarks:
        """A fresh coordinator for the source (restore it from a control entry's snapshot)."""
        return SourceWatermarks(
            self.strategy,
            periodic_interval=self.periodic_interval,
            percentile=self.percentile,
            splits=self.splits,
            start_processing_time=start_processing_time,
        )


class Controller:
    """Control entry N+1 of a query's graph of sources and stages, from entry N and batch N's rows.

    Each source has its own :class:`SourceWatermarks`, fed by the STATS rows of its splits (labelled
    ``"<source>/<split>"`` when the graph has several sources, the split alone when it has one); the stages'
    input watermarks follow :class:`~floodmark.core.watermarks.graph.StageGraph` from the sources'
    watermarks and the GAUGE rows' holds. The entry carries them as ``stage_watermarks`` (its ``watermark`` is
    their MIN).

    :arg log: the control log (under the query's checkpoint).
    :arg sources: ``{source: SourceSettings}``. :arg upstreams: ``{stage: [its sources or stages]}``.
    :arg clock: processing time (injected; the wall clock by default).
    :arg metrics_path: a local file each report is appended to (JSON lines), or None.
    :arg engine: what the engine running the query offers (:class:`EngineHooks`).
    :arg earlier: the controller of an earlier run of the same query in this process (started again after a
        failure): its reports and its end-of-input condition carry over.
    """

    def __init__(
        self,
        log: ControlLog,
        sources: dict[str, SourceSettings],
        upstreams: dict[str, list[str]],
        clock: Clock | None = None,
        metrics_path: Path | None = None,
        engine: EngineHooks = NO_ENGINE,
        earlier: Controller | None = None,
    ) -> None:
        if not sources or not upstreams:
            raise ValueError("a query's graph needs at least one source and one stage")
        self.log = log
        self.sources = sources
        self.upstreams = upstreams
        self.clock = clock or SystemClock()
        self.metrics_path = metrics_path
        self.engine = engine
        self.reports: deque[BatchReport] = deque(earlier.reports if earlier is not None else (), maxlen=REPORTS_KEPT)
        """The latest :data:`REPORTS_KEPT` batches' reports, oldest first (the metrics file has every batch's)."""
        self.batches_reported = earlier.batches_reported if earlier is not None else 0
        """How many batches this controller (and the ones before it, ``earlier``) reported; a replay counts once."""
        self.totals = earlier.totals if earlier is not None else RunTotals(upstreams)
        """The checkpoint's reconciliation, every run's batches (resumed from the control log at the first report:
        the totals through the batch before it), kept up to date by :meth:`record`."""
        self._totals_resumed = earlier is not None
        self.keeps_totals = True
        """Whether :meth:`record` writes the totals into the control log (not a Spark Connect client's copy, which
        follows the server's: the server's writes them)."""
        self.end_of_input = EndOfInput(engine, earlier.end_of_input if earlier is not None else None)
        """When the input ends (:mod:`floodmark.driver.end_of_input`)."""
        self.next_batch: NextBatch | None = None
        """The latest decision of when the next batch runs without input."""
        self._running_entry: ControlEntry | None = None

    def end_input(self) -> None:
        """End the input at the next batch (its watermark MAX: every window fires), whatever the sources still
        have; never taken back."""
        self.end_of_input.now()

    def end_input_when(self, exhausted: Callable[[], bool]) -> None:
        """End the input (watermark MAX, every window fires) at the first batch the engine planned to read
        nothing (:meth:`begin_batch`), or after the first batch that read nothing, if ``exhausted()`` also says
        so then (a bounded run); called on the driver from the batch's sink."""
        self.end_of_input.when(exhausted)

    def end_input_when_requested(self, requested: Callable[[], bool], exhausted: Callable[[], bool]) -> None:
        """:meth:`end_input_when` ``exhausted``, from the first batch that begins once ``requested()`` is true: how
        a Spark Connect client asks this controller, which runs in the server, to end a run's input (a request file
        in the checkpoint, :meth:`~floodmark.spark.driver.query.FloodmarkQuery.finish_when_input_exhausted`)."""
        self.end_of_input.when_requested(requested, exhausted)

    @classmethod
    def of_aggregation(cls, log: ControlLog, source: SourceSettings, **options: Any) -> Controller:
        """The controller of a single aggregation: the graph of :data:`AGGREGATION_SOURCE` read by
        :data:`AGGREGATION_STAGE` (``options``: as for the constructor)."""
        return cls(log, {AGGREGATION_SOURCE: source}, {AGGREGATION_STAGE: [AGGREGATION_SOURCE]}, **options)

    # ------------------------------------------------------------- the graph
    @property
    def order(self) -> list[str]:
        """The stages, upstream first."""
        return StageGraph(list(self.sources), self.upstreams).order

    def split_label(self, source: str, split: str) -> str:
        """How ``source``'s ``split`` is named in STATS rows and reports (see the class docstring)."""
        return f"{source}/{split}" if len(self.sources) > 1 else split

    def source_of(self, label: str) -> tuple[str, str]:
        """``(source, split)`` of a split label (:meth:`split_label`'s inverse)."""
        if len(self.sources) == 1:
            return next(iter(self.sources)), label
        name, _, split = label.partition("/")
        return name, split

    def _graph(self, entry: ControlEntry) -> tuple[dict[str, SourceWatermarks], StageGraph]:
        sources = {}
        for name, settings in self.sources.items():
            source = settings.build(entry.processing_time)
            saved = entry.coordinator.get("sources", {}).get(name)
            if saved is not None:
                source.restore(saved)
            sources[name] = source
        graph = StageGraph(list(self.sources), self.upstreams)
        graph.restore(entry.coordinator.get("graph", {}))
        return sources, graph

    @staticmethod
    def _coordinator(sources: dict[str, SourceWatermarks], graph: StageGraph) -> dict[str, Any]:
        return {"sources": {name: s.snapshot() for name, s in sources.items()}, "graph": graph.snapshot()}

    def watermarks_at(self, seq: int | None = None, source: str | None = None) -> SourceWatermarks:
        """``source``'s coordinator (default: the only source) as control entry ``seq`` (default: the latest)
        left it, for inspection."""
        if source is None:
            if len(self.sources) > 1:
                raise ValueError(f"the query has sources {sorted(self.sources)}: say which one")
            source = next(iter(self.sources))
        if source not in self.sources:
            raise ValueError(f"no source {source!r} in the query (it has {sorted(self.sources)})")
        return self.graph_at(seq)[0][source]

    def graph_at(self, seq: int | None = None) -> tuple[dict[str, SourceWatermarks], StageGraph, ControlEntry]:
        """The sources' coordinators and the stages' watermarks as control entry ``seq`` (default: the latest)
        holds them (after the batch before it), with the entry itself, for inspection.

        :raises LookupError: the log has no entry ``seq`` (never written, or pruned).
        """
        seq = self.log.latest_seq() if seq is None else seq
        entry = None if seq is None else self.logged(seq)
        if entry is None:
            raise LookupError(
                f"no control entry {seq} in {self.log.directory} (entries older than {KEPT_ENTRIES} batches are pruned)"
            )
        sources, graph = self._graph(entry)
        return sources, graph, entry

    def ensure_initial_entry(self) -> ControlEntry:
        """Entry 0 for a new query; a restarted query keeps its log, which must be of the same graph.

        :raises ValueError: the log's entries name other stages (another query's checkpoint, or one written
            before floodmark 0.2, whose single aggregation had no named stage).
        """
        latest = self.log.latest_seq()
        if latest is None:
            now = self.clock.now_ms()
            sources, graph = self._graph(ControlEntry(0, MIN_TIMESTAMP, now))
            stages = graph.input_watermarks()
            coordinator = self._coordinator(sources, graph)
            self.log.write(ControlEntry(0, MIN_TIMESTAMP, now, coordinator=coordinator, stage_watermarks=stages))
            latest = 0
        entry = self.log.read(latest)
        assert entry is not None
        self.log.prune_end_markers(latest - KEPT_ENTRIES)
        if sorted(entry.stage_watermarks) != sorted(self.upstreams):
            raise ValueError(
                f"the checkpoint's control log ({self.log.directory}) is of a query with stages "
                f"{sorted(entry.stage_watermarks)}, not {sorted(self.upstreams)}"
                + ("" if entry.stage_watermarks else " (written before floodmark 0.2)")
                + ": start this query from a new checkpoint"
            )
        return entry

    # ------------------------------------------------------------ alignment
    @property
    def aligned_sources(self) -> list[str]:
        """The sources whose watermark strategy asks for watermark alignment."""
        return aligned_sources(self.sources)

    def paused(self, sources: dict[str, SourceWatermarks]) -> dict[str, frozenset[str]]:
        """``{aligned source: its splits to pause}`` for the sources' split watermarks: each alignment group's
        rule (:class:`~floodmark.core.watermarks.alignment.WatermarkAlignment`) over the splits of all its
        sources (a group's sources must agree on the drift)."""
        groups: dict[str, list[str]] = {}
        for name in self.aligned_sources:
            alignment = self.sources[name].strategy.alignment
            assert alignment is not None
            groups.setdefault(alignment.group, []).append(name)
        paused = dict.fromkeys(self.aligned_sources, frozenset[str]())
        for members in groups.values():
            alignments = {self.sources[name].strategy.alignment for name in members}
            if len(alignments) > 1:
                raise ValueError(f"the sources {members} of one alignment group give different drifts: {alignments}")
            alignment = alignments.pop()
            assert alignment is not None
            marks = {
                (name, split): mark for name in members for split, mark in sources[name].split_watermarks().items()
            }
            for name, split in alignment.paused(marks):
                paused[name] = paused[name] | {split}
        return paused

    def publish_paused(self, entry: ControlEntry | None = None) -> dict[str, frozenset[str]]:
        """Tell the engine (``EngineHooks.pause``) which splits to pause for the batch after ``entry`` (default: the
        latest entry's; a runtime calls this at start, :meth:`on_batch` after each batch); returns them."""
        if not self.aligned_sources:
            return {}
        if entry is None:
            latest = self.log.latest_seq()
            entry = self.logged(latest) if latest is not None else None
        sources = self._graph(entry)[0] if entry is not None else {}
        paused = self.paused(sources) if entry is not None and not entry.end_of_input else {}
        if self.engine.pause is not None:
            self.engine.pause(paused)
        return paused

    # ----------------------------------------------------------- the batches
    def logged(self, seq: int, recorded_end: bool = True) -> ControlEntry | None:
        """Control entry ``seq`` as batch ``seq`` ran (or runs) with it: the logged entry, at the end of input
        when the batch was recorded as the flush (:meth:`begin_batch`); None if the log does not have it.

        :arg recorded_end: look for that record (one file read); False when the caller knows there is none.
        """
        entry = self.log.read(seq)
        if entry is None or entry.end_of_input or not recorded_end or not self.log.ends_input(seq):
            return entry
        sources, graph = self._graph(entry)
        inputs = graph.end_sources()
        return replace(
            entry,
            end_of_input=True,
            watermark=min(inputs.values()),
            stage_watermarks=inputs,
            coordinator=self._coordinator(sources, graph),
        )

    def entry_for_batch(self, batch_id: int) -> ControlEntry:
        """Control entry ``batch_id`` (batch N runs with entry N, :meth:`logged`), which must exist."""
        entry = self.logged(batch_id)
        if entry is None:
            raise RuntimeError(
                f"floodmark control entry {batch_id} is missing from {self.log.directory}: the checkpoint's "
                f"floodmark/control directory was altered or belongs to another query"
            )
        return entry

    def begin_batch(self, batch_id: int) -> ControlEntry:
        """Control entry ``batch_id`` as that batch runs with it (its tasks and :meth:`on_batch`).

        Its processing time becomes the time the engine planned the batch (``EngineHooks.planned_at``) when that is
        later: the entry was written when the previous batch ended, which is long before after an idle stretch
        (batches without input run only when needed: :mod:`floodmark.driver.next_batch`). Spark logs that time
        with the batch's offsets (``batchTimestampMs``), so a replayed batch gets the same value.

        In a bounded run (:meth:`end_input_when`), a batch the engine planned to read no new input, other than
        the first of this run, when ``exhausted()`` says so too, is the end of input itself: it runs with every
        source's watermark MAX (``StageGraph.end_sources``) instead of reading nothing and leaving the flush to
        the batch after it. The decision is recorded in the log before any task reads the entry, so a replay
        flushes in the same batch.
        """
        self.end_of_input.begin(batch_id)
        # Only this run's begin_batch records a later batch as the end, so only a replay of the run's first batch
        # can find a record without writing it: no file read per batch for it otherwise.
        entry = self.logged(batch_id, recorded_end=batch_id <= self.end_of_input.first_batch_id)
        if entry is None:
            entry = self.entry_for_batch(batch_id)  # raises: the entry is missing
        if self.end_of_input.begins_at_end(batch_id, entry.end_of_input):
            self.log.mark_end_of_input(batch_id)
            entry = self.entry_for_batch(batch_id)
        planned = self.engine.planned_at(batch_id)
        if planned is not None and planned > entry.processing_time:
            entry = replace(entry, processing_time=planned)
        self._running_entry = entry
        return entry

    def running(self, batch_id: int) -> ControlEntry:
        """The entry batch ``batch_id`` runs with (:meth:`begin_batch`'s, or the logged one)."""
        entry = self._running_entry
        return entry if entry is not None and entry.seq == batch_id else self.entry_for_batch(batch_id)

    def ends_input(self, entry: ControlEntry, batch_id: int, records: int, bad: int) -> bool:
        """Whether the next batch gets the end of input (watermark MAX), after batch ``batch_id`` read
        ``records`` good records and ``bad`` dead letters."""
        ended = self.end_of_input.after_batch(batch_id, records, bad)
        return entry.end_of_input or ended

    def on_batch(
        self,
        batch_id: int,
        stats: list[dict[str, Any]],
        gauges: dict[str, list[dict[str, Any]]],
        counts: dict[str, dict[str, int]],
        first_dead_letter: Callable[[], str | None] | None = None,
    ) -> BatchReport:
        """Batch ``batch_id`` is done: write entry N+1 and report.

        :arg stats: the batch's STATS rows. :arg gauges: each stage's GAUGE rows (of the buckets that ran).
        :arg counts: each stage's PANE, LATE and BAD counts. :arg first_dead_letter: see :meth:`record`.
        """
        entry = self.running(batch_id)
        sources, graph = self._graph(entry)
        merged = merge_split_stats(stats)
        now = max(self.clock.now_ms(), entry.processing_time)
        backlog = self.engine.backlog(batch_id)
        self._feed_sources(sources, merged, backlog, now)
        records = sum(c for c, _, _ in merged.values())
        unread = unread_rows(stats, lambda label: self.source_of(label)[0])
        bad_in = sum(unread.values())
        end = self.ends_input(entry, batch_id, records, bad_in)
        watermarks = {name: (MAX_TIMESTAMP, False) if end else (s.watermark, s.idle) for name, s in sources.items()}
        buckets = BucketGauges(entry.buckets)
        for stage, rows in gauges.items():
            buckets.update(stage, rows)
        next_inputs = graph.advance(watermarks, {stage: buckets.lowest(stage, wire.HOLD) for stage in graph.order})
        written, replayed = self.write_next(
            ControlEntry(
                seq=batch_id + 1,
                watermark=min(next_inputs.values()),
                processing_time=now,
                end_of_input=end,
                coordinator=self._coordinator(sources, graph),
                stage_watermarks=next_inputs,
                buckets=buckets.snapshot(),
            )
        )
        stage_sources = {stage: [sources[name] for name in graph.sources_of(stage)] for stage in graph.order}
        self.plan_next_batch(now, written, buckets, stage_sources, flushed=entry.watermark == MAX_TIMESTAMP)
        paused = self.publish_paused(written)
        stage_reports = {
            stage: self._stage_report(stage, entry, written, graph, buckets, gauges.get(stage, []), counts, unread)
            for stage in graph.order
        }
        last = [stage_reports[s] for s in graph.order if not graph.downstream(s)]
        report = BatchReport(
            batch_id=batch_id,
            watermark=entry.watermark,
            next_watermark=written.watermark,
            processing_time=entry.processing_time,
            splits={
                self.split_label(name, split): mark
                for name, s in sources.items()
                for split, mark in s.split_watermarks().items()
            },
            records=records,
            panes=sum(r.panes for r in stage_reports.values()),
            late=sum(r.late for r in stage_reports.values()),
            bad=sum(r.bad for r in stage_reports.values()),
            input_dead_letters=bad_in,
            source_dead_letters=unread,
            stage_dead_letters=sum(r.bad - r.source_dead_letters for r in stage_reports.values()),
            output_watermark=min(r.output_watermark for r in last),
            oldest_pending=min((r.oldest_pending for r in last if r.oldest_pending is not None), default=None),
            open_windows=sum(r.open_windows for r in stage_reports.values()),
            next_processing_time=written.processing_time,
            split_records={label: c for label, (c, _, _) in merged.items()},
            split_backlog={
                self.split_label(name, split): unread
                for name, splits in backlog.items()
                for split, unread in splits.items()
            },
            max_event_time=max((hi for _, _, hi in merged.values()), default=None),
            accepted=sum(r.accepted for r in stage_reports.values()),
            stages=stage_reports,
            paused_splits=tuple(
                sorted(self.split_label(name, split) for name, held in paused.items() for split in held)
            ),
            next_batch=self.next_batch,
            replayed=replayed,
        )
        return self.record(report, first_dead_letter)

    def _feed_sources(
        self,
        sources: dict[str, SourceWatermarks],
        merged: dict[str, tuple[int, int, int]],
        backlog: dict[str, dict[str, int]],
        now: int,
    ) -> None:
        """Each source's split statistics of the batch (``merged``: by split label; ``backlog``: the records each
        source's splits left unread, :attr:`EngineHooks.backlog`), then processing time ``now``."""
        per_source: dict[str, dict[str, SplitBatchStats]] = {name: {} for name in sources}
        for label, (count, low, high) in merged.items():
            name, split = self.source_of(label)
            per_source[name][split] = SplitBatchStats(split, count, low, high, unread=backlog.get(name, {}).get(split))
        for name, splits in backlog.items():
            for split, unread in splits.items():
                if name in per_source and split not in per_source[name]:
                    per_source[name][split] = SplitBatchStats(split, 0, unread=unread)
        for name, source in sources.items():
            source.on_batch(per_source[name].values())
            source.advance_processing_time(now)

    @staticmethod
    def _stage_report(
        stage: str,
        entry: ControlEntry,
        written: ControlEntry,
        graph: StageGraph,
        buckets: BucketGauges,
        rows: list[dict[str, Any]],
        counts: dict[str, dict[str, int]],
        unread: dict[str, int],
    ) -> StageReport:
        """What ``stage`` did in the batch that ran with ``entry`` (``written``: the next one); ``unread``: the
        batch's rows that are no record, by source."""
        pending = buckets.values(stage, wire.OLDEST_PENDING)
        stage_counts = counts.get(stage, {})
        return StageReport(
            input_watermark=entry.stage_watermarks[stage],
            output_watermark=graph.watermarks[stage].output_watermark,
            next_input_watermark=written.stage_watermarks[stage],
            panes=stage_counts.get(wire.PANE, 0),
            late=stage_counts.get(wire.LATE, 0),
            bad=stage_counts.get(wire.BAD, 0),
            source_dead_letters=sum(unread.get(upstream, 0) for upstream in graph.upstreams[stage]),
            made_dead_letters=sum(int(g.get(wire.COUNT) or 0) for g in rows),
            accepted=sum(int(g.get(wire.ACCEPTED) or 0) for g in rows),
            open_windows=buckets.total(stage, wire.OPEN_WINDOWS),
            oldest_pending=min(pending) if pending else None,
            processing_time=entry.processing_time,
        )

    def write_next(self, entry: ControlEntry) -> tuple[ControlEntry, bool]:
        """Write entry N+1 and prune the oldest; returns the entry and whether it existed already (a replayed
        batch keeps the one its first attempt wrote)."""
        replayed = not self.log.write(entry)
        written = self.entry_for_batch(entry.seq)
        self.log.prune_one(entry.seq - 1 - KEPT_ENTRIES)  # the one entry this batch moves out of the kept range
        return written, replayed

    def plan_next_batch(
        self,
        now: int,
        written: ControlEntry,
        gauges: BucketGauges,
        sources: dict[str, list[SourceWatermarks]],
        flushed: bool,
    ) -> None:
        """Ask for the next batch when something can fire without input (:mod:`floodmark.driver.next_batch`);
        ``sources``: each stage's sources; ``flushed``: the batch just run had watermark MAX at every stage."""
        bounded = self.end_of_input.bounded or written.end_of_input
        self.next_batch = next_batch(
            now, written.stage_watermarks, written.processing_time, gauges, sources, bounded, flushed=flushed
        )
        if self.engine.ticks is not None:
            self.engine.ticks.request(self.next_batch.at - now)

    def record(self, report: BatchReport, first_dead_letter: Callable[[], str | None] | None = None) -> BatchReport:
        """Keep ``report`` (and append it to the metrics file); warn when most of its rows were dead letters
        (:func:`dead_letter_warning`, with ``first_dead_letter()`` as the reason). A replayed batch's report
        replaces the one its earlier attempt made in this process, and is not appended to the file again."""
        replaced = None
        if report.next_batch is not None:  # a Spark Connect client's copy learns the server's plan from the report
            self.next_batch = report.next_batch
        if not self._totals_resumed:  # the runs before this one: their totals through the batch before this one
            saved = self.log.read_totals(report.batch_id - 1)
            if saved is not None:
                self.totals = RunTotals.restore(self.upstreams, saved)
            self._totals_resumed = True
        if report.replayed and self.reports and self.reports[-1].batch_id == report.batch_id:
            replaced = self.reports[-1]
            self.reports[-1] = report
        else:
            self.reports.append(report)
            self.batches_reported += 1
        self.totals.add(report, lambda label: self.source_of(label)[0], replaced)
        if self.keeps_totals:
            self.log.write_totals(report.batch_id, self.totals.snapshot())
        warning = dead_letter_warning(report, first_dead_letter)
        if warning is not None:
            _LOG.warning(warning)
        if self.metrics_path is not None and not report.replayed:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            if self.metrics_path.exists() and self.metrics_path.stat().st_size >= METRICS_FILE_BYTES:
                self.metrics_path.replace(self.metrics_path.with_name(self.metrics_path.name + ".1"))
            with self.metrics_path.open("a") as handle:
                handle.write(report.to_json() + "\n")
        return report
