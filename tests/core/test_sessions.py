"""Session windows: merging, Beam's strict-overlap rule, late records bridging sessions."""

import pytest

from floodmark import AccumulationMode, aggregates, triggers, windows
from floodmark.core.windows import Window, merge_windows
from floodmark.testing import WindowHarness

pytestmark = pytest.mark.usefixtures("both_operators")  # every test runs on the general and the columnar operator


def sessions(**kwargs):
    return WindowHarness(window=windows.Sessions(10), aggregate=aggregates.count(), **kwargs)


def test_records_closer_than_the_gap_merge():
    h = sessions()
    h.add_elements([(None, 0), (None, 5), (None, 20), (None, 9)], key="k")
    panes = h.advance_watermark_to_infinity()
    assert [(p.window, p.value) for p in panes] == [(Window(0, 19), 3), (Window(20, 30), 1)]


def test_windows_that_only_touch_do_not_merge():
    assert merge_windows([Window(0, 10), Window(10, 20)]) == [
        (Window(0, 10), [Window(0, 10)]),
        (Window(10, 20), [Window(10, 20)]),
    ]
    h = sessions()
    h.add_elements([(None, 0), (None, 10)], key="k")
    assert len(h.advance_watermark_to_infinity()) == 2


def test_keys_are_independent():
    h = sessions()
    h.add_elements([(None, 0)], key="a")
    h.add_elements([(None, 5)], key="b")
    panes = h.advance_watermark_to_infinity()
    assert sorted((p.key, p.window.start, p.window.end) for p in panes) == [("a", 0, 10), ("b", 5, 15)]


def test_late_record_bridges_two_fired_sessions_within_lateness():
    for mode, expected in [(AccumulationMode.ACCUMULATING, 3), (AccumulationMode.DISCARDING, 1)]:
        h = sessions(allowed_lateness=100, accumulation=mode)
        h.add_elements([(None, 0), (None, 15)], key="k")
        on_time = h.advance_watermark_to(30)
        assert [(p.window, p.value, p.timing.value) for p in on_time] == [
            (Window(0, 10), 1, "ON_TIME"),
            (Window(15, 25), 1, "ON_TIME"),
        ]
        (bridged,) = h.add_elements([(None, 7)], key="k")
        assert (bridged.window, bridged.value, bridged.timing.value) == (Window(0, 25), expected, "LATE")
        assert h.open_windows("k") == {Window(0, 25)}
        assert h.late == []


def test_late_record_bridges_into_an_open_session_which_then_fires_on_time():
    h = sessions(allowed_lateness=100, accumulation=AccumulationMode.ACCUMULATING)
    h.add_elements([(None, 0), (None, 15)], key="k")
    assert [p.window for p in h.advance_watermark_to(12)] == [Window(0, 10)]
    assert h.add_elements([(None, 8)], key="k") == []  # [8, 18) joins both: merged [0, 25) not yet due
    (pane,) = h.advance_watermark_to(24)
    assert (pane.window, pane.value, pane.timing.value, pane.pane_index) == (Window(0, 25), 3, "ON_TIME", 0)


def test_record_beyond_lateness_does_not_bridge():
    h = sessions(allowed_lateness=5)
    h.add_elements([(None, 0)], key="k")
    h.advance_watermark_to(20)
    h.add_elements([(None, 3)], key="k")  # its own window [3, 13) expired: horizon 12 + 5 <= 20
    assert [(r.window, r.reason.value) for r in h.late] == [(Window(3, 13), "EXPIRED")]


def test_count_trigger_state_merges():
    h = sessions(trigger=triggers.AfterWatermark(early=triggers.AfterCount(3)))
    h.add_elements([(None, 0), (None, 15)], key="k")
    assert h.panes == []
    (pane,) = h.add_elements([(None, 7)], key="k")  # 1 + 1 + 1 records in the merged session
    assert (pane.window, pane.value, pane.timing.value) == (Window(0, 25), 3, "EARLY")


def test_mean_merges_exactly_across_sessions():
    h = WindowHarness(window=windows.Sessions(10), aggregate=aggregates.mean())
    h.add_elements([(1.0, 0), (3.0, 12)], key="k")
    h.add_elements([(8.0, 6)], key="k")
    (pane,) = h.advance_watermark_to_infinity()
    assert pane.value == 4.0


def test_a_session_snapshot_of_the_general_policy_resumes_on_it():
    """State written before sessions ran on the columnar policy keeps running where it was taken: the snapshot's
    header names its policy."""
    import numpy as np

    from floodmark.core.records import RecordBatch
    from floodmark.core.spec import WindowSpec
    from floodmark.core.window import WindowOperator, restore_operator, step

    spec = WindowSpec(windows.Sessions(10), aggregates.count())
    general = WindowOperator(spec, watermark=0, policy="general")
    general.add(RecordBatch(np.array(["k"], dtype=object), np.array([5]), {None: np.array([1])}))
    restored = restore_operator(spec, general.snapshot())
    assert restored.policy.name == "general"
    _, out, _ = step(spec, general.snapshot(), None, watermark=100, processing_time=0)
    assert [(p.window, p.value) for p in out.all_panes()] == [(Window(5, 15), 1)]


def test_a_record_behind_the_horizon_that_overlaps_a_live_session_joins_it():
    """Flink's order (merge, then test the merged window's horizon): the record at 750 has its own window
    [750, 1050) past its horizon at watermark 1100, but it overlaps the live session [1000, 1300); it joins it and
    extends it backwards, and the session fires with both records. Nothing is late."""
    h = WindowHarness(window=windows.Sessions(300), aggregate=aggregates.count())
    h.add_elements([(None, 1000)], key="k")
    h.advance_watermark_to(1100)
    h.add_elements([(None, 750)], key="k")
    assert h.late == []
    assert h.open_windows("k") == {Window(750, 1300)}
    assert [(p.window, p.value) for p in h.advance_watermark_to_infinity()] == [(Window(750, 1300), 2)]


def test_a_record_whose_merged_session_is_past_its_horizon_is_late_with_that_session():
    """The horizon is tested on the window the record merges into: alone, its own window; past it, the record
    goes to the late output (EXPIRED) and no window changes."""
    h = WindowHarness(window=windows.Sessions(300), aggregate=aggregates.count(), allowed_lateness=300)
    h.add_elements([(None, 1000)], key="k")
    h.advance_watermark_to(1500)  # [1000, 1300) fired ON_TIME at 1299; its horizon is 1599
    h.add_elements([(None, 900)], key="k")  # own horizon 1499 passed; merged [900, 1300) has 1599: a LATE pane
    h.add_elements([(None, 100)], key="k")  # [100, 400): alone, and past its horizon 699
    (late,) = h.late
    assert (late.timestamp, late.window, late.reason.value) == (100, Window(100, 400), "EXPIRED")
    h.advance_watermark_to(2000)
    assert [(p.window, p.value, p.timing.value) for p in h.panes] == [
        (Window(1000, 1300), 1, "ON_TIME"),
        (Window(900, 1300), 1, "LATE"),
    ]
