"""The driver side: after each batch, feed the splits' statistics to the core coordinator.

:class:`BatchController` is called from the ``foreachBatch`` sink with the STATS
and GAUGE rows of batch N. It restores :class:`SourceWatermarks` from control
entry N (the one batch N consumed), feeds it the batch's per-split statistics,
advances processing time to now (periodic emits, idleness), and writes entry
N+1 for the next batch. The driver holds per-split state only: its memory
does not grow with the number of keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floodmark.core.clock import Clock, SystemClock
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.core.watermarks import SourceWatermarks, SplitBatchStats, WatermarkStrategy
from floodmark.driver.control_log import ControlEntry, ControlLog

KEPT_ENTRIES = 100
"""Control entries kept behind the newest (for replays, ``explain --batch`` and inspection)."""


@dataclass
class BatchReport:
    """What one batch did, for metrics and the live view."""

    batch_id: int
    seq: int
    watermark: int
    next_watermark: int
    processing_time: int
    splits: dict[str, tuple[int, bool]]
    records: int
    panes: int = 0
    late: int = 0
    bad: int = 0
    output_watermark: int = MIN_TIMESTAMP
    oldest_pending: int | None = None
    open_windows: int = 0
    next_processing_time: int = 0
    """Processing time of the next control entry (when ``next_watermark`` takes effect)."""
    split_records: dict[str, int] = field(default_factory=dict)
    """Good records per split in this batch."""
    max_event_time: int | None = None
    """Highest event time of this batch's good records."""
    accepted: int = 0
    """(record, window) pairs added to windows this batch: each is counted in the panes its window fires."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_in(self) -> int:
        """Rows read this batch: good records (``records``) + dead letters (``bad``)."""
        return self.records + self.bad


class BatchController:
    """Computes control entry N+1 from entry N and batch N's statistics.

    :arg log: the control log (under the query's checkpoint).
    :arg strategy: the watermark strategy (per-split generators).
    :arg periodic_interval: auto-watermark interval in ms.
    :arg clock: processing time source (injected; the wall clock by default).
    """

    def __init__(
        self,
        log: ControlLog,
        strategy: WatermarkStrategy,
        periodic_interval: int = 200,
        percentile: float = 100.0,
        splits: Iterable[str] = (),
        clock: Clock | None = None,
        metrics_path: Path | None = None,
    ) -> None:
        self.log = log
        self.strategy = strategy
        self.periodic_interval = periodic_interval
        self.percentile = percentile
        self.splits = [str(s) for s in splits]
        self.clock = clock or SystemClock()
        self.metrics_path = metrics_path
        self.end_of_input_requested = False
        self.end_when_exhausted: Callable[[], bool] | None = None
        """When set: end the input (next watermark MAX) after a batch with no records, if this also says so."""
        self.reports: list[BatchReport] = []
        self.first_batch_id = 0
        """The first batch this run of the query executes (set by ``start``); see :meth:`on_batch`."""
        self.next_entry: ControlEntry | None = None
        """The entry the latest :meth:`on_batch` wrote (or found) for the next batch."""

    def _source(self, start: int) -> SourceWatermarks:
        return SourceWatermarks(
            self.strategy,
            periodic_interval=self.periodic_interval,
            percentile=self.percentile,
            splits=self.splits,
            start_processing_time=start,
        )

    def watermarks_at(self, seq: int | None = None) -> SourceWatermarks:
        """The coordinator as control entry ``seq`` (default: the latest) left it, for inspection."""
        seq = self.log.latest_seq() if seq is None else seq
        entry = None if seq is None else self.log.read(seq)
        if entry is None:
            raise LookupError(
                f"no control entry {seq} in {self.log.directory} (entries older than {KEPT_ENTRIES} batches are pruned)"
            )
        source = self._source(entry.processing_time)
        source.restore(entry.coordinator)
        return source

    def ensure_initial_entry(self) -> ControlEntry:
        """Entry 0 for a new query (a restarted query keeps its log)."""
        latest = self.log.latest_seq()
        if latest is None:
            now = self.clock.now_ms()
            self.log.write(ControlEntry(0, MIN_TIMESTAMP, now, coordinator=self._source(now).snapshot()))
            latest = 0
        entry = self.log.read(latest)
        assert entry is not None
        return entry

    def entry_for_batch(self, batch_id: int) -> ControlEntry:
        """Control entry ``batch_id`` (batch N runs with entry N), which must exist."""
        entry = self.log.read(batch_id)
        if entry is None:
            raise RuntimeError(
                f"floodmark control entry {batch_id} is missing from {self.log.directory}: the checkpoint's "
                f"floodmark/control directory was altered or belongs to another query"
            )
        return entry

    def on_batch(
        self, batch_id: int, stats: list[dict[str, Any]], gauges: list[dict[str, Any]], counts: dict[str, int]
    ) -> BatchReport:
        seq = batch_id  # batch N runs with entry N (see batch_entry.py)
        entry = self.entry_for_batch(seq)
        source = self._source(entry.processing_time)
        source.restore(entry.coordinator)
        merged: dict[str, list[int]] = {}
        for row in stats:
            acc = merged.setdefault(str(row["fm_split"]), [0, row["fm_min_ts"], row["fm_max_ts"]])
            acc[0] += int(row["fm_count"])
            acc[1] = min(acc[1], int(row["fm_min_ts"]))
            acc[2] = max(acc[2], int(row["fm_max_ts"]))
        source.on_batch(SplitBatchStats(s, c, lo, hi) for s, (c, lo, hi) in sorted(merged.items()))
        now = max(self.clock.now_ms(), entry.processing_time)
        watermark = source.advance_processing_time(now)
        records = sum(c for c, _, _ in merged.values())
        # The first batch of a (re)started query may replay offsets planned before a restart, when newer input
        # did not exist yet: reading nothing there says nothing about the input now.
        read_nothing = records == 0 and not counts.get("BAD", 0) and batch_id > self.first_batch_id
        exhausted = self.end_when_exhausted is not None and read_nothing
        if exhausted and not self.end_of_input_requested:
            # Decided here, before entry N+1 is written, so the flush is the very next batch. A one-way latch:
            # a request made directly (end_of_input_requested = True) is never taken back.
            self.end_of_input_requested = bool(self.end_when_exhausted())
        end = entry.end_of_input or self.end_of_input_requested
        if end:
            watermark = MAX_TIMESTAMP
        self.log.write(ControlEntry(seq + 1, watermark, now, end, source.snapshot()))
        written = self.entry_for_batch(seq + 1)  # a replayed batch keeps the entry its first attempt wrote
        self.next_entry = written
        self.log.prune_one(seq - KEPT_ENTRIES)  # the one entry this batch moves out of the kept range
        holds = [g["fm_hold"] for g in gauges if g.get("fm_hold") is not None]
        pending = [g["fm_oldest_pending"] for g in gauges if g.get("fm_oldest_pending") is not None]
        report = BatchReport(
            batch_id=batch_id,
            seq=seq,
            watermark=entry.watermark,
            next_watermark=written.watermark,
            processing_time=entry.processing_time,
            splits=source.split_watermarks(),
            records=records,
            panes=counts.get("PANE", 0),
            late=counts.get("LATE", 0),
            bad=counts.get("BAD", 0),
            output_watermark=min([entry.watermark, *holds]),
            oldest_pending=min(pending) if pending else None,
            open_windows=sum(int(g.get("fm_open_windows") or 0) for g in gauges),
            next_processing_time=written.processing_time,
            split_records={split: c for split, (c, _, _) in merged.items()},
            max_event_time=max((hi for _, _, hi in merged.values()), default=None),
            accepted=sum(int(g.get("fm_accepted") or 0) for g in gauges),
        )
        self.reports.append(report)
        if self.metrics_path is not None:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with self.metrics_path.open("a") as handle:
                handle.write(json.dumps({**report.__dict__, "rows_in": report.rows_in}, default=str) + "\n")
        return report
