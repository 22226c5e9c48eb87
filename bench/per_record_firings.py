"""The general policy when every record fires a pane (no Spark): seconds for one batch, best of three.

    .venv/bin/python bench/per_record_firings.py

20,000 records of 1,000 keys in one-minute windows under ``Repeatedly(AfterAny(AfterCount(1), ...))`` (a composite
trigger: the general policy), so each record fires its own pane inside ``add_records``: the cost of a pane made
window by window, which a vectorised firing of many windows at once hides.
"""

from __future__ import annotations

import time

import numpy as np

from floodmark import aggregates, triggers, windows
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.window import WindowOperator

RECORDS, KEYS = 20_000, 1_000


def main() -> None:
    every_record = triggers.AfterAny(triggers.AfterCount(1), triggers.AfterProcessingTime(10**9))
    spec = WindowSpec(windows.Tumbling(60_000), aggregates.count(), triggers.Repeatedly(every_record))
    keys = np.array([f"k{i % KEYS}" for i in range(RECORDS)], dtype=object)
    batch = RecordBatch(keys, np.arange(RECORDS, dtype=np.int64), {None: keys})
    best = float("inf")
    for _ in range(3):
        operator = WindowOperator(spec, policy="general")
        started = time.perf_counter()
        out = operator.add(batch)
        best = min(best, time.perf_counter() - started)
        assert out.pane_count() == RECORDS
    per_pane = best / RECORDS * 1e6
    print(f"{RECORDS:,} per-record firings on the general policy: {best:.3f} s ({per_pane:.0f} us per pane)")


if __name__ == "__main__":
    main()
