"""The core's window operator alone (no Spark): seconds per workload, both firing policies.

    .venv/bin/python bench/core_step.py

Eight micro-batches of 31,250 records (1-minute windows, 75 s of event time per batch), then the end of
input, through ``core.window.step`` as the Spark processor runs it (one bucket holding every key); the columnar
rows go through the map-side combine first where the spec allows it. Best of three runs. Useful to see
what a change to the core costs before paying for a Spark benchmark (``bench/throughput.py``).
"""

from __future__ import annotations

import time

import numpy as np
from rich.console import Console
from rich.table import Table

from floodmark import WindowSpec, aggregates, triggers, windows
from floodmark.core.combine import combine
from floodmark.core.records import RecordBatch
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.window import step

BATCH_RECORDS, BATCHES, BATCH_SPAN_MS = 31_250, 8, 75_000


def batches(keys: int, seed: int = 1) -> list[RecordBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for b in range(BATCHES):
        k = np.empty(BATCH_RECORDS, dtype=object)
        k[:] = [f"k{i}" for i in rng.integers(0, keys, BATCH_RECORDS)]
        ts = (b * BATCH_SPAN_MS + rng.integers(0, BATCH_SPAN_MS, BATCH_RECORDS)).astype(np.int64)
        out.append(RecordBatch(k, ts, {None: np.arange(BATCH_RECORDS)}))
    return out


def seconds(spec: WindowSpec, keys: int, runs: int = 3) -> float:
    data = batches(keys)
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        snapshot = None
        for i, batch in enumerate(data):
            watermark = i * BATCH_SPAN_MS - 5_000
            partials, records = None, batch
            if spec.combines_records:
                partials, raw = combine(spec, watermark, batch)
                records = RecordBatch(batch.keys[raw], batch.timestamps[raw], {None: batch.columns[None][raw]})
            snapshot, _, _ = step(spec, snapshot, records, watermark, i * 1_000, partials)
        step(spec, snapshot, None, MAX_TIMESTAMP, 10**6)
        best = min(best, time.perf_counter() - started)
    return best


def flush_seconds(windows_open: int = 1_000_000, runs: int = 3) -> float:
    """Fire ``windows_open`` one-hour windows at the end of input (watermark MAX), from a restored snapshot as
    the Spark processor does: the per-pane cost of a flush (the target: well under 2 us per pane)."""
    spec = WindowSpec(windows.Tumbling(3_600_000), {"n": aggregates.count()})
    keys = np.empty(windows_open, dtype=object)
    keys[:] = [f"user-{i}" for i in range(windows_open)]
    records = RecordBatch(keys, np.full(windows_open, 1_000, dtype=np.int64), {None: keys})
    snapshot, _, _ = step(spec, None, records, 0, 0)
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        _, out, _ = step(spec, snapshot, None, MAX_TIMESTAMP, 1)
        best = min(best, time.perf_counter() - started)
        assert out.pane_count() == windows_open
    return best


def main() -> None:
    count = {"n": aggregates.count()}
    tumbling = windows.Tumbling(60_000)
    workloads = [
        ("tumbling, Default, 100 keys", WindowSpec(tumbling, count), 100),
        ("tumbling, Default, 100k keys", WindowSpec(tumbling, count), 100_000),
        (
            "tumbling, early every 100 records, 100k keys",
            WindowSpec(tumbling, count, triggers.AfterWatermark(early=triggers.AfterCount(100))),
            100_000,
        ),
        (
            "tumbling, late=AfterCount(2) (general), 10k keys",
            WindowSpec(tumbling, count, triggers.AfterWatermark(late=triggers.AfterCount(2))),
            10_000,
        ),
        ("sessions gap 1 min, 10k keys", WindowSpec(windows.Sessions(60_000), count), 10_000),
        ("sessions gap 1 min, 100k keys", WindowSpec(windows.Sessions(60_000), count), 100_000),
    ]
    table = Table(title=f"core.window.step, {BATCHES} batches of {BATCH_RECORDS:,} records, best of 3")
    for column in ("workload", "policy", "seconds", "records/s"):
        table.add_column(column, justify="left" if column in ("workload", "policy") else "right")
    for name, spec, keys in workloads:
        took = seconds(spec, keys)
        operator = "columnar" if spec.is_columnar else "general"
        table.add_row(name, operator, f"{took:.3f}", f"{BATCHES * BATCH_RECORDS / took:,.0f}")
    Console(width=140).print(table)
    flush = flush_seconds()
    Console(width=140).print(
        f"flush of 1,000,000 open windows (restore + fire, columnar): {flush:.3f} s, "
        f"{flush * 1e6 / 1_000_000:.2f} us per pane"
    )


if __name__ == "__main__":
    main()
