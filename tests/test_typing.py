"""The code users copy type-checks against floodmark's annotations (``py.typed``): every ```python block of the
README and of the documentation site through mypy, each after a context that gives the names the docs' fragments
take from the text around them (``spark``, ``agg``, ``spec``...), typed as the docs say they are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from readme_blocks import BLOCKS, KAFKA_CONTEXT, doc_blocks

ROOT = Path(__file__).resolve().parents[1]

CONTEXT = """
from datetime import timedelta
from typing import Any
from pyspark.sql import SparkSession
from floodmark import WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.driver.reports import BatchReport
from floodmark.spark import (
    EventTimeAggregation, FileSink, FloodmarkQuery, KafkaSink, Outputs, Pipeline, SourceTime, TableSink, read_kafka,
    topic_partitions,
)

from pyspark.sql import DataFrame

spark: SparkSession
events: DataFrame
time: SourceTime
schema: str
spec: WindowSpec
strategy: WatermarkStrategy
agg: EventTimeAggregation
job: EventTimeAggregation
pipeline: Pipeline
query: FloodmarkQuery
def view(report: BatchReport) -> None: ...
def metrics(report: BatchReport) -> None: ...
"""


def test_the_readme_and_the_docs_type_check(tmp_path):
    kafka = "Kafka in, panes to any sink"
    sources = {f"readme_{n}": code for n, (heading, code) in enumerate(BLOCKS.items()) if heading != kafka}
    sources["readme_kafka"] = KAFKA_CONTEXT + BLOCKS[kafka]
    sources.update(
        {
            name.replace("/", "_").replace(":", "_").replace("-", "_").replace(".md", ""): CONTEXT + code
            for name, code in doc_blocks().items()
        }
    )
    for name, code in sources.items():
        (tmp_path / f"{name}.py").write_text(code)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--follow-imports=silent",
            "--python-version",
            "3.11",
            "--no-incremental",
            "--check-untyped-defs",
            *sorted(str(p) for p in tmp_path.glob("*.py")),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
