"""Idle only when caught up: a split whose source says it has unread records is never idle, whatever its silence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks import SourceWatermarks, SplitBatchStats, WatermarkStrategy

BOUND, TIMEOUT, BATCH_MS = 100, 1_000, 500


def _late_records(schedule: list[int], says_unread: bool) -> tuple[int, int]:
    """Split ``slow`` has 40 records (timestamps 0, 100, ..., one every 100 ms of event time) waiting from the
    start; the batch ``i`` reads ``schedule[i]`` of them (0: held back by a rate limit or a pause) while split
    ``fast`` reads 5 records a batch, always 500 ms of event time ahead. Returns (records of ``slow`` that arrive
    below the combined watermark the batch ran with, batches after which ``slow`` was idle with records waiting)."""
    source = SourceWatermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(BOUND).with_idleness(TIMEOUT), splits=["fast", "slow"]
    )
    waiting = [i * 100 for i in range(40)]
    fast_next, late, idle_batches, now = 0, 0, 0, 0
    for take in [*schedule, 40]:
        batch, waiting = waiting[:take], waiting[take:]
        late += sum(1 for ts in batch if ts <= source.watermark)
        fast = [fast_next + i * 100 for i in range(5)]
        fast_next += 500 * 4  # the fast split runs ahead of the slow one's backlog
        stats = [SplitBatchStats("fast", 5, fast[0], fast[-1])]
        unread = len(waiting) if says_unread else None
        if batch:
            stats.append(SplitBatchStats("slow", len(batch), batch[0], batch[-1], unread=unread))
        elif says_unread:
            stats.append(SplitBatchStats("slow", 0, unread=unread))
        source.on_batch(stats)
        now += BATCH_MS
        source.advance_processing_time(now)
        idle_batches += bool(waiting) and source.split_watermarks()["slow"][1]
    return late, idle_batches


throttles = st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(throttles)
def test_a_split_with_unread_records_is_never_idle_and_loses_nothing(schedule: list[int]) -> None:
    late, idle_batches = _late_records(schedule, says_unread=True)
    assert (late, idle_batches) == (0, 0)


def test_the_timeout_alone_makes_a_held_back_split_idle_and_its_records_late() -> None:
    """The baseline the backlog rule is measured against: three batches without records of ``slow`` (1.5 s > the
    1 s timeout) while it still has records waiting make it idle, the fast split's watermark takes over, and what
    ``slow`` reads next is late."""
    schedule = [2, 0, 0, 0, 0, 2, 2]
    assert _late_records(schedule, says_unread=False) == (38, 2), "every record read after the pause is late"
    assert _late_records(schedule, says_unread=True) == (0, 0)


def test_a_caught_up_silent_split_goes_idle_as_with_the_timeout_alone() -> None:
    for unread in (None, 0):
        source = SourceWatermarks(
            WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(TIMEOUT), splits=["a", "b"]
        )
        source.on_batch([SplitBatchStats("a", 1, 5_000, 5_000), SplitBatchStats("b", 1, 100, 100, unread=unread)])
        source.advance_processing_time(500)
        assert source.watermark == 99
        for now in range(1_000, 3_001, 500):
            source.on_batch([SplitBatchStats("a", 1, 5_000, 5_000), SplitBatchStats("b", 0, unread=unread)])
            source.advance_processing_time(now)
        assert source.split_watermarks()["b"] == (99, True)
        assert source.watermark == 4_999, "the caught-up silent split no longer holds the watermark back"


def test_a_batch_that_does_not_say_keeps_the_last_backlog_and_a_caught_up_one_releases_it() -> None:
    source = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(TIMEOUT), splits=["b"])
    source.on_batch([SplitBatchStats("b", 1, 100, 100, unread=7)])
    source.advance_processing_time(500)
    for now in range(1_000, 10_001, 500):
        source.on_batch([])  # a replayed batch: its source does not say
        source.advance_processing_time(now)
    assert source.split_watermarks()["b"] == (99, False)
    assert source.generators["b"].view().unread == 7
    twin = source.copy()
    assert twin.generators["b"].view().unread == 7, "the backlog is in the snapshot"
    source.on_batch([SplitBatchStats("b", 0, unread=0)])
    for now in range(10_500, 12_001, 500):
        source.advance_processing_time(now)
        source.on_batch([])
    assert source.split_watermarks()["b"] == (99, True)


def test_a_snapshot_written_before_the_backlog_was_kept_restores() -> None:
    source = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(TIMEOUT), splits=["b"])
    source.on_batch([SplitBatchStats("b", 1, 100, 100)])
    saved = source.snapshot()
    del saved["generators"]["b"]["unread"]
    twin = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(TIMEOUT))
    twin.restore(saved)
    assert twin.generators["b"].view().unread is None


def test_the_controller_feeds_what_the_engine_says_was_left_unread_and_reports_it(tmp_path) -> None:
    """``EngineHooks.backlog`` for the batches the engine planned in this run; a batch it does not know (a replay)
    gets nothing, and its splits keep what the last batch said."""
    from controller_rows import gauge_rows, stats

    from floodmark.core.clock import ManualClock
    from floodmark.driver.control_log import ControlLog
    from floodmark.driver.controller import (
        AGGREGATION_SOURCE,
        AGGREGATION_STAGE,
        Controller,
        EngineHooks,
        SourceSettings,
    )

    said = {0: {AGGREGATION_SOURCE: {"0": 0, "1": 500}}, 1: {AGGREGATION_SOURCE: {"0": 0, "1": 380}}}
    clock = ManualClock(0)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(TIMEOUT)
    ctl = Controller.of_aggregation(
        ControlLog(tmp_path),
        SourceSettings(strategy, splits=("0", "1")),
        clock=clock,
        engine=EngineHooks(backlog=lambda batch_id: said.get(batch_id, {})),
    )
    ctl.ensure_initial_entry()
    reports = []
    for batch in range(8):
        clock.advance_to((batch + 1) * 1_000)
        rows = [stats("0", 1, 10_000 * (batch + 1), 10_000 * (batch + 1))]
        reports.append(ctl.on_batch(batch, rows, {AGGREGATION_STAGE: gauge_rows(None, None, 0)}, {}))
    assert [r.split_backlog for r in reports[:2]] == [{"0": 0, "1": 500}, {"0": 0, "1": 380}]
    assert all(not r.split_backlog for r in reports[2:])
    assert not any(r.splits["1"][1] for r in reports), "split 1 sent nothing for 8 s but had records unread"
    assert reports[-1].watermark == MIN_TIMESTAMP, "so it holds the watermark back"


def test_idle_and_advancing_the_watermark_goes_on_with_processing_time_and_a_record_then_is_judged_by_it() -> None:
    """``with_idleness(timeout, advance=True)``: once idle (caught up and silent), W + (now - t)."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(TIMEOUT, advance=True)
    source = SourceWatermarks(strategy, splits=["a", "b"], periodic_interval=100)
    source.on_batch([SplitBatchStats("a", 1, 65_000, 65_000, unread=0), SplitBatchStats("b", 1, 64_000, 64_000)])
    source.advance_processing_time(100)
    assert source.watermark == 63_999
    marks = {}
    for now in range(200, 5_001, 100):
        source.on_batch([SplitBatchStats("a", 0, unread=0)])
        marks[now] = source.advance_processing_time(now)
    # Both quiet from 200 (the first check without records), idle once more than 1 s has passed: at 1,300; from
    # there each goes on from its own watermark; the combined is the highest (every split idle).
    assert marks[1_200] == 63_999 and source.split_watermarks()["a"] == (64_999 + 5_000 - 1_300, True)
    assert marks[5_000] == 64_999 + 5_000 - 1_300
    source.on_batch([SplitBatchStats("b", 1, 66_000, 66_000)])
    source.advance_processing_time(5_100)
    assert source.watermark == 68_699, "b woke up: its record at 66 s is at or below the watermark (late)"
    held = SourceWatermarks(strategy.with_idleness(TIMEOUT), splits=["a"], periodic_interval=100)
    held.on_batch([SplitBatchStats("a", 1, 65_000, 65_000)])
    for now in range(100, 5_001, 100):
        held.on_batch([])
        held.advance_processing_time(now)
    assert held.watermark == 64_999, "without advance, an idle source's watermark stays where it was"


def test_a_split_behind_does_not_advance_and_the_advance_survives_a_restart() -> None:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(TIMEOUT, advance=True)
    source = SourceWatermarks(strategy, splits=["a"], periodic_interval=100)
    source.on_batch([SplitBatchStats("a", 1, 65_000, 65_000, unread=10)])
    for now in range(100, 5_001, 100):
        source.on_batch([])
        source.advance_processing_time(now)
    assert source.watermark == 64_999, "unread records: never idle, so never advancing"
    source.on_batch([SplitBatchStats("a", 0, unread=0)])
    for now in range(5_100, 7_001, 100):
        source.on_batch([])
        source.advance_processing_time(now)
    twin = source.copy()
    for s in (source, twin):
        s.advance_processing_time(8_000)
    assert source.watermark == twin.watermark > 64_999
    assert "then advancing with processing time" in source.generators["a"].describe()
