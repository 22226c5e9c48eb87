"""Per-split coordination: MIN over non-idle splits, idleness, all-idle, percentiles, batches."""

from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks import (
    SourceWatermarks,
    SplitBatchStats,
    StageWatermark,
    WatermarkMultiplexer,
    WatermarkStrategy,
)
from floodmark.core.watermarks.percentile import PercentileOfRecentTimestamps, completeness_percentile


def test_multiplexer_min_idle_excluded_no_regression():
    # Flink's WatermarkOutputMultiplexerTest cases.
    mux = WatermarkMultiplexer()
    a, b = mux.register("a"), mux.register("b")
    a.emit_watermark(10)
    assert mux.update_combined() == MIN_TIMESTAMP
    b.emit_watermark(5)
    assert mux.update_combined() == 5
    b.mark_idle()
    assert mux.update_combined() == 10
    b.emit_watermark(7)  # back from idle, behind the combined: the combined does not regress
    assert mux.update_combined() == 10
    assert not mux.idle
    a.emit_watermark(3)  # a split's own watermark does not regress either
    assert a.watermark == 10


def test_all_idle_marks_output_idle_and_advances_to_max():
    mux = WatermarkMultiplexer()
    a, b = mux.register("a"), mux.register("b")
    a.emit_watermark(10)
    b.emit_watermark(20)
    a.mark_idle()
    b.mark_idle()
    assert mux.update_combined() == 20
    assert mux.idle


def test_percentile_across_splits():
    assert completeness_percentile([1, 2, 3], 100) == 1
    assert completeness_percentile([1, 2, 3], 66) == 2
    assert completeness_percentile([1, 2, 3], 33) == 3
    mux = WatermarkMultiplexer(percentile=50)
    for split, wm in zip("abcd", (10, 20, 30, 40), strict=True):
        mux.register(split).emit_watermark(wm)
    assert mux.update_combined() == 30


def test_source_watermarks_event_mode_periodic_and_idleness():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(10).with_idleness(1_000)
    source = SourceWatermarks(strategy, periodic_interval=200)
    source.on_event("p0", None, 1_000)
    source.on_event("p1", None, 5_000)
    assert source.advance_processing_time(200) == 989
    for now in range(400, 1_401, 200):
        source.on_event("p1", None, 5_000 + now)
        source.advance_processing_time(now)
    assert source.watermark == 989, "p0 is not idle yet: first quiet check at 400, idle once > 1000 ms later"
    source.on_event("p1", None, 6_600)
    source.advance_processing_time(1_600)
    assert source.split_watermarks()["p0"][1] is True
    assert source.watermark == 6_589


def test_declared_silent_split_holds_back_until_idle():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(500)
    source = SourceWatermarks(strategy, periodic_interval=100, splits=["0", "1", "2"])
    for now in range(100, 1_001, 100):
        source.on_batch([SplitBatchStats("0", 1, now, now), SplitBatchStats("1", 1, now, now)])
        source.advance_processing_time(now)
    # split 2 never had a record: quiet check at 100 starts its timer, idle once now - 100 > 500.
    assert source.split_watermarks()["2"] == (MIN_TIMESTAMP, True)
    assert source.watermark == 999


def test_batch_mode_equals_event_mode_for_max_based_generators():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(50)
    events = {"a": [100, 90, 180], "b": [40, 60]}
    by_event = SourceWatermarks(strategy)
    for split, stamps in events.items():
        for ts in stamps:
            by_event.on_event(split, None, ts)
    by_batch = SourceWatermarks(strategy)
    by_batch.on_batch(SplitBatchStats(s, len(t), min(t), max(t)) for s, t in events.items())
    assert by_event.advance_processing_time(200) == by_batch.advance_processing_time(200) == 9


def test_periodic_catch_up_calls_once_per_interval():
    strategy = WatermarkStrategy.for_idle_advancing(bound=0, wait=0, interval=100)
    source = SourceWatermarks(strategy, periodic_interval=100)
    source.on_event("a", None, 1_000)
    source.advance_processing_time(1_000)  # ten periodic calls: logical 1_000 + 1_000
    assert source.watermark == 1_999


def test_coordinator_snapshot_restore_continues_identically():
    strategy = WatermarkStrategy.for_idle_advancing(bound=10, wait=300, interval=100).with_idleness(2_000)
    original = SourceWatermarks(strategy, periodic_interval=100)
    original.on_event("a", None, 5_000)
    original.on_event("b", None, 4_000)
    original.advance_processing_time(250)
    restored = SourceWatermarks(strategy, periodic_interval=100)
    restored.restore(original.snapshot())
    for now in (500, 900, 3_000, 6_000):
        assert original.advance_processing_time(now) == restored.advance_processing_time(now)
        assert original.split_watermarks() == restored.split_watermarks()


def test_percentile_generator_bound_from_recent_delays():
    generator = PercentileOfRecentTimestamps(percentile=50)
    from floodmark.core.watermarks import RecordingOutput

    out = RecordingOutput()
    for ts in [1_000, 990, 980, 1_000, 700]:  # delays 0, 10, 20, 0, 300
        generator.on_event(None, ts, out)
    generator.on_periodic_emit(out)
    assert out.watermark == 1_000 - 10 - 1
    complete = PercentileOfRecentTimestamps(percentile=100)
    for ts in [1_000, 990, 980, 1_000, 700]:
        complete.on_event(None, ts, out)
    out2 = RecordingOutput()
    complete.on_periodic_emit(out2)
    assert out2.watermark == 1_000 - 300 - 1


def test_stage_watermark_input_min_output_held():
    stage = StageWatermark(["mobile", "console"])
    stage.update_upstream("mobile", 100)
    assert stage.input_watermark == MIN_TIMESTAMP
    stage.update_upstream("console", 80)
    assert stage.input_watermark == 80
    assert stage.update_output(hold=50) == 49, "one below what it owes: a row at the watermark is late"
    assert stage.update_output(hold=None) == 80
    assert stage.update_output(hold=10) == 80, "the output watermark never regresses"
    times = stage.times(now=1_000, oldest_pending=400)
    assert (times.event_time_lag, times.processing_time_lag) == (920, 600)


def test_batch_mode_a_slow_batch_does_not_make_a_split_with_records_idle():
    """Records keep arriving while a batch is processed: idleness runs from the first batch without records."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(500)
    source = SourceWatermarks(strategy, periodic_interval=100, splits=["a", "b"])
    source.on_batch([SplitBatchStats("a", 1, 1_000, 1_000), SplitBatchStats("b", 1, 400, 400)])
    source.advance_processing_time(10_000)  # a batch that took 10 s, twenty idle timeouts
    assert source.split_watermarks() == {"a": (999, False), "b": (399, False)}
    assert source.watermark == 399, "b holds the watermark: its unread records are not late"
    source.on_batch([SplitBatchStats("a", 1, 2_000, 2_000)])  # b had nothing in this batch: its timer starts
    source.advance_processing_time(10_400)
    assert source.split_watermarks()["b"] == (399, False), "not idle within the timeout"
    source.on_batch([SplitBatchStats("a", 1, 2_100, 2_100)])
    source.advance_processing_time(10_800)
    assert source.split_watermarks()["b"] == (399, True), "idle once the timeout passed without its records"
    assert source.watermark == 2_099
    restored = SourceWatermarks(strategy, periodic_interval=100)
    restored.restore(source.snapshot())
    assert restored.snapshot() == source.snapshot()


def test_a_record_wakes_an_idle_split_even_when_it_does_not_raise_its_watermark():
    """A deliberate difference from Flink 2.3 (docs/semantics.md): any record makes an idle split active again,
    because a record is proof that the split is sending. Flink keeps the split idle until its generator emits a
    watermark, so a record below the split's maximum would leave it idle there and the combined watermark would
    move past the split's next records."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(1_000)
    source = SourceWatermarks(strategy, periodic_interval=200)
    source.on_event("a", None, 100)
    source.on_event("b", None, 500)
    for now in range(200, 1_601, 200):
        source.on_event("b", None, 500 + now)
        source.advance_processing_time(now)
    assert source.split_watermarks()["a"] == (99, True)
    assert source.watermark == 2_099, "a is idle: b alone"
    source.on_event("a", None, 50)  # below a's maximum: its watermark stays 99, but it is active again
    assert source.split_watermarks()["a"] == (99, False)
    source.on_event("b", None, 3_000)
    source.advance_processing_time(1_800)
    assert source.watermark == 2_099, "a holds the combined watermark again (it never goes back)"
