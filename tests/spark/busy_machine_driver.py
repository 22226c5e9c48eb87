"""A query started in a fresh process whose Python workers are slow to start (``PYSPARK_PYTHON`` is the test's
wrapper): prints one JSON line with what the handle saw (tests/spark/test_busy_machine.py).

The bounded run is ``run_to_completion``'s, in two steps (``start``, then ``finish_when_input_exhausted``) so that
a thread can look at the handle meanwhile, as a user's monitoring would: what ``isActive``, ``exception()`` and
``status`` say while the Spark query has failed and the handle starts it again (held until the looks are taken:
:func:`prestart_after_the_looks`)."""

import json
import sys
import threading
import time
from pathlib import Path

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session, read_json_lines, read_panes
from floodmark.spark.driver import python_workers

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


LOOKS = 3
query_started, looked = threading.Event(), threading.Event()
prestart = python_workers.prestart


def prestart_after_the_looks(spark):
    """Each start of the query begins here: the handle's second one (its restart) waits until the looks are
    taken. Starting the query again takes 0.2 s here, less than a look takes on a busy machine."""
    if query_started.is_set():
        looked.wait(120)
    return prestart(spark)


python_workers.prestart = prestart_after_the_looks


def look_while_restarting(query, seen: list[dict], done: threading.Event) -> None:
    """Once the handle has begun to start the failed Spark query again (``query.restarts``), and until the new
    one is its query: what the handle says."""
    first = query.query
    while not done.is_set() and query.restarts == 0:
        time.sleep(0.005)
    while not done.is_set() and query.query is first:
        said = {"isActive": query.isActive, "exception": query.exception(), "status": query.status}
        if query.query is first:  # said while the handle restarted
            seen.append({**said, "exception": None if said["exception"] is None else str(said["exception"])})
        if len(seen) >= LOOKS:
            looked.set()
            time.sleep(0.01)


query = agg.start(str(root / "ckpt"), str(root / "out"))
query_started.set()
seen: list[dict] = []
done = threading.Event()
looking = threading.Thread(target=look_while_restarting, args=(query, seen, done), daemon=True)
looking.start()
try:
    query.finish_when_input_exhausted(timeout_s=600)
finally:
    done.set()
    looking.join()
panes = read_panes(spark, str(root / "out")).orderBy("window_start").select("n").collect()
print(
    json.dumps(
        {
            "restarts": query.restarts,
            "counts": [row.n for row in panes],
            "rows_in": query.reconciliation.rows_in,
            "while_restarting": {
                "looks": len(seen),
                "isActive": sorted({look["isActive"] for look in seen}),
                "exception": sorted({str(look["exception"]) for look in seen}),
                "status": sorted({json.dumps(look["status"], sort_keys=True) for look in seen}),
            },
            "after": {"isActive": query.isActive, "exception": query.exception()},
        }
    )
)
