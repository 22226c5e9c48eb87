"""Which Python stateful operators can be chained in one streaming query (the question behind the one-query graph).

    .venv/bin/python bench/chained_stateful_probe.py

Stage 1 sums ``v`` per key, stage 2 counts stage 1's output rows per group; three one-file micro-batches.
Prints, per combination, whether the query starts and what stage 2 saw after each batch (stage 2 seeing
stage 1's output of the same batch means one query can run two floodmark stages with one batch between
them). Measured on Spark 4.3.0 (2026-11-23):

| stage 1 | stage 2 | result |
|---|---|---|
| applyInPandasWithState | applyInPandasWithState | AnalysisException: Multiple applyInPandasWithStates are not... |
| applyInPandasWithState | transformWithStateInPandas | runs; stage 2 sees stage 1's rows of the same batch |
| transformWithStateInPandas | transformWithStateInPandas | runs; the same |
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.types import LongType, StructField, StructType
from rich.console import Console
from rich.table import Table

from floodmark.spark import local_session

STAGE1_SCHEMA, STAGE2_SCHEMA = "g STRING, k STRING, v LONG", "g STRING, rows_seen LONG"
COUNTER = StructType([StructField("s", LongType())])


def sum_per_key(key, frames, state):
    total = sum(int(f["v"].sum()) for f in frames)
    previous = state.get[0] if state.exists else 0
    state.update((previous + total,))
    yield pd.DataFrame({"g": ["all"], "k": [key[0]], "v": [previous + total]})


def count_rows(key, frames, state):
    n = sum(len(f) for f in frames)
    previous = state.get[0] if state.exists else 0
    state.update((previous + n,))
    yield pd.DataFrame({"g": [key[0]], "rows_seen": [previous + n]})


class SumPerKey(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("s", COUNTER)

    def handleInputRows(self, key, rows, timerValues):
        total = sum(int(f["v"].sum()) for f in rows)
        previous = self.state.get()[0] if self.state.exists() else 0
        self.state.update((previous + total,))
        yield pd.DataFrame({"g": ["all"], "k": [key[0]], "v": [previous + total]})

    def close(self) -> None:
        pass


class CountRows(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("s", COUNTER)

    def handleInputRows(self, key, rows, timerValues):
        n = sum(len(f) for f in rows)
        previous = self.state.get()[0] if self.state.exists() else 0
        self.state.update((previous + n,))
        yield pd.DataFrame({"g": [key[0]], "rows_seen": [previous + n]})

    def close(self) -> None:
        pass


def stage(frame, kind: str, key: str, first: bool):
    grouped = frame.groupBy(key)
    if kind == "applyInPandasWithState":
        fn, schema = (sum_per_key, STAGE1_SCHEMA) if first else (count_rows, STAGE2_SCHEMA)
        return grouped.applyInPandasWithState(fn, schema, "s LONG", "append", GroupStateTimeout.NoTimeout)
    processor, schema = (SumPerKey(), STAGE1_SCHEMA) if first else (CountRows(), STAGE2_SCHEMA)
    return grouped.transformWithStateInPandas(processor, schema, "Append", "None")


def probe(spark, directory: Path, first: str, second: str) -> str:
    source = spark.readStream.schema("k STRING, v LONG").option("maxFilesPerTrigger", 1).parquet(str(directory / "in"))
    seen: list[int] = []
    try:
        chained = stage(stage(source, first, "k", True), second, "g", False)
        checkpoint = tempfile.mkdtemp(dir=directory)
        query = (
            chained.writeStream.foreachBatch(lambda frame, _: seen.extend(r.rows_seen for r in frame.collect()))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
    except Exception as error:  # the answer we are after
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    deadline = time.monotonic() + 120
    while len(seen) < 3 and time.monotonic() < deadline and query.exception() is None:
        time.sleep(0.2)
    failure = query.exception()
    query.stop()
    return f"fails: {failure}" if failure else f"runs; stage 2 saw {seen} rows after each batch (2 per batch)"


def main() -> None:
    spark = local_session("chained-stateful-probe", cores=2, shuffle_partitions=2)
    directory = Path(tempfile.mkdtemp())
    (directory / "in").mkdir()
    for i in range(3):
        pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]}).to_parquet(directory / "in" / f"part-{i}.parquet")
    table = Table(title="chaining Python stateful operators in one streaming query")
    for column in ("stage 1", "stage 2", "result"):
        table.add_column(column)
    kinds = ("applyInPandasWithState", "transformWithStateInPandas")
    for first, second in ((kinds[0], kinds[0]), (kinds[0], kinds[1]), (kinds[1], kinds[1])):
        table.add_row(first, second, probe(spark, directory, first, second))
    Console(width=160).print(table)
    spark.stop()


if __name__ == "__main__":
    main()
