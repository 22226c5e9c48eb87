"""The controller without Spark: end of input decided in the batch that read nothing, as a one-way latch."""

from __future__ import annotations

from floodmark import WatermarkStrategy
from floodmark.core.clock import ManualClock
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import AGGREGATION_STAGE, Controller, EngineHooks, SourceSettings


def controller(tmp_path):
    source = SourceSettings(WatermarkStrategy.for_bounded_out_of_orderness(0))
    ctl = Controller.of_aggregation(ControlLog(tmp_path), source, clock=ManualClock(0))
    ctl.ensure_initial_entry()
    return ctl


def stats(count):
    return [{"fm_split": "0", "fm_count": count, "fm_min_ts": 10, "fm_max_ts": 20}] if count else []


def test_end_of_input_after_the_first_batch_without_records(tmp_path):
    ctl = controller(tmp_path)
    ctl.end_input_when(lambda: True)
    assert ctl.on_batch(0, stats(3), {}, {}).next_watermark < MAX_TIMESTAMP
    assert ctl.on_batch(1, [], {}, {AGGREGATION_STAGE: {"BAD": 1}}).next_watermark < MAX_TIMESTAMP, "dead letters"
    assert ctl.on_batch(2, [], {}, {}).next_watermark == MAX_TIMESTAMP
    assert ctl.on_batch(3, [], {}, {}).watermark == MAX_TIMESTAMP


def test_the_first_batch_after_a_restart_does_not_end_the_input(tmp_path):
    ctl = controller(tmp_path)
    ctl.on_batch(0, stats(3), {}, {})
    ctl.on_batch(1, stats(2), {}, {})
    # Batch 2 replays offsets planned before the restart: no input then.
    restarted = Controller(ctl.log, ctl.sources, ctl.upstreams, clock=ManualClock(0), engine=EngineHooks(2))
    restarted.end_input_when(lambda: True)
    assert restarted.on_batch(2, [], {}, {}).next_watermark < MAX_TIMESTAMP
    assert restarted.on_batch(3, [], {}, {}).next_watermark == MAX_TIMESTAMP


def test_a_direct_request_is_not_taken_back_by_a_source_that_is_not_done(tmp_path):
    ctl = controller(tmp_path)
    ctl.end_input_when(lambda: False)
    assert ctl.on_batch(0, [], {}, {}).next_watermark < MAX_TIMESTAMP, "the source says it is not done"
    ctl.end_input()
    assert ctl.on_batch(1, [], {}, {}).next_watermark == MAX_TIMESTAMP
