"""Helpers shared by the Spark tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa

from floodmark.spark import pane_blocks


def write_batches(directory: Path, batches: list[pd.DataFrame]) -> None:
    """One parquet file per batch, with increasing modification times (the file source's order)."""
    directory.mkdir(parents=True, exist_ok=True)
    base = time.time() - 1_000
    for i, frame in enumerate(batches):
        path = directory / f"part-{i:05d}.parquet"
        frame.to_parquet(path, index=False)
        os.utime(path, (base + i, base + i))


def read_output(spark, path: Path) -> pd.DataFrame:
    if not path.exists() or not any(path.iterdir()):
        return pd.DataFrame()
    return spark.read.parquet(str(path)).toPandas()


def explode_pane_blocks(block_rows: pa.Table | pa.RecordBatch, pane_columns: list[str]) -> pa.Table:
    """PANE block rows -> one row per pane, as the sink's ``pane_blocks.unpack`` does in the JVM, restated in
    Arrow for tests without a JVM: pane i takes element i of each array, or the array's only element."""
    counts = block_rows.column(pane_blocks.COUNT).to_pylist()
    columns = {}
    for name in pane_columns:
        arrays = block_rows.column(pane_blocks.PREFIX + name)
        values: list = []
        for array, count in zip(arrays.to_pylist(), counts, strict=True):
            assert len(array) in (1, count), f"{name}: {len(array)} values for {count} panes"
            values.extend(array * count if len(array) == 1 else array)
        columns[name] = pa.array(values, type=arrays.type.value_type)
    return pa.table(columns)
