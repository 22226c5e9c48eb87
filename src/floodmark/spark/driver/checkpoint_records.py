"""What a query keeps in its checkpoint besides Spark's and the control log, read and written before it starts:
where the checkpoint and outputs may be, the control log and metrics file, the buckets' layout, the state format and
where each stage runs (the files' names: :mod:`floodmark.driver.checkpoint_layout`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from floodmark import __version__
from floodmark.driver import checkpoint_files, checkpoint_layout
from floodmark.driver.checkpoint_layout import floodmark_path
from floodmark.driver.control_log import ControlLog
from floodmark.spark import hadoop_files
from floodmark.spark.connect import connect_path_problem, is_connect
from floodmark.spark.outputs.sinks import Outputs
from floodmark.spark.stateful import bucket_layout, state_codec


def check_locations(checkpoint: str, outputs: Sequence[Outputs], spark: SparkSession) -> None:
    """Refuse, before anything is written, a checkpoint or file output that cannot be a directory, or under
    Spark Connect is not an absolute plain path (:func:`~floodmark.spark.connect.connect_path_problem`)
    (ValueError)."""
    checkpoint_files.require_directory(checkpoint, "the checkpoint")
    connect = is_connect(spark)
    problem = connect_path_problem(checkpoint) if connect else None
    if problem is not None:
        raise ValueError(f"the checkpoint {checkpoint} cannot be used: {problem}")
    for each in outputs:
        each.check_before_start(connect)


def control_log(checkpoint: str, spark: SparkSession) -> tuple[ControlLog, Path | None]:
    """The query's control log under ``checkpoint`` and, for a local checkpoint, its ``metrics.jsonl``."""
    files = hadoop_files.files_for(checkpoint, spark)
    return ControlLog(floodmark_path(checkpoint, checkpoint_layout.CONTROL), files), metrics_file(checkpoint)


def metrics_file(checkpoint: str) -> Path | None:
    """The file the query at ``checkpoint`` appends its batch reports to, None for a checkpoint that is a URI (a
    local file to append to; object stores cannot append: listeners and reports have it all)."""
    return (
        None if checkpoint_files.has_scheme(checkpoint) else Path(floodmark_path(checkpoint, checkpoint_layout.METRICS))
    )


def shuffle_partitions(spark: SparkSession) -> int:
    """``spark.sql.shuffle.partitions`` of the session (what a new checkpoint's stateful operators get)."""
    return int(spark.conf.get("spark.sql.shuffle.partitions") or "200")


def fixed_bucket_layout(
    checkpoint: str, spark: SparkSession, log: ControlLog, requested: int | None, default: int, stages: Sequence[str]
) -> bucket_layout.BucketLayout:
    """The bucket layout of the query at ``checkpoint``: new, or as stored (:func:`bucket_layout.fixed`)."""
    return bucket_layout.fixed(
        log.files,
        checkpoint,
        requested,
        default,
        shuffle_partitions(spark),
        stages,
        existing=log.latest_seq() is not None,
    )


def check_state_format(files: checkpoint_files.CheckpointFiles, checkpoint: str, existing: bool) -> int:
    """The state format the query at ``checkpoint`` stores its buckets in, recorded there; refuses a checkpoint
    that a floodmark of a newer state format has written to. Call before the query starts.

    A checkpoint keeps the format it was created with (it decides Spark's operators,
    :mod:`floodmark.spark.stateful.bucket_state`): :data:`~floodmark.spark.stateful.state_codec.FORMAT` for a new
    checkpoint, format 1
    for one created with format 0 or 1 (``existing`` and no record: written before formats were recorded).

    :raises state_codec.StateFormatError: the checkpoint records a format this floodmark cannot read.
    """
    folder = floodmark_path(checkpoint)
    prefix, suffix = checkpoint_layout.STATE_FORMAT.split("{}")
    recorded = sorted(
        int(number)
        for name in files.list_names(folder)
        if name.startswith(prefix)
        and name.endswith(suffix)
        and (number := name.removeprefix(prefix).removesuffix(suffix)).isdigit()
    )
    if recorded:
        newest = recorded[-1]
        text = files.read_text(checkpoint_files.join(folder, checkpoint_layout.STATE_FORMAT.format(newest))) or "{}"
        state_codec.check_readable(newest, f"the checkpoint {checkpoint}", json.loads(text).get("floodmark"))
    created = recorded[0] if recorded else 1 if existing else state_codec.FORMAT
    writing = state_codec.FORMAT if created >= state_codec.PARTS_FORMAT else 1
    record = {"state_format": writing, "floodmark": __version__}
    files.write_once(checkpoint_files.join(folder, checkpoint_layout.STATE_FORMAT.format(writing)), json.dumps(record))
    return writing


def stage_hosts(
    files: checkpoint_files.CheckpointFiles,
    checkpoint: str,
    existing: bool,
    choose: Callable[[], dict[str, str]],
) -> dict[str, str]:
    """Where each stage of the query at ``checkpoint`` runs: as recorded there, else as ``choose`` decides for a new
    checkpoint (then recorded); every stage on the Python host in a checkpoint created before hosts were recorded
    (``existing`` and no record)."""
    path = floodmark_path(checkpoint, checkpoint_layout.HOSTS)
    text = files.read_text(path)
    if text is not None:
        return dict(json.loads(text)["hosts"])
    if existing:
        return {}
    hosts = choose()
    files.write_once(path, json.dumps({"hosts": hosts}))
    return dict(json.loads(files.read_text(path) or "{}").get("hosts", hosts))
