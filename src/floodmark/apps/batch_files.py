"""A simulated run's records as files a streaming query reads one batch at a time."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from floodmark.simulator.games import batch_count


def write_batch_files(
    records: Mapping[str, pd.DataFrame], directory: Path, columns: Mapping[str, Sequence[str]]
) -> int:
    """Each source's records (a ``batch`` column numbers them) as one Parquet file per batch under
    ``directory/<source>/``, of the source's ``columns``; empty batches included, so every source has the same
    batches for a reader of one file per trigger (``maxFilesPerTrigger=1``). Returns the number of batches."""
    count = batch_count(records)
    base = time.time() - 10 * count  # increasing modification times: the file source reads files in that order
    for name, frame in records.items():
        folder = directory / name
        folder.mkdir(parents=True, exist_ok=True)
        for b in range(count):
            path = folder / f"part-{b:05d}.parquet"
            frame[frame["batch"] == b][list(columns[name])].reset_index(drop=True).to_parquet(path, index=False)
            os.utime(path, (base + b, base + b))
    return count
