"""Keyed process functions with timers (``floodmark.core.process``, ``ProcessHarness``) against straight
computations of the rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.core.keyed_operator import KeyedRows
from floodmark.core.process import KeyedProcessOperator, TimeDomain, Timer, restore_process_operator
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.watermarks.stage import StageWatermark
from floodmark.testing import ProcessHarness

SILENCE = 10_000


class AbsenceAlerts:
    """An alert when a device says nothing for 10 s of event time after one of its records (however the records
    fall into batches: each sets a timer 10 s on, which alerts only if no record came in those 10 s)."""

    def process(self, record, ctx):
        ctx.state["seen"] = ctx.state.get("seen", frozenset()) | {ctx.timestamp}
        ctx.set_event_timer(ctx.timestamp + SILENCE, output_time=ctx.timestamp)  # an alert is timed at the record

    def on_timer(self, timer, ctx):
        since = timer.time - SILENCE
        seen = ctx.state["seen"]
        if not any(since < t <= timer.time for t in seen):
            ctx.emit({"device": ctx.key, "silent_since": since})
        ctx.state["seen"] = frozenset(t for t in seen if t > since)  # what a later timer can still ask about


def straight_alerts(records: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(device, silent since, alert time) for every gap of more than 10 s after a device's record, and its end."""
    alerts = []
    for device in sorted({d for d, _ in records}):
        times = sorted({t for d, t in records if d == device})
        for now, following in zip(times, [*times[1:], None], strict=True):
            if following is None or following > now + SILENCE:
                alerts.append((device, now, now + SILENCE))
    return alerts


def test_a_timer_fires_when_the_watermark_reaches_it_and_its_rows_carry_its_output_time():
    h = ProcessHarness(AbsenceAlerts())
    h.add_elements([("on", 1_000)], key="d1")
    assert h.event_timers("d1") == [11_000]
    assert h.output_watermark_hold() == 1_000, "the alert it may emit is timed at 1 s: the stage holds below it"
    assert h.advance_watermark_to(10_999) == []
    fired = h.advance_watermark_to(11_000)  # W >= t, Flink's boundary (a window's max timestamp fires so)
    assert [(r.key, r.row, r.timestamp) for r in fired] == [("d1", {"device": "d1", "silent_since": 1_000}, 1_000)]
    assert h.output_watermark_hold() is None


class Late:
    def process(self, record, ctx):
        ctx.set_event_timer(10, output_time=11)

    def on_timer(self, timer, ctx):
        pass


def test_a_timer_cannot_output_after_it_fires():
    h = ProcessHarness(Late())
    h.add_elements([("x", 5)], key="k")
    assert [b.reason for b in h.bad] == [
        "the keyed process function's process raised ValueError: an event-time timer at 10 cannot output at 11, "
        "after it fires"
    ]


records = st.lists(st.tuples(st.sampled_from(["d1", "d2", "d3"]), st.integers(0, 60_000)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(records, st.integers(1, 6), st.integers(0, 5))
def test_absence_alerts_equal_a_straight_computation_whatever_the_batches_and_a_restore(rows, batches, restore_at):
    """The watermark follows the records (bounded out-of-orderness 0) after each batch, so no record is behind it;
    where the batches fall and a snapshot/restore between two of them change nothing."""
    ordered = sorted(rows, key=lambda r: r[1])
    operator, emitted = KeyedProcessOperator(AbsenceAlerts()), []
    size = max(1, -(-len(ordered) // batches))
    for b, start in enumerate(range(0, len(ordered), size)):
        if b == restore_at:
            operator = restore_process_operator(AbsenceAlerts(), operator.snapshot())
        chunk = ordered[start : start + size]
        emitted += operator.add(KeyedRows([d for d, _ in chunk], [t for _, t in chunk], [None] * len(chunk))).rows
        emitted += operator.advance_watermark(chunk[-1][1] - 1).rows
    emitted += operator.advance_watermark(MAX_TIMESTAMP).rows
    got = sorted((r.key, r.row["silent_since"], r.timestamp + SILENCE) for r in emitted)
    assert got == straight_alerts(rows)


class Chained:
    """Timers that set timers: at t, one more at t + 5 (until 20), and one at or behind the watermark."""

    def process(self, record, ctx):
        ctx.set_event_timer(ctx.timestamp)

    def on_timer(self, timer, ctx):
        ctx.emit(timer.time)
        if 0 < timer.time < 20:
            ctx.set_event_timer(timer.time + 5)
        if timer.time == 5:
            ctx.set_event_timer(ctx.watermark - 100)  # behind the watermark: fires in this same move


def test_timers_fire_in_time_order_and_those_they_set_within_reach_fire_in_the_same_move():
    h = ProcessHarness(Chained())
    h.add_elements([("x", 5)], key="a")
    h.add_elements([("x", 7)], key="b")
    fired = h.advance_watermark_to(16)
    assert [(r.key, r.row) for r in fired] == [("a", 5), ("a", -84), ("b", 7), ("a", 10), ("b", 12), ("a", 15)]
    assert h.event_timers("a") == [20] and h.event_timers("b") == [17]


def test_a_timer_set_twice_fires_once_and_a_deleted_one_never():
    class Twice:
        def process(self, record, ctx):
            ctx.set_event_timer(100)
            ctx.set_event_timer(100)
            ctx.set_event_timer(200)
            ctx.delete_event_timer(200)

        def on_timer(self, timer, ctx):
            ctx.emit(timer)

    h = ProcessHarness(Twice())
    h.add_elements([("x", 1), ("y", 2)], key="k")
    assert [r.row for r in h.advance_watermark_to_infinity()] == [Timer(100, TimeDomain.EVENT_TIME, 100)]


def test_processing_time_timers_follow_the_clock():
    class Reminder:
        def process(self, record, ctx):
            ctx.set_processing_timer(ctx.processing_time + 1_000)

        def on_timer(self, timer, ctx):
            ctx.emit(timer.domain)

    h = ProcessHarness(Reminder(), processing_time=5_000)
    h.add_elements([("x", 1)], key="k")
    assert h.advance_watermark_to_infinity() == []
    # Timed at the event time of the record that set it (Beam's processing-time timers), which it held.
    assert h.output_watermark_hold() == 1
    assert [(r.row, r.timestamp) for r in h.advance_processing_time_to(6_000)] == [(TimeDomain.PROCESSING_TIME, 1)]


def test_a_call_that_raises_is_a_dead_letter_and_changes_nothing():
    class Picky:
        def process(self, record, ctx):
            ctx.state["seen"] = ctx.state.get("seen", 0) + 1
            ctx.set_event_timer(50)
            ctx.emit("before the error")
            if record == "bad":
                raise ValueError("no bad records here")

        def on_timer(self, timer, ctx):
            ctx.emit(ctx.state["seen"])

    h = ProcessHarness(Picky())
    h.add_elements([("good", 1), ("bad", 2), ("good", 3)], key="k")
    assert [b.reason for b in h.bad] == ["the keyed process function's process raised ValueError: no bad records here"]
    assert (h.bad[0].value, h.bad[0].raw_timestamp) == ("bad", 2)
    assert h.state("k") == {"seen": 2} and [r.row for r in h.rows] == ["before the error"] * 2
    assert [r.row for r in h.advance_watermark_to(50)] == [2]


def test_bad_event_times_are_dead_letters_and_the_function_must_fit_the_protocol():
    h = ProcessHarness(AbsenceAlerts())
    h.add_elements([("x", None), ("y", 1.5)], key="k")
    assert [b.reason for b in h.bad] == ["missing timestamp", "timestamp is not whole milliseconds: 1.5"]
    with pytest.raises(TypeError, match="needs process\\(\\) and on_timer\\(\\)"):
        KeyedProcessOperator(object())


@settings(max_examples=200, deadline=None)
@given(records, st.lists(st.integers(0, 20_000), min_size=1, max_size=8))
def test_what_a_timer_emits_is_after_the_output_watermark_the_batch_before_left(rows, steps):
    """The hold: a pending event-time timer keeps the stage's output watermark below it, so its rows (timed at
    the timer) are on time downstream."""
    operator, marks = KeyedProcessOperator(AbsenceAlerts()), StageWatermark(["in"])
    ordered, watermark = sorted(rows, key=lambda r: r[1]), 0
    per_batch = max(1, -(-len(ordered) // len(steps)))
    for b, step in enumerate(steps):
        before = marks.output_watermark
        watermark += step
        marks.update_upstream("in", watermark)
        out = operator.advance_watermark(watermark)
        chunk = [r for r in ordered[b * per_batch : (b + 1) * per_batch] if r[1] > watermark]
        out.extend(operator.add(KeyedRows([d for d, _ in chunk], [t for _, t in chunk], [None] * len(chunk))))
        assert all(r.timestamp > before for r in out.rows), (before, out.rows)
        marks.update_output(operator.gauges().hold)


def test_a_timer_a_record_sets_behind_the_watermark_fires_at_the_next_move_as_flinks():
    """Flink's ``InternalTimerServiceImpl`` fires event-time timers only when the watermark moves: one a record sets
    at or behind it waits for the next move (so a record right after it can still delete it)."""

    class Behind:
        def process(self, record, ctx):
            for t in ctx.event_timers():
                ctx.delete_event_timer(t)
            ctx.set_event_timer(record["at"])

        def on_timer(self, timer, ctx):
            ctx.emit(timer.time)

    h = ProcessHarness(Behind())
    h.advance_watermark_to(100)
    assert h.add_elements([({"at": 50}, 40)], key="k") == [], "behind the watermark, not fired between records"
    assert h.add_elements([({"at": 60}, 45)], key="k") == [], "and the next record replaced it"
    assert [r.row for r in h.advance_watermark_to(100)] == [60], "the next move fires it, even at the same watermark"
