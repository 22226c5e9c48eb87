"""``floodmark replay``: run last year's history through the same pipeline (seed 001), as a bounded job.

The input is JSON-lines or Parquet files; they are read as a file stream (a few
files per micro-batch, in name order) through exactly the streaming pipeline,
and the run ends like a Flink bounded job: once every file is read the
watermark goes to MAX and every window fires. With every record on time the
panes equal those of the streaming run over the same records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from floodmark.apps.config import PipelineConfig
from floodmark.apps.outputs import read_output, write_text_lines
from floodmark.driver.checkpoint_files import require_directory
from floodmark.driver.reconciliation import Reconciliation

FORMATS = ("json", "parquet")


@dataclass
class ReplayResult:
    output: Path
    panes: pd.DataFrame
    late: pd.DataFrame
    dead_letter: pd.DataFrame
    records: int
    batches: int
    seconds: float
    reconciliation: Reconciliation


def input_files(path: Path, file_format: str) -> list[Path]:
    """The files a replay reads: ``path`` itself or its ``*.jsonl``/``*.json``/``*.parquet`` files, sorted."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"input {path} does not exist")
    suffixes = (".jsonl", ".json") if file_format == "json" else (".parquet",)
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in suffixes)
    if not files:
        raise FileNotFoundError(f"no {'/'.join(suffixes)} files in {path}")
    return files


def detect_format(path: Path) -> str:
    """``json`` or ``parquet`` from the file name(s) under ``path``."""
    if not path.exists():
        raise FileNotFoundError(f"input {path} does not exist")
    candidates = [path] if path.is_file() else sorted(path.iterdir()) if path.is_dir() else []
    for candidate in candidates:
        if candidate.suffix == ".parquet":
            return "parquet"
        if candidate.suffix in (".jsonl", ".json"):
            return "json"
    raise ValueError(f"cannot tell the format of {path}: give --format json or --format parquet")


def run_replay(
    input_path: Path,
    pipeline: PipelineConfig,
    output: Path,
    file_format: str | None = None,
    files_per_batch: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 24 * 3600.0,
) -> ReplayResult:
    """Replay ``input_path`` through ``pipeline`` into ``output``; ``on_progress(records_done, records_total)``."""
    from floodmark.spark import local_session, read_json_lines

    file_format = file_format or detect_format(input_path)
    if file_format not in FORMATS:
        raise ValueError(f"unknown format {file_format!r}: use one of {FORMATS}")
    files = input_files(input_path, file_format)
    require_directory(output, "the output directory")
    output.mkdir(parents=True, exist_ok=True)
    (output / "pipeline.json").write_text(pipeline.model_dump_json(indent=2))
    started = time.monotonic()
    spark = local_session("floodmark-replay", cores=2, shuffle_partitions=2)
    static = spark.read.format(file_format).load([str(f) for f in files])
    total = static.count()
    missing = [
        c
        for c in [pipeline.event_time, *pipeline.key_by, *([pipeline.split] if pipeline.split else [])]
        if c not in static.columns
    ]
    if missing:
        raise ValueError(f"the input has no column(s) {missing}; it has {static.columns}")
    directory = files[0].parent if input_path.is_dir() else input_path.parent
    glob = None if input_path.is_dir() else input_path.name
    options = {"maxFilesPerTrigger": str(files_per_batch), **({"pathGlobFilter": glob} if glob else {})}
    if file_format == "json":
        # Each line keeps its own text, the record of its dead letter whatever makes it bad (a corrupt-record
        # column in the inferred schema, when some line is broken, is the one read_json_lines fills).
        stream = read_json_lines(spark, str(directory), static.schema, options)
    else:
        stream = spark.readStream.schema(static.schema).options(**options).parquet(str(directory))
    aggregation = pipeline.aggregation(stream)
    done = [0]

    def progress(report) -> None:
        done[0] += report.records + report.bad
        if on_progress is not None:
            on_progress(min(done[0], total), total)

    handle = aggregation.run_to_completion(
        str(output / "checkpoint"),
        str(output),
        trigger_interval="0 seconds",
        timeout_s=timeout_s,
        listeners=[progress],
    )
    panes = read_output(output, "panes")
    write_text_lines(panes, pipeline.key_by, list(pipeline.aggregations), output / "results.txt")
    return ReplayResult(
        output=output,
        panes=panes,
        late=read_output(output, "late"),
        dead_letter=read_output(output, "dead_letter"),
        records=total,
        batches=len(handle.reports),
        seconds=time.monotonic() - started,
        reconciliation=handle.reconciliation,
    )
