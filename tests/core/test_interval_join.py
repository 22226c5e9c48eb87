"""The interval join in the core (``floodmark.core.join``) against a straight computation of its rules."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.core.join import (
    IntervalJoinOperator,
    IntervalJoinSpec,
    JoinKind,
    JoinTime,
    Side,
    restore_interval_join,
)
from floodmark.core.keyed_operator import KeyedRows
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, out_of_range_reason
from floodmark.core.watermarks.stage import StageWatermark


def test_flinks_lost_pair_is_joined_while_on_time_and_late_once_the_watermark_reaches_it():
    """Flink's ``IntervalJoinOperator`` with bounds [-5, 0]: left@100, the watermark reaches 100 (left@100's
    cleanup timer fires), then right@100 arrives, passes Flink's ``ts < watermark`` lateness check and finds no
    partner: no pair, no late output. Here the two rules share one comparison."""
    spec = IntervalJoinSpec(between=(-5, 0))
    on_time = IntervalJoinOperator(spec)
    on_time.add(KeyedRows(["k"], [100], ["l"], Side.LEFT))
    on_time.advance_watermark(99)
    pairs = on_time.add(KeyedRows(["k"], [100], ["r"], Side.RIGHT)).joined
    assert [(p.left, p.right, p.timestamp) for p in pairs] == [("l", "r", 100)]

    late = IntervalJoinOperator(spec)
    late.add(KeyedRows(["k"], [100], ["l"], Side.LEFT))
    late.advance_watermark(100)
    out = late.add(KeyedRows(["k"], [100], ["r"], Side.RIGHT))
    assert out.joined == []
    assert [(r.side, r.value, r.timestamp, r.watermark, r.lateness) for r in out.late] == [
        (Side.RIGHT, "r", 100, 100, 0)
    ], "a row at the watermark is late (Flink's watermark contract): it goes to the late output, not nowhere"


def test_allowed_lateness_keeps_partners_for_rows_behind_the_watermark():
    spec = IntervalJoinSpec(between=(-5, 0), allowed_lateness=10)
    op = IntervalJoinOperator(spec)
    op.add(KeyedRows(["k"], [100], ["l"], Side.LEFT))
    op.advance_watermark(105)
    assert [(p.left, p.right) for p in op.add(KeyedRows(["k"], [100], ["r"], Side.RIGHT)).joined] == [("l", "r")]
    op.advance_watermark(109)
    assert op.gauges().open_state == 2
    op.advance_watermark(110)  # left@100's last match 100 + lateness 10
    assert op.gauges().open_state == 1
    assert [r.horizon for r in op.add(KeyedRows(["k"], [100], ["r2"], Side.RIGHT)).late] == [110]


def test_outer_rows_come_with_nulls_when_no_partner_can_come_any_more():
    spec = IntervalJoinSpec(between=(0, 10), how="outer")
    op = IntervalJoinOperator(spec)
    op.add(KeyedRows(["a", "b"], [5, 5], ["la", "lb"], Side.LEFT))
    op.add(KeyedRows(["a", "c"], [12, 30], ["ra", "rc"], Side.RIGHT))
    out = op.advance_watermark(14)
    assert out.joined == [], "left b at 5 may still meet a right row up to 15"
    out = op.advance_watermark(15)
    assert [(r.key, r.left, r.right, r.timestamp) for r in out.joined] == [("b", "lb", None, 5)]
    out = op.advance_watermark(MAX_TIMESTAMP)
    assert [(r.key, r.left, r.right, r.timestamp) for r in out.joined] == [("c", None, "rc", 30)]
    assert op.gauges().open_state == 0


def test_bad_event_times_are_dead_letters_with_the_reason():
    op = IntervalJoinOperator(IntervalJoinSpec(between=(0, 1)))
    out = op.add(KeyedRows(["k", "k", "k"], [None, "12", MAX_TIMESTAMP], ["a", "b", "c"], Side.LEFT))
    assert [b.reason for b in out.bad] == [
        "missing timestamp",
        "timestamp is not a number: '12'",
        out_of_range_reason(MAX_TIMESTAMP),
    ], "the window operator's reasons (one rule: core.assign.validate_timestamps)"
    assert op.gauges().open_state == 0


def test_bounds_are_checked():
    with pytest.raises(ValueError, match="must not exceed its upper bound"):
        IntervalJoinSpec(between=(5, 0))
    with pytest.raises(ValueError, match="must not be negative"):
        IntervalJoinSpec(between=(0, 5), allowed_lateness=-1)


# ---------------------------------------------------------------------------------------------------- property
rows = st.lists(st.tuples(st.sampled_from([Side.LEFT, Side.RIGHT]), st.sampled_from("ab"), st.integers(0, 60)))
scripts = st.lists(st.tuples(rows, st.integers(0, 12)), min_size=1, max_size=10)
specs = st.builds(
    IntervalJoinSpec,
    st.sampled_from([(-5, 0), (0, 0), (0, 10), (-10, 10), (3, 8), (-8, -3)]),
    st.sampled_from(list(JoinKind)),
    st.sampled_from(list(JoinTime)),
    st.sampled_from([0, 4]),
)


def run(spec: IntervalJoinSpec, script, restore_at: int | None = None):
    """The script's batches through the operator as a runtime drives it: the batch's watermark first (it only
    rises), then its rows in arrival order. Returns (joined, late, (output watermark before, joined) per batch)."""
    op, watermark, batches = IntervalJoinOperator(spec), MIN_TIMESTAMP, []
    marks, output_watermark = StageWatermark(["left", "right"]), MIN_TIMESTAMP
    for b, (batch, step) in enumerate([*script, ([], None)]):
        watermark = MAX_TIMESTAMP if step is None else max(watermark, 0) + step
        if restore_at == b:
            op = restore_interval_join(spec, op.snapshot())
        out = op.advance_watermark(watermark)
        marks.update_upstream("left", watermark)
        marks.update_upstream("right", watermark)
        for side, key, ts in batch:
            out.extend(op.add(KeyedRows([key], [ts], [(side, key, ts, len(batches))], side)))
        batches.append((output_watermark, watermark, out))
        marks.update_output(op.gauges().hold)
        output_watermark = marks.output_watermark
    return batches


def straight(spec: IntervalJoinSpec, script):
    """Every rule at once: which rows are late at arrival, every pair of the others, the outer rows."""
    watermark, arrived = MIN_TIMESTAMP, []
    for b, (batch, step) in enumerate(script):
        watermark = max(watermark, 0) + step
        arrived += [((side, key, ts, b), watermark) for side, key, ts in batch]
    late = [row for row, w in arrived if w >= row[2] + spec.allowed_lateness]
    kept = [row for row, w in arrived if w < row[2] + spec.allowed_lateness]
    pairs = [
        (left, right)
        for left in kept
        for right in kept
        if left[0] is Side.LEFT and right[0] is Side.RIGHT and left[1] == right[1]
        if left[2] + spec.lower <= right[2] <= left[2] + spec.upper
    ]
    joined = Counter((left[1], left, right, spec.output_time.of(left[2], right[2])) for left, right in pairs)
    paired = {row for pair in pairs for row in pair}
    for row in kept:
        if row not in paired and spec.how.keeps_unmatched(row[0]):
            left, right = (row, None) if row[0] is Side.LEFT else (None, row)
            joined[(row[1], left, right, row[2])] += 1
    return joined, Counter(late)


@settings(max_examples=400, deadline=None)
@given(specs, scripts, st.integers(0, 11))
def test_every_pair_of_rows_that_are_not_late_is_joined_exactly_once(spec, script, restore_at):
    """And nothing else: the unmatched rows of outer sides once each, the late rows in the late output. A
    snapshot and restore in the middle changes nothing."""
    batches = run(spec, script, restore_at)
    joined = Counter((r.key, r.left, r.right, r.timestamp) for _, _, out in batches for r in out.joined)
    late = Counter(r.value for _, _, out in batches for r in out.late)
    assert (joined, late) == straight(spec, script)


@settings(max_examples=300, deadline=None)
@given(specs.filter(lambda s: s.allowed_lateness == 0), scripts)
def test_outputs_are_never_behind_the_output_watermark_the_previous_batch_left(spec, script):
    """The hold: every row a batch emits is timestamped after the output watermark of the batch before (so a
    downstream stage, which reads that watermark, takes it on time)."""
    for output_watermark, _, out in run(spec, script):
        assert all(r.timestamp > output_watermark for r in out.joined), (output_watermark, out.joined)
