"""Files as a stream in an order the user chooses, a few per micro-batch: how history is replayed.

::

    events = read_files_in_order(spark, "history/", order="path", files_per_batch=2)
    EventTimeAggregation(events, event_time="ts", key_by="device", spec=spec, time=time).run_to_completion(...)

Spark's file stream takes new files in modification-time order. History copied, restored from a backup or
written by several processes has modification times that say nothing about event time, and a replay that reads
last week's files before last year's sends last year's records to the late output. Here the order is the
files' paths (``order="path"``: ``date=2026-01-01/`` folders and time-stamped names in time order), their file
names (``"name"``, then the path: ``gateway=g1/0001.jsonl`` and ``gateway=g2/0001.jsonl`` interleave) or their
modification times (``"modified"``, Spark's own order), fixed when the stream is defined.

Folders named ``key=value`` are partition columns (Spark's partition discovery, with Spark's inferred types).
JSON lines keep each line's text for its dead letter (as :func:`~floodmark.spark.read_json_lines`); Parquet
files are read with pyarrow. The files are read in Python on the executors, one file per task.

Offsets are ``{"files": n, "list": digest}``: the first ``n`` files of the list have been read (``digest`` names the
list: :func:`list_digest`). A restart from a checkpoint resumes with file ``n`` of the list the stream was defined
with; files added or removed before the restart shift that list (define the stream over the same files).

What a split has left to read (:class:`FilesBacklog`, the backlog that keeps it from going idle) is known when the
split is a folder column (``gateway=g1/``): its files after the batch's.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from floodmark.protocol.files import FileOrder, detect_format, list_files, partition_values
from floodmark.spark.sources.json_lines import records_of_lines

SOURCE_NAME = "floodmark_ordered_files"
FILES_OPTION = "floodmark.files"
"""The source's option holding its list of files (JSON), by which the driver finds the source in a plan."""
BASE_OPTION = "floodmark.files.base"
"""The source's option holding the folder its partition columns are relative to."""


def read_files_in_order(
    spark: SparkSession,
    path: str | Path,
    file_format: str | None = None,
    order: FileOrder = "path",
    files_per_batch: int = 1,
    schema: StructType | str | None = None,
) -> DataFrame:
    """A streaming DataFrame of the files under ``path`` (:func:`list_files`), ``files_per_batch`` files per
    micro-batch in ``order``, ending after the last file.

    Columns: the records' fields, then the partition folders' columns. JSON lines also have Spark's
    corrupt-record column and :data:`~floodmark.spark.plan.TEXT` (each line's text: the dead letter's record),
    as :func:`~floodmark.spark.read_json_lines` gives them.

    :arg file_format: ``"json"`` or ``"parquet"``; None: from the file names (:func:`detect_format`).
    :arg schema: the records' fields (partition columns may be named too, to fix their types); None: inferred
        by Spark from every file (a batch read), as ``spark.read`` infers it.
    :raises FileNotFoundError, ValueError: as :func:`list_files`.
    """
    if files_per_batch < 1:
        raise ValueError(f"files_per_batch must be at least 1, got {files_per_batch}")
    root = Path(path).resolve()
    file_format = file_format or detect_format(root)
    files = list_files(root, file_format, order)
    base = root if root.is_dir() else root.parent
    reader = spark.read.option("basePath", str(base))
    inferred = (
        (reader.schema(schema) if schema is not None else reader)
        .format(file_format)
        .load([str(f) for f in files])
        .schema
    )
    folders = [c for c in dict.fromkeys(k for f in files for k in partition_values(base, f)) if c in inferred.names]
    data_fields = [f for f in inferred.fields if f.name not in folders]
    folder_fields = [inferred[c] for c in folders]
    records = [StructField("value", StringType())] if file_format == "json" else data_fields
    streamed = StructType([*records, *folder_fields])
    spark.dataSource.register(OrderedFilesSource)
    stream = (
        spark.readStream.format(SOURCE_NAME)
        .schema(streamed)
        .option(FILES_OPTION, json.dumps([str(f) for f in files]))
        .option(BASE_OPTION, str(base))
        .option("format", file_format)
        .option("files_per_batch", str(files_per_batch))
        .load()
    )
    if file_format == "json":
        return records_of_lines(stream, StructType(data_fields), folders, "read_files_in_order")
    return stream


def list_digest(files: Sequence[str]) -> str:
    """What names a list of files in the stream's offsets (16 hex digits of the SHA-1 of its JSON)."""
    return hashlib.sha1(json.dumps(list(files)).encode()).hexdigest()[:16]


class FilesBacklog:
    """What each split of a stream over ``files`` under ``base`` has left to read after a batch, when ``split`` is a
    folder column of every file (``split_of`` is None otherwise)."""

    def __init__(self, files: Sequence[str], base: str, split: str) -> None:
        self.digest = list_digest(files)
        values = [partition_values(Path(base), Path(f)).get(split, _NOT_A_FOLDER) for f in files]
        self.split_of = None if _NOT_A_FOLDER in values else [str(v) for v in values]

    def unread(self, offsets: Sequence[object]) -> dict[str, int] | None:
        """``{split: files not read}`` after the batch whose offsets are ``offsets`` (each source's, as Spark
        logged them), every split among the files included (0: caught up); None when it is not known."""
        read = next((o["files"] for o in offsets if isinstance(o, dict) and o.get("list") == self.digest), None)
        if read is None or self.split_of is None:
            return None
        unread = Counter(self.split_of[int(read) :])
        return {split: unread.get(split, 0) for split in dict.fromkeys(self.split_of)}


_NOT_A_FOLDER = object()


class FilePartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class OrderedFilesReader(DataSourceStreamReader):
    """Offsets ``{"files": n}`` over a fixed list of files (the module docstring)."""

    def __init__(self, files: Sequence[str], base: str, file_format: str, per_batch: int, schema: StructType):
        self.files = list(files)
        self.base = Path(base)
        self.file_format = file_format
        self.per_batch = per_batch
        self.schema = schema

    def initialOffset(self) -> dict:
        return {"files": 0, "list": list_digest(self.files)}

    def latestOffset(self, start: dict, limit: object) -> dict:
        return {"files": min(int(start["files"]) + self.per_batch, len(self.files)), "list": list_digest(self.files)}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [FilePartition(f) for f in self.files[int(start["files"]) : int(end["files"])]]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        target = to_arrow_schema(self.schema)
        folders = partition_values(self.base, Path(partition.path))
        folder_names = [n for n in target.names if n in folders]
        data = pa.schema([f for f in target if f.name not in folder_names])
        for batch in self._batches(partition.path, data):
            columns = {name: batch.column(name) for name in data.names}
            for name in folder_names:
                text = pa.array([folders[name]] * batch.num_rows, pa.string())
                columns[name] = text.cast(target.field(name).type, safe=False)
            yield pa.RecordBatch.from_arrays([columns[n] for n in target.names], schema=target)

    def _batches(self, path: str, data: pa.Schema) -> Iterator[pa.RecordBatch]:
        if self.file_format == "json":
            text = Path(path).read_bytes().decode("utf-8", errors="replace")
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            lines = [line.removesuffix("\r") for line in lines]
            for start in range(0, max(len(lines), 1), 65_536):
                chunk = lines[start : start + 65_536]
                if chunk:
                    yield pa.record_batch([pa.array(chunk, pa.string())], schema=data)
            return
        parquet = pq.ParquetFile(path)
        present = [n for n in data.names if n in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=65_536, columns=present):
            columns = [
                batch.column(n).cast(data.field(n).type, safe=False)
                if n in present
                else pa.nulls(batch.num_rows, data.field(n).type)
                for n in data.names
            ]
            yield pa.RecordBatch.from_arrays(columns, schema=data)

    def commit(self, end: dict) -> None:
        """Nothing to release: the files stay where they are."""


class OrderedFilesSource(DataSource):
    """``spark.readStream.format("floodmark_ordered_files")``: see :func:`read_files_in_order`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        raise ValueError("floodmark_ordered_files needs a schema: use read_files_in_order")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OrderedFilesReader(
            json.loads(self.options[FILES_OPTION]),
            self.options[BASE_OPTION],
            self.options["format"],
            int(self.options["files_per_batch"]),
            schema,
        )
