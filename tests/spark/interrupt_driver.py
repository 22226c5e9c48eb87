"""A floodmark query in a fresh process for the Ctrl-C tests (tests/spark/test_interrupt.py).

Usage: interrupt_driver.py await|complete ROOT
Reads ROOT/in (20 JSON-lines files of 10 records, one file a batch; written on the first run) into 10 s tumbling
counts. ``await``: starts the query from ROOT/ckpt and waits in ``awaitTermination()``; ``complete``: runs it to
the end with ``run_to_completion`` and prints one JSON line with each window's count (``read_panes``).
"""

import json
import os
import sys
import time
from pathlib import Path

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session, read_json_lines, read_panes

FILES, PER_FILE = 20, 10

mode, root = sys.argv[1], Path(sys.argv[2])
spark = local_session("floodmark-interrupt", cores=2, shuffle_partitions=2)
source = root / "in"
if not source.exists():
    source.mkdir(parents=True)
    base = time.time() - 1_000
    for f in range(FILES):
        path = source / f"part-{f:03d}.jsonl"
        path.write_text("".join(json.dumps({"ts": (f * PER_FILE + s) * 1000, "k": "a"}) + "\n" for s in range(10)))
        os.utime(path, (base + f, base + f))  # the file source's order: by modification time
agg = EventTimeAggregation(
    read_json_lines(spark, str(source), "ts LONG, k STRING", {"maxFilesPerTrigger": "1"}),
    "ts",
    "k",
    WindowSpec(windows.Tumbling("10 seconds"), {"n": aggregates.count()}),
    SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0)),
)
checkpoint, output = str(root / "ckpt"), str(root / "out")
if mode == "await":
    agg.start(checkpoint, output).awaitTermination()
else:
    agg.run_to_completion(checkpoint, output, timeout_s=600)
    panes = read_panes(spark, output).orderBy("window_start").select("n").collect()
    print(json.dumps({"counts": [row.n for row in panes]}))
