"""The *Streaming Systems* diagram of a run: event time across, processing time up.

The book draws every record as a dot at (event time, processing time), the watermark as a line that
climbs with processing time and moves right as event time is promised complete, and each pane as the
window's event-time extent at the processing time it was emitted. :func:`plot_timeline` draws exactly
that from a :class:`Timeline`:

* records: filled dots coloured per split; late records as hollow red circles;
* watermarks: one step line per split (thin, split colour) and the combined watermark (thick, black),
  dashed while idle, with the idle processing-time periods of a split shaded in its colour;
* firings: a horizontal bar over ``[window start, window end)`` at the firing's processing time, a
  diamond at the window end coloured by timing (EARLY / ON_TIME / LATE) and the pane's record count.

All times are ``int`` ms since the epoch and are shown as ``HH:MM:SS`` UTC. Watermark values of
``MIN_TIMESTAMP`` (nothing promised yet) are skipped; ``MAX_TIMESTAMP`` (input complete) is drawn at the
right edge and labelled ``MAX``. matplotlib is imported only when plotting, and through a private
``Figure`` with an Agg canvas: the caller's pyplot backend and figures are left alone.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP

if TYPE_CHECKING:  # matplotlib is optional (the cli extra) and slow to import: only when plotting
    from matplotlib.figure import Figure

DEFAULT_TITLE = "floodmark: event time vs processing time"
DEFAULT_MAX_POINTS = 20_000
"""Record dots drawn at most; more are down-sampled deterministically (:func:`downsample_indices`)."""
MAX_FIRINGS = 5_000
"""Firings drawn at most (every k-th beyond); pane counts are annotated only up to ``MAX_ANNOTATIONS``."""
MAX_ANNOTATIONS = 150
MAX_LEGEND_SPLITS = 12

# matplotlib dates cover years 1..9999; values outside (including MIN/MAX) are not plottable as dates.
_FIRST_PLOTTABLE_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
_LAST_PLOTTABLE_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_MS_PER_DAY = 86_400_000
_TIMINGS = ("EARLY", "ON_TIME", "LATE")
_TIMING_COLOURS = {"EARLY": "tab:orange", "ON_TIME": "tab:green", "LATE": "tab:red"}


def _int_array(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if array.size and array.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer milliseconds, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


def _object_array(values: Sequence[Any] | ArrayLike, n: int, default: Any, name: str) -> np.ndarray:
    if values is None:
        return np.full(n, default, dtype=object)
    # fromiter keeps tuple split ids whole; np.asarray would turn them into a second dimension.
    array = np.fromiter(values, dtype=object) if not isinstance(values, np.ndarray) else values.astype(object)
    if array.shape != (n,):
        raise ValueError(f"{name} must have one entry per row ({n}), got shape {array.shape}")
    return array


def _bool_array(values: ArrayLike | None, n: int, name: str) -> np.ndarray:
    if values is None:
        return np.zeros(n, dtype=bool)
    array = np.asarray(values, dtype=bool)
    if array.shape != (n,):
        raise ValueError(f"{name} must have one entry per row ({n}), got shape {array.shape}")
    return array


@dataclass
class Timeline:
    """What happened in a run, in the three parts the plot shows. All times ``int`` ms since the epoch.

    Records (one row each): ``record_processing_time_ms`` (when it arrived), ``record_event_time_ms``,
    ``record_split`` (any hashable; ``None``: all on split 0), ``record_late`` (``None``: none late).

    Watermark samples (one row per emitted value): ``watermark_processing_time_ms``, ``watermark_split``
    (the split, or ``None`` for the combined watermark; the whole argument ``None``: all combined),
    ``watermark_ms`` (``MIN_TIMESTAMP``/``MAX_TIMESTAMP`` allowed), ``watermark_idle``. A sample holds
    until the next sample of the same series.

    Firings (one row per emitted pane): ``firing_processing_time_ms``, ``firing_window_start_ms``
    (inclusive), ``firing_window_end_ms`` (exclusive), ``firing_timing`` (``EARLY``/``ON_TIME``/``LATE``,
    ``None``: all ON_TIME), ``firing_count`` (records in the pane, or ``None`` if unknown).

    Inputs are normalised to numpy arrays on construction; lengths are checked per part.
    """

    record_processing_time_ms: ArrayLike = ()
    record_event_time_ms: ArrayLike = ()
    record_split: ArrayLike | None = None
    record_late: ArrayLike | None = None
    watermark_processing_time_ms: ArrayLike = ()
    watermark_split: Sequence[Hashable | None] | None = None
    watermark_ms: ArrayLike = ()
    watermark_idle: ArrayLike | None = None
    firing_processing_time_ms: ArrayLike = ()
    firing_window_start_ms: ArrayLike = ()
    firing_window_end_ms: ArrayLike = ()
    firing_timing: Sequence[str] | None = None
    firing_count: Sequence[int | None] | None = None

    def __post_init__(self) -> None:
        self.record_processing_time_ms = _int_array(self.record_processing_time_ms, "record_processing_time_ms")
        self.record_event_time_ms = _int_array(self.record_event_time_ms, "record_event_time_ms")
        n = len(self.record_processing_time_ms)
        if len(self.record_event_time_ms) != n:
            raise ValueError("record_processing_time_ms and record_event_time_ms differ in length")
        self.record_split = _object_array(self.record_split, n, 0, "record_split")
        self.record_late = _bool_array(self.record_late, n, "record_late")

        self.watermark_processing_time_ms = _int_array(
            self.watermark_processing_time_ms, "watermark_processing_time_ms"
        )
        self.watermark_ms = _int_array(self.watermark_ms, "watermark_ms")
        m = len(self.watermark_processing_time_ms)
        if len(self.watermark_ms) != m:
            raise ValueError("watermark_processing_time_ms and watermark_ms differ in length")
        self.watermark_split = _object_array(self.watermark_split, m, None, "watermark_split")
        self.watermark_idle = _bool_array(self.watermark_idle, m, "watermark_idle")

        self.firing_processing_time_ms = _int_array(self.firing_processing_time_ms, "firing_processing_time_ms")
        self.firing_window_start_ms = _int_array(self.firing_window_start_ms, "firing_window_start_ms")
        self.firing_window_end_ms = _int_array(self.firing_window_end_ms, "firing_window_end_ms")
        f = len(self.firing_processing_time_ms)
        if not len(self.firing_window_start_ms) == len(self.firing_window_end_ms) == f:
            raise ValueError("firing_processing_time_ms, firing_window_start_ms and firing_window_end_ms differ")
        # str() accepts floodmark's Timing StrEnum as well as plain strings.
        timing = _object_array(self.firing_timing, f, "ON_TIME", "firing_timing")
        self.firing_timing = np.array([str(t).upper() for t in timing], dtype=object)
        unknown = set(self.firing_timing.tolist()) - set(_TIMINGS)
        if unknown:
            raise ValueError(f"firing_timing must be EARLY, ON_TIME or LATE, got {sorted(unknown)}")
        self.firing_count = _object_array(self.firing_count, f, None, "firing_count")


def downsample_indices(processing_time_ms: ArrayLike, late: ArrayLike, max_points: int) -> np.ndarray:
    """Indices (ascending) of at most ``max_points`` records to draw; all of them if they fit.

    Deterministic (no randomness: same input, same indices): records are ordered by processing time
    (stable) and every k-th is kept, so the sample is even over the run. Late records are rarer and the
    point of the plot, so they get up to half of the budget before on-time records share the rest.
    """
    if max_points < 1:
        raise ValueError("max_points must be positive")
    pt = np.asarray(processing_time_ms)
    is_late = np.asarray(late, dtype=bool)
    n = len(pt)
    if n <= max_points:
        return np.arange(n)
    order = np.argsort(pt, kind="stable")
    late_order = order[is_late[order]]
    on_time_order = order[~is_late[order]]
    late_budget = min(len(late_order), max_points // 2)
    on_time_budget = min(len(on_time_order), max_points - late_budget)
    late_budget = min(len(late_order), max_points - on_time_budget)  # unused on-time budget goes to late

    def every_kth(indices: np.ndarray, budget: int) -> np.ndarray:
        if budget >= len(indices):
            return indices
        if budget == 0:
            return indices[:0]
        return indices[np.linspace(0, len(indices) - 1, budget).round().astype(np.int64)]

    return np.sort(np.concatenate([every_kth(late_order, late_budget), every_kth(on_time_order, on_time_budget)]))


def _plottable(values: np.ndarray) -> np.ndarray:
    return values[(values >= _FIRST_PLOTTABLE_MS) & (values <= _LAST_PLOTTABLE_MS)]


def _limits(parts: list[np.ndarray], fallback: tuple[int, int] | None) -> tuple[int, int] | None:
    values = np.concatenate([_plottable(p) for p in parts]) if parts else np.empty(0, dtype=np.int64)
    if values.size == 0:
        return fallback
    low, high = int(values.min()), int(values.max())
    # 4 % each side; a single instant gets half a second so its ticks are still readable.
    margin = max((high - low) // 25, 1) if high > low else 500
    return max(low - margin, _FIRST_PLOTTABLE_MS), min(high + margin, _LAST_PLOTTABLE_MS)


def _codes(values: np.ndarray, keys: list[Any]) -> np.ndarray:
    index = {key: i for i, key in enumerate(keys)}
    return np.fromiter((index[v] for v in values.tolist()), dtype=np.int64, count=len(values))


def _watermark_series(timeline: Timeline, x_limits: tuple[int, int], y_end: int) -> list[dict[str, Any]]:
    """Per series (split, or ``None`` = combined): step segments in ms as ``(k, 2, 2)`` arrays, solid and
    idle, the idle processing-time spans, and where the line first reaches MAX (drawn at the right edge)."""
    result = []
    keys = list(dict.fromkeys(timeline.watermark_split.tolist()))
    codes = _codes(timeline.watermark_split, keys)
    for code, key in enumerate(keys):
        mask = codes == code
        order = np.argsort(timeline.watermark_processing_time_ms[mask], kind="stable")
        t = timeline.watermark_processing_time_ms[mask][order]
        w = timeline.watermark_ms[mask][order]
        idle = timeline.watermark_idle[mask][order]
        real = w > MIN_TIMESTAMP  # MIN = nothing promised yet: skip until the first real value
        t, w, idle = t[real], w[real], idle[real]
        if len(t) == 0:
            continue
        # Lossless thinning: a sample equal to the previous one (value and idleness) draws nothing new.
        keep = np.ones(len(t), dtype=bool)
        keep[1:] = (w[1:] != w[:-1]) | (idle[1:] != idle[:-1])
        t, w, idle = t[keep], w[keep], idle[keep]
        x = np.clip(w, *x_limits)
        # Each value holds until the next sample of its series; the last one until the end of the data.
        t_next = np.append(t[1:], max(y_end, int(t[-1])))
        holds = np.stack([np.stack([x, t], axis=1), np.stack([x, t_next], axis=1)], axis=1)
        jumps = np.stack([np.stack([x[:-1], t_next[:-1]], axis=1), np.stack([x[1:], t_next[:-1]], axis=1)], axis=1)
        segments = np.concatenate([holds, jumps])
        segment_idle = np.concatenate([idle, idle[1:]])  # a jump belongs to the sample it jumps to
        # Idle spans: merge consecutive idle samples into one processing-time interval.
        spans = []
        run_start = None
        for i in range(len(t)):
            if idle[i] and run_start is None:
                run_start = int(t[i])
            if run_start is not None and (i + 1 == len(t) or not idle[i + 1]):
                spans.append((run_start, int(t_next[i])))
                run_start = None
        reaches_max = np.flatnonzero(w >= MAX_TIMESTAMP)
        result.append(
            {
                "key": key,
                "solid": segments[~segment_idle],
                "idle": segments[segment_idle],
                "idle_spans": spans,
                "max_at": None if len(reaches_max) == 0 else (int(x[reaches_max[0]]), int(t[reaches_max[0]])),
            }
        )
    return result


def plot_timeline(
    timeline: Timeline,
    path: str | Path,
    title: str = DEFAULT_TITLE,
    max_points: int = DEFAULT_MAX_POINTS,
) -> Path:
    """Draw ``timeline`` (:func:`timeline_figure`) as a PNG at ``path`` and return the path.

    Parent directories are created; the file is PNG whatever its suffix.
    """
    figure = timeline_figure(timeline, title=title, max_points=max_points)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
    return path


def timeline_figure(
    timeline: Timeline,
    title: str = DEFAULT_TITLE,
    max_points: int = DEFAULT_MAX_POINTS,
) -> Figure:
    """The plot as a matplotlib ``Figure`` with one axes (for embedding or further drawing).

    Event time on the x axis, processing time on the y axis (the *Streaming Systems* convention), both
    ``HH:MM:SS`` UTC (with milliseconds when the axis spans under 10 s). At most ``max_points`` record dots
    (:func:`downsample_indices`; the legend says when records were down-sampled) and :data:`MAX_FIRINGS`
    firings are drawn, so large runs plot in about a second. The figure has its own Agg canvas and is not
    registered with pyplot: no global matplotlib state is changed.
    """
    from matplotlib import colormaps
    from matplotlib import dates as mdates
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    tl = timeline

    # ---- limits (ms), from everything that has a real, plottable value
    times = [tl.record_processing_time_ms, tl.watermark_processing_time_ms, tl.firing_processing_time_ms]
    finite_wm = tl.watermark_ms[(tl.watermark_ms > MIN_TIMESTAMP) & (tl.watermark_ms < MAX_TIMESTAMP)]
    events = [tl.record_event_time_ms, finite_wm, tl.firing_window_start_ms, tl.firing_window_end_ms]
    y_limits = _limits(times, None)
    x_limits = _limits(events, y_limits)  # nothing in event time: reuse the processing-time span
    empty = x_limits is None
    if x_limits is None:
        x_limits = (0, 1000)
    if y_limits is None:
        y_limits = x_limits
    plottable_times = np.concatenate([_plottable(p) for p in times])
    y_data_end = int(plottable_times.max()) if plottable_times.size else y_limits[1]

    # ms -> matplotlib date numbers, respecting the caller's date epoch (rcParams) without changing it
    epoch = float(mdates.date2num(datetime(1970, 1, 1, tzinfo=UTC)))

    def num(ms: ArrayLike) -> np.ndarray:
        return epoch + np.asarray(ms, dtype=np.float64) / _MS_PER_DAY

    fig = Figure(figsize=(13, 7.5), layout="constrained")
    FigureCanvasAgg(fig)  # render with Agg whatever pyplot's backend is
    ax = fig.add_subplot()
    handles: list[Any] = []

    # ---- split colours: records' splits first, in order of appearance, then watermark-only splits
    split_keys = list(dict.fromkeys(tl.record_split.tolist()))
    split_keys += [s for s in dict.fromkeys(tl.watermark_split.tolist()) if s is not None and s not in split_keys]
    palette = colormaps["tab10" if len(split_keys) <= 10 else "tab20"]
    colour_of = {key: palette(i % palette.N) for i, key in enumerate(split_keys)}
    split_colours = np.array([colour_of[key] for key in split_keys]).reshape(-1, 4)

    # ---- idle shading and watermark lines (below the dots)
    def to_num(segments: np.ndarray) -> np.ndarray:
        return epoch + segments.astype(np.float64) / _MS_PER_DAY

    for series in _watermark_series(tl, x_limits, y_data_end):
        key = series["key"]
        combined = key is None
        colour = "black" if combined else colour_of[key]
        for start, end in series["idle_spans"]:
            ax.axhspan(float(num(start)), float(num(end)), color="grey" if combined else colour, alpha=0.08, lw=0)
        for style, segments in (("-", series["solid"]), ("--", series["idle"])):
            if len(segments):
                # The combined line is a wide translucent band under the splits' lines: where it equals a split
                # (the MIN is always some split's value) both stay visible.
                ax.add_collection(
                    LineCollection(
                        to_num(segments),
                        colors=[colour],
                        linewidths=5.0 if combined else 1.3,
                        linestyles=style,
                        alpha=0.3 if combined else 0.95,
                        zorder=2 if combined else 3,
                    )
                )
        if series["max_at"] is not None:
            x_max, t_max = series["max_at"]
            ax.annotate("MAX", (num(x_max), num(t_max)), xytext=(-28, 4), textcoords="offset points", fontsize=8)

    # ---- records
    n = len(tl.record_processing_time_ms)
    shown = downsample_indices(tl.record_processing_time_ms, tl.record_late, max_points)
    x_rec = tl.record_event_time_ms[shown]
    y_rec = tl.record_processing_time_ms[shown]
    late = tl.record_late[shown]
    size = 18 if len(shown) <= 2_000 else 5
    on_time = ~late
    if on_time.any():
        colours = split_colours[_codes(tl.record_split[shown][on_time], split_keys)]
        ax.scatter(num(x_rec[on_time]), num(y_rec[on_time]), s=size, c=colours, lw=0, zorder=4)
    if late.any():
        ax.scatter(
            num(x_rec[late]),
            num(y_rec[late]),
            s=size * 2.2,
            facecolors="none",
            edgecolors="red",
            linewidths=1.0,
            zorder=5,
        )

    # ---- firings: the window's extent at the firing's processing time, a diamond at its end
    f = len(tl.firing_processing_time_ms)
    fired = np.arange(f)
    if f > MAX_FIRINGS:
        fired = np.linspace(0, f - 1, MAX_FIRINGS).round().astype(np.int64)
    pt = num(tl.firing_processing_time_ms[fired])
    start = num(np.clip(tl.firing_window_start_ms[fired], *x_limits))  # global windows: MIN/MAX at the edges
    end = num(np.clip(tl.firing_window_end_ms[fired], *x_limits))
    timing = tl.firing_timing[fired]
    for name in _TIMINGS:
        mask = timing == name
        if not mask.any():
            continue
        colour = _TIMING_COLOURS[name]
        bars = np.stack([np.stack([start[mask], pt[mask]], axis=1), np.stack([end[mask], pt[mask]], axis=1)], axis=1)
        ax.add_collection(LineCollection(bars, colors=[colour], linewidths=4, alpha=0.35, zorder=3))
        ax.scatter(end[mask], pt[mask], marker="D", s=36, c=colour, edgecolors="black", lw=0.6, zorder=6)
        handles.append(
            Line2D([], [], color=colour, marker="D", markeredgecolor="black", lw=4, alpha=0.8, label=f"{name} pane")
        )
    if len(fired) <= MAX_ANNOTATIONS:  # beyond that the numbers overlap into a smudge
        for j, count in enumerate(tl.firing_count[fired].tolist()):
            if count is not None:
                ax.annotate(
                    str(count), (end[j], pt[j]), xytext=(4, 3), textcoords="offset points", fontsize=7, zorder=7
                )

    # ---- legend
    legend_splits = split_keys[:MAX_LEGEND_SPLITS]
    split_handles = [
        Line2D([], [], color=colour_of[s], marker="o", lw=1.2, markersize=5, label=f"split {s}") for s in legend_splits
    ]
    if len(split_keys) > len(legend_splits):
        split_handles.append(Line2D([], [], lw=0, label=f"... and {len(split_keys) - len(legend_splits)} more splits"))
    extra = []
    if any(split is None for split in tl.watermark_split.tolist()):
        extra.append(Line2D([], [], color="black", lw=5.0, alpha=0.3, label="combined watermark"))
    if tl.watermark_idle.any():
        extra.append(Line2D([], [], color="grey", lw=1.2, ls="--", label="watermark while idle (shaded)"))
    late_total = int(tl.record_late.sum())
    if late_total:
        label = "late record" if len(shown) == n else f"late record ({int(late.sum()):,} of {late_total:,} shown)"
        extra.append(Line2D([], [], color="red", marker="o", markerfacecolor="none", lw=0, label=label))
    if len(shown) < n:
        extra.append(
            Line2D([], [], lw=0, label=f"records: {len(shown):,} of {n:,} shown\n(every k-th, late ones first)")
        )
    if len(fired) < f:
        extra.append(Line2D([], [], lw=0, label=f"firings: {len(fired):,} of {f:,} shown"))
    all_handles = split_handles + extra + handles
    if all_handles:
        fig.legend(handles=all_handles, loc="outside right upper", fontsize=8, frameon=False)

    # ---- axes
    ax.set_xlim(num(x_limits[0]), num(x_limits[1]))
    ax.set_ylim(num(y_limits[0]), num(y_limits[1]))
    for axis, limits in ((ax.xaxis, x_limits), (ax.yaxis, y_limits)):
        axis.set_major_locator(mdates.AutoDateLocator(tz=UTC, minticks=4, maxticks=10))
        with_ms = limits[1] - limits[0] < 10_000  # sub-second ticks need milliseconds to differ

        def label(value: float, _pos: int, with_ms: bool = with_ms) -> str:
            instant = mdates.num2date(value, tz=UTC)
            return instant.strftime("%H:%M:%S.%f")[:-3] if with_ms else instant.strftime("%H:%M:%S")

        axis.set_major_formatter(FuncFormatter(label))

    def day(ms: int) -> str:
        return mdates.num2date(num(ms), tz=UTC).strftime("%Y-%m-%d")

    def axis_label(name: str, limits: tuple[int, int]) -> str:
        first, last = day(limits[0]), day(limits[1])
        return f"{name} (UTC, {first})" if first == last else f"{name} (UTC, {first} .. {last})"

    ax.set_xlabel(axis_label("event time", x_limits))
    ax.set_ylabel(axis_label("processing time", y_limits))
    ax.grid(True, alpha=0.25)
    ax.set_title(title)
    if empty:
        ax.text(0.5, 0.5, "no records, watermarks or firings", transform=ax.transAxes, ha="center", va="center")
    return fig
