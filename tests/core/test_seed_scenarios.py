"""The seeds' scenarios on the engine-free core: seed 000's lone last event, seed 003's stages."""

from floodmark import TimestampCombiner, WatermarkStrategy, aggregates, windows
from floodmark.core.pipeline import Stage
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.watermarks import SourceWatermarks
from floodmark.core.window import WindowOperator
from floodmark.testing import TestStream

MINUTE = 60_000


def run_single_event_then_silence(strategy, seconds=600):
    """One record at event time 30 s on split 0, then no input at all; returns when the window fired."""
    source = SourceWatermarks(strategy, periodic_interval=200)
    operator = WindowOperator(WindowSpec(windows.Tumbling(MINUTE), aggregates.count()), policy="general")
    source.on_event("0", None, 30_000)
    operator.add(RecordBatch.from_elements([("click", 30_000)], key="k"))
    for now in range(200, seconds * 1000 + 1, 200):
        watermark = source.advance_processing_time(now)
        emitted = operator.advance_watermark(watermark)
        if emitted.pane_count():
            return now, emitted.all_panes()
    return None, []


def test_seed000_generator_fires_the_lone_window_after_wait():
    strategy = WatermarkStrategy.for_idle_advancing(bound=5_000, wait=10_000, interval=200)
    fired_at, panes = run_single_event_then_silence(strategy)
    # logical time must pass 30 s + 10 s (wait) and reach 60 s + 5 s + 1 ms -> 35 s of silence.
    assert fired_at == 35_000
    assert [(p.window.start, p.value, p.timing.value) for p in panes] == [(0, 1, "ON_TIME")]


def test_plain_bounded_out_of_orderness_never_fires_it():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(5_000)
    fired_at, _ = run_single_event_then_silence(strategy)
    assert fired_at is None


def test_idle_split_holds_back_unless_idleness_is_configured():
    def fired(strategy):
        source = SourceWatermarks(strategy, periodic_interval=200, splits=["0", "1", "2"])
        operator = WindowOperator(WindowSpec(windows.Tumbling(MINUTE), aggregates.count()), policy="general")
        for now in range(200, 200_001, 200):
            event_time = now * 10  # splits 0 and 1 keep producing; split 2 never does (seed 000's skew)
            source.on_event("0", None, event_time)
            source.on_event("1", None, event_time)
            operator.add(RecordBatch.from_elements([(None, event_time)], key="k"))
            if operator.advance_watermark(source.advance_processing_time(now)).pane_count():
                return True
        return False

    assert not fired(WatermarkStrategy.for_bounded_out_of_orderness(1_000))
    assert fired(WatermarkStrategy.for_bounded_out_of_orderness(1_000).with_idleness(5_000))


def seed003_pipeline(combiner):
    """Per-user sessions (gap 1 min) -> session lengths -> fixed 2-minute windows -> mean length."""
    sessions = Stage(
        "sessions",
        WindowSpec(windows.Sessions(MINUTE), aggregates.count(), timestamp_combiner=combiner),
        output_key=lambda pane: "all",
        output_value=lambda pane: pane.window.end - pane.window.start,
    )
    means = Stage("means", WindowSpec(windows.Tumbling(2 * MINUTE), aggregates.mean()))
    stream = (
        TestStream()
        .add_elements([("play", 0), ("play", 30_000)], key="mobile-user")
        .add_elements([("play", 10_000)], key="console-user")
        .advance_watermark_to(50_000)
    )
    held = stream.run([sessions, means])
    stream.advance_watermark_to_infinity()
    final = stream.run([sessions, means])
    return held, final


def test_seed003_earliest_timestamps_hold_the_downstream_watermark():
    eow_held, eow_final = seed003_pipeline(TimestampCombiner.END_OF_WINDOW)
    early_held, early_final = seed003_pipeline(TimestampCombiner.EARLIEST)
    assert eow_held.stage_times("sessions").output_watermark == 50_000
    assert early_held.stage_times("sessions").output_watermark == -1, "held below the earliest open session record"
    assert early_held.stage_times("means").input_watermark == -1
    # Same sessions, but the downstream window they land in follows their output timestamps.
    assert [(p.window.start, p.value) for p in eow_final.panes("means")] == [(0, 75_000.0)]
    assert [(p.window.start, p.value) for p in early_final.panes("means")] == [(0, 75_000.0)]
    assert sorted(p.timestamp for p in early_final.panes("sessions")) == [0, 10_000]
    assert sorted(p.timestamp for p in eow_final.panes("sessions")) == [69_999, 89_999]
