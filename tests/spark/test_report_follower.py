"""The Spark Connect client's copy of the controller, kept up to date from the metrics file the server's copy
appends to (``floodmark.spark.driver.report_follower``), without Spark: lines written after the follower was made,
whole lines only, across the file's rollover."""

from __future__ import annotations

from floodmark import WatermarkStrategy
from floodmark.core.clock import ManualClock
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import Controller, SourceSettings
from floodmark.driver.next_batch import HEARTBEAT, NextBatch
from floodmark.driver.reports import BatchReport, StageReport
from floodmark.spark.driver.report_follower import ReportFollower


def report(batch_id: int) -> BatchReport:
    stage = StageReport(input_watermark=batch_id, output_watermark=batch_id, next_input_watermark=batch_id + 1)
    return BatchReport(
        batch_id,
        batch_id,
        batch_id + 1,
        1_000,
        {"0": (batch_id, False)},
        records=3,
        stages={"aggregation": stage},
        next_batch=NextBatch(2_000 + batch_id, HEARTBEAT),
    )


def test_the_follower_records_each_report_once_with_its_listeners(tmp_path):
    source = SourceSettings(WatermarkStrategy.for_bounded_out_of_orderness(0))
    ctl = Controller.of_aggregation(ControlLog(tmp_path / "control"), source, clock=ManualClock(0))
    path = tmp_path / "metrics.jsonl"
    path.write_text(report(0).to_json() + "\n")  # an earlier run's: not this handle's
    heard: list[int] = []
    follower = ReportFollower(path, lambda: ctl, [lambda r: heard.append(r.batch_id)])
    with path.open("a") as out:
        out.write(report(1).to_json() + "\n" + report(2).to_json()[:40])  # batch 2's line is being written
    follower.poll()
    assert [r.batch_id for r in ctl.reports] == heard == [1]
    with path.open("a") as out:
        out.write(report(2).to_json()[40:] + "\n")
    path.replace(path.with_name(path.name + ".1"))  # rolled over after batch 2
    path.write_text(report(3).to_json() + "\n")
    follower.poll()
    follower.poll()
    assert heard == [1, 2, 3] and ctl.batches_reported == 3
    assert ctl.reports[-1] == report(3) and ctl.totals.run.records == 9
    assert ctl.next_batch == NextBatch(2_003, HEARTBEAT) and ctl.next_batch.waits_for_input, "query.settled reads it"
