"""The job behind ``tests/spark/data/checkpoint-state-format-1/``: a checkpoint that floodmark's state format 1 wrote,
with windows still open in its buckets' state, for the test that a newer floodmark resumes it
(``test_state_format.py``).

Usage: state_format_job.py OUTPUT_DIR   (writes OUTPUT_DIR/checkpoint; run it with the floodmark that writes the
format, from a checkout: ``.venv/bin/python tests/spark/state_format_job.py /tmp/x``, then copy the checkpoint)

The first part of the input (:func:`first_part`) is read and the query stopped before any window fires (bounded
out-of-orderness of a minute); the test reads :func:`second_part` from the restored checkpoint and runs to the end.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session

SCHEMA = "ts LONG, k STRING, p INT, v DOUBLE"
MINUTE = 60_000


def first_part() -> list[dict]:
    """Keys a and b, both splits, in the windows [0, 1 min) and [1 min, 2 min)."""
    return [
        {"ts": ts, "k": k, "p": p, "v": float(ts // 1000)}
        for ts in range(0, 2 * MINUTE, 7_000)
        for k, p in (("a", 0), ("b", 1))
    ]


def second_part() -> list[dict]:
    """More of the same windows, then a record per split far enough on to fire them."""
    more = [{"ts": ts, "k": "a", "p": 0, "v": 1.0} for ts in range(30_000, 2 * MINUTE, 20_000)]
    return more + [{"ts": 10 * MINUTE, "k": "c", "p": p, "v": 0.0} for p in (0, 1)]


def write_input(directory: Path, name: str, rows: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(json.dumps(row) + "\n" for row in rows))


def aggregation(spark: SparkSession, input_dir: Path) -> EventTimeAggregation:
    return EventTimeAggregation(
        spark.readStream.schema(SCHEMA).json(str(input_dir)),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count(), "total": aggregates.sum("v")}),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(MINUTE), split="p", known_splits=["0", "1"]),
        buckets=2,
    )


def main(out: Path) -> None:
    spark = local_session("floodmark-state-format", cores=2, shuffle_partitions=2)
    input_dir = out / "in"
    write_input(input_dir, "part-1.json", first_part())
    query = aggregation(spark, input_dir).start(str(out / "checkpoint"), str(out / "out"), "0 seconds")
    query.await_settled()
    query.stop()
    assert not any(report.panes for report in query.reports), "no window fired: the state holds them all"
    spark.stop()
    (out / "checkpoint" / "floodmark" / "metrics.jsonl").unlink(missing_ok=True)  # a log, not state


if __name__ == "__main__":
    main(Path(sys.argv[1]))
