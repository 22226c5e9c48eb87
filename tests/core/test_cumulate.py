"""Cumulate windows (``windows.Cumulate``): Flink's ``CUMULATE`` in the core, against Flink's documented example and
a straight computation."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import TimestampCombiner, WatermarkStrategy, aggregates, windows
from floodmark.apps.config import WindowConfig
from floodmark.apps.inspection import window_at
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.watermarks import SourceWatermarks, SplitBatchStats
from floodmark.core.window import WindowOperator
from floodmark.core.windows import Window
from floodmark.testing import WindowHarness

MINUTE = 60_000

pytestmark = pytest.mark.usefixtures("both_operators")


def at(hhmm: str) -> int:
    """2020-04-15 hh:mm UTC in ms (the day of Flink's ``Bid`` table)."""
    return int(datetime.fromisoformat(f"2020-04-15T{hhmm}+00:00").timestamp() * 1000)


BIDS = [("08:05", 4.0, "C"), ("08:07", 2.0, "A"), ("08:09", 5.0, "D"), ("08:11", 3.0, "B"), ("08:13", 1.0, "E")]
BIDS += [("08:17", 6.0, "F")]


@pytest.mark.parametrize("policy", ["general", "columnar"])
def test_flinks_documented_cumulate_example(policy):
    """Flink's window TVF page: ``CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10'
    MINUTES)`` with ``SUM(price)`` gives these eight windows. [08:10, 08:16) has no bid of its own last step
    (08:14-08:16) and still fires (Flink's default, ``emitOnlyOnUpdate = false``); [08:00, 08:02) and [08:00, 08:04)
    hold no bid and fire nothing."""
    h = WindowHarness(
        window=windows.Cumulate(2 * MINUTE, 10 * MINUTE), aggregate=aggregates.sum("price"), policy=policy
    )
    h.add_elements([({"price": price, "item": item}, at(t)) for t, price, item in BIDS])
    h.advance_watermark_to(at("08:17") - 1_000)  # Flink's Bid table: watermark = bidtime - 1 s
    h.advance_watermark_to_infinity()
    got = [(p.window.start, p.window.end, p.value) for p in h.panes]
    assert got == [
        (at("08:00"), at("08:06"), 4.0),
        (at("08:00"), at("08:08"), 6.0),
        (at("08:00"), at("08:10"), 11.0),
        (at("08:10"), at("08:12"), 3.0),
        (at("08:10"), at("08:14"), 4.0),
        (at("08:10"), at("08:16"), 4.0),
        (at("08:10"), at("08:18"), 10.0),
        (at("08:10"), at("08:20"), 10.0),
    ]
    assert h.late == [] and h.bad == []


def test_each_window_fires_as_its_step_ends():
    """A day's running count every hour: the window ending at 10:00 fires when the watermark reaches 09:59:59.999,
    before the day is over; the day's last window fires at the day's end."""
    day, hour = 24 * 60 * MINUTE, 60 * MINUTE
    h = WindowHarness(window=windows.Cumulate(timedelta(hours=1), timedelta(days=1)), aggregate=aggregates.count())
    h.add_elements([("x", 30 * MINUTE), ("x", 9 * hour + 5), ("x", 10 * hour)], key="k")
    h.advance_watermark_to(10 * hour - 2)
    assert [(p.window.end // hour, p.value) for p in h.panes] == [(j, 1) for j in range(1, 10)]
    fired = h.advance_watermark_to(10 * hour - 1)
    assert [(p.window.end // hour, p.value) for p in fired] == [(10, 2)]
    h.advance_watermark_to(day - 1)
    assert [(p.window.end // hour, p.value) for p in h.panes[-14:]] == [(j, 3) for j in range(11, 25)]
    assert {p.window.start for p in h.panes} == {0}


def test_a_sparse_key_gets_a_pane_at_every_step_of_its_epoch():
    h = WindowHarness(window=windows.Cumulate(10, 40), aggregate=aggregates.count(), policy="columnar")
    h.add_elements([("x", 3)], key="k")
    h.advance_watermark_to_infinity()
    assert [(p.window, p.value) for p in h.panes] == [(Window(0, end), 1) for end in (10, 20, 30, 40)]


def test_output_times_are_not_before_the_previous_windows_end():
    """EARLIEST: a record at 3 holds [0, 10) at 3, but [0, 20) only from 10 (the end of the epoch's previous
    window), as sliding windows do; a downstream stage is not held back to the epoch's start."""
    h = WindowHarness(
        window=windows.Cumulate(10, 30), aggregate=aggregates.count(), timestamp_combiner=TimestampCombiner.EARLIEST
    )
    h.add_elements([("x", 3)], key="k")
    assert h.output_watermark_hold() == 3
    h.advance_watermark_to(9)
    assert h.output_watermark_hold() == 10
    h.advance_watermark_to(19)
    assert h.output_watermark_hold() == 20
    assert [(p.window.end, p.timestamp) for p in h.panes] == [(10, 3), (20, 10)]


def straight_windows(ts: int, step: int, max_size: int, offset: int) -> list[Window]:
    """Flink's ``CumulativeWindowAssigner.assignWindows``, one record at a time with Python's floor division."""
    epoch = (ts - offset) // max_size * max_size + offset
    first_end = (ts - offset) // step * step + offset + step
    return [Window(epoch, end) for end in range(first_end, epoch + max_size + 1, step)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=30),
    st.sampled_from([(1, 1), (1, 5), (3, 12), (7, 7), (5, 60)]),
    st.integers(-100, 100),
)
def test_assignment_is_flinks(timestamps, steps, offset):
    step, max_size = steps
    assigner = windows.Cumulate(step, max_size, offset)
    for ts in timestamps:
        assigned = assigner.assign_one(ts)
        assert assigned == straight_windows(ts, step, max_size, offset)
        assert all(w.contains(ts) for w in assigned)


batches = st.lists(
    st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("pqr"), st.integers(0, 120)), max_size=8),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(batches, st.sampled_from(["general", "columnar"]), st.sampled_from([(5, 20), (10, 30)]))
def test_split_watermarks_out_of_order_input_and_an_idle_split_equal_a_straight_computation(raw, policy, steps):
    """Two splits with out-of-order records, split "b" silent after the first half (idleness lets the watermark go
    on without it), lateness 0: every (record, window) pair either counts in its window's one pane or is late, by
    the watermark its batch found (``W >= end - 1``); nothing else."""
    step, max_size = steps
    spec = WindowSpec(windows.Cumulate(step, max_size), {"n": aggregates.count()})
    source = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(7).with_idleness(50), 10)
    operator = WindowOperator(spec, policy=policy)
    expected: Counter = Counter()
    late_pairs: Counter = Counter()
    panes, late = [], []
    for b, records in enumerate(raw):
        now = b * 20
        source.advance_processing_time(now)
        watermark = source.watermark  # a batch runs with the watermark its start found, as in Spark
        panes += operator.advance_processing_time(now).all_panes()
        panes += operator.advance_watermark(watermark).all_panes()
        if b >= len(raw) // 2:
            records = [r for r in records if r[0] == "a"]  # split b goes idle
        for _, key, ts in records:
            for window in spec.window.assign_one(ts):
                (late_pairs if watermark >= window.max_timestamp else expected)[(key, window)] += 1
        if records:
            keys = np.array([k for _, k, _ in records], dtype=object)
            ts = np.array([t for _, _, t in records], dtype=np.int64)
            emitted = operator.add(RecordBatch(keys, ts, {None: keys}))
            panes += emitted.all_panes()
            late += emitted.late
            stats = [
                SplitBatchStats(split, len(rows), min(rows), max(rows))
                for split in "ab"
                if (rows := [t for s, _, t in records if s == split])
            ]
            source.on_batch(stats)
    emitted = operator.advance_watermark(2**63 - 1)
    panes += emitted.all_panes()
    got = Counter()
    for pane in panes:
        got[(pane.key, pane.window)] += pane.value["n"]
    assert got == expected
    assert Counter((r.key, r.window) for r in late) == late_pairs
    assert len(panes) == len(expected), "one pane per window that has on-time records"


def test_bad_shapes_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="whole multiple of the step"):
        windows.Cumulate(7, 20)
    with pytest.raises(ValueError, match="use a longer step"):
        windows.Cumulate(1, 86_400_000)
    with pytest.raises(ValueError, match="needs step and max_size"):
        WindowConfig(kind="cumulate")
    assert WindowConfig(kind="cumulate", step="1 hour", max_size="1 day", offset="19 hours").assigner() == (
        windows.Cumulate(3_600_000, 86_400_000, 68_400_000)
    )


def test_explain_names_a_cumulate_window_by_start_and_end():
    spec = WindowSpec(windows.Cumulate(10, 40), aggregates.count())
    assert window_at(spec, 40, 60) == Window(40, 60)
    with pytest.raises(ValueError, match="share their start: give the window's end too"):
        window_at(spec, 40)
    with pytest.raises(ValueError, match="not the start of a 40 ms cumulate window"):
        window_at(spec, 50, 60)
    with pytest.raises(ValueError, match="ends at 50"):
        window_at(WindowSpec(windows.Tumbling(10), aggregates.count()), 40, 60)
