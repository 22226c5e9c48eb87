"""The interval-join advisor against a straight computation: every left row against every right row."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from floodmark.apps.join_advisor import advise_join, nearest_offsets, pairs_within

rows = st.lists(st.tuples(st.sampled_from("abcd"), st.integers(-50, 50)), max_size=30)


def straight_nearest(left, right):
    out = []
    for key, ts in left:
        partners = sorted((abs(r - ts), r - ts) for k, r in right if k == key)  # the earlier of two as near: -d first
        out.append(partners[0][1] if partners else None)
    return out


@settings(max_examples=300, deadline=None)
@given(rows, rows, st.integers(-20, 5), st.integers(-5, 20))
def test_nearest_offsets_and_pairs_equal_a_straight_computation(left, right, lower, upper):
    lk, lt = [k for k, _ in left], np.array([t for _, t in left], dtype=np.int64)
    rk, rt = [k for k, _ in right], np.array([t for _, t in right], dtype=np.int64)
    got = nearest_offsets(lk, lt, rk, rt)
    assert [None if math.isnan(x) else int(x) for x in got] == straight_nearest(left, right)
    pairs = pairs_within(lk, lt, rk, rt, lower, upper)
    assert list(pairs) == [sum(k == key and ts + lower <= r <= ts + upper for k, r in right) for key, ts in left]


@settings(max_examples=200, deadline=None)
@given(rows.filter(bool), rows.filter(bool), st.sampled_from(["left", "right"]))
def test_each_proposal_is_the_narrowest_interval_keeping_its_share(left, right, per):
    lk, lt = [k for k, _ in left], np.array([t for _, t in left], dtype=np.int64)
    rk, rt = [k for k, _ in right], np.array([t for _, t in right], dtype=np.int64)
    measured, other = (left, right) if per == "left" else (right, left)
    # Offsets as r - l: measuring the right side, the nearest left row's l - r, negated.
    offsets = [x if per == "left" else -x for x in straight_nearest(measured, other) if x is not None]
    if not offsets:
        with pytest.raises(ValueError, match=f"no {per} row has a row of its key"):
            advise_join(lk, lt, rk, rt, per)
        return
    advice = advise_join(lk, lt, rk, rt, per)
    assert advice.matched == len(offsets) and advice.measured == len(measured)
    for b in advice.bounds:
        need = math.ceil(b.coverage * len(offsets))
        kept = sum(b.lower <= x <= b.upper for x in offsets)
        assert kept >= need and b.kept == kept / len(offsets)
        narrowest = min(hi - lo for lo in offsets for hi in offsets if sum(lo <= x <= hi for x in offsets) >= need)
        assert b.upper - b.lower == narrowest
        pairs = sum(k == key and ts + b.lower <= r <= ts + b.upper for k, r in right for key, ts in left)
        assert b.pairs_per_row == pytest.approx(pairs / len(measured))


def test_an_order_and_its_shipment_two_days_later_at_most():
    """Orders shipped 1 h to 2 days after; one order in 100 never ships; a few ship early (data entered late)."""
    rng = np.random.default_rng(7)
    orders = np.arange(10_000)
    placed = rng.integers(0, 30 * 86_400_000, len(orders))
    delay = rng.integers(3_600_000, 2 * 86_400_000, len(orders))
    delay[:50] = -rng.integers(1, 60_000, 50)
    shipped = rng.random(len(orders)) >= 0.01
    advice = advise_join(list(orders), placed, list(orders[shipped]), (placed + delay)[shipped], per="left")
    assert advice.matched == shipped.sum()
    everything = advice.bounds[-1]
    assert (everything.lower, everything.upper) == (int(delay[shipped].min()), int(delay[shipped].max()))
    assert everything.kept == 1.0 and everything.pairs_per_row == pytest.approx(shipped.mean())
    per_shipment = advise_join(list(orders), placed, list(orders[shipped]), (placed + delay)[shipped])
    assert (per_shipment.bounds[-1].lower, per_shipment.bounds[-1].upper) == (everything.lower, everything.upper)
    ninety = next(b for b in advice.bounds if b.coverage == 0.9)
    assert ninety.lower >= 0 and ninety.kept >= 0.9  # the early few are outside the narrowest 90 %
    assert "left rows" in advice.text() and "99.90%" in advice.text()
