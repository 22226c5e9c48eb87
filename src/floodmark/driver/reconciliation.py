"""Where every input row went: the run's reconciliation count, from the batches' reports.

Every row a query reads ends in exactly one place: a good record, whose (record, window) pairs are each either
added to a window (and counted in the panes that window fires) or sent to the late output, or a dead letter
(with the reason and the original text). So, over a run::

    rows_in == records + dead_letters
    window_pairs == in_windows + late

and with a ``count`` aggregate and DISCARDING panes the panes' counts add up to ``in_windows``. A record
belongs to one window with tumbling, session and global windows, and to about ``size / slide`` with sliding
windows, so ``window_pairs`` is ``records`` times that.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from floodmark.driver.controller import BatchReport


@dataclass(frozen=True)
class Reconciliation:
    """Totals over a run's batches: see the module docstring for the identities they obey."""

    rows_in: int
    records: int
    dead_letters: int
    in_windows: int
    late: int

    @property
    def window_pairs(self) -> int:
        """(record, window) pairs of the good records: added to windows or late."""
        return self.in_windows + self.late

    @classmethod
    def of(cls, reports: Iterable[BatchReport]) -> Reconciliation:
        """The totals of ``reports``; a batch reported twice (replayed after a restart) counts once, as its
        last report (the attempt that was committed)."""
        latest = {report.batch_id: report for report in reports}
        batches = list(latest.values())
        return cls(
            rows_in=sum(r.rows_in for r in batches),
            records=sum(r.records for r in batches),
            dead_letters=sum(r.bad for r in batches),
            in_windows=sum(r.accepted for r in batches),
            late=sum(r.late for r in batches),
        )

    def describe(self) -> str:
        """``rows in 1,000 = 990 records + 10 dead letters; (record, window) pairs 990 = 985 in windows + 5 late``."""
        return (
            f"rows in {self.rows_in:,} = {self.records:,} records + {self.dead_letters:,} dead letters; "
            f"(record, window) pairs {self.window_pairs:,} = {self.in_windows:,} in windows + {self.late:,} late"
        )
