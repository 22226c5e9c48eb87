"""The Streaming Systems plot: writes PNGs, survives MIN/MAX, samples large runs deterministically."""

import numpy as np
import pytest

mdates = pytest.importorskip("matplotlib.dates")

from floodmark.apps.plot import Timeline, downsample_indices, plot_timeline, timeline_figure  # noqa: E402
from floodmark.core.panes import Timing  # noqa: E402 - after the importorskip
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BASE = 1_714_560_000_000  # 2024-05-01T10:40:00Z


def small_timeline(**overrides):
    pt = BASE + np.arange(0, 60_000, 5_000)
    fields = dict(
        record_processing_time_ms=pt,
        record_event_time_ms=pt - 3_000 - (np.arange(len(pt)) % 4) * 1_000,
        record_split=["a", "b"] * (len(pt) // 2),
        record_late=[False] * (len(pt) - 1) + [True],
        watermark_processing_time_ms=np.concatenate([pt, pt, pt]),
        watermark_split=["a"] * len(pt) + ["b"] * len(pt) + [None] * len(pt),
        watermark_ms=np.concatenate([pt - 8_000, pt - 9_000, pt - 9_000]),
        watermark_idle=[False] * len(pt) + [i in (5, 6) for i in range(len(pt))] + [False] * len(pt),
        firing_processing_time_ms=BASE + np.array([20_000, 40_000, 55_000]),
        firing_window_start_ms=BASE + np.array([0, 10_000, 0]),
        firing_window_end_ms=BASE + np.array([10_000, 20_000, 10_000]),
        firing_timing=["ON_TIME", Timing.EARLY, "LATE"],
        firing_count=[3, None, 1],
    )
    fields.update(overrides)
    return Timeline(**fields)


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 5_000


def test_writes_a_png(tmp_path):
    path = plot_timeline(small_timeline(), tmp_path / "sub" / "timeline.png", title="small")
    assert path == tmp_path / "sub" / "timeline.png"
    assert_png(path)


def test_min_and_max_watermarks_do_not_wreck_the_axes(tmp_path):
    pt = BASE + np.arange(0, 60_000, 5_000)
    marks = pt - 8_000
    marks[:3] = MIN_TIMESTAMP  # nothing promised yet
    marks[-1] = MAX_TIMESTAMP  # end of input
    timeline = small_timeline(
        watermark_processing_time_ms=np.concatenate([pt, pt]),
        watermark_split=[None] * len(pt) + ["never"] * len(pt),
        watermark_ms=np.concatenate([marks, np.full(len(pt), MIN_TIMESTAMP)]),  # one series MIN throughout
        watermark_idle=None,
        # the global window: [MIN, MAX)
        firing_processing_time_ms=[BASE + 59_000],
        firing_window_start_ms=[MIN_TIMESTAMP],
        firing_window_end_ms=[MAX_TIMESTAMP],
        firing_timing=None,
        firing_count=[12],
    )
    ax = timeline_figure(timeline).axes[0]
    for limits in (ax.get_xlim(), ax.get_ylim()):
        low, high = (mdates.num2date(v).timestamp() * 1000 for v in limits)
        assert BASE - 60_000 < low < high < BASE + 120_000, "the axes span the data, not MIN..MAX"
    assert_png(plot_timeline(timeline, tmp_path / "minmax.png"))


def test_one_split_no_firings_no_watermarks(tmp_path):
    pt = BASE + np.arange(10)
    timeline = Timeline(record_processing_time_ms=pt, record_event_time_ms=pt - 5)
    assert list(timeline.record_split) == [0] * 10 and not timeline.record_late.any()
    assert_png(plot_timeline(timeline, tmp_path / "one.png"))
    # Only a combined watermark, still no firings.
    timeline = Timeline(
        record_processing_time_ms=pt,
        record_event_time_ms=pt - 5,
        watermark_processing_time_ms=pt,
        watermark_ms=pt - 6,
    )
    assert_png(plot_timeline(timeline, tmp_path / "combined.png"))


def test_empty_timeline(tmp_path):
    assert_png(plot_timeline(Timeline(), tmp_path / "empty.png"))


def test_downsampling_is_deterministic_and_keeps_late_records(tmp_path):
    rng = np.random.default_rng(7)
    n = 100_000
    pt = rng.integers(0, 10**6, n)
    late = rng.random(n) < 0.01
    first = downsample_indices(pt, late, 20_000)
    second = downsample_indices(pt.copy(), late.copy(), 20_000)
    assert np.array_equal(first, second)
    assert len(first) == 20_000
    assert np.all(np.diff(first) > 0), "ascending, no duplicates"
    assert late[first].sum() == late.sum(), "fewer late records than half the budget: all kept"
    # Evenly spread over processing time: each tenth of the run gets about a tenth of the dots.
    shares = np.histogram(pt[first], bins=10, range=(0, 10**6))[0] / len(first)
    assert np.all(np.abs(shares - 0.1) < 0.01)
    # Mostly late: late records get at most half, unless on-time ones leave budget unused.
    all_late = np.ones(n, bool)
    assert all_late[downsample_indices(pt, all_late, 1_000)].sum() == 1_000
    mostly_late = rng.random(n) < 0.9
    assert mostly_late[downsample_indices(pt, mostly_late, 1_000)].sum() == 500
    assert np.array_equal(downsample_indices(pt[:10], late[:10], 20_000), np.arange(10))
    with pytest.raises(ValueError):
        downsample_indices(pt, late, 0)
    # A large run still plots (only max_points dots drawn).
    big = Timeline(record_processing_time_ms=BASE + pt, record_event_time_ms=BASE + pt - 100, record_late=late)
    assert_png(plot_timeline(big, tmp_path / "big.png", max_points=2_000))


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="differ in length"):
        Timeline(record_processing_time_ms=[1, 2], record_event_time_ms=[1])
    with pytest.raises(TypeError, match="integer milliseconds"):
        Timeline(record_processing_time_ms=[1.5], record_event_time_ms=[1])
    with pytest.raises(ValueError, match="EARLY, ON_TIME or LATE"):
        small_timeline(firing_timing=["ON_TIME", "SOON", "LATE"])
    with pytest.raises(ValueError, match="one entry per row"):
        small_timeline(record_late=[True])
    # Tuple split ids stay whole.
    timeline = Timeline(record_processing_time_ms=[1, 2], record_event_time_ms=[1, 2], record_split=[("t", 0)] * 2)
    assert timeline.record_split.tolist() == [("t", 0), ("t", 0)]
