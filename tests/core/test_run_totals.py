"""A run's reconciliation kept batch by batch equals the one over every report, and the reports kept in memory
are bounded (issue 44: a query that runs for months must not grow with its batches)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import WatermarkStrategy
from floodmark.core.clock import ManualClock
from floodmark.driver import controller as controller_module
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import Controller, SourceSettings
from floodmark.driver.reconciliation import Reconciliation, RunTotals, StageReconciliation, committed
from floodmark.driver.reports import BatchReport, StageReport

UPSTREAMS = {"a": ["src"], "b": ["a"]}


def report(batch_id: int, counts: tuple[int, ...], replayed: bool = False) -> BatchReport:
    n0, n1, bad, accepted, late, panes, b_bad, b_accepted = counts
    stages = {
        "a": StageReport(0, 0, 0, panes=panes, late=late, bad=bad, source_dead_letters=bad, accepted=accepted),
        "b": StageReport(0, 0, 0, panes=panes // 2, late=0, bad=b_bad, accepted=b_accepted),
    }
    return BatchReport(
        batch_id=batch_id,
        watermark=0,
        next_watermark=0,
        processing_time=0,
        splits={},
        records=n0 + n1,
        panes=panes + panes // 2,
        late=late,
        bad=bad + b_bad,
        accepted=accepted + b_accepted,
        split_records={"0": n0, "1": n1},
        stages=stages,
        input_dead_letters=bad,
        source_dead_letters={"src": bad},
        stage_dead_letters=b_bad,
        replayed=replayed,
    )


COUNTS = st.tuples(*[st.integers(0, 50)] * 8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(COUNTS, st.booleans(), COUNTS), max_size=30))
def test_totals_kept_batch_by_batch_equal_the_totals_over_every_report(batches):
    totals, reports = RunTotals(UPSTREAMS), []
    for batch_id, (counts, replayed, again) in enumerate(batches):
        first = report(batch_id, counts)
        totals.add(first, lambda label: "src")
        reports.append(first)
        if replayed:  # Spark ran the batch again after a failure: its last attempt's report counts
            second = report(batch_id, again, replayed=True)
            totals.add(second, lambda label: "src", replaced=first)
            reports.append(second)
    assert len(committed(reports)) == len(batches)
    assert totals.run == Reconciliation.of(reports, stages=len(UPSTREAMS))
    for stage, upstream in UPSTREAMS.items():
        assert totals.stages[stage] == StageReconciliation.of(reports, stage, upstream, lambda label: "src")


def test_a_controller_keeps_the_latest_reports_and_counts_every_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(controller_module, "REPORTS_KEPT", 5)
    monkeypatch.setattr(controller_module, "METRICS_FILE_BYTES", 2_000)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    metrics = tmp_path / "floodmark" / "metrics.jsonl"
    sources = {"src": SourceSettings(strategy)}
    ctl = Controller(ControlLog(tmp_path), sources, UPSTREAMS, clock=ManualClock(0), metrics_path=metrics)
    for batch_id in range(12):
        ctl.record(report(batch_id, (1, 2, 1, 3, 0, 1, 0, 1)))
    ctl.record(report(11, (1, 2, 1, 3, 0, 1, 0, 1), replayed=True))
    assert [r.batch_id for r in ctl.reports] == [7, 8, 9, 10, 11]
    older = metrics.with_name("metrics.jsonl.1")
    on_disk = [json.loads(line)["batch_id"] for path in (older, metrics) for line in path.read_text().splitlines()]
    assert on_disk == list(range(on_disk[0], 12)) and on_disk[0] > 0, "the latest batches, each once, in order"
    assert older.stat().st_size >= 2_000 and metrics.stat().st_size < 2 * 2_000, "a file passes the size by a line"
    assert ctl.batches_reported == 12
    assert ctl.totals.run.rows_in == 12 * 4 and ctl.totals.stages["a"].input_rows == 12 * 4
    again = Controller(ControlLog(tmp_path), sources, UPSTREAMS, earlier=ctl)
    assert list(again.reports) == list(ctl.reports) and again.batches_reported == 12 and again.totals is ctl.totals


def test_a_pipelines_line_says_its_pairs_are_every_stages():
    """A pipeline's rows in are its sources' rows, its (record, window) pairs every stage's: the line says so."""
    lines = {}
    for name, upstreams in (("pipeline", UPSTREAMS), ("one stage", {"a": ["src"]})):
        totals = RunTotals(upstreams)
        totals.add(report(0, (1, 2, 1, 3, 0, 1, 0, 1)), lambda label: "src")
        run = totals.run
        rows = f"rows in {run.rows_in} = {run.records} records + {run.dead_letters} dead letters; "
        lines[name] = (run.describe(), rows, f"{run.window_pairs} = {run.in_windows} in windows + {run.late} late")
    described, rows, pairs = lines["pipeline"]
    assert described == f"{rows}(record, window) pairs of the 2 stages {pairs}"  # stage b refused nothing
    described, rows, pairs = lines["one stage"]
    assert described == f"{rows}(record, window) pairs {pairs}"


def test_records_a_stage_could_not_use_are_said_apart_from_the_sources_dead_letters():
    """A source's rows that are no record are its dead letters, once; a record one stage refuses (its aggregate's
    input missing) is still a record of the source, and a dead letter of that stage, said on its own."""
    totals = RunTotals(UPSTREAMS)
    totals.add(report(0, (5, 5, 2, 8, 0, 2, 3, 1)), lambda label: "src")
    run = totals.run
    assert (run.rows_in, run.records, run.dead_letters, run.stage_dead_letters) == (12, 10, 2, 3)
    assert "; 3 more dead letters of stages that could not use records; " in run.describe()


def test_a_restarted_controller_resumes_the_checkpoints_totals(tmp_path):
    """A new run on the same checkpoint counts on from the totals through the batch before its first one; a batch
    that ran but was not committed (its totals written) is counted once when it runs again."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    sources = {"src": SourceSettings(strategy)}
    first = Controller(ControlLog(tmp_path), sources, UPSTREAMS, clock=ManualClock(0))
    for batch_id in range(3):
        first.record(report(batch_id, (1, 2, 1, 3, 0, 1, 0, 1)))
    # Batch 2 was not committed: the next run starts with it again.
    second = Controller(ControlLog(tmp_path), sources, UPSTREAMS, clock=ManualClock(0))
    for batch_id in (2, 3):
        second.record(report(batch_id, (1, 2, 1, 3, 0, 1, 0, 1)))
    assert second.totals.run.rows_in == 4 * 4 and second.totals.stages["a"].input_rows == 4 * 4
    assert second.totals.run == Reconciliation.of([report(b, (1, 2, 1, 3, 0, 1, 0, 1)) for b in range(4)], stages=2)
