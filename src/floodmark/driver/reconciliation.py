"""Where every input row went: the run's reconciliation count, from the batches' reports.

Every row a query reads is either a record of its source or a dead letter (not parsed, no usable event time; with
the reason and the original text), counted once whatever reads it. A stage may still refuse a record it cannot use
(an aggregate's input missing or not a number): that record is a dead letter of that stage, counted apart. Each
good record's (record, window) pairs are either added to a window (and counted in the panes that window fires) or
sent to the late output. So, over a run::

    rows_in == records + dead_letters
    window_pairs == in_windows + late

and with a ``count`` aggregate and DISCARDING panes the panes' counts add up to ``in_windows``. A record
belongs to one window with tumbling, session and global windows, and to about ``size / slide`` with sliding
windows, so in a query of one stage ``window_pairs`` is ``records - stage_dead_letters`` times that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from floodmark.driver.reports import BatchReport


def committed(reports: Iterable[BatchReport]) -> list[BatchReport]:
    """One report per batch: a batch reported twice (replayed after a restart) counts as its last report (the
    attempt that was committed)."""
    return list({report.batch_id: report for report in reports}.values())


@dataclass(frozen=True)
class Reconciliation:
    """Totals over a run's batches: see the module docstring for the identities they obey."""

    rows_in: int
    records: int
    dead_letters: int
    in_windows: int
    late: int
    stage_dead_letters: int = 0
    """Records a stage could not use (its own dead letters), summed over the stages."""
    stages: int = 1
    """The stages whose (record, window) pairs the totals add up: a pipeline's rows in are its sources', its
    pairs every stage's (a stage reading another's panes adds pairs of its own)."""

    @property
    def window_pairs(self) -> int:
        """(record, window) pairs of the good records: added to windows or late."""
        return self.in_windows + self.late

    @classmethod
    def of(cls, reports: Iterable[BatchReport], stages: int = 1) -> Reconciliation:
        """The totals of ``reports`` of a query of ``stages`` stages; a batch reported twice (replayed after a
        restart) counts once, as its last report (the attempt that was committed)."""
        batches = committed(reports)
        return cls(
            rows_in=sum(r.rows_in for r in batches),
            records=sum(r.records for r in batches),
            dead_letters=sum(r.read_dead_letters for r in batches),
            in_windows=sum(r.accepted for r in batches),
            late=sum(r.late for r in batches),
            stage_dead_letters=sum(r.stage_dead_letters for r in batches),
            stages=stages,
        )

    def describe(self) -> str:
        """``rows in 1,000 = 990 records + 10 dead letters; (record, window) pairs 990 = 985 in windows + 5 late``;
        with several stages ``(record, window) pairs of the 3 stages 1,200 = ...``; records a stage could not use
        are said between the two: ``...; 3 more dead letters of stages that could not use records; ...``."""
        pairs = "(record, window) pairs" if self.stages == 1 else f"(record, window) pairs of the {self.stages} stages"
        refused = ""
        if self.stage_dead_letters:
            refused = f"{self.stage_dead_letters:,} more dead letters of stages that could not use records; "
        return (
            f"rows in {self.rows_in:,} = {self.records:,} records + {self.dead_letters:,} dead letters; {refused}"
            f"{pairs} {self.window_pairs:,} = {self.in_windows:,} in windows + {self.late:,} late"
        )


@dataclass(frozen=True)
class StageReconciliation:
    """Where one stage's input rows went, over a run's batches.

    A stage reads its sources' rows (``input_rows`` = their records and the rows that are none) or its upstream
    stages' panes (``input_rows`` = those panes, one row each); its dead letters are the input rows it refused
    (rows that are no record, records it could not use) and those it made of its own work (a process function's
    calls that raised, rows that do not fit its output). Its good records' (record, window) pairs are added to
    windows or late::

        input_rows == records + refused   (refused == dead_letters - made_dead_letters)
        window_pairs == in_windows + late

    and ``window_pairs == records`` for assigners that give a record one window (tumbling, sessions, global).
    """

    stage: str
    input_rows: int
    dead_letters: int
    in_windows: int
    late: int
    panes: int
    made_dead_letters: int = 0
    """Of ``dead_letters``, those the stage made of its own work (a process function's calls that raised, rows that
    do not fit its output): the rest are input rows it refused."""

    @property
    def refused(self) -> int:
        """The input rows that were dead letters (``dead_letters`` but the ones the stage made)."""
        return self.dead_letters - self.made_dead_letters

    @property
    def records(self) -> int:
        """The stage's good input rows."""
        return self.input_rows - self.refused

    @property
    def window_pairs(self) -> int:
        return self.in_windows + self.late

    @classmethod
    def of(
        cls, reports: Iterable[BatchReport], stage: str, upstream: Sequence[str], source_of: Callable[[str], str]
    ) -> StageReconciliation:
        """``stage``'s totals over ``reports`` (a replayed batch counts once, as its last report).

        :arg upstream: the sources or stages ``stage`` reads. :arg source_of: a split label of the reports ->
            its source (``Controller.source_of``).
        """
        batches = committed(reports)
        mine = [r.stages[stage] for r in batches if stage in r.stages]
        bad = sum(s.bad for s in mine)
        # The panes of the upstream stages, the records and dead letters of the upstream sources (a join may read one
        # of each; names of sources and stages are distinct).
        input_rows = sum(r.stages[up].panes for r in batches for up in upstream if up in r.stages)
        split_records = [item for r in batches for item in r.split_records.items()]
        input_rows += sum(n for r in batches for source, n in r.source_dead_letters.items() if source in upstream)
        input_rows += sum(count for label, count in split_records if source_of(label) in upstream)
        return cls(
            stage=stage,
            input_rows=input_rows,
            dead_letters=bad,
            in_windows=sum(s.accepted for s in mine),
            made_dead_letters=sum(s.made_dead_letters for s in mine),
            late=sum(s.late for s in mine),
            panes=sum(s.panes for s in mine),
        )

    def describe(self) -> str:
        """``stage means: input 120 = 120 records + 0 dead letters; pairs 120 = 118 in windows + 2 late; 4 panes``,
        and ``; 2 more dead letters made by its function`` when the stage made some."""
        made = f"; {self.made_dead_letters:,} more dead letters made by its function" if self.made_dead_letters else ""
        return (
            f"stage {self.stage}: input {self.input_rows:,} = {self.records:,} records + {self.refused:,} "
            f"dead letters; (record, window) pairs {self.window_pairs:,} = {self.in_windows:,} in windows + "
            f"{self.late:,} late; {self.panes:,} panes{made}"
        )


Totals = TypeVar("Totals", Reconciliation, StageReconciliation)


def _plus(totals: Totals, more: Totals, sign: int) -> Totals:
    """``totals`` with each count of ``more`` added (``sign`` 1) or taken away (-1)."""
    names = [f.name for f in fields(totals) if f.name not in ("stage", "stages")]
    return replace(totals, **{name: getattr(totals, name) + sign * getattr(more, name) for name in names})


class RunTotals:
    """A run's reconciliation kept batch by batch, so that it needs no list of every batch's report: a report adds
    its counts; a replayed batch's report replaces the one its earlier attempt made (takes those away first).

    :arg upstreams: each stage's sources or upstream stages.
    """

    def __init__(self, upstreams: Mapping[str, Sequence[str]]) -> None:
        self.upstreams = {stage: list(upstream) for stage, upstream in upstreams.items()}
        self.run = Reconciliation.of((), stages=max(1, len(self.upstreams)))
        """Every stage's totals together (:meth:`Reconciliation.of` over the run's reports)."""
        self.stages = {stage: StageReconciliation.of((), stage, [], str) for stage in self.upstreams}
        """Each stage's totals (:meth:`StageReconciliation.of` over the run's reports)."""

    def add(self, report: BatchReport, source_of: Callable[[str], str], replaced: BatchReport | None = None) -> None:
        """Count ``report`` (instead of ``replaced``, an earlier attempt's report of the same batch).

        :arg source_of: a split label of the reports -> its source (``Controller.source_of``)."""
        for sign, counted in ((1, report), (-1, replaced)):
            if counted is None:
                continue
            self.run = _plus(self.run, Reconciliation.of([counted]), sign)
            for stage, upstream in self.upstreams.items():
                mine = StageReconciliation.of([counted], stage, upstream, source_of)
                self.stages[stage] = _plus(self.stages[stage], mine, sign)

    def snapshot(self) -> dict[str, Any]:
        """The totals as JSON-able data (:meth:`restore` reads them back)."""
        return {"run": asdict(self.run), "stages": {name: asdict(totals) for name, totals in self.stages.items()}}

    @classmethod
    def restore(cls, upstreams: Mapping[str, Sequence[str]], saved: Mapping[str, Any]) -> RunTotals:
        """The totals :meth:`snapshot` saved, for a query of ``upstreams`` (a stage the snapshot lacks starts at 0)."""
        totals = cls(upstreams)
        totals.run = replace(totals.run, **{k: v for k, v in saved["run"].items() if k != "stages"})
        for name, kept in saved.get("stages", {}).items():
            if name in totals.stages:
                totals.stages[name] = StageReconciliation(**kept)
        return totals
