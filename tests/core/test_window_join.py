"""The window join (``floodmark.core.join.window_join``), engine-free: every pair of a left and a right row of one key
that share a window, once, for rows that were not late for that window, whatever the arrival order, the watermark
moves, allowed lateness (LATE panes pair only what is new) and a snapshot/restore in the middle; sessions that
merge keep the pairs their parts emitted."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import Timing, windows
from floodmark.core.join import Side, WindowJoinOperator, WindowJoinSpec, restore_window_join
from floodmark.core.keyed_operator import KeyedRows
from floodmark.core.time import MAX_TIMESTAMP

ASSIGNERS = [windows.Tumbling(10), windows.Sliding(20, 10), windows.Cumulate(5, 20)]

batches = st.lists(
    st.tuples(
        st.integers(0, 15),  # how far the watermark moves before the batch
        st.lists(st.tuples(st.sampled_from(list(Side)), st.sampled_from("ab"), st.integers(0, 80)), max_size=6),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(ASSIGNERS), st.sampled_from([0, 7]), batches, st.integers(0, 12))
def test_every_pair_sharing_a_window_once_unless_late(assigner, lateness, script, restore_at):
    spec = WindowJoinSpec(assigner, allowed_lateness=lateness)
    operator = WindowJoinOperator(spec)
    watermark, row_id, rows, joined, late, accepted = 0, 0, [], [], [], 0
    for b, (move, arriving) in enumerate(script):
        if b == restore_at:
            operator = restore_window_join(spec, operator.snapshot())
        watermark += move
        out = operator.advance_watermark(watermark)
        for side in Side:
            mine = [(key, ts, row_id + i) for i, (s, key, ts) in enumerate(arriving) if s is side]
            out.extend(
                operator.add(KeyedRows([k for k, _, _ in mine], [t for _, t, _ in mine], [i for _, _, i in mine], side))
            )
            rows += [(side, key, ts, i, watermark) for key, ts, i in mine]
        row_id += len(arriving)
        joined += out.joined
        late += out.late
        accepted += out.accepted
    joined += operator.advance_watermark(MAX_TIMESTAMP).joined

    expected = Counter()
    on_time = Counter()  # (row, window) pairs that were not late
    for side, key, ts, i, at in rows:
        for w in assigner.assign_one(ts):
            if at < w.max_timestamp + lateness:
                on_time[(side, key, i, w.start, w.end)] += 1
    for side, key, i, start, end in on_time:
        if side is Side.LEFT:
            for other, key2, j, start2, end2 in on_time:
                if other is Side.RIGHT and (key2, start2, end2) == (key, start, end):
                    expected[(key, i, j, start, end)] += 1
    got = Counter((p.key, p.left, p.right, p.window.start, p.window.end) for p in joined)
    assert got == expected
    assert all(p.timestamp == p.window.end - 1 for p in joined)
    assert all(p.timing in (Timing.ON_TIME, Timing.LATE) for p in joined)
    late_pairs = Counter((r.side, r.key, r.value) for r in late)
    expected_late = Counter(
        (side, key, i)
        for side, key, ts, i, at in rows
        for w in assigner.assign_one(ts)
        if at >= w.max_timestamp + lateness
    )
    assert late_pairs == expected_late
    assert accepted == sum(on_time.values()), "the reconciliation: (row, window) pairs taken"


def test_a_late_row_within_lateness_pairs_in_a_late_pane_and_nothing_twice():
    op = WindowJoinOperator(WindowJoinSpec(windows.Tumbling(10), allowed_lateness=5))
    op.add(KeyedRows(["k"], [1], ["l1"], Side.LEFT))
    op.add(KeyedRows(["k"], [2], ["r1"], Side.RIGHT))
    fired = op.advance_watermark(9)
    assert [(p.left, p.right, p.timing) for p in fired.joined] == [("l1", "r1", Timing.ON_TIME)]
    again = op.add(KeyedRows(["k"], [3], ["r2"], Side.RIGHT))  # late, within lateness: only its own pairs
    assert [(p.left, p.right, p.timing, p.pane_index) for p in again.joined] == [("l1", "r2", Timing.LATE, 1)]
    gone = op.add(KeyedRows(["k"], [4], ["l2"], Side.LEFT))
    assert [(p.left, p.right) for p in gone.joined] == [("l2", "r1"), ("l2", "r2")]
    op.advance_watermark(14)  # the window's horizon: its rows are dropped
    expired = op.add(KeyedRows(["k"], [5], ["l3"], Side.LEFT))
    assert expired.joined == [] and [(r.side, r.value, r.horizon) for r in expired.late] == [(Side.LEFT, "l3", 14)]


def test_sessions_that_merge_keep_the_pairs_their_parts_emitted():
    op = WindowJoinOperator(WindowJoinSpec(windows.Sessions(10), allowed_lateness=100))
    op.add(KeyedRows(["k"], [0], ["l1"], Side.LEFT))
    op.add(KeyedRows(["k"], [5], ["r1"], Side.RIGHT))
    first = op.advance_watermark(20)  # session [0, 15) fires
    assert [(p.left, p.right, p.window.end) for p in first.joined] == [("l1", "r1", 15)]
    assert (
        op.add(KeyedRows(["k"], [12], ["r2"], Side.RIGHT)).joined == []
    )  # extends the session to [0, 22), not yet due
    merged = op.advance_watermark(30)
    assert [(p.left, p.right, p.window.end) for p in merged.joined] == [("l1", "r2", 22)], "not l1-r1 again"
