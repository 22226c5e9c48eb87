"""A query started in a fresh process whose Python workers are slow to start (``PYSPARK_PYTHON`` is the test's
wrapper): prints one JSON line with what the handle saw (tests/spark/test_busy_machine.py)."""

import json
import sys
from pathlib import Path

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session, read_json_lines, read_panes

root = Path(sys.argv[1])
spark = local_session()
(root / "in").mkdir(parents=True)
(root / "in" / "part-0.jsonl").write_text("".join(json.dumps({"ts": s * 1000, "k": "a"}) + "\n" for s in range(100)))
agg = EventTimeAggregation(
    read_json_lines(spark, str(root / "in"), "ts LONG, k STRING"),
    "ts",
    "k",
    WindowSpec(windows.Tumbling("10 seconds"), {"n": aggregates.count()}),
    SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0)),
    host="python",  # the JVM host starts no Python worker on the driver: nothing there to be slow
)
query = agg.run_to_completion(str(root / "ckpt"), str(root / "out"), timeout_s=600)
panes = read_panes(spark, str(root / "out")).orderBy("window_start").select("n").collect()
print(
    json.dumps(
        {"restarts": query.restarts, "counts": [row.n for row in panes], "rows_in": query.reconciliation.rows_in}
    )
)
