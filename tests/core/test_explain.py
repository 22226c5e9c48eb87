"""``explain_window``: why a window has not fired, from the source's splits and the operator's state."""

import pytest
from controller_rows import gauge_rows, stats
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.core import aggregates, triggers, windows
from floodmark.core.clock import ManualClock
from floodmark.core.pipeline import WindowedStage
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP, format_duration, format_instant
from floodmark.core.watermarks import SourceWatermarks, WatermarkStrategy
from floodmark.core.window import WindowOperator
from floodmark.core.windows import Window
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import Controller, SourceSettings
from floodmark.explain.stage import explain_stage
from floodmark.explain.window import WindowStatus, explain_window

BOUND, IDLE, TICK = 50, 300, 100
WINDOW = Window(0, 1_000)  # max timestamp 999
STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(BOUND).with_idleness(IDLE)


def source(splits=("a", "b", "c"), percentile=100.0, strategy=STRATEGY) -> SourceWatermarks:
    return SourceWatermarks(strategy, periodic_interval=TICK, splits=splits, percentile=percentile)


def spec(trigger=None, lateness=0) -> WindowSpec:
    return WindowSpec(
        windows.Tumbling(1_000), aggregates.count(), trigger=trigger or triggers.Default(), allowed_lateness=lateness
    )


def feed(operator, source: SourceWatermarks, now: int, records=(), key="k"):
    """One micro-batch as the runtime runs it: processing time, watermark, then records."""
    source.advance_processing_time(now)
    operator.advance_processing_time(now)
    emitted = operator.advance_watermark(source.watermark)
    if records:
        emitted.extend(operator.add(RecordBatch.from_elements([(None, ts) for ts in records], key)))
    return emitted


def three_splits():
    """a at 1_049 (watermark 998), b at 500 (watermark 449), c at 2_000 (watermark 1_949)."""
    src = source()
    src.on_event("a", None, 1_049)
    src.on_event("b", None, 500)
    src.on_event("c", None, 2_000)
    return src


def pass_window(src: SourceWatermarks) -> None:
    """Records that lift a and b past the window's max timestamp at the next periodic emit."""
    src.on_event("a", None, 1_100)
    src.on_event("b", None, 1_100)


def test_the_slowest_split_holds_the_window_back_by_its_gap():
    src = three_splits()
    op = WindowOperator(spec(), policy="general")
    feed(op, src, 100, records=[10, 20, 30])
    e = explain_window(spec(), "k", WINDOW, src, op)
    assert e.status is WindowStatus.WAITING_FOR_WATERMARK
    assert (e.max_timestamp, e.combined_watermark, e.remaining_ms) == (999, 449, 550)
    assert [(s.split, s.watermark, s.gap_ms) for s in e.holding_splits] == [("b", 449, 550), ("a", 998, 1)]
    b = e.holding_splits[0]
    assert not b.idle and b.bound_ms == BOUND and b.highest_event_time == 500
    assert b.needs_event_time == 999 + BOUND + 1  # Flink: watermark = max - bound - 1
    # Activity at 0 is consumed by the check at 100; the check at 200 starts the timer; idle once > 300 later.
    assert b.idle_at == 600 and b.idle_timeout_ms == IDLE
    assert e.splits_needed == 2 and e.target_watermark == 999
    assert e.watermark_reaches_at == 600  # a and b idle at 600, c (1_949) carries the MIN
    assert e.pane_state.records_since_last_pane == 3 and e.pane_state.panes_emitted == 0
    assert "3 record(s)" in e.trigger_state
    text = e.text()
    assert "'b'" in e.reason and "550 ms" in e.reason
    assert "HOLDING THE WINDOW BACK, 550 ms behind" in text
    assert "event time >= 1970-01-01T00:00:01.050Z" in text
    assert "marked idle" in text and "1970-01-01T00:00:00.600Z" in text
    assert "(1050 ms)" not in text, "each time once"


def test_idle_split_is_excluded_and_reported():
    src = three_splits()
    op = WindowOperator(spec(), policy="general")
    feed(op, src, 100, records=[10])
    for now in range(200, 601, 100):  # a and c keep sending; b goes quiet and is idle at 600
        src.on_event("a", None, 1_049)
        src.on_event("c", None, 2_000)
        feed(op, src, now)
    e = explain_window(spec(), "k", WINDOW, src, op)
    assert [s.split for s in e.idle_splits] == ["b"]
    assert [s.split for s in e.holding_splits] == ["a"]
    assert e.combined_watermark == 998 and e.remaining_ms == 1
    assert e.holding_splits[0].needs_event_time == 1_050
    assert "IDLE (excluded" in e.text()
    assert any("'b'" in note and "late" in note for note in e.notes)  # b is behind the combined watermark


def test_a_split_behind_is_never_idle_and_an_idle_caught_up_one_says_so():
    from floodmark.core.watermarks import SplitBatchStats

    src = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(500), splits=["a", "b"])
    op = WindowOperator(spec(), policy="general")
    for now in range(100, 2_001, 100):  # neither sends; a's source says it left 40 records unread, b's nothing
        src.on_batch([SplitBatchStats("a", 0, unread=40), SplitBatchStats("b", 0, unread=0)])
        feed(op, src, now)
    e = explain_window(spec(), "k", WINDOW, src, op)
    assert [s.split for s in e.idle_splits] == ["b"]
    text = e.text()
    assert "IDLE (caught up, excluded" in text
    assert "behind: 40 unread when the last batch was planned, so never idle" in text


def test_status_after_firing_lateness_and_expiry():
    lateness = 500
    sp = spec(lateness=lateness)
    src = three_splits()
    op = WindowOperator(sp, policy="general")
    feed(op, src, 100, records=[10])
    pass_window(src)
    src.advance_processing_time(200)
    # The source has passed the max timestamp; the operator gets the watermark with the next batch.
    e = explain_window(sp, "k", WINDOW, src, op)
    assert e.status is WindowStatus.DUE and e.combined_watermark == 1_049 and e.operator_watermark == 449
    assert any("lags" in note for note in e.notes)
    panes = feed(op, src, 200).all_panes()
    assert [p.timing.value for p in panes] == ["ON_TIME"]
    e = explain_window(sp, "k", WINDOW, src, op)
    assert e.status is WindowStatus.FIRED_CAN_FIRE_LATE
    assert e.remaining_ms == 0 and e.holding_splits == () and e.horizon == 999 + lateness
    assert e.horizon_remaining_ms == 999 + lateness - 1_049
    assert e.pane_state.nonearly_fired and not e.pane_state.finished
    assert "LATE pane" in e.fires_when and format_instant(1_499) in e.fires_when
    # Past the horizon the state is gone.
    for split in "abc":
        src.on_event(split, None, 1_600)
    feed(op, src, 300)
    e = explain_window(sp, "k", WINDOW, src, op)
    assert e.status is WindowStatus.EXPIRED and e.pane_state is None
    assert "EXPIRED" in e.fires_when


def test_after_watermark_without_late_firings_is_final():
    sp = spec(trigger=triggers.AfterWatermark(), lateness=500)
    src = three_splits()
    op = WindowOperator(sp, policy="general")
    feed(op, src, 100, records=[10])
    pass_window(src)
    feed(op, src, 200)
    e = explain_window(sp, "k", WINDOW, src, op)
    assert e.status is WindowStatus.FIRED_FINAL and e.pane_state.finished
    assert "WINDOW_CLOSED" in e.fires_when


def test_percentile_mode_names_the_splits_below_and_how_many_must_move():
    src = source(splits=("a", "b", "c", "d"), percentile=50)
    for split, ts in zip("abcd", (300, 600, 2_000, 3_100), strict=True):
        src.on_event(split, None, ts)
    src.advance_processing_time(100)
    # Watermarks 249, 549, 1_949, 3_049: the 50th percentile of four is the third lowest, 1_949.
    assert src.watermark == 1_949
    e = explain_window(spec(), "k", Window(2_000, 3_000), src)
    assert e.status is WindowStatus.WAITING_FOR_WATERMARK and e.remaining_ms == 1_050
    assert [s.split for s in e.holding_splits] == ["a", "b", "c"]
    assert e.splits_needed == 1  # two of four may stay below
    assert "percentile 50" in e.reason and "not their minimum" in e.reason
    assert "1 more of these 3 split(s) must reach it" in e.fires_when
    # Two of the four splits are still below 999, yet in percentile mode the window is past (not expired:
    # lateness 2 s).
    e = explain_window(spec(lateness=2_000), "k", Window(0, 1_000), src)
    assert e.status is WindowStatus.WATERMARK_PASSED and e.holding_splits == ()


def test_no_data_yet_watermark_min_names_splits_without_records():
    src = source()
    src.on_event("a", None, 500)
    src.advance_processing_time(100)
    op = WindowOperator(spec(), policy="general")
    e = explain_window(spec(), "k", WINDOW, src, op)
    assert e.status is WindowStatus.NO_DATA and e.pane_state is None and e.trigger_state is None
    assert e.combined_watermark == MIN_TIMESTAMP
    assert e.splits_without_records == ("b", "c")
    assert "no records for this key and window yet" in e.reason
    assert "'b', 'c' have no watermark yet" in e.reason and "never saw a record" in e.reason
    assert "never seen a record" in e.text()
    # Idle after the timeout: the check at 100 starts the timer of b and c (never active) and consumes a's
    # record, so a's timer starts at 200; idle at the first check strictly more than 300 ms after the start.
    assert {s.split: s.idle_at for s in e.splits} == {"a": 600, "b": 500, "c": 500}


def test_late_but_within_allowed_lateness_without_state():
    sp = spec(lateness=500)
    src = three_splits()
    pass_window(src)
    op = WindowOperator(sp, policy="general")
    feed(op, src, 100)
    e = explain_window(sp, "other-key", WINDOW, src, op)
    assert e.status is WindowStatus.NO_DATA
    assert "late but within the allowed lateness" in e.fires_when and "LATE pane at once" in e.fires_when
    # A late record then fires a LATE pane and the window stays open for more until the horizon.
    late = op.add(RecordBatch.from_elements([(None, 5)], "other-key"))
    assert [p.timing.value for p in late.all_panes()] == ["LATE"]
    e = explain_window(sp, "other-key", WINDOW, src, op)
    assert e.status is WindowStatus.FIRED_CAN_FIRE_LATE


def test_all_splits_idle():
    src = source(splits=("a", "b"))
    src.on_event("a", None, 600)
    src.on_event("b", None, 700)
    src.advance_processing_time(700)
    assert src.idle and src.watermark == 649
    e = explain_window(spec(), "k", WINDOW, src)
    assert e.all_splits_idle and e.holding_splits == () and e.splits_needed == 1
    assert {s.split for s in e.idle_splits} == {"a", "b"}
    assert "every split is idle" in e.reason
    assert e.watermark_reaches_at is None  # nothing left to go idle or to advance on its own


def fired_on_the_columnar_operator(sp):
    """The explanation of WINDOW after two records and a watermark past its end, on the columnar operator."""
    src = three_splits()
    op = WindowOperator(sp, policy="columnar")
    feed(op, src, 100, records=[10, 20])
    pass_window(src)
    feed(op, src, 200)
    return explain_window(sp, "k", WINDOW, src, op)


def test_columnar_policy_state():
    src = three_splits()
    op = WindowOperator(spec(), policy="columnar")
    feed(op, src, 100, records=[10, 20])
    e = explain_window(spec(), "k", WINDOW, src, op)
    assert e.status is WindowStatus.WAITING_FOR_WATERMARK
    assert e.pane_state.records_since_last_pane == 2 and not e.pane_state.nonearly_fired
    assert "columnar policy" in e.trigger_state and "fired: no" in e.trigger_state
    pass_window(src)
    feed(op, src, 200)
    e = explain_window(spec(lateness=0), "k", WINDOW, src, op)
    assert e.status is WindowStatus.EXPIRED  # lateness 0: fired and dropped at once
    e = fired_on_the_columnar_operator(spec(lateness=500))
    assert e.status is WindowStatus.FIRED_CAN_FIRE_LATE and "fired: yes" in e.trigger_state
    e = fired_on_the_columnar_operator(spec(lateness=500, trigger=triggers.AfterWatermark(late=triggers.AfterCount(1))))
    assert e.status is WindowStatus.FIRED_CAN_FIRE_LATE
    assert "late firings: Repeatedly[AfterCount(1): 0 of 1 record(s)]" in e.trigger_state
    sp = spec(trigger=triggers.AfterWatermark(early=triggers.AfterCount(3)))
    for policy in ("general", "columnar"):
        op = WindowOperator(sp, policy=policy)
        feed(op, three_splits(), 100, records=[10, 20])
        e = explain_window(sp, "k", WINDOW, three_splits(), op)
        assert "early firings: Repeatedly[AfterCount(3): 2 of 3 record(s)]" in e.trigger_state
        assert e.pane_state.records_until_check == 1


def test_trigger_driven_window_waits_for_its_trigger():
    sp = spec(trigger=triggers.AfterCount(3), lateness=500)
    src = three_splits()
    op = WindowOperator(sp, policy="general")
    feed(op, src, 100, records=[10])
    e = explain_window(sp, "k", WINDOW, src, op)
    assert e.status is WindowStatus.WAITING_FOR_TRIGGER
    assert e.pane_state.records_until_check == 2 and "1 of 3" in e.trigger_state
    assert e.target_watermark == 1_499  # the garbage-collection pane at the horizon
    assert "2 more record(s)" in e.fires_when and "garbage-collection" in e.fires_when
    sp = spec(trigger=triggers.AfterWatermark(early=triggers.AfterProcessingTime(1_000)))
    for policy in ("general", "columnar"):  # the columnar policy keeps no trigger dicts
        op = WindowOperator(sp, policy=policy)
        feed(op, src, 100, records=[10])
        e = explain_window(sp, "k", WINDOW, src, op)
        assert e.status is WindowStatus.WAITING_FOR_WATERMARK and e.pane_state.processing_deadline == 1_100
        assert "fires at processing time 1970-01-01T00:00:01.100Z" in e.trigger_state
    assert "EARLY pane" in e.fires_when and format_instant(1_100) in e.fires_when


def test_idle_advancing_split_advances_on_its_own():
    strategy = WatermarkStrategy.for_idle_advancing(bound=0, wait=200, interval=TICK)
    src = source(splits=("a",), strategy=strategy)
    src.on_event("a", None, 500)
    src.advance_processing_time(100)
    e = explain_window(spec(), "k", WINDOW, src)
    (a,) = e.holding_splits
    assert a.self_advance_at == e.watermark_reaches_at
    while src.watermark < 999:
        before = src.clock.now_ms()
        src.advance_processing_time(before + TICK)
    assert src.clock.now_ms() == e.watermark_reaches_at
    assert "advancing on its own" in e.fires_when


def test_explaining_changes_nothing():
    src = three_splits()
    op = WindowOperator(spec(trigger=triggers.AfterWatermark(early=triggers.AfterCount(5))), policy="general")
    feed(op, src, 100, records=[10, 20])
    before = (src.snapshot(), op.snapshot())
    explain_window(op.spec, "k", WINDOW, src, op).text()
    assert (src.snapshot(), op.snapshot()) == before


def test_session_covering_the_window_is_explained():
    sp = WindowSpec(windows.Sessions(100), aggregates.count())
    src = three_splits()
    op = WindowOperator(sp, policy="general")
    feed(op, src, 100, records=[600, 650])
    e = explain_window(sp, "k", Window(600, 700), src, op)
    assert e.window == Window(600, 750) and e.pane_state.records_since_last_pane == 2
    assert any("session" in note for note in e.notes)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0 ms"),
        (999, "999 ms"),
        (50_000, "50 s"),
        (70_500, "1 min 10.5 s"),
        (3_600_001, "1 h 0.001 s"),
    ],
)
def test_durations(ms, text):
    assert format_duration(ms) == text


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 3_000), st.integers(0, 250)), min_size=0, max_size=12
    ),
    idle_advancing=st.booleans(),
    idleness=st.booleans(),
    percentile=st.sampled_from([100.0, 50.0]),
    window_start=st.sampled_from([0, 1_000, 2_000]),
)
def test_projection_matches_the_coordinator(records, idle_advancing, idleness, percentile, window_start):
    """``watermark_reaches_at`` is exactly when the coordinator, run tick by tick with no records, gets there."""
    if idle_advancing:
        strategy = WatermarkStrategy.for_idle_advancing(bound=BOUND, wait=250, interval=TICK)
    else:
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(BOUND)
    if idleness:
        strategy = strategy.with_idleness(IDLE)
    src = source(percentile=percentile, strategy=strategy)
    now = 0
    for split, ts, pause in records:
        now += pause
        src.advance_processing_time(now)
        src.on_event(split, None, ts)
    window = Window(window_start, window_start + 1_000)
    e = explain_window(spec(), "k", window, src)
    target = window.max_timestamp
    if src.watermark >= target:
        assert e.status is WindowStatus.EXPIRED and e.watermark_reaches_at is None  # lateness 0: horizon = max
        return
    reached_at = None
    tick = src.last_periodic
    for _ in range(200):  # far beyond the idleness timeout and the seed-000 wait
        tick += TICK
        if src.advance_processing_time(tick) >= target:
            reached_at = tick
            break
    assert e.watermark_reaches_at == reached_at


def test_empty_source_and_global_window_do_not_break():
    src = SourceWatermarks(STRATEGY, periodic_interval=TICK)
    e = explain_window(spec(), "k", WINDOW, src)
    assert e.splits == () and e.combined_watermark == MIN_TIMESTAMP
    assert "no split has reported yet" in e.reason and "no split has reported yet" in e.fires_when
    sp = WindowSpec(windows.Global(), aggregates.count(), trigger=triggers.Repeatedly(triggers.AfterCount(2)))
    src = three_splits()
    op = WindowOperator(sp, policy="general")
    feed(op, src, 100, records=[10])
    e = explain_window(sp, "k", windows.GLOBAL_WINDOW, src, op)
    assert e.status is WindowStatus.WAITING_FOR_TRIGGER and e.pane_state.records_until_check == 1
    assert "MAX" in e.text()


def test_a_stage_reading_a_stage_names_the_upstream_that_holds_it(tmp_path):
    """Stage b reads stage a (``explain.stage.explain_stage`` from the control log): a's pending panes hold its
    output watermark at 60 s although its input is at 78.999 s, so b's window [60 s, 120 s) waits for a's
    panes; b's window [0, 60 s) ran with 28.999 s and is DUE with the 60 s a handed on after the batch."""
    clock = ManualClock(1_000_000)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(1_000)
    ctl = Controller(ControlLog(tmp_path), {"src": SourceSettings(strategy)}, {"a": ["src"], "b": ["a"]}, clock=clock)
    ctl.ensure_initial_entry()
    batches = [
        ([stats("0", 5, 10_000, 30_000)], {"a": gauge_rows(None, None, 2, 5)}),
        ([stats("0", 2, 70_000, 80_000)], {"a": gauge_rows(60_000, 1_001_500, 1, 2)}),
        ([], {}),
    ]
    for batch_id, (rows, gauges) in enumerate(batches):
        clock.advance_to(1_000_000 + (batch_id + 1) * 1_000)  # each batch after a periodic emit
        ctl.on_batch(batch_id, rows, gauges, {})
    spec = WindowSpec(windows.Tumbling(60_000), aggregates.several(n=aggregates.count()))
    a, b = WindowedStage("a", "src", spec), WindowedStage("b", "a", spec)

    waiting = explain_stage(ctl, b, None, Window(60_000, 120_000))
    assert waiting.status is WindowStatus.WAITING_FOR_WATERMARK, waiting.text()
    assert (waiting.operator_watermark, waiting.combined_watermark) == (28_999, 59_999)
    assert not waiting.splits and [u.name for u in waiting.upstreams] == ["a"]
    upstream = waiting.upstreams[0]
    assert (upstream.watermark, upstream.input_watermark, upstream.hold) == (59_999, 78_999, 60_000)
    assert upstream.held_by_panes and upstream.gap_ms == 60_000
    assert "upstream stage 'a' holds the input watermark" in waiting.reason and "pending panes" in waiting.reason
    assert "stage 'a' needs to fire the panes it holds" in waiting.fires_when
    text = waiting.text()
    assert "Input watermark (MIN over the non-idle upstreams)" in text and "Upstreams:" in text
    assert "stage 'a': watermark" in text and "HOLDING THE WINDOW BACK" in text

    due = explain_stage(ctl, b, None, Window(0, 60_000))
    assert due.status is WindowStatus.DUE, due.text()
    # After batch 1, a had handed on 28.999 s, but its input (78.999 s) and its panes (60 s) were past 59.999 s.
    before = explain_stage(ctl, b, None, Window(0, 60_000), batch=1)
    assert before.status is WindowStatus.WAITING_FOR_WATERMARK, before.text()
    assert before.upstreams[0].watermark == 28_999 and before.upstreams[0].next_watermark == 60_000
    assert "hands on" in before.reason and "the batch after" in before.reason
    assert "stage 'a' gets there in its next batch" in before.fires_when
    first = explain_stage(ctl, b, None, Window(0, 60_000), batch=0)
    assert first.upstreams[0].next_watermark == 28_999 and "its input watermark, " in first.reason, first.text()

    # A stage reading a source is explained from the source's splits, as always.
    source_stage = explain_stage(ctl, a, None, Window(60_000, 120_000))
    assert [s.split for s in source_stage.splits] == ["0"] and not source_stage.upstreams
    assert source_stage.operator_watermark == 78_999
    with pytest.raises(LookupError, match="no control entry 7"):
        explain_stage(ctl, b, None, Window(0, 60_000), batch=7)
