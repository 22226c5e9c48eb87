"""Panes, triggers, lateness and accumulation through the public WindowHarness."""

import pytest

from floodmark import AccumulationMode, LateReason, TimestampCombiner, Timing, aggregates, triggers, windows
from floodmark.core.windows import Window
from floodmark.testing import WindowHarness

pytestmark = pytest.mark.usefixtures("both_operators")  # every test runs on the general and the columnar operator


def summary(panes):
    return [(p.window.start, p.value, p.timing.value, p.pane_index, p.nonspeculative_index, p.is_last) for p in panes]


def test_issue_example_early_on_time_late_and_dropped():
    h = WindowHarness(
        window=windows.Tumbling(10),
        trigger=triggers.AfterWatermark(early=triggers.AfterCount(3), late=triggers.AfterCount(1)),
        allowed_lateness=20,
        accumulation=AccumulationMode.DISCARDING,
        timestamp_combiner=TimestampCombiner.END_OF_WINDOW,
        aggregate=aggregates.collect_list(),
    )
    assert summary(h.add_elements([("a", 1), ("b", 2), ("c", 3), ("d", 4)], key="k")) == [
        (0, ["a", "b", "c"], "EARLY", 0, -1, False)
    ]
    assert summary(h.advance_watermark_to(8)) == []
    assert summary(h.advance_watermark_to(9)) == [(0, ["d"], "ON_TIME", 1, 0, False)]
    assert summary(h.add_elements([("e", 5)], key="k")) == [(0, ["e"], "LATE", 2, 1, False)]
    assert summary(h.add_elements([("f", 6), ("g", 7)], key="k")) == [
        (0, ["f"], "LATE", 3, 2, False),
        (0, ["g"], "LATE", 4, 3, False),
    ]
    assert h.advance_watermark_to(29) == []  # horizon 9 + 20: state cleared, nothing new to emit
    h.add_elements([("h", 8)], key="k")
    (late,) = h.late
    assert (late.window, late.timestamp, late.value, late.lateness, late.horizon, late.reason) == (
        Window(0, 10),
        8,
        "h",
        21,
        29,
        LateReason.EXPIRED,
    )
    assert all(p.timestamp == 9 for p in h.panes)


def test_default_trigger_zero_lateness_fires_once_and_drops_late():
    h = WindowHarness(window=windows.Tumbling(10), aggregate=aggregates.count())
    h.add_elements([(None, 1), (None, 2)], key="k")
    assert summary(h.advance_watermark_to(9)) == [(0, 2, "ON_TIME", 0, 0, True)]
    h.add_elements([(None, 5)], key="k")
    assert [r.reason for r in h.late] == [LateReason.EXPIRED]


def test_default_trigger_fires_per_late_record_within_lateness():
    h = WindowHarness(window=windows.Tumbling(10), aggregate=aggregates.count(), allowed_lateness=5)
    h.add_elements([(None, 1)], key="k")
    assert summary(h.advance_watermark_to(10)) == [(0, 1, "ON_TIME", 0, 0, False)]
    assert summary(h.add_elements([(None, 3), (None, 4)], key="k")) == [
        (0, 1, "LATE", 1, 1, False),
        (0, 1, "LATE", 2, 2, False),
    ]
    assert h.advance_watermark_to(14) == []
    assert h.operator.gauges().open_state == 0


def test_after_watermark_without_late_closes_the_window():
    h = WindowHarness(
        window=windows.Tumbling(10),
        trigger=triggers.AfterWatermark(),
        aggregate=aggregates.count(),
        allowed_lateness=100,
    )
    h.add_elements([(None, 1)], key="k")
    assert summary(h.advance_watermark_to(9)) == [(0, 1, "ON_TIME", 0, 0, True)]
    h.add_elements([(None, 2)], key="k")
    assert [r.reason for r in h.late] == [LateReason.WINDOW_CLOSED]


def test_empty_on_time_pane_is_emitted_but_empty_late_is_not():
    h = WindowHarness(
        window=windows.Tumbling(10),
        trigger=triggers.AfterWatermark(early=triggers.AfterCount(1)),
        aggregate=aggregates.count(),
    )
    assert summary(h.add_elements([(None, 1)], key="k")) == [(0, 1, "EARLY", 0, -1, False)]
    assert summary(h.advance_watermark_to(9)) == [(0, 0, "ON_TIME", 1, 0, True)]


def test_accumulating_mode():
    h = WindowHarness(
        window=windows.Tumbling(10),
        trigger=triggers.AfterWatermark(early=triggers.AfterCount(2), late=triggers.AfterCount(1)),
        accumulation=AccumulationMode.ACCUMULATING,
        allowed_lateness=10,
        aggregate=aggregates.collect_list(),
    )
    h.add_elements([("a", 1), ("b", 2), ("c", 3)], key="k")
    h.advance_watermark_to(9)
    h.add_elements([("d", 4)], key="k")
    assert [p.value for p in h.panes] == [["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]]


def test_after_count_alone_fires_early_then_closes():
    h = WindowHarness(window=windows.Global(), trigger=triggers.AfterCount(2), aggregate=aggregates.count())
    h.add_elements([(None, 1), (None, 2), (None, 3)], key="k")
    assert [(p.value, p.timing, p.is_last) for p in h.panes] == [(2, Timing.EARLY, True)]
    assert [r.reason for r in h.late] == [LateReason.WINDOW_CLOSED]


def test_repeatedly_after_count_in_global_window_with_final_pane():
    h = WindowHarness(
        window=windows.Global(), trigger=triggers.Repeatedly(triggers.AfterCount(2)), aggregate=aggregates.count()
    )
    h.add_elements([(None, t) for t in range(5)], key="k")
    assert [p.value for p in h.panes] == [2, 2]
    final = h.advance_watermark_to_infinity()
    assert [(p.value, p.timing, p.is_last) for p in final] == [(1, Timing.ON_TIME, True)]


def test_processing_time_early_firings():
    h = WindowHarness(
        window=windows.Tumbling(100),
        trigger=triggers.AfterWatermark(early=triggers.AfterProcessingTime(10)),
        aggregate=aggregates.count(),
    )
    h.advance_processing_time_to(1_000)
    h.add_elements([(None, 1)], key="k")
    h.advance_processing_time_to(1_005)
    h.add_elements([(None, 2)], key="k")
    assert h.advance_processing_time_to(1_009) == []
    assert summary(h.advance_processing_time_to(1_010)) == [(0, 2, "EARLY", 0, -1, False)]
    assert h.advance_processing_time_to(2_000) == [], "no new records: the delay has not restarted"
    h.add_elements([(None, 3)], key="k")
    assert summary(h.advance_processing_time_to(2_010)) == [(0, 1, "EARLY", 1, -1, False)]
    assert summary(h.advance_watermark_to(99)) == [(0, 0, "ON_TIME", 2, 0, True)]


def test_after_each_sequence():
    h = WindowHarness(
        window=windows.Global(),
        trigger=triggers.AfterEach(triggers.AfterCount(2), triggers.AfterCount(3)),
        aggregate=aggregates.count(),
    )
    h.add_elements([(None, t) for t in range(6)], key="k")
    assert [(p.value, p.is_last) for p in h.panes] == [(2, False), (3, True)]
    assert len(h.late) == 1


def test_or_finally():
    h = WindowHarness(
        window=windows.Global(),
        trigger=triggers.OrFinally(triggers.Repeatedly(triggers.AfterCount(2)), triggers.AfterCount(5)),
        aggregate=aggregates.count(),
    )
    h.add_elements([(None, t) for t in range(7)], key="k")
    assert [(p.value, p.is_last) for p in h.panes] == [(2, False), (2, False), (1, True)]
    assert len(h.late) == 2


def test_after_all_waits_for_every_subtrigger():
    h = WindowHarness(
        window=windows.Global(),
        trigger=triggers.AfterAll(triggers.AfterCount(2), triggers.AfterProcessingTime(10)),
        aggregate=aggregates.count(),
    )
    h.add_elements([(None, 1)], key="k")
    assert h.advance_processing_time_to(10) == []  # time is up, count is not
    assert [p.value for p in h.add_elements([(None, 2)], key="k")] == [2]
    assert h.panes[-1].is_last


def test_after_any_repeated():
    h = WindowHarness(
        window=windows.Global(),
        trigger=triggers.Repeatedly(triggers.AfterAny(triggers.AfterCount(3), triggers.AfterProcessingTime(10))),
        aggregate=aggregates.count(),
    )
    h.add_elements([(None, t) for t in range(4)], key="k")
    assert [p.value for p in h.panes] == [3]
    assert [p.value for p in h.advance_processing_time_to(10)] == [1]


def test_never_fires_only_at_garbage_collection():
    h = WindowHarness(window=windows.Tumbling(10), trigger=triggers.Never(), aggregate=aggregates.count())
    h.add_elements([(None, 1)], key="k")
    assert summary(h.advance_watermark_to(9)) == [(0, 1, "ON_TIME", 0, 0, True)]


def test_first_records_after_the_watermark_give_a_late_pane():
    h = WindowHarness(window=windows.Tumbling(10), aggregate=aggregates.count(), allowed_lateness=50)
    h.advance_watermark_to(15)
    assert summary(h.add_elements([(None, 3)], key="k")) == [(0, 1, "LATE", 0, 0, False)]


def test_timestamp_combiners_and_holds():
    for combiner, expected in [
        (TimestampCombiner.END_OF_WINDOW, 9),
        (TimestampCombiner.EARLIEST, 2),
        (TimestampCombiner.LATEST, 7),
    ]:
        h = WindowHarness(window=windows.Tumbling(10), aggregate=aggregates.count(), timestamp_combiner=combiner)
        h.add_elements([(None, 5), (None, 2), (None, 7)], key="k")
        assert h.output_watermark_hold() == expected
        (pane,) = h.advance_watermark_to(9)
        assert pane.timestamp == expected
        assert h.output_watermark_hold() is None


def test_sliding_windows_output_time_not_before_previous_window_end():
    h = WindowHarness(
        window=windows.Sliding(10, 5),
        aggregate=aggregates.count(),
        timestamp_combiner=TimestampCombiner.EARLIEST,
    )
    h.add_elements([(None, 7)], key="k")  # windows [0, 10) and [5, 15)
    panes = h.advance_watermark_to_infinity()
    stamps = {p.window.start: p.timestamp for p in panes}
    assert stamps == {0: 7, 5: 10}, "window [5,15) outputs at >= 10, the end of [0,10)"


def test_bad_records_go_to_the_bad_output_with_a_reason():
    h = WindowHarness(window=windows.Tumbling(10), aggregate=aggregates.count())
    h.add_elements([("ok", 1), ("none", None), ("text", "12"), ("frac", 1.5), ("flag", True), ("float", 3.0)], key="k")
    assert [(b.value, b.reason) for b in h.bad] == [
        ("none", "missing timestamp"),
        ("text", "timestamp is not a number: '12'"),
        ("frac", "timestamp is not whole milliseconds: 1.5"),
        ("flag", "timestamp is not a number: True"),
    ]
    (pane,) = h.advance_watermark_to(9)
    assert pane.value == 2


def test_window_assignment_edges():
    assert windows.Tumbling(10).assign_one(-1) == [Window(-10, 0)]
    assert windows.Tumbling(10, offset=3).assign_one(2) == [Window(-7, 3)]
    assert windows.Sliding(10, 5).assign_one(5) == [Window(0, 10), Window(5, 15)]
    assert windows.Sliding(10, 3).assign_one(9) == [Window(0, 10), Window(3, 13), Window(6, 16), Window(9, 19)]
    assert windows.Tumbling(10).assign_one(10) == [Window(10, 20)]
    assert Window(0, 10).max_timestamp == 9
    with pytest.raises(ValueError):
        windows.Sliding(5, 10)


def test_several_aggregates_and_user_defined():
    spread = aggregates.UserAggregate(
        create=lambda: (None, None),
        add=lambda acc, v: (v if acc[0] is None else min(acc[0], v), v if acc[1] is None else max(acc[1], v)),
        merge=lambda a, b: (min(a[0], b[0]), max(a[1], b[1])),
        result=lambda acc: acc[1] - acc[0],
    )
    h = WindowHarness(
        window=windows.Tumbling(10),
        aggregate=aggregates.several(
            n=aggregates.count(),
            total=aggregates.sum(),
            low=aggregates.min(),
            high=aggregates.max(),
            avg=aggregates.mean(),
            spread=spread,
            median=aggregates.FullWindow(lambda vs: sorted(vs)[len(vs) // 2]),
        ),
    )
    h.add_elements([(4, 1), (1, 2), (7, 3)], key="k")
    (pane,) = h.advance_watermark_to(9)
    assert pane.value == {"n": 3, "total": 12, "low": 1, "high": 7, "avg": 4.0, "spread": 6, "median": 4}


def test_operator_snapshot_restore_mid_stream():
    def run(restore_after):
        h = WindowHarness(
            window=windows.Tumbling(10),
            trigger=triggers.AfterWatermark(early=triggers.AfterCount(2), late=triggers.AfterCount(1)),
            allowed_lateness=10,
            aggregate=aggregates.collect_list(),
        )
        steps = [
            lambda: h.add_elements([(1, 1), (2, 12)], key="a"),
            lambda: h.add_elements([(3, 3)], key="a"),
            lambda: h.advance_watermark_to(9),
            lambda: h.add_elements([(4, 4), (5, 15)], key="b"),
            lambda: h.advance_watermark_to(30),
        ]
        for i, step in enumerate(steps):
            if i == restore_after:
                from floodmark.core.window import restore_operator

                h.operator = restore_operator(h.spec, h.operator.snapshot())
            step()
        return summary(h.panes), [(r.key, r.timestamp) for r in h.late]

    baseline = run(restore_after=-1)
    for i in range(5):
        assert run(restore_after=i) == baseline
