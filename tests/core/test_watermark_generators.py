"""Watermark generators: Flink's own vectors and the seeds' generators."""

from datetime import timedelta

import pytest

from floodmark.core.clock import ManualClock
from floodmark.core.time import MIN_TIMESTAMP, to_millis
from floodmark.core.watermarks import (
    AscendingTimestamps,
    BoundedOutOfOrderness,
    BoundedOutOfOrdernessWatermarkBasedOnEventTime,
    LegacyBoundedOutOfOrderness,
    RecordingOutput,
    SplitBatchStats,
    WatermarkGenerator,
    WatermarkStrategy,
    WatermarksWithIdleness,
)


def feed(generator, timestamps, output=None):
    output = output or RecordingOutput()
    for ts in timestamps:
        generator.on_event(None, ts, output)
    return output


def test_bounded_out_of_orderness_flink_vector():
    # Flink's BoundedOutOfOrdernessWatermarksTest: bound 10, events 12345, 12300, 12340, 12280 -> 12334.
    generator = BoundedOutOfOrderness(10)
    output = RecordingOutput()
    generator.on_periodic_emit(output)
    assert output.emitted == [MIN_TIMESTAMP]
    feed(generator, [12345, 12300, 12340, 12280], output)
    assert output.emitted == [MIN_TIMESTAMP], "bounded out-of-orderness is periodic, not punctuated"
    generator.on_periodic_emit(output)
    assert output.watermark == 12334


def test_bounded_out_of_orderness_accepts_timedelta():
    generator = BoundedOutOfOrderness(timedelta(seconds=5))
    output = feed(generator, [100_000])
    generator.on_periodic_emit(output)
    assert output.watermark == 100_000 - 5_000 - 1


def test_negative_bound_is_refused():
    with pytest.raises(ValueError, match="must not be negative"):
        BoundedOutOfOrderness(-1)


def test_ascending_timestamps_is_max_minus_one():
    generator = AscendingTimestamps()
    output = feed(generator, [5, 7, 6])
    generator.on_periodic_emit(output)
    assert output.watermark == 6


def test_legacy_extractor_has_no_minus_one_and_never_decreases():
    generator = LegacyBoundedOutOfOrderness(10)
    output = RecordingOutput()
    generator.on_periodic_emit(output)
    assert output.emitted == [MIN_TIMESTAMP]
    feed(generator, [100, 50], output)
    generator.on_periodic_emit(output)
    assert output.emitted[-1] == 90


def test_legacy_extractor_punctuated_emits_per_event():
    generator = LegacyBoundedOutOfOrderness(10, punctuated=True)
    output = feed(generator, [100, 120, 110])
    assert output.emitted == [90, 110, 110]


def test_seed000_generator_advances_after_wait_without_events():
    generator = BoundedOutOfOrdernessWatermarkBasedOnEventTime(bound=5_000, wait=60_000, interval=200)
    output = RecordingOutput()
    generator.on_event(None, 1_000_000, output)
    emitted = []
    for _ in range(300):  # 60 s of periodic calls: logical - last_event reaches 60_000, not more
        generator.on_periodic_emit(output)
        emitted.append(output.emitted[-1])
    assert set(emitted) == {1_000_000 - 5_000 - 1}
    generator.on_periodic_emit(output)  # 60.2 s > wait: event time starts moving
    assert output.emitted[-1] == 1_000_000 + 60_200 - 5_000 - 1
    generator.on_periodic_emit(output)
    assert output.emitted[-1] == 1_000_000 + 60_400 - 5_000 - 1


def test_seed000_generator_resets_on_new_event():
    generator = BoundedOutOfOrdernessWatermarkBasedOnEventTime(bound=0, wait=1_000, interval=500)
    output = RecordingOutput()
    generator.on_event(None, 10_000, output)
    for _ in range(3):
        generator.on_periodic_emit(output)
    assert output.emitted == [9_999, 9_999, 11_500 - 1]
    generator.on_event(None, 10_500, output)  # lower than the logical max: max_ts stays 11_500
    generator.on_periodic_emit(output)
    assert output.emitted[-1] == 11_500 - 1


def test_user_defined_generator_punctuated_and_snapshot():
    class EveryTenth(WatermarkGenerator):
        def __init__(self):
            self.count = 0
            self.highest = MIN_TIMESTAMP

        def on_event(self, event, timestamp, output):
            self.count += 1
            self.highest = max(self.highest, timestamp)
            if self.count % 10 == 0:
                output.emit_watermark(self.highest)

    generator = EveryTenth()
    output = feed(generator, range(100, 125))
    assert output.emitted == [109, 119]
    saved = generator.snapshot()
    other = EveryTenth()
    other.restore(saved)
    assert (other.count, other.highest) == (25, 124)


def test_generator_snapshot_restore_roundtrip_for_builtins():
    for make in (
        lambda: BoundedOutOfOrderness(10),
        lambda: LegacyBoundedOutOfOrderness(10),
        lambda: BoundedOutOfOrdernessWatermarkBasedOnEventTime(10, 100, 50),
    ):
        original = make()
        feed(original, [1_000, 990, 1_010])
        original.on_periodic_emit(RecordingOutput())
        copy = make()
        copy.restore(original.snapshot())
        a, b = RecordingOutput(), RecordingOutput()
        for _ in range(5):
            original.on_periodic_emit(a)
            copy.on_periodic_emit(b)
        assert a.emitted == b.emitted


def test_default_on_batch_is_one_event_with_the_batch_max():
    generator = BoundedOutOfOrderness(10)
    output = RecordingOutput()
    generator.on_batch(SplitBatchStats("0", count=3, min_timestamp=5, max_timestamp=500), output)
    generator.on_batch(SplitBatchStats("0", count=0), output)
    generator.on_periodic_emit(output)
    assert output.watermark == 489


def test_idleness_flink_timer_semantics():
    clock = ManualClock(0)
    generator = WatermarksWithIdleness(BoundedOutOfOrderness(0), timeout=1_000, clock=clock)
    output = RecordingOutput()
    generator.on_event(None, 50, output)
    generator.on_periodic_emit(output)  # activity since last check: reset
    assert not output.idle
    clock.advance_to(100)
    generator.on_periodic_emit(output)  # first quiet check starts the timer at 100
    clock.advance_to(1_100)
    generator.on_periodic_emit(output)  # exactly timeout: not yet (strictly greater)
    assert not output.idle
    clock.advance_to(1_101)
    generator.on_periodic_emit(output)
    assert output.idle
    emitted_before = len(output.emitted)
    generator.on_periodic_emit(output)
    assert len(output.emitted) == emitted_before, "an idle split's generator is not asked to emit"
    generator.on_event(None, 60, output)
    assert not output.idle


def test_idleness_timeout_must_be_positive():
    with pytest.raises(ValueError):
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(0)


def test_strategy_builder_and_timestamp_assigner():
    strategy = (
        WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=50))
        .with_idleness(timedelta(minutes=1))
        .with_timestamp_assigner(lambda record, previous: record["timestamp"] * 1000)
    )
    assert strategy.idle_timeout_ms == 60_000
    generator = strategy.create_generator(ManualClock())
    assert isinstance(generator, WatermarksWithIdleness)
    assert strategy.extract_timestamp({"timestamp": 1_700_000_000}) == 1_700_000_000_000
    with pytest.raises(ValueError, match="int milliseconds"):
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, p: "x").extract_timestamp({})
    with pytest.raises(ValueError, match="no timestamp"):
        WatermarkStrategy.for_monotonous_timestamps().extract_timestamp({"a": 1})


def test_for_generator_must_return_a_generator():
    strategy = WatermarkStrategy.for_generator(lambda: object())
    with pytest.raises(TypeError, match="not a WatermarkGenerator"):
        strategy.create_generator(ManualClock())


def test_to_millis():
    assert to_millis(timedelta(seconds=1, microseconds=1500)) == 1001
    assert to_millis(timedelta(milliseconds=-3)) == -3
    with pytest.raises(TypeError):
        to_millis(1.5)
