"""What one batch did, as the driver reports it: per batch (:class:`BatchReport`) and per stage
(:class:`StageReport`); what the live view, Prometheus, the metrics file, listeners and the reconciliation read."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks.stage import StageTimes
from floodmark.driver.next_batch import NextBatch


@dataclass
class StageReport:
    """What one stage of a query did in one batch (times in ms)."""

    input_watermark: int
    """The stage's input watermark for the batch (MIN of its upstreams' after the previous batch)."""
    output_watermark: int
    """After the batch: MIN(input watermark, the lowest pane timestamp the stage still owes); never regresses."""
    next_input_watermark: int
    panes: int = 0
    late: int = 0
    bad: int = 0
    """The stage's dead letters: its sources' rows that are no record (:attr:`source_dead_letters`) and its own."""
    source_dead_letters: int = 0
    """Of ``bad``, its sources' rows that are no record (every stage reading the source has them)."""
    made_dead_letters: int = 0
    """Of ``bad``, the ones the stage made of its own work (a process function's calls that raised, rows that do
    not fit its output), not input it refused."""
    accepted: int = 0
    open_windows: int = 0
    oldest_pending: int | None = None
    """Processing time of the oldest record taken in and not yet emitted (None: nothing pending)."""
    processing_time: int = 0

    def times(self) -> StageTimes:
        """The stage's watermarks and lags after the batch (:class:`StageTimes`)."""
        return StageTimes.at(self.processing_time, self.input_watermark, self.output_watermark, self.oldest_pending)


@dataclass
class BatchReport:
    """What one batch did, for metrics and the live view."""

    batch_id: int
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
    stages: dict[str, StageReport] = field(default_factory=dict)
    """What each stage did, by name (``watermark`` is the MIN of their input watermarks, so it is MAX only once
    every stage has had the end of input)."""

    paused_splits: tuple[str, ...] = ()
    """Split labels that watermark alignment pauses for the next batch (sorted; see :meth:`Controller.paused`)."""

    split_backlog: dict[str, int] = field(default_factory=dict)
    """Records each split's source left unread when it planned this batch, by split label, for the splits whose
    source says (Kafka partitions, files read in order); a split with unread records is never idle."""

    input_dead_letters: int | None = None
    """Rows read this batch that are no record of their source (not parsed, no usable event time), each counted
    once whatever reads it (:attr:`source_dead_letters` summed). ``bad`` counts every stage's dead letters: these
    once per stage that reads their source, and each stage's own (:attr:`stage_dead_letters`). None: all of
    ``bad`` (a report of an older floodmark)."""
    source_dead_letters: dict[str, int] = field(default_factory=dict)
    """:attr:`input_dead_letters` by source."""
    stage_dead_letters: int = 0
    """Dead letters the stages made of records they read (an aggregate's input missing or not a number, a process
    function's call that raised or row that does not fit; panes a stage refused), summed over the stages."""

    next_batch: NextBatch | None = None
    """When the controller asked for the next batch without input, decided after this one (None: not said)."""

    replayed: bool = False
    """An earlier attempt of this batch (before a crash, a failed sink or a restart) already completed it: it wrote
    its outputs and the next control entry, then reported it, unless it stopped in between. Spark replays a batch
    it has not committed; its outputs are replaced, and this report repeats that attempt's numbers. Whatever
    counts batches (Prometheus' counters, :attr:`Controller.reports`, the metrics file) counts it once."""

    def to_json(self) -> str:
        """The report as one line of the metrics file (``rows_in`` included for its readers)."""
        return json.dumps({**asdict(self), "rows_in": self.rows_in}, default=str)

    @classmethod
    def from_json(cls, line: str) -> BatchReport:
        """The report :meth:`to_json` wrote."""
        fields = json.loads(line)
        fields.pop("rows_in", None)
        fields["splits"] = {split: (int(w), bool(idle)) for split, (w, idle) in fields["splits"].items()}
        fields["stages"] = {name: StageReport(**stage) for name, stage in fields["stages"].items()}
        fields["paused_splits"] = tuple(fields["paused_splits"])
        planned = fields.get("next_batch")
        fields["next_batch"] = None if planned is None else NextBatch(**planned)
        return cls(**fields)

    @property
    def rows_in(self) -> int:
        """Rows read this batch: records (``records``) + the rows that are none (:attr:`read_dead_letters`)."""
        return self.records + self.read_dead_letters

    @property
    def read_dead_letters(self) -> int:
        """:attr:`input_dead_letters`, or ``bad`` when not given (a query of one stage)."""
        return self.bad if self.input_dead_letters is None else self.input_dead_letters


MOSTLY_DEAD_LETTERS = 0.5
"""A batch whose dead letters are more than this share of the rows it read logs a warning: the input is
probably not what the definition expects (schema, event-time column or unit), and nothing else would stop."""


def dead_letter_warning(report: BatchReport, first_reason: Callable[[], str | None] | None = None) -> str | None:
    """One line when most of ``report``'s rows were dead letters (else None); ``first_reason()`` gives one of
    their reasons and is called only then (it may cost a Spark job)."""
    if not report.read_dead_letters or report.read_dead_letters <= MOSTLY_DEAD_LETTERS * report.rows_in:
        return None
    reason = first_reason() if first_reason is not None else None
    return (
        f"batch {report.batch_id}: {report.read_dead_letters:,} of {report.rows_in:,} rows were dead letters"
        + (f", first reason: {reason}" if reason else "")
        + "; check the input against the definition (schema, event-time column and unit)"
    )
