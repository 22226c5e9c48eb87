"""What waits at an event time in an interval join or a process stage, explained from a control log (no Spark): the
join's partners, cleanup and lateness and the timer's firing point, against the input watermark the controller
made from the sources, and the source that holds it back."""

from __future__ import annotations

import pytest

from floodmark import WatermarkStrategy
from floodmark.core.clock import ManualClock
from floodmark.core.join.spec import IntervalJoinSpec
from floodmark.core.pipeline import JoinStage, ProcessStage
from floodmark.core.windows import Window
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import Controller, SourceSettings
from floodmark.explain.rows import TimeStatus, explain_time
from floodmark.explain.stage import explain_stage

JOIN = JoinStage("pairs", "clicks", "views", "user", IntervalJoinSpec((-5_000, 10_000), how="left"))


def run(tmp_path, stage, batches):
    """A controller of ``stage`` over two sources, fed ``batches`` of ``{source: max event time}`` (bounded
    out-of-orderness 0: a source's watermark is its max event time - 1)."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    sources = {name: SourceSettings(strategy) for name in stage.upstream}
    clock = ManualClock(0)
    ctl = Controller(ControlLog(tmp_path), sources, {stage.name: list(stage.upstream)}, clock=clock)
    ctl.ensure_initial_entry()
    for batch, maxima in enumerate(batches):
        clock.advance_by(1_000)  # past the generators' periodic interval: each batch emits a watermark
        ctl.begin_batch(batch)
        stats = [
            {"fm_split": ctl.split_label(source, "0"), "fm_count": 1, "fm_min_ts": ts, "fm_max_ts": ts}
            for source, ts in maxima.items()
        ]
        ctl.on_batch(batch, stats, {}, {})
    return ctl


def test_a_join_row_waits_for_the_slower_sides_watermark_then_is_cleaned_up(tmp_path):
    ctl = run(tmp_path, JOIN, [{"clicks": 100_000, "views": 20_000}])
    # A left row at 25 s joins views in [20 s, 35 s] and leaves at 35 s (lateness 0).
    waiting = explain_time(ctl, JOIN, 25_000, "left")
    assert waiting.status is TimeStatus.WAITING_FOR_WATERMARK and waiting.decided_at == 35_000
    assert waiting.input_watermark == 19_999
    assert [u.name for u in waiting.upstreams if not u.idle and u.watermark < 35_000] == ["views"]
    text = waiting.text()
    assert "'views'" in text and "HOLDING IT BACK" in text and "emitted with nulls" in text, text
    assert "Not late" in text, text
    # The same time on the right side: partners at [15 s, 30 s], cleaned up at 30 s (an inner side: dropped).
    right = explain_time(ctl, JOIN, 25_000, "right")
    assert right.decided_at == 30_000 and "is dropped" in right.decided_when
    ctl = run(tmp_path / "later", JOIN, [{"clicks": 100_000, "views": 20_000}, {"clicks": 100_000, "views": 40_000}])
    assert explain_time(ctl, JOIN, 25_000, "left", batch=0).status is TimeStatus.WAITING_FOR_WATERMARK
    assert explain_time(ctl, JOIN, 25_000, "left", batch=1).status is TimeStatus.DUE, "entry 2 has views at 40 s"
    ctl.clock.advance_by(1_000)
    ctl.begin_batch(2)
    ctl.on_batch(2, [], {}, {})
    done = explain_time(ctl, JOIN, 25_000, "left")
    assert done.status is TimeStatus.DONE and "left the buffer" in done.reason


def test_a_row_below_the_watermark_is_reported_late_not_joined(tmp_path):
    ctl = run(tmp_path, JOIN, [{"clicks": 100_000, "views": 20_000}])
    text = explain_time(ctl, JOIN, 15_000, "right").text()
    assert "goes to the late output" in text, "the next batch's input watermark, 19.999 s, is past 15 s:\n" + text


class Silence:
    """A keyed process function (its calls do not matter here: explain reads the control log only)."""

    def process(self, record, ctx):
        ctx.set_event_timer(record["ts"] + 10_000)

    def on_timer(self, timer, ctx):
        ctx.emit({"alert": "silent"})


def test_a_process_stages_timer_fires_when_the_input_watermark_reaches_it(tmp_path):
    stage = ProcessStage("alerts", ["clicks", "views"], "user", Silence(), {"alert": "string"})
    ctl = run(tmp_path, stage, [{"clicks": 50_000, "views": 30_000}])
    waiting = explain_time(ctl, stage, 40_000)
    assert waiting.status is TimeStatus.WAITING_FOR_WATERMARK and "views" in waiting.reason
    assert explain_time(ctl, stage, 20_000).status is TimeStatus.DUE, "batch 0 ran with no watermark yet"
    with pytest.raises(ValueError, match="no side"):
        explain_time(ctl, stage, 40_000, "left")


def test_what_has_windows_is_explained_as_windows(tmp_path):
    ctl = run(tmp_path, JOIN, [{"clicks": 100_000, "views": 20_000}])
    with pytest.raises(ValueError, match="say which side"):
        explain_time(ctl, JOIN, 15_000)
    with pytest.raises(ValueError, match="no windows"):
        explain_stage(ctl, JOIN, "u", Window(0, 10_000))
