"""``floodmark demo games``: the two-stage game-session pipeline on local Spark, with its figures.

1. The simulator (:mod:`floodmark.simulator.games`) writes mobile and console score events (the console
   source 20-40 s behind) as one Parquet file per source and micro-batch.
2. The pipeline of :mod:`floodmark.apps.games` runs on Spark twice, with END_OF_WINDOW and with EARLIEST
   session timestamps; each run's means are checked against a straight computation.
3. ``watermarks.png``: both sources' and every stage's watermarks over (simulated) processing time, one
   panel per run: with EARLIEST, sessions still open hold the mean stage's watermark back (Figure 3-10).
4. A percentile table (Figure 3-11) from the engine-free core on the same batches: both sources' splits
   as one input counted in 1-minute windows, its watermark the 33rd, 66th or 100th percentile of the
   splits': lower percentiles fire earlier and send more records to the late output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console

from floodmark.apps.demo_output import prepare
from floodmark.apps.games import DEMO_MARKER as MARKER
from floodmark.apps.games import SOURCES, game_pipeline, straight_means, write_input
from floodmark.core import aggregates, windows
from floodmark.core.pipeline import MicroBatchPipeline, WindowedStage
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.watermarks import SourceWatermarks, WatermarkStrategy
from floodmark.simulator import games

COMBINERS = (TimestampCombiner.END_OF_WINDOW, TimestampCombiner.EARLIEST)
PERCENTILES = (33, 66, 100)


def demo_config(seed: int = 3) -> games.GamesConfig:
    """The demo's simulation: 6 minutes of sessions, 40 players per source, 20-second batches."""
    return games.GamesConfig(
        sources={
            "mobile": games.GameSource(users=40, splits=2, max_delay_ms=5_000),
            "console": games.GameSource(users=40, splits=2, min_delay_ms=20_000, max_delay_ms=40_000),
        },
        duration_ms=6 * 60_000,
        batch_ms=20_000,
        seed=seed,
    )


@dataclass
class StageLine:
    """One run: watermarks per batch (``{line name: [event time per batch]}``), the means' panes, and per stage
    its event-time and processing-time lags after each batch (simulated ms)."""

    watermarks: dict[str, list[int]]
    means: pd.DataFrame
    lags: dict[str, tuple[list[float], list[float]]]


def run_games_demo(output: Path, config: games.GamesConfig, console: Console) -> str:
    """Run the demo into ``output`` (replaced if it holds an earlier games demo); returns the summary."""
    from floodmark.spark import local_session

    prepare(output, MARKER, "games")
    records = games.generate(config)
    batches = write_input(records, output / "input")
    console.print(
        f"[bold]game scores[/]: {sum(len(f) for f in records.values())} score events from "
        f"{', '.join(f'{n} ({len(f)})' for n, f in records.items())} in {batches} batches of "
        f"{config.batch_ms // 1000} s; sessions (gap 1 min) per source, then the mean session length per 2 min"
    )
    spark = local_session("floodmark-demo-games", cores=2, shuffle_partitions=2)
    lines: dict[TimestampCombiner, StageLine] = {}
    checks = []
    for combiner in COMBINERS:
        console.print(f"running the two-stage pipeline with {combiner.name} session timestamps ...")
        query = game_pipeline(spark, output / "input", combiner).run_to_completion(
            str(output / combiner.name / "checkpoint"), str(output / combiner.name), timeout_s=900
        )
        panes = spark.read.parquet(str(output / combiner.name / "means" / "panes")).toPandas()
        lines[combiner] = StageLine(
            _watermark_lines(query.reports), panes.sort_values("window_start"), stage_lags(query.reports, config)
        )
        got = dict(zip(panes["window_start"], panes["mean_length"], strict=True))
        expected = straight_means(records, combiner)
        exact = got.keys() == expected.keys() and all(np.isclose(got[k], v) for k, v in expected.items())
        checks.append(f"{combiner.name}: means {'equal' if exact else 'DIFFER FROM'} the straight computation")
    figure = _plot(lines, config, output / "watermarks.png")
    summary = _summary(lines, config, checks, percentile_table(records, config), figure)
    (output / "summary.txt").write_text(summary + "\n")
    return summary


def _watermark_lines(reports: list) -> dict[str, list[int]]:
    """Per batch: each source's watermark (its session stage's input) and each stage's output watermark."""
    lines: dict[str, list[int]] = {}
    for report in reports:
        stages = report.stages
        for name in SOURCES:
            lines.setdefault(f"{name} source", []).append(stages[f"{name}_sessions"].input_watermark)
            lines.setdefault(f"{name} sessions out", []).append(stages[f"{name}_sessions"].output_watermark)
        lines.setdefault("means in", []).append(stages["means"].input_watermark)
    return lines


def stage_lags(reports: list, config: games.GamesConfig) -> dict[str, tuple[list[float], list[float]]]:
    """*Streaming Systems*' two lags per stage after every batch, on the simulated clock (batch b ends at
    ``start + (b + 1) * batch_ms``): event-time lag = now - output watermark; processing-time lag = now - the
    arrival of the oldest record the stage still holds. On Spark a record's arrival is its batch's processing
    time (wall clock), which maps back to its batch."""
    batch_of = {report.processing_time: i for i, report in enumerate(reports)}
    lags: dict[str, tuple[list[float], list[float]]] = {}
    for i, report in enumerate(reports):
        now = config.start_ms + (i + 1) * config.batch_ms
        for name, stage in report.stages.items():
            event, processing = lags.setdefault(name, ([], []))
            valid = not np.isnan(_minutes(stage.output_watermark, config))
            event.append(now - stage.output_watermark if valid else float("nan"))
            arrived = i if stage.oldest_pending is None else batch_of.get(stage.oldest_pending, i)
            processing.append((i - arrived) * config.batch_ms)
    return lags


def percentile_table(records: dict[str, pd.DataFrame], config: games.GamesConfig) -> list[dict]:
    """Figure 3-11 on the core: every split of both sources as one input, 1-minute counts, the input's
    watermark the given percentile of the splits' (bounded out-of-orderness 0). Per percentile: the batch
    of each window's first pane and the late records."""
    scores = pd.concat([f.assign(split=f"{name[0]}" + f["split"].astype(str)) for name, f in records.items()])
    scores = scores.sort_values(["batch", "arrival"], kind="stable")
    splits = sorted(scores["split"].unique())
    count = games.batch_count(records)
    stage = WindowedStage("counts", "scores", WindowSpec(windows.Tumbling(60_000), {"events": aggregates.count()}))
    rows = []
    for percentile in PERCENTILES:
        pipeline = MicroBatchPipeline({"scores": "ts"}, [stage])
        source = SourceWatermarks(
            WatermarkStrategy.for_bounded_out_of_orderness(0),
            periodic_interval=1,
            percentile=percentile,
            splits=splits,
            start_processing_time=config.start_ms,
        )
        first: dict[int, int] = {}
        for b in range(count + 2):
            now = config.start_ms + (b + 1) * config.batch_ms
            batch = scores[scores["batch"] == b]
            for pane in pipeline.run_batch({"scores": batch}, now)["counts"].all_panes():
                first.setdefault(pane.window.start, b)
            source.on_batch(games.split_stats(batch))
            source.advance_processing_time(now)
            ended = b >= count - 1
            pipeline.end_batch({"scores": (MAX_TIMESTAMP, False) if ended else (source.watermark, source.idle)}, now)
        late = len(pipeline.results["counts"].emitted.late)
        rows.append({"percentile": percentile, "late": late, "first": dict(sorted(first.items()))})
    return rows


def _plot(lines: dict[TimestampCombiner, StageLine], config: games.GamesConfig, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, grid = plt.subplots(2, len(lines), figsize=(13, 9), sharey="row", height_ratios=[3, 2])
    axes = grid[0]
    styles = {
        "mobile source": ("tab:blue", "-"),
        "console source": ("tab:orange", "-"),
        "mobile sessions out": ("tab:blue", ":"),
        "console sessions out": ("tab:orange", ":"),
        "means in": ("black", "-"),
    }
    minute = 60_000
    for axis, (combiner, line) in zip(np.atleast_1d(axes), lines.items(), strict=True):
        n = len(next(iter(line.watermarks.values())))
        x = [(b + 1) * config.batch_ms / minute for b in range(n)]
        for name, values in line.watermarks.items():
            color, style = styles[name]
            y = [_minutes(v, config) for v in values]
            axis.step(
                x, y, where="post", color=color, linestyle=style, label=name, linewidth=2 if name == "means in" else 1.3
            )
        means = line.means
        axis.scatter(
            [(b + 1) * config.batch_ms / minute for b in means["batch_id"]],
            (means["window_end"] - config.start_ms) / minute,
            marker="s",
            color="tab:green",
            zorder=3,
            label="mean pane (at its window's end)",
        )
        axis.set_title(f"sessions timestamped {combiner.name}")
        axis.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("event time (minutes)")
    np.atleast_1d(axes)[0].legend(loc="upper left", fontsize=8)
    colors = {"mobile_sessions": "tab:blue", "console_sessions": "tab:orange", "means": "black"}
    for axis, line in zip(grid[1], lines.values(), strict=True):
        for name, (event, processing) in line.lags.items():
            x = [(b + 1) * config.batch_ms / minute for b in range(len(event))]
            axis.plot(x, np.asarray(event) / minute, color=colors[name], label=f"{name}: event-time lag")
            axis.plot(
                x,
                np.asarray(processing) / minute,
                color=colors[name],
                linestyle="--",
                label=f"{name}: processing-time lag",
            )
        axis.set_xlabel("processing time (simulated minutes)")
        axis.grid(alpha=0.3)
    grid[1][0].set_ylabel("lag (minutes)")
    grid[1][0].legend(loc="upper left", fontsize=7, ncol=2)
    figure.suptitle("game scores: watermarks through two stages (the means stage reads both session stages)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _summary(
    lines: dict[TimestampCombiner, StageLine],
    config: games.GamesConfig,
    checks: list[str],
    percentiles: list[dict],
    figure: Path,
) -> str:
    minute = 60_000
    out = ["mean session length per 2-minute window (minutes), and the batch of its pane:"]
    header = "  window  " + "".join(f"| {c.name:<24}" for c in lines)
    out.append(header)
    windows_ = sorted({int(w) for line in lines.values() for w in line.means["window_start"]})
    for w in windows_:
        cells = []
        for line in lines.values():
            row = line.means[line.means["window_start"] == w]
            cells.append(
                f"| {row['mean_length'].iloc[0] / minute:5.2f} in batch {int(row['batch_id'].iloc[0]):<3}     "
                if len(row)
                else "| -                       "
            )
        out.append(f"  {(w - config.start_ms) // minute:>3} min  " + "".join(cells))
    eow, earliest = (lines[c].watermarks["means in"] for c in COMBINERS)
    behind = [
        a - b for a, b in zip(eow, earliest, strict=True) if a < MAX_TIMESTAMP and b > config.start_ms - 10 * minute
    ]
    out += [*(f"check: {c}" for c in checks)]
    if behind:
        out.append(
            f"EARLIEST holds the means stage back: its input watermark trails END_OF_WINDOW's by up to "
            f"{max(behind) / 1000:.0f} s (median {np.median(behind) / 1000:.0f} s)"
        )
    out.append("")
    out.append("percentile watermarks (engine-free core, same batches; every split of both sources, 1-min counts):")
    out.append("  percentile | late records | batch of the first pane of each window (minute: batch)")
    for row in percentiles:
        firsts = ", ".join(f"{(w - config.start_ms) // minute}: {b}" for w, b in row["first"].items())
        out.append(f"  {row['percentile']:>10} | {row['late']:>12} | {firsts}")
    out.append("")
    out.append(f"figure: {figure}")
    return "\n".join(out)


def _minutes(watermark: int, config: games.GamesConfig) -> float:
    """A watermark in minutes since the run's start; NaN before the first records and at the end of input."""
    if watermark < config.start_ms - 10 * 60_000 or watermark == MAX_TIMESTAMP:
        return float("nan")
    return (watermark - config.start_ms) / 60_000
