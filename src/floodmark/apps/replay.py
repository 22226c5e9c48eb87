"""``floodmark replay``: run last year's history through the same pipeline (seed 001), as a bounded job.

The input is JSON-lines or Parquet files, in a folder and its partition folders (``key=value``: columns); they
are read as a stream (a few files per micro-batch, in path order whatever their modification times, or the
order asked for: :mod:`floodmark.protocol.files`) through exactly the streaming pipeline, and the run ends like
a Flink bounded job: once every file is read the watermark goes to MAX and every window fires. With every record
on time the panes equal those of the streaming run over the same records.
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
from floodmark.protocol.files import FORMATS, FileOrder, detect_format, list_files


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


def run_replay(
    input_path: Path,
    pipeline: PipelineConfig,
    output: Path,
    file_format: str | None = None,
    files_per_batch: int = 1,
    order: FileOrder = "path",
    on_progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 24 * 3600.0,
) -> ReplayResult:
    """Replay ``input_path`` through ``pipeline`` into ``output``, ``files_per_batch`` files per batch in
    ``order`` (:func:`floodmark.spark.read_files_in_order`); ``on_progress(records_done, records_total)``."""
    from floodmark.spark import local_session, read_files_in_order

    file_format = file_format or detect_format(input_path)
    if file_format not in FORMATS:
        raise ValueError(f"unknown format {file_format!r}: use one of {FORMATS}")
    files = [str(f) for f in list_files(input_path, file_format, order)]
    require_directory(output, "the output directory")
    output.mkdir(parents=True, exist_ok=True)
    (output / "pipeline.json").write_text(pipeline.model_dump_json(indent=2))
    started = time.monotonic()
    spark = local_session("floodmark-replay", cores=2, shuffle_partitions=2)
    stream = read_files_in_order(spark, input_path, file_format, order, files_per_batch)
    missing = [
        c
        for c in [pipeline.event_time, *pipeline.key_by, *([pipeline.split] if pipeline.split else [])]
        if c not in stream.columns
    ]
    if missing:
        raise ValueError(f"the input has no column(s) {missing}; it has {stream.columns}")
    # Rows, as the stream counts them: Parquet rows, or JSON lines that are not blank.
    total = (
        spark.read.text(files).where("value NOT RLIKE '^\\\\s*$'").count()
        if file_format == "json"
        else spark.read.parquet(*files).count()
    )
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
