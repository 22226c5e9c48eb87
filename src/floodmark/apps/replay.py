"""``floodmark replay``: run last year's history through the same pipeline (the clickstream job's), as a bounded job.

The input is JSON-lines or Parquet files, in a folder and its partition folders (``key=value``: columns); they
are read as a stream (a few files per micro-batch, in path order whatever their modification times, or the
order asked for: :mod:`floodmark.protocol.files`) through exactly the streaming pipeline, and the run ends like
a Flink bounded job: once every file is read the watermark goes to MAX and every window fires. With every record
on time the panes equal those of the streaming run over the same records.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from floodmark.apps.config import PipelineConfig
from floodmark.apps.outputs import read_output, write_text_lines
from floodmark.driver.checkpoint_files import require_directory
from floodmark.driver.definition import JobDefinition
from floodmark.driver.reconciliation import Reconciliation
from floodmark.protocol.files import FORMATS, FileOrder, detect_format, list_files, partition_values


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
    pipeline: PipelineConfig | JobDefinition,
    output: Path,
    file_format: str | None = None,
    files_per_batch: int = 1,
    order: FileOrder = "path",
    on_progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 24 * 3600.0,
) -> ReplayResult:
    """Replay ``input_path`` through ``pipeline`` into ``output``, ``files_per_batch`` files per batch in
    ``order`` (:func:`floodmark.spark.read_files_in_order`); ``on_progress(records_done, records_total)``.

    :arg pipeline: a pipeline file's one aggregation, or a job's definition read from its checkpoint
        (``--like``): a job of one source, whose input the files are; each of its stages writes under
        ``output/<stage>`` (directly under ``output`` for a job of one stage). The result's panes, late records and
        dead letters are the last stage's.
    """
    from floodmark.spark import Pipeline, local_session, read_files_in_order

    file_format = file_format or detect_format(input_path)
    if file_format not in FORMATS:
        raise ValueError(f"unknown format {file_format!r}: use one of {FORMATS}")
    if isinstance(pipeline, JobDefinition) and len(pipeline.sources) != 1:
        raise ValueError(
            f"the job reads {len(pipeline.sources)} sources ({', '.join(pipeline.sources)}): replay --like runs jobs "
            "of one source, whose input the files are"
        )
    files = [str(f) for f in list_files(input_path, file_format, order)]
    require_directory(output, "the output directory")
    output.mkdir(parents=True, exist_ok=True)
    if isinstance(pipeline, PipelineConfig):
        (output / "pipeline.json").write_text(pipeline.model_dump_json(indent=2))
    started = time.monotonic()
    spark = local_session("floodmark-replay", cores=2, shuffle_partitions=2)
    stream = read_files_in_order(spark, input_path, file_format, order, files_per_batch)
    if isinstance(pipeline, PipelineConfig):
        needed = [pipeline.event_time, *pipeline.key_by, *([pipeline.split] if pipeline.split else [])]
        missing = [c for c in needed if c not in stream.columns]
        if missing:
            raise ValueError(f"the input has no column(s) {missing}; it has {stream.columns}")
    # Rows, as the stream counts them: Parquet rows, or JSON lines that are not blank.
    total = (
        spark.read.text(files).where("value NOT RLIKE '^\\\\s*$'").count()
        if file_format == "json"
        else spark.read.parquet(*files).count()
    )
    done = [0]

    def progress(report) -> None:
        done[0] += report.rows_in
        if on_progress is not None:
            on_progress(min(done[0], total), total)

    checkpoint = str(output / "checkpoint")
    if isinstance(pipeline, PipelineConfig):
        # History holds every split from its start: one a folder names holds the watermark back before its first
        # file is read (else files read in path order make a later folder's records late).
        known = folder_splits(input_path, files, pipeline.split)
        handle = pipeline.aggregation(stream, known_splits=known).run_to_completion(
            checkpoint, str(output), trigger_interval="0 seconds", timeout_s=timeout_s, listeners=[progress]
        )
        last = output
    else:
        job = Pipeline.from_definition(pipeline, {next(iter(pipeline.sources)): stream})
        roots = {name: output if len(pipeline.stages) == 1 else output / name for name in pipeline.stages}
        handle = job.run_to_completion(
            checkpoint,
            {name: str(root) for name, root in roots.items()},
            trigger_interval="0 seconds",
            timeout_s=timeout_s,
            listeners=[progress],
        )
        last = roots[list(handle.stage_outputs)[-1]]
    panes = read_output(last, "panes")
    if isinstance(pipeline, PipelineConfig):
        write_text_lines(panes, pipeline.key_by, list(pipeline.aggregations), output / "results.txt")
    return ReplayResult(
        output=output,
        panes=panes,
        late=read_output(last, "late"),
        dead_letter=read_output(last, "dead_letter"),
        records=total,
        batches=handle.batches_completed,
        seconds=time.monotonic() - started,
        reconciliation=handle.reconciliation,
    )


def folder_splits(root: Path, files: list[str], split: str | None) -> list[str]:
    """The split labels the ``split=value`` folders of ``files`` under ``root`` name (as the combiner labels the
    values Spark reads from them: an integral number without its zeros or ``.0``), in path order; [] when the split
    is not a folder's."""
    labels: dict[str, None] = {}
    for file in files:
        values = partition_values(Path(root), Path(file))
        if split is not None and split in values:
            labels[_label(values[split])] = None
    return list(labels)


def _label(text: str | None) -> str:
    """The combiner's label of the value Spark reads from a folder's text (a numeric text is read as a number)."""
    from floodmark.spark.map_side.combiner import split_label

    try:
        number = float(text) if text is not None else None
    except ValueError:
        return split_label(text)
    return split_label(number if number is not None and math.isfinite(number) else text)
