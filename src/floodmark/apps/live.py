"""The live terminal view of a running query (rich): per-split watermarks, idleness, lags and counts.

:class:`LiveView` is a batch listener (``EventTimeAggregation.start(listeners=[view])``):
each :class:`~floodmark.driver.reports.BatchReport` redraws one table. It
shows, for every split, its watermark, whether it is idle, and whether it is
the one holding the combined watermark back, then the combined watermark, the
event-time lag (how far the combined watermark trails the latest event time
seen: data buffered and not yet final) and the processing-time lag (how long
the oldest not-yet-fired record has waited), and the running totals of panes,
late and bad records. A query of several stages (a pipeline) also gets one row
per stage: its input and output watermarks, its event-time and processing-time
lags (:meth:`~floodmark.driver.reports.StageReport.times`), its open windows
and its running totals of panes, late and bad records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, format_seconds, format_watermark

if TYPE_CHECKING:
    from floodmark.driver.reports import BatchReport


@dataclass
class StageTotals:
    """One stage's running totals over the reports seen."""

    panes: int = 0
    late: int = 0
    bad: int = 0


@dataclass
class Totals:
    """Running totals over the reports seen."""

    batches: int = 0
    records: int = 0
    panes: int = 0
    late: int = 0
    bad: int = 0
    max_event_time: int = MIN_TIMESTAMP
    split_records: dict[str, int] = field(default_factory=dict)
    stages: dict[str, StageTotals] = field(default_factory=dict)
    """Per stage, by name."""

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        self.records += report.records
        self.panes += report.panes
        self.late += report.late
        self.bad += report.bad
        for split, count in report.split_records.items():
            self.split_records[split] = self.split_records.get(split, 0) + count
        if report.max_event_time is not None:
            self.max_event_time = max(self.max_event_time, report.max_event_time)
        for name, stage in report.stages.items():
            totals = self.stages.setdefault(name, StageTotals())
            totals.panes += stage.panes
            totals.late += stage.late
            totals.bad += stage.bad


def _state(idle: bool, unread: int | None, holding: bool) -> Text:
    """A split's state: idle (``caught up`` when its source said it had nothing left to read), holding the combined
    watermark back, behind (its source left ``unread`` of it when it planned the batch: never idle) or active."""
    if idle:
        return Text("idle (caught up)" if unread == 0 else "IDLE (ignored)", style="yellow")
    behind = f"behind ({unread:,} unread)" if unread else None
    if holding:
        return Text("holding the watermark back" + (f", {behind}" if behind else ""), style="bold red")
    return Text(behind or "active")


def render(report: BatchReport, totals: Totals, title: str = "floodmark") -> Group:
    """One frame of the view for the latest report (pure: used by the live view and its test)."""
    combined = report.next_watermark
    # At the end of input the combined watermark is MAX: no split holds it back, none is "ahead" of it.
    measured = MIN_TIMESTAMP < combined < MAX_TIMESTAMP
    live = {s: wm for s, (wm, idle) in report.splits.items() if not idle}
    holder = min(live, key=lambda s: live[s]) if live and measured else None
    table = Table(title=f"{title} - batch {report.batch_id}", expand=False)
    for column in ("split", "watermark", "state", "ahead of combined", "records"):
        table.add_column(column, justify="right" if column in ("ahead of combined", "records") else "left")
    for split in sorted(report.splits, key=_split_order):
        watermark, idle = report.splits[split]
        state = _state(idle, report.split_backlog.get(split), split == holder and len(live) > 1)
        behind = watermark - combined if measured and watermark > MIN_TIMESTAMP else None
        table.add_row(
            split,
            format_watermark(watermark),
            state,
            format_seconds(behind),
            f"{totals.split_records.get(split, 0):,}",
        )
    event_lag = totals.max_event_time - combined if measured and totals.max_event_time > MIN_TIMESTAMP else None
    pending_lag = None if report.oldest_pending is None else max(0, report.processing_time - report.oldest_pending)
    summary = Table.grid(padding=(0, 2))
    summary.add_row("combined watermark", format_watermark(combined), "open windows", f"{report.open_windows:,}")
    summary.add_row("event-time lag", format_seconds(event_lag), "processing-time lag", format_seconds(pending_lag))
    summary.add_row("records", f"{totals.records:,}", "panes", f"{totals.panes:,}")
    summary.add_row("late records", f"{totals.late:,}", "bad records", f"{totals.bad:,}")
    notes = []
    idle = [s for s, (_, is_idle) in report.splits.items() if is_idle]
    if idle:
        notes.append(
            Text(
                f"split(s) {', '.join(sorted(idle, key=_split_order))} idle: they no longer hold the combined "
                "watermark back, so windows keep firing (what with_idleness is for).",
                style="yellow",
            )
        )
    stages = [_stage_table(report, totals)] if len(report.stages) > 1 else []
    return Group(table, *stages, summary, *notes)


def _stage_table(report: BatchReport, totals: Totals) -> Table:
    """One row per stage, upstream first (a single stage's numbers are the summary's)."""
    table = Table(title="stages", expand=False)
    table.add_column("stage")
    for column in ("input watermark", "output watermark"):
        table.add_column(column)
    for column in ("event-time lag", "processing-time lag", "open windows", "panes", "late", "bad"):
        table.add_column(column, justify="right")
    for name, stage in report.stages.items():
        times = stage.times()
        # Measured from a watermark of MIN (none yet) or MAX (end of input), a lag means nothing.
        measured = MIN_TIMESTAMP < times.output_watermark < MAX_TIMESTAMP
        seen = totals.stages.get(name, StageTotals())
        table.add_row(
            name,
            format_watermark(times.input_watermark),
            format_watermark(times.output_watermark),
            format_seconds(times.event_time_lag if measured else None),
            format_seconds(times.processing_time_lag),
            f"{stage.open_windows:,}",
            f"{seen.panes:,}",
            f"{seen.late:,}",
            f"{seen.bad:,}",
        )
    return table


def _split_order(split: str) -> tuple[int, str]:
    return (0, f"{int(split):012d}") if split.isdigit() else (1, split)


class LiveView:
    """A batch listener that redraws :func:`render` in the terminal; use as a context manager."""

    def __init__(self, title: str = "floodmark", console: Console | None = None) -> None:
        self.title = title
        self.console = console or Console()
        self.totals = Totals()
        self.live = Live(
            Text("waiting for the first batch (Spark's Python workers take a few seconds)"),
            console=self.console,
            refresh_per_second=4,
            transient=False,
        )

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    def __call__(self, report: BatchReport) -> None:
        self.totals.add(report)
        self.live.update(render(report, self.totals, self.title))
