"""Issue 4 end to end on real Spark: the demo's counts, the idle split in explain, replay == streaming."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from floodmark.apps.demo import SEED_001, check_counts, run_demo
from floodmark.apps.inspection import explain_run
from floodmark.apps.outputs import read_output
from floodmark.apps.replay import run_replay
from floodmark.simulator.clickstream import ClickstreamConfig, generate
from readme_blocks import page_blocks, run_block

SMALL = ClickstreamConfig(
    seed=7,
    splits=3,
    records_per_tick_per_split=40,
    tick_ms=10_000,
    ticks=48,  # 8 minutes of simulated processing time
    idle_split=2,
    idle_from_tick=24,
    late_burst_tick=30,
    late_burst_records=25,
    late_burst_age_ms=400_000,
    bad_records_per_tick=1,
)


# Seed 001's job with a shorter idleness timeout, so that a 16-second run shows the idle split.
PIPELINE = SEED_001.model_copy(update={"idleness": 2_000})


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory):
    output = tmp_path_factory.mktemp("demo") / "run"
    return run_demo(output, SMALL, PIPELINE, ticks_per_second=3.0, live=False, console=Console(quiet=True))


def test_demo_counts_every_record_once_and_writes_every_output(demo):
    assert check_counts(SMALL, demo.panes, demo.late, 60_000) == []
    records = generate(SMALL)
    assert int(demo.panes["count"].sum()) + len(demo.late) == int(records["ts"].notna().sum())
    tick = records["id"] // SMALL.id_slot // SMALL.splits
    oldest_regular = SMALL.start_ms + tick * SMALL.tick_ms - SMALL.source_lateness_ms - SMALL.jitter_ms
    burst_ids = set(records[records["ts"] < oldest_regular]["id"])
    assert len(burst_ids) == SMALL.late_burst_records
    assert {json.loads(r)["id"] for r in demo.late["record"]} == burst_ids, "exactly the burst is late"
    assert len(demo.dead_letter) == int(records["ts"].isna().sum())
    assert set(demo.dead_letter["reason"]) == {"missing timestamp"}
    lines = (demo.output / "results.txt").read_text().splitlines()
    assert len(lines) == len(demo.panes)
    assert all(len(line.split()) == 5 and len(line.split()[0]) == 14 for line in lines)
    assert (demo.output / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "counts: exact" in (demo.output / "summary.txt").read_text()


def test_the_idle_split_is_detected_and_explained(demo):
    idle_after = [r.batch_id for r in demo.reports if r.splits.get("2", (0, False))[1]]
    active = [r.batch_id for r in demo.reports if not r.splits.get("2", (0, True))[1]]
    assert active and idle_after and max(active) < max(idle_after), "split 2 was active, then idle"
    batch = next(b for b in idle_after if b > min(active))
    after = explain_run(demo.output, ("a", "CLICK"), int(demo.panes["window_start"].max()), batch)
    idle = {s.split for s in after.explanation.idle_splits}
    assert "2" in idle
    assert "2" not in {s.split for s in after.explanation.holding_splits}
    assert "IDLE" in after.text()


def test_replay_of_the_same_on_time_records_gives_the_streaming_panes(demo, spark, tmp_path):
    on_time = dataclasses.replace(SMALL, late_burst_tick=None, late_burst_records=0, bad_records_per_tick=0)
    streamed = run_demo(tmp_path / "stream", on_time, ticks_per_second=8.0, live=False, console=Console(quiet=True))
    # (no idleness question here: every split produces until the end)
    history = tmp_path / "history"
    history.mkdir()
    records = generate(on_time)
    for i, part in enumerate(range(0, len(records), 1_500)):
        records.iloc[part : part + 1_500].to_json(history / f"part-{i:03d}.jsonl", orient="records", lines=True)
    first = history / "part-000.jsonl"
    with first.open("a") as part:
        part.write('{"ts": 17, "channel": "a", "id": 9, "behav\n')  # a line cut short
        part.write('{ "channel":"a",  "behavior":"CLICK" }\n')  # no timestamp: the dead letter keeps this text
    # Modification times against the names (a copied history): the replay reads in path order all the same
    # (Spark's file stream, by modification time, sent most records to the late output; issue 39).
    files = sorted(history.iterdir())
    for i, file in enumerate(files):
        os.utime(file, (1_700_000_000 - i * 60, 1_700_000_000 - i * 60))
    replayed = run_replay(history, SEED_001, tmp_path / "replay", files_per_batch=2)

    def panes(frame: pd.DataFrame) -> list[tuple]:
        return sorted(frame[["window_start", "channel", "behavior", "count", "timing"]].itertuples(index=False))

    assert replayed.records == len(records) + 2
    assert sorted(replayed.dead_letter["record"]) == [
        '{ "channel":"a",  "behavior":"CLICK" }',
        '{"ts": 17, "channel": "a", "id": 9, "behav',
    ]
    assert replayed.late.empty and streamed.late.empty
    assert panes(replayed.panes) == panes(streamed.panes)
    assert (tmp_path / "replay" / "results.txt").read_text() == (tmp_path / "stream" / "results.txt").read_text()


def test_the_getting_started_replay_gives_the_python_job_s_windows(tmp_path):
    """The docs' first job (zone-less ISO times read in Europe/Berlin) and the page's ``floodmark replay`` command
    over the same readings: the same windows and counts (without the zone, g2's would be an hour off). The command
    runs as a user runs it, its output captured (a pipe, not a terminal): its summary lines are not wrapped."""
    data, job, results, live = page_blocks("getting-started.md")[:4]
    # The readings/ folders, the job into out/, then the continuous query, which adds a part-1 file per gateway:
    # replayed in path order g1's files come before g2's, and g2 (a folder) holds the watermark back from the start.
    run_block(data + job + results + live, tmp_path)
    page = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text()
    (command,) = [line for line in page.splitlines() if line.startswith("floodmark replay ")]
    assert "--time-zone Europe/Berlin" in command
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "LINES")}
    run = [sys.executable, "-m", "floodmark.apps.cli", *shlex.split(command)[1:]]
    result = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr

    python = read_output(tmp_path / "out", "panes")
    replayed = read_output(tmp_path / "floodmark-replay", "panes")
    nine = 1_767_254_400_000 + 3_600_000  # 2026-01-01T09:00Z: 10:00 in Berlin
    later = [("d1", nine + 3 * 60_000, 2)]  # the continuous block's reading, in each gateway's part-1 file
    expected = sorted([*python[["device", "window_start", "readings"]].itertuples(index=False, name=None), *later])
    assert sorted(replayed[["device", "window_start", "count"]].itertuples(index=False, name=None)) == expected
    assert ("d3", nine, 2) in expected, "g2's 10:00:20 and 10:00:50 Berlin time in the window of 09:00 UTC"
    summary = next(line for line in result.stdout.splitlines() if line.startswith("replayed "))
    assert len(summary) > 80 and summary.endswith("(results.txt, panes/, late/, dead_letter/)"), summary
    reconciliation = next(line for line in result.stdout.splitlines() if line.startswith("reconciliation: "))
    assert "1 dead letters; (record, window) pairs" in reconciliation and reconciliation.endswith("+ 0 late")


def test_replay_knows_the_splits_its_folders_name_as_the_combiner_labels_them(tmp_path):
    from floodmark.apps.replay import folder_splits

    files = [tmp_path / f"p={p}" / "part-0.jsonl" for p in ("01", "2.0", "g1", "__HIVE_DEFAULT_PARTITION__")]
    assert folder_splits(tmp_path, [str(f) for f in files], "p") == ["1", "2", "g1", ""]
    assert folder_splits(tmp_path, [str(f) for f in files], "other") == []
