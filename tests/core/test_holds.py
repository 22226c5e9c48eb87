"""Beam's hold rule (Java Beam's ``WatermarkHold.addElementHold``), on random streams, both operators.

A record holds its pane's output time only if that time is not behind the output watermark its key sees
when it arrives (and only while its window is open); otherwise its pane falls back on the window's max
timestamp. So the output watermark MIN(input watermark, holds) never goes back, and no EARLY or ON_TIME pane
is timestamped behind the output watermark in force before it fired: a downstream stage never takes it as
late because of an upstream record that was already behind.
"""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import TimestampCombiner, aggregates, triggers, windows
from floodmark.core.pipeline import MicroBatchPipeline, WindowedStage
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.watermarks.stage import held_below
from floodmark.core.window import WindowOperator
from floodmark.testing import WindowHarness

WINDOWS = [
    windows.Tumbling(10),
    windows.Sliding(10, 5),
    windows.Sliding(9, 4, offset=2),
    windows.Cumulate(4, 12, offset=2),
    windows.Sessions(5),
]
TRIGGERS = [
    triggers.Default(),
    triggers.AfterWatermark(early=triggers.AfterCount(2), late=triggers.AfterCount(1)),
    triggers.AfterWatermark(early=triggers.AfterProcessingTime(3)),
    triggers.Repeatedly(triggers.AfterCount(3)),
]
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"), st.lists(st.tuples(st.sampled_from("abc"), st.integers(-5, 80)), min_size=1, max_size=6)
        ),
        st.tuples(st.just("wm"), st.integers(0, 15)),
        st.tuples(st.just("pt"), st.integers(0, 6)),
    ),
    min_size=1,
    max_size=25,
)


def output_watermark(operator) -> int:
    """The stage's rule (``StageWatermark.update_output``): one below the lowest hold."""
    hold = operator.gauges().hold
    return operator.watermark if hold is None else min(operator.watermark, held_below(hold))


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(WINDOWS),
    st.sampled_from(TRIGGERS),
    st.sampled_from(list(TimestampCombiner)),
    st.sampled_from([0, 5]),
    st.sampled_from(["general", "columnar"]),
    ops,
)
def test_no_hold_behind_the_output_watermark(window, trigger, combiner, lateness, kind, steps):
    spec = WindowSpec(window, aggregates.count(), trigger, lateness, timestamp_combiner=combiner)
    operator = WindowOperator(spec, -10, policy="columnar" if kind == "columnar" and spec.is_columnar else "general")
    watermark, now = -10, 0
    previous = output_watermark(operator)
    for step_kind, arg in [*steps, ("wm", MAX_TIMESTAMP)]:
        before = output_watermark(operator)
        if step_kind == "add":
            keys = np.array([k for k, _ in arg], dtype=object)
            out = operator.add(RecordBatch(keys, np.array([t for _, t in arg], dtype=np.int64), {None: keys}))
        elif step_kind == "wm":
            watermark = MAX_TIMESTAMP if arg == MAX_TIMESTAMP else watermark + arg
            out = operator.advance_watermark(watermark)
        else:
            now += arg
            out = operator.advance_processing_time(now)
        for pane in out.all_panes():
            if pane.timing.value != "LATE":
                assert pane.timestamp > before, (pane, before)  # a row at a watermark is late downstream
        current = output_watermark(operator)
        assert current >= previous, "the output watermark went back"
        previous = current


def test_a_record_behind_the_output_watermark_does_not_hold_its_pane_there():
    """The issue's case: EARLIEST, a record behind the watermark in a window still open."""
    for operator in ("general", "columnar"):
        h = WindowHarness(
            window=windows.Tumbling(10),
            aggregate=aggregates.count(),
            timestamp_combiner=TimestampCombiner.EARLIEST,
            policy=operator,
        )
        h.advance_watermark_to(5)
        h.add_elements([("behind", 2)], key="a")  # output time 2 < output watermark 5: no hold
        h.add_elements([("on time", 7)], key="b")  # holds b's pane at 7
        h.add_elements([("behind too", 3)], key="b")  # 3 < b's output watermark 5: no hold
        assert h.operator.gauges().hold == 7
        h.advance_watermark_to(9)
        assert {(p.key, p.timestamp) for p in h.panes} == {("a", 9), ("b", 7)}, operator


def test_a_record_at_or_after_its_keys_output_watermark_still_holds():
    for operator in ("general", "columnar"):
        h = WindowHarness(
            window=windows.Tumbling(10), aggregate=aggregates.count(), timestamp_combiner="LATEST", policy=operator
        )
        h.add_elements([("first", 6)], key="a")  # holds [0, 10) at 6
        h.advance_watermark_to(8)  # a's output watermark: MIN(8, 6 - 1) = 5
        h.add_elements([("behind the input watermark", 7)], key="a")  # 7 > 5: holds, LATEST -> 7
        h.advance_watermark_to(9)
        assert [(p.window.start, p.timestamp) for p in h.panes] == [(0, 7)], operator


def test_an_earliest_pane_is_on_time_for_a_downstream_window_whose_max_timestamp_it_is():
    """EARLIEST holds a window's output watermark at its record's time e; the stage's output watermark stays one
    below (``e - 1``), so the pane at ``e`` reaches a downstream window ``[e, e + 1)`` before that window fires.
    (With the output watermark at the hold itself, the pane went to the downstream late output.)"""
    first = WindowSpec(windows.Tumbling(10), {"n": aggregates.count()}, timestamp_combiner=TimestampCombiner.EARLIEST)
    pipeline = MicroBatchPipeline(
        {"src": "ts"},
        [
            WindowedStage("first", ("src",), first, key_by=("k",)),
            WindowedStage("second", ("first",), WindowSpec(windows.Tumbling(1), {"m": aggregates.count()})),
        ],
    )
    late, panes = [], []
    for batch, watermark in enumerate([1, 5, 9, 20, MAX_TIMESTAMP]):
        rows = pd.DataFrame({"ts": [2], "k": ["a"]}) if batch == 0 else pd.DataFrame({"ts": [], "k": []})
        for emitted in pipeline.run_batch({"src": rows.astype({"ts": "int64"})}, 0).values():
            late += emitted.late
            panes += emitted.all_panes()
        pipeline.end_batch({"src": (watermark, False)})
    assert late == []
    assert [(p.window, p.timestamp) for p in panes] == [(windows.Window(0, 10), 2), (windows.Window(2, 3), 2)]


@pytest.mark.parametrize("combiner", [TimestampCombiner.EARLIEST, TimestampCombiner.LATEST])
@pytest.mark.parametrize("window", [windows.Tumbling(10), windows.Sessions(4)])
def test_a_late_record_keeps_its_own_timestamp_when_its_hold_is_dropped(window, combiner):
    """A record behind the output watermark adds no hold; its event time, which the late output carries, stays
    its own (found by the JVM host's differential test: the hold was written over the timestamp)."""
    spec = WindowSpec(window, aggregates.count(), triggers.AfterWatermark(), 0, timestamp_combiner=combiner)
    operator = WindowOperator(spec, watermark=100)
    keys = np.array(["a", "a"], dtype=object)
    batch = RecordBatch(keys, np.array([3, 95], dtype=np.int64), {None: np.array([1, 2], dtype=object)})
    late = operator.add(batch).late
    assert [(r.timestamp, r.lateness) for r in late] == [(3, 97), (95, 5)]
