"""Lateness advisor: out-of-orderness, the histogram, recommendations against a simulated watermark."""

import json
from datetime import timedelta
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.apps.advisor import (
    NUM_BINS,
    LatenessProfile,
    bin_edges,
    bin_index,
    format_tradeoff,
    observe,
    out_of_orderness,
    recommend,
    tradeoff,
)
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.core.watermarks import BoundedOutOfOrderness, RecordingOutput
from floodmark.core.watermarks.percentile import PercentileOfRecentTimestamps


def simulated_late(splits, event_times, bound):
    """Records late under Flink's bounded watermark per split, emitted after every record (the real generator)."""
    generators: dict = {}
    late = 0
    for split, ts in zip(splits, event_times, strict=True):
        generator = generators.setdefault(split, BoundedOutOfOrderness(bound))
        output = RecordingOutput()
        generator.on_periodic_emit(output)
        late += ts <= output.watermark
        generator.on_event(None, int(ts), output)
    return late


def limit(fraction, n):
    return int(Fraction(repr(float(fraction))) * n)


# -- out-of-orderness ------------------------------------------------------------------------------------


def test_out_of_orderness_single_split_by_hand():
    # maxima before each record: -, 0, 5, 5, 10, 10, 10
    assert out_of_orderness(None, [0, 5, 3, 10, 1, 10, 8]).tolist() == [0, 0, 2, 0, 9, 0, 2]


def test_out_of_orderness_flink_vector():
    # Flink's test records: 12300 trails 12345 by 45, 12340 by 5, 12280 by 65.
    assert out_of_orderness(None, [12345, 12300, 12340, 12280]).tolist() == [0, 45, 5, 65]


def test_out_of_orderness_is_per_split():
    splits = ["a", "b", "a", "b", "a"]
    times = [100, 50, 95, 40, 101]
    # Against the global maximum 50 would trail by 50 and 40 by 60; per split only 95 and 40 trail.
    assert out_of_orderness(splits, times).tolist() == [0, 0, 5, 10, 0]
    # Integer and tuple split ids work the same; the order across splits does not matter.
    assert out_of_orderness(np.array([1, 2, 1, 2, 1]), times).tolist() == [0, 0, 5, 10, 0]
    assert out_of_orderness([("t", 0), ("t", 1), ("t", 0), ("t", 1), ("t", 0)], times).tolist() == [0, 0, 5, 10, 0]


def test_out_of_orderness_extremes_do_not_overflow():
    ooo = out_of_orderness(None, np.array([MAX_TIMESTAMP, MIN_TIMESTAMP, 0], dtype=np.int64))
    assert ooo.tolist() == [0, MAX_TIMESTAMP, MAX_TIMESTAMP]


def test_inputs_are_checked():
    with pytest.raises(TypeError, match="integer milliseconds"):
        out_of_orderness(None, [1.5, 2.0])
    with pytest.raises(ValueError, match="one entry per record"):
        out_of_orderness(["a"], [1, 2])
    assert out_of_orderness(None, []).tolist() == []
    with pytest.raises(ValueError, match="no records"):
        recommend(LatenessProfile(), 0.1)
    profile = observe(None, [1, 2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        recommend(profile, 1.5)
    with pytest.raises(ValueError, match="window_size_ms"):
        recommend(profile, 0.1, window_size_ms=0)


# -- histogram -------------------------------------------------------------------------------------------


def test_bins_tile_the_range_with_at_most_one_percent_width():
    previous_high = -1
    for index in range(NUM_BINS):
        low, high = bin_edges(index)
        assert low == previous_high + 1
        assert (high - low + 1) <= max(1, low / 128)
        previous_high = high
    assert previous_high == MAX_TIMESTAMP
    edges = np.array([bin_edges(i) for i in range(NUM_BINS)], dtype=np.int64)
    assert (bin_index(edges[:, 0]) == np.arange(NUM_BINS)).all()
    assert (bin_index(edges[:, 1]) == np.arange(NUM_BINS)).all()
    assert bin_edges(int(bin_index([1000])[0])) == (1000, 1003)
    assert bin_edges(int(bin_index([255])[0])) == (255, 255)


def test_bound_is_an_observed_value_and_floor_is_the_bin_minimum():
    profile = LatenessProfile()
    profile.add_values([0] * 98 + [1000, 1002])  # 1000 and 1002 share the bin [1000, 1003]
    rec = recommend(profile, 0.0)
    assert (rec.bound_ms, rec.bound_floor_ms) == (1002, 1000)
    assert profile.late_count(1002) == 0
    assert profile.late_count(1001) == 2, "inside a bin's [min, max): counted as late (upper limit)"
    assert profile.late_count(999) == 2
    # 1 %: one record may be late. The true optimum is 1000 (only 1002 late), but the bin cannot tell
    # 1000 from 1002: the bound stays safe (1002) and the floor says how much it may overshoot.
    rec = recommend(profile, 0.01)
    assert (rec.bound_ms, rec.bound_floor_ms, rec.late_fraction) == (1002, 1000, 0.0)
    assert recommend(profile, 0.02).bound_ms == 0


# -- recommendations -------------------------------------------------------------------------------------


def test_recommend_by_hand():
    profile = observe(None, [0, 5, 3, 10, 1, 10, 8])  # out-of-orderness 0, 0, 2, 0, 9, 0, 2
    # 50 %: 3 of 7 records (42.9 %) have out-of-orderness > 0.
    assert recommend(profile, 0.5).bound_ms == 0
    # 30 %: at most floor(2.1) = 2 late; bound 0 leaves 3, bound 2 leaves 1 (the 9).
    rec = recommend(profile, 0.3, window_size_ms=5)
    assert rec.bound_ms == rec.bound_floor_ms == 2
    assert rec.late_fraction == pytest.approx(1 / 7)
    # dropped target 3 %: none may be dropped, so bound + allowed lateness must cover 9.
    assert rec.allowed_lateness_ms == 7
    assert rec.dropped_fraction == 0.0
    assert (rec.latency_ms, rec.retention_ms) == (2, 9)
    assert rec.max_windows_per_key == 1 + 2  # ceil(9 / 5) windows behind the current one
    assert rec.records == 7
    # An explicit dropped target may allow the late record to be dropped.
    assert recommend(profile, 0.3, target_dropped_fraction=0.2).allowed_lateness_ms == 0
    assert recommend(profile, 0.3, window_size_ms=timedelta(milliseconds=10)).max_windows_per_key == 2
    # Nothing late: the largest out-of-orderness.
    assert recommend(profile, 0).bound_ms == 9
    assert recommend(profile, 1).bound_ms == 0


def test_flink_minus_one_boundary():
    # 90 trails 100 by exactly 10: on time with bound 10 (watermark 89), late with bound 9 (watermark 90).
    splits, times = ["s", "s"], [100, 90]
    assert simulated_late(splits, times, 10) == 0
    assert simulated_late(splits, times, 9) == 1
    profile = observe(splits, times)
    assert profile.late_count(10) == 0
    assert profile.late_count(9) == 1
    assert recommend(profile, 0.0).bound_ms == 10


def test_recommended_bound_drops_no_more_than_allowed_in_simulation():
    rng = np.random.default_rng(3)
    n = 2000
    splits = rng.integers(0, 4, n)
    times = np.arange(n) * 10 - rng.geometric(0.01, n)  # mostly a few hundred ms out of order
    profile = observe(splits, times)
    for rec in tradeoff(profile):
        assert simulated_late(splits, times, rec.bound_ms) <= limit(rec.target_late_fraction, n)
        total = rec.bound_ms + rec.allowed_lateness_ms
        assert simulated_late(splits, times, total) <= limit(rec.target_dropped_fraction, n)
        assert simulated_late(splits, times, rec.bound_ms) == round(rec.late_fraction * n)


def test_matches_seed_003_percentile_generator():
    # Seed 003's generator: bound = nearest-rank p-th percentile of the delays; p = 100 (1 - target).
    times = [50, 10, 40, 60, 55, 20, 61, 61, 30, 70, 65, 90]
    for percentile, target in [(100, 0.0), (90, 0.1), (75, 0.25), (50, 0.5)]:
        generator = PercentileOfRecentTimestamps(percentile)
        for ts in times:
            generator.on_event(None, ts, RecordingOutput())
        assert recommend(observe(None, times), target).bound_ms == generator.current_bound(), percentile


def test_tradeoff_rows_and_table():
    profile = observe(None, [0, 5, 3, 10, 1, 10, 8])
    rows = tradeoff(profile, window_size_ms=5)
    assert [row.target_late_fraction for row in rows] == [0.5, 0.1, 0.05, 0.01, 0.001, 0.0]
    bounds = [row.bound_ms for row in rows]
    assert bounds == sorted(bounds), "a smaller target never gives a smaller bound"
    assert all(row.latency_ms == row.bound_ms for row in rows)
    table = format_tradeoff(rows)
    assert "bound ms" in table and "allowed lateness ms" in table
    assert len(table.splitlines()) == 1 + len(rows)
    assert rows[0].as_dict()["bound_ms"] == 0


# -- batches, merge, snapshot ----------------------------------------------------------------------------


def test_batches_carry_the_split_maximum():
    splits = ["a", "b", "a", "b", "a", "a", "b"]
    times = [100, 50, 95, 40, 101, 80, 45]
    whole = observe(splits, times)
    batched = LatenessProfile()
    first = batched.observe(splits[:3], times[:3])
    second = batched.observe(splits[3:], times[3:])
    assert first.tolist() + second.tolist() == out_of_orderness(splits, times).tolist() == [0, 0, 5, 10, 0, 21, 5]
    assert batched.snapshot() == whole.snapshot()


def test_snapshot_round_trip_through_json():
    profile = observe([("topic", 0), ("topic", 1), ("topic", 0)], [5_000_000, 7, 1_234])
    state = json.loads(json.dumps(profile.snapshot()))
    restored = LatenessProfile.from_snapshot(state)
    assert restored.snapshot() == profile.snapshot()
    assert restored.split_max == {("topic", 0): 5_000_000, ("topic", 1): 7}
    # The restored profile keeps comparing with the carried maxima.
    assert restored.observe([("topic", 1)], [2]).tolist() == [5]
    with pytest.raises(ValueError, match="incompatible"):
        LatenessProfile().restore({**state, "precision_bits": 3})


def test_large_stream_is_vectorised():
    rng = np.random.default_rng(0)
    n = 300_000
    splits = rng.integers(0, 64, n)
    times = np.arange(n, dtype=np.int64) * 3 - rng.integers(0, 5_000, n)
    profile = observe(splits, times)
    assert profile.count == n
    rec = recommend(profile, 0.01)
    # Uniform delays up to 5 s: the 99th percentile of out-of-orderness is a little under 5 s.
    assert 4_000 < rec.bound_ms < 5_000
    assert rec.bound_ms - rec.bound_floor_ms <= rec.bound_ms / 128
    assert rec.late_fraction <= 0.01


records = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.one_of(st.integers(0, 300), st.integers(0, 100_000)),  # exact bins and log bins
    ),
    min_size=1,
    max_size=120,
)
targets = st.sampled_from([0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.9, 1.0])


@settings(max_examples=150, deadline=None)
@given(records, targets)
def test_recommended_bound_is_the_smallest_that_meets_the_target(data, target):
    splits = [split for split, _ in data]
    times = [ts for _, ts in data]
    n = len(times)
    profile = observe(splits, times)
    rec = recommend(profile, target)
    allowed = limit(target, n)
    late = simulated_late(splits, times, rec.bound_ms)
    assert late <= allowed
    assert late == profile.late_count(rec.bound_ms)
    # Minimal within the bin: every bound below the floor fails; below 256 ms that is bound - 1.
    assert rec.bound_floor_ms <= rec.bound_ms
    assert rec.bound_ms - rec.bound_floor_ms <= rec.bound_ms // 128
    if rec.bound_floor_ms > 0:
        assert simulated_late(splits, times, rec.bound_floor_ms - 1) > allowed
    if rec.bound_ms < 256 and rec.bound_ms > 0:
        assert rec.bound_floor_ms == rec.bound_ms
    dropped = simulated_late(splits, times, rec.bound_ms + rec.allowed_lateness_ms)
    assert dropped <= limit(rec.target_dropped_fraction, n)


@settings(max_examples=100, deadline=None)
@given(records, records, st.integers(1, 119))
def test_merge_equals_profile_of_concatenation(left, right, cut):
    # Disjoint splits (left on 0-3, right on 10-13): merging is exact.
    splits = [s for s, _ in left] + [s + 10 for s, _ in right]
    times = [t for _, t in left] + [t for _, t in right]
    merged = observe(splits[: len(left)], times[: len(left)]).merge(observe(splits[len(left) :], times[len(left) :]))
    whole = observe(splits, times)
    assert merged.count == whole.count
    assert np.array_equal(merged.counts, whole.counts)
    assert merged.split_max == whole.split_max
    for target in (0.0, 0.01, 0.1, 0.5):
        assert recommend(merged, target) == recommend(whole, target)
    # Consecutive batches of the same splits, fed to one profile: identical to one batch.
    cut = min(cut, len(times))
    batched = LatenessProfile()
    batched.observe(splits[:cut], times[:cut])
    batched.observe(splits[cut:], times[cut:])
    assert batched.snapshot() == whole.snapshot()
