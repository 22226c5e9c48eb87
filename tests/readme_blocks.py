"""The README's Python blocks, and how the tests run them: each in a fresh interpreter (so that no earlier import
helps), in a working directory that holds the input the block names, with a few lines appended (the "check")
that print what the block wrote as one JSON line."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
MINUTE = 60_000


def readme_blocks() -> dict[str, str]:
    """Each ```python block of the README under the heading (``## ...``) it follows; one block per heading."""
    blocks: dict[str, str] = {}
    heading = ""
    for match in re.finditer(r"^## ([^\n]+)$|^```python\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL):
        if match.group(1):
            heading = match.group(1).strip()
        else:
            assert heading not in blocks, f"two python blocks under {heading!r}: give each its own heading"
            blocks[heading] = match.group(2)
    return blocks


BLOCKS = readme_blocks()

KAFKA_CONTEXT = """
from datetime import timedelta
from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, local_session

spark = local_session()
spark.sql("CREATE DATABASE IF NOT EXISTS analytics")
spec = WindowSpec(windows.Tumbling(timedelta(minutes=1)), {"count": aggregates.count()})
strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=50))
"""
"""What the README's Kafka block takes from the blocks above it ("spec ... and strategy ... as above"), and the
database its table names."""


def page_blocks(page: str) -> list[str]:
    """The ```python blocks of one page of the documentation site (``docs/<page>``), in order."""
    text = (README.parent / "docs" / page).read_text()
    return [m.group(1) for m in re.finditer(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)]


def doc_blocks() -> dict[str, str]:
    """Every ```python block of the documentation site (``docs/``), by ``<page>:<n>``."""
    blocks: dict[str, str] = {}
    for page in sorted((README.parent / "docs").rglob("*.md")):
        pattern = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
        for n, match in enumerate(pattern.finditer(page.read_text())):
            blocks[f"{page.relative_to(README.parent).as_posix()}:{n}"] = match.group(1)
    return blocks


def run_block(code: str, cwd: Path, timeout_s: float = 600, python: str = sys.executable) -> str:
    """``code`` in a fresh interpreter (``python``) in ``cwd``; its stdout's last line (the check's JSON)."""
    result = subprocess.run([python, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
    return result.stdout.strip().splitlines()[-1]


def clicks(splits: int = 4, minutes: int = 5) -> list[dict]:
    """In-order clickstream records over ``minutes`` minutes, one every 2 s per split."""
    rows = []
    for second in range(0, minutes * 60, 2):
        for split in range(splits):
            ts = second * 1000 + split * 100
            rows.append(
                {
                    "ts": ts,
                    "channel": "ab"[second % 2 == 0],
                    "behavior": ("CLICK", "VIEW")[split % 2],
                    "partition": split,
                }
            )
    return rows


def window_counts(rows: list[dict], keys: tuple[str, ...]) -> dict[str, int]:
    return dict(Counter("|".join([*(str(r[k]) for k in keys), str(r["ts"] // MINUTE * MINUTE)]) for r in rows))


CHECK_PANES = """
query.finish_when_input_exhausted(timeout_s=300)
import json
panes = spark.read.parquet("{panes}").collect()
print(json.dumps({{"|".join([*(str(r[k]) for k in {keys!r}), str(r.window_start)]): r["{value}"] for r in panes}}))
"""
