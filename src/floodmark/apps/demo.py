"""``floodmark demo``: the clickstream job on the simulator, with a split that goes quiet.

The job (:data:`SEED_001`): events ``(ts, channel, id, behavior)`` from 4 splits,
bounded out-of-orderness 50 s, idleness, tumbling 1-minute windows keyed by
(channel, behavior), a count per window. The simulator (the job's producer:
event time trails processing time by 120 s, with jitter) makes split 3 go
silent 60% into the run (without idleness the combined watermark
would stop there and no window would fire until the end), adds a burst of
very late records and a few records without a timestamp.

:func:`run_demo` runs it on local Spark, shows the live view while it runs and
leaves in the output directory: ``panes/``, ``late/``, ``dead_letter/``
(Parquet), ``results.txt`` (the job's text lines), ``timeline.png``,
``summary.txt``, ``pipeline.json`` and the checkpoint. :func:`check_counts`
compares the panes with a straight count over the simulator's records.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console

from floodmark.apps.advisor import LatenessProfile, recommend
from floodmark.apps.config import PipelineConfig, WindowConfig
from floodmark.apps.live import LiveView, Totals
from floodmark.apps.outputs import read_output, write_text_lines
from floodmark.core.time import format_watermark
from floodmark.driver.checkpoint_files import require_directory
from floodmark.driver.reconciliation import Reconciliation
from floodmark.simulator.clickstream import ClickstreamConfig, generate, straight_counts

SEED_001 = PipelineConfig(
    event_time="ts",
    key_by=["channel", "behavior"],
    split="split",
    window=WindowConfig(kind="tumbling", size=60_000),
    out_of_orderness=50_000,
    idleness=5_000,
    aggregations={"count": "count"},
)
"""The clickstream job: 1-minute tumbling counts per (channel, behavior), bound 50 s, idleness 5 s."""

DEMO_TICKS_PER_SECOND = 4.0


@dataclass
class DemoResult:
    """What a demo run left behind and what it counted."""

    output: Path
    pipeline: PipelineConfig
    simulator: ClickstreamConfig
    panes: pd.DataFrame
    late: pd.DataFrame
    dead_letter: pd.DataFrame
    reports: list
    seconds: float
    files: dict[str, Path] = field(default_factory=dict)
    summary: str = ""


def check_counts(simulator: ClickstreamConfig, panes: pd.DataFrame, late: pd.DataFrame, window_ms: int) -> list[str]:
    """Differences between the panes (+ late records) and a straight count of the simulator's records.

    Every record with a timestamp must be counted once: in its window's panes, or
    in the late output. Returns a list of human-readable differences (empty = exact).
    """
    records = generate(simulator)
    expected = straight_counts(records, window_ms).set_index(["window_start", "channel", "behavior"])["count"]
    keys = ["window_start", "channel", "behavior"]
    total = pd.Series(0, index=expected.index, dtype=np.int64)
    if not panes.empty:
        total = total.add(panes.groupby(keys)["count"].sum(), fill_value=0)
    if not late.empty:
        total = total.add(late.groupby(keys).size(), fill_value=0)
    both = pd.concat([expected.rename("expected"), total.rename("counted")], axis=1).fillna(0).astype(np.int64)
    wrong = both[both["expected"] != both["counted"]]
    return [
        f"window {format_watermark(int(start))} {channel} {behavior}: expected {row.expected}, counted {row.counted}"
        for (start, channel, behavior), row in wrong.iterrows()
    ]


def run_demo(
    output: Path,
    simulator: ClickstreamConfig | None = None,
    pipeline: PipelineConfig = SEED_001,
    ticks_per_second: float = DEMO_TICKS_PER_SECOND,
    live: bool = True,
    console: Console | None = None,
    timeout_s: float = 600.0,
) -> DemoResult:
    """Run the demo into ``output`` (replaced if it holds an earlier demo); returns what it produced."""
    from floodmark.apps.clickstream_source import read_clickstream
    from floodmark.spark import local_session

    console = console or Console()
    simulator = simulator or ClickstreamConfig.demo()
    output = Path(output)
    prepare_output(output, pipeline, simulator)
    started = time.monotonic()
    console.print("[bold]floodmark demo[/]: starting local Spark (the first batch takes a few seconds)")
    spark = local_session("floodmark-demo", cores=2, shuffle_partitions=2)
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    source = read_clickstream(spark, simulator, ticks_per_second)
    aggregation = pipeline.aggregation(source)
    view = LiveView("clickstream: 1-minute counts per (channel, behavior)", console=console)
    listeners = [view] if live else [view.totals.add]
    checkpoint = output / "checkpoint"
    handle = aggregation.start(str(checkpoint), str(output), trigger_interval="1 second", listeners=listeners)
    last_tick = simulator.ticks - 1
    try:
        finish(handle, view if live else None, timeout_s, exhausted=lambda: _read_tick(handle.query) >= last_tick)
    finally:
        handle.stop()
    seconds = time.monotonic() - started
    result = DemoResult(
        output=output,
        pipeline=pipeline,
        simulator=simulator,
        panes=read_output(output, "panes"),
        late=read_output(output, "late"),
        dead_letter=read_output(output, "dead_letter"),
        reports=list(handle.reports),
        seconds=seconds,
    )
    result.files["results"] = write_text_lines(
        result.panes, pipeline.key_by, list(pipeline.aggregations), output / "results.txt"
    )
    result.files["timeline"] = _plot(result, handle.query)
    result.summary = summarize(result, view.totals)
    summary_path = output / "summary.txt"
    summary_path.write_text(result.summary + "\n")
    result.files["summary"] = summary_path
    return result


def finish(handle, view: LiveView | None, timeout_s: float, exhausted: Callable[[], bool]) -> None:
    """Run ``handle``'s query until its input is exhausted and the final flush is written, showing ``view``
    (the live watermark view) meanwhile when given."""
    with view if view is not None else contextlib.nullcontext():
        handle.finish_when_input_exhausted(timeout_s, exhausted=exhausted)


def prepare_output(output: Path, pipeline: PipelineConfig, simulator: ClickstreamConfig) -> None:
    """An empty ``output`` (an earlier demo's is replaced, anything else refused) with the run's configs.

    :raises ValueError: ``output`` cannot be a directory (a file is in the way, no permission).
    :raises FileExistsError: ``output`` holds something else than an earlier demo.
    """
    require_directory(output, "the output directory")
    if output.exists():
        if not (output / "pipeline.json").exists() and any(output.iterdir()):
            raise FileExistsError(f"{output} exists and is not an earlier demo's output: choose another --output")
        shutil.rmtree(output)
    output.mkdir(parents=True)
    (output / "pipeline.json").write_text(pipeline.model_dump_json(indent=2))
    (output / "simulator.json").write_text(json.dumps(simulator.as_options(), indent=2))


def _clickstream_offsets(progress) -> tuple[int, int] | None:
    """``(start, end)`` ticks of the simulator source in one progress entry (its offsets are ``{"tick": n}``)."""
    for source in progress.sources:
        end = _offset(source.endOffset)
        if end is not None and "tick" in end:
            start = _offset(source.startOffset) or {}
            return int(start.get("tick", -1)), int(end["tick"])
    return None


def _offset(value) -> dict | None:
    if not value:
        return None
    return json.loads(value) if isinstance(value, str) else dict(value)


def _read_tick(query) -> int:
    """The last simulator tick the query has read (-1 before the first)."""
    ends = [o[1] for o in map(_clickstream_offsets, query.recentProgress) if o is not None]
    return max(ends, default=-1)


def _batch_ticks(query) -> dict[int, tuple[int, int]]:
    """``{batch id: (first tick, last tick)}`` read by each batch."""
    out = {}
    for progress in query.recentProgress:
        offsets = _clickstream_offsets(progress)
        if offsets is not None and offsets[1] > offsets[0]:
            out[progress.batchId] = (offsets[0] + 1, offsets[1])
    return out


def _plot(result: DemoResult, query) -> Path:
    from floodmark.apps.plot import Timeline, plot_timeline

    simulator = result.simulator
    ptime = {r.batch_id: r.processing_time for r in result.reports}
    records = generate(simulator)
    records = records[records["ts"].notna()]
    tick_of = (records["id"].to_numpy() // simulator.id_slot) // simulator.splits
    record_ptime = np.full(len(records), -1, dtype=np.int64)
    for batch_id, (first, last) in _batch_ticks(query).items():
        if batch_id in ptime:
            record_ptime[(tick_of >= first) & (tick_of <= last)] = ptime[batch_id]
    late_ids = set()
    if not result.late.empty:
        late_ids = {json.loads(r)["id"] for r in result.late["record"]}
    keep = record_ptime >= 0
    wm_time, wm_split, wm_value, wm_idle = [], [], [], []
    for report in result.reports:
        at = report.next_processing_time
        wm_time.append(at)
        wm_split.append(None)
        wm_value.append(report.next_watermark)
        wm_idle.append(False)
        for split, (watermark, idle) in report.splits.items():
            wm_time.append(at)
            wm_split.append(split)
            wm_value.append(watermark)
            wm_idle.append(idle)
    panes = result.panes
    timeline = Timeline(
        record_processing_time_ms=record_ptime[keep],
        record_event_time_ms=records["ts"].to_numpy(dtype=np.int64)[keep],
        record_split=records["split"].astype(str).to_numpy()[keep],
        record_late=records["id"].isin(late_ids).to_numpy()[keep],
        watermark_processing_time_ms=np.array(wm_time, dtype=np.int64),
        watermark_split=wm_split,
        watermark_ms=np.array(wm_value, dtype=np.int64),
        watermark_idle=np.array(wm_idle, dtype=bool),
        firing_processing_time_ms=np.array([ptime.get(b, 0) for b in panes.get("batch_id", [])], dtype=np.int64),
        firing_window_start_ms=panes.get("window_start", pd.Series(dtype=np.int64)).to_numpy(dtype=np.int64),
        firing_window_end_ms=panes.get("window_end", pd.Series(dtype=np.int64)).to_numpy(dtype=np.int64),
        firing_timing=list(panes.get("timing", [])),
        firing_count=[int(c) for c in panes.get("count", [])],
    )
    return plot_timeline(
        timeline, result.output / "timeline.png", title="clickstream: per-split watermarks and idleness"
    )


def _idle_batches(reports: list, split: str) -> list[int]:
    """Batches after which ``split`` was idle, counted from the first time it was active (start-up is not idleness)."""
    seen_active = False
    out = []
    for report in reports:
        _, idle = report.splits.get(split, (None, True))
        seen_active = seen_active or not idle
        if seen_active and idle:
            out.append(report.batch_id)
    return out


def _idle_line(simulator: ClickstreamConfig, idleness: int | None, idle_batches: list[int]) -> str:
    """The summary's line on the idle split: what happened, and only the consequence that follows from it."""
    head = f"idle split: {simulator.idle_split} stops at tick {simulator.idle_from_tick}"
    if simulator.idle_from_tick is None or simulator.idle_from_tick >= simulator.ticks:
        return f"idle split: {simulator.idle_split} never stops in this run ({simulator.ticks} ticks)"
    if idle_batches:
        return (
            f"{head}; marked idle from batch {idle_batches[0]} (after {idleness} ms without records), so windows "
            "kept firing without it"
        )
    return (
        f"{head}; never marked idle before the input ended (idleness {idleness} ms), so the windows it held back "
        "fired only with the end of input"
    )


def summarize(result: DemoResult, totals: Totals, late_in: str = "late/", dead_in: str = "dead_letter/") -> str:
    """The end-of-run summary (also written to ``summary.txt``); ``late_in``/``dead_in``: where those went."""
    simulator = result.simulator
    records = generate(simulator)
    with_ts = records[records["ts"].notna()]
    problems = check_counts(simulator, result.panes, result.late, result.pipeline.window.size or 60_000)
    idle_batches = _idle_batches(result.reports, str(simulator.idle_split))
    profile = LatenessProfile()
    ordered = with_ts.sort_values("id", kind="stable")
    profile.observe(ordered["split"].to_numpy(), ordered["ts"].to_numpy(dtype=np.int64))
    advice = recommend(profile, 0.001, window_size_ms=result.pipeline.window.size)
    windows = result.panes.groupby(["window_start"]).ngroups if not result.panes.empty else 0
    lines = [
        f"floodmark demo: {result.seconds:.1f} s wall time, {len(result.reports)} batches",
        f"records generated: {len(records):,} ({len(records) - len(with_ts):,} without a timestamp)",
        f"panes: {len(result.panes):,} over {windows} one-minute windows, "
        f"counting {int(result.panes['count'].sum()) if not result.panes.empty else 0:,} records",
        f"late records (beyond the watermark, in {late_in}): {len(result.late):,}",
        f"bad records (in {dead_in}): {len(result.dead_letter):,}",
        f"reconciliation: {Reconciliation.of(result.reports).describe()}",
        "counts: exact (every record with a timestamp is in one pane or in the late output)"
        if not problems
        else f"counts: {len(problems)} windows differ from a straight count, e.g. {problems[0]}",
    ]
    if simulator.idle_split is not None:
        lines.append(_idle_line(simulator, result.pipeline.idleness, idle_batches))
    lines.append(
        f"lateness advisor (0.1% late target): bound {advice.bound_ms:,} ms, allowed lateness "
        f"{advice.allowed_lateness_ms:,} ms (configured: bound {result.pipeline.out_of_orderness:,} ms)"
    )
    lines += [f"{name}: {path}" for name, path in result.files.items()]
    return "\n".join(lines)
