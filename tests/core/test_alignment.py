"""Watermark alignment: Flink's rule (FLIP-182/217) and the controller that applies it across sources."""

from datetime import timedelta

import pytest
from controller_rows import gauge_rows, stats

from floodmark.core.clock import ManualClock
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks import WatermarkAlignment, WatermarkStrategy
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import Controller, EngineHooks, SourceSettings

MINUTE = 60_000


def test_a_split_beyond_the_lowest_watermark_plus_the_drift_is_paused():
    alignment = WatermarkAlignment.of("g", timedelta(minutes=10))
    marks = {"0": (5 * MINUTE, False), "1": (15 * MINUTE, False), "2": (16 * MINUTE, False)}
    assert alignment.max_allowed(marks) == 15 * MINUTE
    assert alignment.paused(marks) == {"2"}, "15 min is within the drift (not above the maximal allowed)"


def test_idle_splits_and_splits_without_a_watermark_do_not_hold_the_group():
    alignment = WatermarkAlignment.of("g", MINUTE)
    marks = {
        "slow but idle": (0, True),
        "silent": (MIN_TIMESTAMP, False),
        "a": (10 * MINUTE, False),
        "b": (12 * MINUTE, False),
    }
    assert alignment.max_allowed(marks) == 11 * MINUTE
    assert alignment.paused(marks) == {"b"}
    assert alignment.paused({"idle": (99 * MINUTE, True), "silent": (MIN_TIMESTAMP, False)}) == frozenset()
    with pytest.raises(ValueError, match="drift"):
        WatermarkAlignment.of("g", 0)


def test_the_controller_pauses_across_the_sources_of_a_group_and_releases_as_the_slowest_catches_up(tmp_path):
    aligned = WatermarkStrategy.for_bounded_out_of_orderness(0).with_watermark_alignment("replay", 10 * MINUTE)
    sources = {"orders": SourceSettings(aligned), "clicks": SourceSettings(aligned)}
    clock = ManualClock(0)
    told: list[dict[str, frozenset[str]]] = []
    engine = EngineHooks(pause=told.append)
    controller = Controller(ControlLog(tmp_path), sources, {"join": ["orders", "clicks"]}, clock=clock, engine=engine)
    controller.ensure_initial_entry()
    assert controller.publish_paused() == {"orders": frozenset(), "clicks": frozenset()}, "no watermark yet"
    # orders/0 replays from an hour behind clicks' partitions.
    first = [stats("orders/0", 10, 0, MINUTE), stats("clicks/0", 10, 60 * MINUTE, 61 * MINUTE)]
    first.append(stats("clicks/1", 10, 60 * MINUTE, 65 * MINUTE))
    clock.advance_by(1_000)  # split watermarks move on the periodic emits (every 200 ms of processing time)
    report = controller.on_batch(0, first, {"join": gauge_rows(None, None, 0)}, {})
    assert report.paused_splits == ("clicks/0", "clicks/1")
    assert told[-1] == {"orders": frozenset(), "clicks": frozenset({"0", "1"})}
    # orders/0 catches up to within 10 minutes of clicks/0, not yet of clicks/1.
    clock.advance_by(1_000)
    report = controller.on_batch(
        1, [stats("orders/0", 10, MINUTE, 52 * MINUTE)], {"join": gauge_rows(None, None, 0)}, {}
    )
    assert report.paused_splits == ("clicks/1",)
    clock.advance_by(1_000)
    report = controller.on_batch(
        2, [stats("orders/0", 10, 52 * MINUTE, 56 * MINUTE)], {"join": gauge_rows(None, None, 0)}, {}
    )
    assert report.paused_splits == ()
    assert told[-1] == {"orders": frozenset(), "clicks": frozenset()}


def test_a_group_whose_sources_disagree_on_the_drift_is_refused(tmp_path):
    base = WatermarkStrategy.for_bounded_out_of_orderness(0)
    sources = {
        "a": SourceSettings(base.with_watermark_alignment("g", MINUTE)),
        "b": SourceSettings(base.with_watermark_alignment("g", 2 * MINUTE)),
    }
    controller = Controller(ControlLog(tmp_path), sources, {"s": ["a", "b"]}, clock=ManualClock(0))
    controller.ensure_initial_entry()
    with pytest.raises(ValueError, match="different drifts"):
        controller.publish_paused()


def test_sources_without_alignment_publish_nothing(tmp_path):
    plain = WatermarkStrategy.for_bounded_out_of_orderness(0)
    engine = EngineHooks(pause=lambda paused: pytest.fail("told about pauses without alignment"))
    controller = Controller.of_aggregation(
        ControlLog(tmp_path), SourceSettings(plain), clock=ManualClock(0), engine=engine
    )
    controller.ensure_initial_entry()
    assert controller.publish_paused() == {}
    assert (
        controller.on_batch(0, [stats("0", 1, 0, 0)], {"aggregation": gauge_rows(None, None, 0)}, {}).paused_splits
        == ()
    )
