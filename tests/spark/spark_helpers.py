"""Helpers shared by the Spark tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd


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
