"""Helpers shared by the Spark tests."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd


def stamp_in_order(paths: list[Path]) -> None:
    """Give ``paths`` modification times one second apart, in their order: Spark's file source reads files by
    modification time (milliseconds), and files written within one millisecond come in listing order."""
    base = time.time() - 1_000
    for i, path in enumerate(paths):
        os.utime(path, (base + i, base + i))


def write_batches(directory: Path, batches: list[pd.DataFrame]) -> None:
    """One parquet file per batch, with increasing modification times (the file source's order)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"part-{i:05d}.parquet" for i in range(len(batches))]
    for path, frame in zip(paths, batches, strict=True):
        frame.to_parquet(path, index=False)
    stamp_in_order(paths)


def read_output(spark, path: Path) -> pd.DataFrame:
    if not path.exists() or not any(path.glob("batch_id=*")):  # a pane output's _floodmark.json alone: no rows
        return pd.DataFrame()
    return spark.read.parquet(str(path)).toPandas()


def recorded_hosts(checkpoint: Path) -> dict[str, str]:
    """Where the checkpoint's stages run, as it recorded when it was created (``{stage: "python" | "jvm"}``)."""
    from floodmark.driver.checkpoint_layout import HOSTS

    return json.loads((checkpoint / "floodmark" / HOSTS).read_text())["hosts"]
