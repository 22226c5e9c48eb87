"""The README's Python blocks run as written, each in a fresh interpreter (so that no earlier import helps).

A block runs in a temporary working directory holding the input it names; a few lines appended after it
(the "check") wait for its query and compare what it wrote with what the input says it must hold. Only the
Kafka block's placeholders (the broker address, a bucket on S3) are replaced: by the test broker and a local
folder.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

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


def run_block(code: str, cwd: Path, timeout_s: float = 600) -> str:
    """``code`` in a fresh interpreter in ``cwd``; its stdout's last line (the check's JSON)."""
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
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


def test_the_harness_example():
    block = BLOCKS["Example: test a window's behaviour without Spark"]
    check = """
import json
print(json.dumps({"panes": [[p.timing.name, list(p.value)] for p in h.panes],
                  "late": [r.value for r in h.late]}))
"""
    out = json.loads(run_block(block + check, Path.cwd()))
    assert out == {"panes": [["EARLY", ["a", "b", "c"]], ["ON_TIME", ["d"]], ["LATE", ["e"]]], "late": ["f"]}


@pytest.mark.spark
def test_the_pipeline_in_20_lines(tmp_path):
    block = BLOCKS["The pipeline in 20 lines"]
    rows = clicks()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clicks.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = CHECK_PANES.format(panes="out/panes", keys=("channel", "behavior"), value="count")
    out = json.loads(run_block(block + check, tmp_path))
    assert out == window_counts(rows, ("channel", "behavior"))


@pytest.mark.spark
def test_several_stages_in_one_query(tmp_path):
    block = BLOCKS["Several stages in one query (seed 003)"]
    starts = range(0, 20 * MINUTE, 5 * MINUTE)
    for name in ("mobile", "console"):
        (tmp_path / name).mkdir()
        # Per user, a session every 5 minutes: 3 events 10 s apart.
        rows = [
            {"ts": start + i * 10_000, "user": user, "partition": 0}
            for start in starts
            for user in ("u1", "u2")
            for i in range(3)
        ]
        (tmp_path / name / "events.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = CHECK_PANES.format(panes="out/means/panes", keys=(), value="mean")
    out = json.loads(run_block(block + check, tmp_path))
    # A session spans its 20 s of events plus the 1-minute gap; with EARLIEST its pane's timestamp is its
    # first event, which puts it in the 2-minute window of its start.
    assert out == {str(start // (2 * MINUTE) * 2 * MINUTE): 80_000.0 for start in starts}


@pytest.mark.spark
def test_kafka_in_panes_to_any_sink(tmp_path, kafka_broker):
    block = BLOCKS["Kafka in, panes to any sink"]
    kafka_broker.create_topic("clicks", partitions=4)
    kafka_broker.create_topic("minute-counts", partitions=1)
    rows = clicks()
    for split in range(4):
        kafka_broker.produce("clicks", [json.dumps(r) for r in rows if r["partition"] == split], partition=split)
    servers = kafka_broker.bootstrap_servers
    code = block.replace("broker:9092", servers).replace("s3a://bucket/dead", "dead")
    assert code.count(servers) == 3, "the block's placeholders moved: update this test"
    # What the block's comment says comes from the blocks above it, and the database its table names.
    prelude = textwrap.dedent(
        """
        from datetime import timedelta
        from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
        from floodmark.spark import EventTimeAggregation, SourceTime, local_session

        spark = local_session()
        spark.sql("CREATE DATABASE IF NOT EXISTS analytics")
        spec = WindowSpec(windows.Tumbling(timedelta(minutes=1)), {"count": aggregates.count()})
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=50))
        """
    )
    check = "query.finish_when_input_exhausted(timeout_s=300)\nprint('{}')\n"
    run_block(prelude + code + check, tmp_path)
    lines = sorted(record.text() for record in kafka_broker.consume("minute-counts"))
    expected = sorted(
        f"{_minute(int(start))} {_minute(int(start) + MINUTE)} {key.replace('|', ' ')} {count}"
        for key_start, count in window_counts(rows, ("channel", "behavior")).items()
        for key, start in [key_start.rsplit("|", 1)]
    )
    assert lines == expected


def _minute(ms: int) -> str:
    """Seed 001's time format, ``yyyyMMddHHmmss`` in UTC."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y%m%d%H%M%S")
