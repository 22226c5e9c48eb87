"""Seed 003's percentile watermarks on Spark: the same input at 33/66/100 percent (issue 13, part 3).

Three splits, the second 20 s and the third 40 s behind the first. The input watermark is the value that the
given percentage of active splits has reached: 100 is the MIN (the slowest split), 66 the middle one, 33 the
fastest. A lower percentile fires windows earlier and sends more records to the late output: the trade-off
of *Streaming Systems* figure 3-11, measured here in micro-batches.
"""

from __future__ import annotations

import pandas as pd
import pytest
from spark_helpers import read_output, write_batches

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime

pytestmark = pytest.mark.spark

SECOND = 1_000
LAG = {0: 0, 1: 20 * SECOND, 2: 40 * SECOND}


def lagging_batches(count: int = 10) -> list[pd.DataFrame]:
    """Batch b: each split's records for the 10 s its clock is at (split p runs LAG[p] behind)."""
    batches = []
    for b in range(count):
        rows = [
            (b * 10 * SECOND - lag + s * SECOND, "k", split)
            for split, lag in LAG.items()
            for s in range(0, 10, 2)
            if b * 10 * SECOND - lag >= 0
        ]
        batches.append(pd.DataFrame(rows, columns=["ts", "k", "p"]).astype({"p": "int32"}))
    return batches


def run(spark, tmp_path, percentile: float) -> tuple[dict[int, int], int]:
    """{window start: batch of its first pane}, late records."""
    agg = EventTimeAggregation(
        spark.readStream.schema("ts LONG, k STRING, p INT")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(tmp_path / "in")),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(10 * SECOND), {"n": aggregates.count()}),
        time=SourceTime(
            WatermarkStrategy.for_bounded_out_of_orderness(0),
            split="p",
            percentile=percentile,
            known_splits=["0", "1", "2"],
        ),
    )
    out = tmp_path / f"p{percentile:g}"
    agg.run_to_completion(str(out / "ckpt"), str(out / "out"), timeout_s=300)
    panes = read_output(spark, out / "out" / "panes")
    first = panes.groupby("window_start")["batch_id"].min().to_dict()
    return {int(k): int(v) for k, v in first.items()}, len(read_output(spark, out / "out" / "late"))


def test_lower_percentiles_fire_earlier_and_send_more_records_late(spark, tmp_path):
    batches = lagging_batches()
    write_batches(tmp_path / "in", batches)
    total = sum(len(b) for b in batches)
    results = {p: run(spark, tmp_path, p) for p in (33, 66, 100)}
    table = ["percentile | late records | batch of each window's first pane (window start s: batch)"]
    for p, (first, late) in results.items():
        table.append(f"{p:>10} | {late:>12} | " + ", ".join(f"{w // SECOND}: {b}" for w, b in sorted(first.items())))
    print("\n" + "\n".join(table))

    assert results[100][1] == 0, "MIN over the splits: nothing is late"
    assert results[33][1] > results[66][1] > 0, "the lower the percentile, the more records are late"
    for low, high in ((33, 66), (66, 100)):
        early, late_first = results[low][0], results[high][0]
        common = set(early) & set(late_first)
        assert all(early[w] <= late_first[w] for w in common), (low, high)
        assert any(early[w] < late_first[w] for w in common), f"{low} fires some window before {high}"
    assert sum(1 for _ in results[100][0]) == len({ts // (10 * SECOND) for b in batches for ts in b["ts"]})
    assert total > 0
