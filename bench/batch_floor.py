"""The floor under a micro-batch's cost: near-empty queries, native and Python, stateless and stateful.

    .venv/bin/python bench/batch_floor.py

Each query reads Spark's ``rate-micro-batch`` source, 8 rows per batch in 8
groups (floodmark's tick rows), and writes to the ``noop`` sink; the table shows
the first batch's planning time and the median time of the later batches:

* native stateless (the source alone), native stateful (``groupBy().count()`` on RocksDB);
* ``applyInPandasWithState`` and ``transformWithStateInPandas`` with a trivial
  function / processor (read the state, count the rows, emit one row).

floodmark's batch with no input (``bench/throughput.py`` prints it) is the
applyInPandasWithState row (before floodmark moved to transformWithStateInPandas) plus the
control entry, the map side and the sink:
the difference is what floodmark adds; the rest is Spark's price for a Python
stateful operator on RocksDB.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType
from rich.console import Console
from rich.table import Table

from floodmark.spark import local_session


class CountRows(StatefulProcessor):
    """The least a stateful processor does: read its state, count the group's rows, emit one row."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("v", StructType([StructField("blob", BinaryType())]))

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        self.state.get()
        yield pd.DataFrame({"n": [sum(len(frame) for frame in rows)]})

    def close(self) -> None:
        pass


def count_rows(key: Any, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState``'s twin of :class:`CountRows`."""
    if state.exists:
        state.get  # noqa: B018 (reading the state is the point)
    state.update((b"",))
    yield pd.DataFrame({"n": [sum(len(frame) for frame in frames)]})


QUERIES: dict[str, tuple[Callable[[DataFrame], DataFrame], str]] = {
    "native, stateless": (lambda ticks: ticks, "append"),
    "native, stateful count": (lambda ticks: ticks.groupBy("b").count(), "update"),
    "applyInPandasWithState": (
        lambda ticks: ticks.groupBy("b").applyInPandasWithState(
            count_rows, "n long", "blob binary", "Update", GroupStateTimeout.NoTimeout
        ),
        "update",
    ),
    "transformWithStateInPandas": (
        lambda ticks: ticks.groupBy("b").transformWithStateInPandas(
            statefulProcessor=CountRows(), outputStructType="n long", outputMode="Append", timeMode="None"
        ),
        "append",
    ),
}


def run(spark, name: str, checkpoint: Path, batches: int) -> list[dict]:
    ticks = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 8)
        .load()
        .selectExpr("cast(value % 8 as int) as b")
    )
    build, mode = QUERIES[name]
    query = (
        build(ticks)
        .writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        while len(query.recentProgress) < batches:
            time.sleep(0.05)
    finally:
        query.stop()
    return [progress.durationMs for progress in query.recentProgress[:batches]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spark = local_session("floodmark-batch-floor", cores=2, shuffle_partitions=2)
    work = Path(tempfile.mkdtemp(prefix="floodmark-batch-floor-"))
    table = Table(title=f"near-empty queries, 8 rows in 8 groups per batch, local[2], median of {args.runs} runs")
    for column in ("query", "first batch: planning ms", "first batch ms", "later batches ms"):
        table.add_column(column, justify="right")
    for name in QUERIES:
        run(spark, name, work / f"{name}-warm-up", 3)  # starts the Python workers, not measured
        runs = [run(spark, name, work / f"{name}-{index}", args.batches) for index in range(args.runs)]
        table.add_row(
            name,
            f"{statistics.median(r[0]['queryPlanning'] for r in runs):.0f}",
            f"{statistics.median(r[0]['triggerExecution'] for r in runs):.0f}",
            f"{statistics.median(d['triggerExecution'] for r in runs for d in r[1:]):.0f}",
        )
    Console(width=160).print(table)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
