"""Idle only when caught up, on Spark: a split with records or files still unread is never idle, a caught-up silent
one is (the core's rule: tests/core/test_idleness_backlog.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.apps.outputs import read_output
from floodmark.spark import EventTimeAggregation, SourceTime, read_files_in_order

pytestmark = pytest.mark.spark

SECOND = 1_000
GATEWAYS, FILES, PER_FILE = ("g1", "g2"), 6, 50


def _write_history(root: Path) -> int:
    """Two gateways' uploads over the same hour, a folder each: read in path order, every file of ``g1`` comes
    before any of ``g2``. Each file: 50 records, 10 s apart, the gateway's name in the record too."""
    for gateway in GATEWAYS:
        folder = root / f"gateway={gateway}"
        folder.mkdir(parents=True)
        for f in range(FILES):
            lines = [
                json.dumps({"ts": (f * PER_FILE + i) * 10 * SECOND, "gw": gateway, "device": f"d{i % 5}"})
                for i in range(PER_FILE)
            ]
            (folder / f"{f:04d}.jsonl").write_text("\n".join(lines) + "\n")
    return len(GATEWAYS) * FILES * PER_FILE


def _replay(spark, root: Path, out: Path, split: str):
    """Counts per device and minute, one file per batch, idle after 300 ms without records."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5)).with_idleness(300)
    events = read_files_in_order(spark, root, order="path", files_per_batch=1)
    return EventTimeAggregation(
        events,
        event_time="ts",
        key_by="device",
        spec=WindowSpec(windows.Tumbling(timedelta(minutes=1)), {"count": aggregates.count()}),
        time=SourceTime(strategy, split=split, known_splits=GATEWAYS),
    ).run_to_completion(str(out / "ckpt"), str(out / "out"), trigger_interval="100 milliseconds", timeout_s=600)


def test_a_gateway_whose_files_come_later_in_the_order_is_never_idle(spark, tmp_path):
    """Split by the folder, ``g2`` has files unread until the last six batches: it holds the watermark back, and
    nothing is late. Split by the same value read from the records (the source cannot say which files hold
    which split: the timeout alone decides), ``g2`` goes idle while ``g1`` is read and its records come late."""
    produced = _write_history(tmp_path / "history")
    runs = {split: _replay(spark, tmp_path / "history", tmp_path / split, split) for split in ("gateway", "gw")}
    folder, column = runs["gateway"].reports, runs["gw"].reports
    late = {split: sum(r.late for r in query.reports) for split, query in runs.items()}
    print(f"\nlate records: {late['gateway']} split by folder, {late['gw']} by the timeout alone (of {produced})")
    assert late["gateway"] == 0
    assert late["gw"] > 0, "the baseline: the timeout alone makes g2 idle while g1's files are read"
    behind = [r.split_backlog.get("g2") for r in folder if r.split_records.get("g1")]
    assert behind and all(b and b > 0 for b in behind), "g2 was behind while g1 was read"
    assert not any(idle for r in folder for split, (_, idle) in r.splits.items() if r.split_backlog.get(split))
    assert all(not r.split_backlog for r in column), "a split read from the records: the source does not say"
    panes = read_output(tmp_path / "gateway" / "out", "panes")
    assert sum(panes["count"]) == produced
