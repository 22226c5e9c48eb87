"""The control source: a Python streaming data source that ticks the query and carries our time.

Each offset ``seq`` is one entry of the :class:`~floodmark.spark.control_log.ControlLog`.
A batch that reads offsets ``(start, end]`` gets, for every bucket ``0..B-1``,
one control row with entry ``end``'s watermark and processing time. Unioned
with the user's input and grouped by bucket, this makes every bucket's window
operator run every batch (so windows fire with no new data: seed 000's lone
last window) and makes a replayed batch see the same values (the log is
immutable, the offsets are in Spark's offset log).

The driver writes entry N+1 at the end of batch N, so there is always a new
offset at the next trigger: the query keeps ticking at its trigger interval
even when the real input is idle.

Runs outside the user's interpreter: ``latestOffset``/``partitions`` in a
process of the JVM's, ``read`` on executors. The only shared state is the log
directory given as the ``path`` option.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from floodmark.spark.control_log import ControlLog

CONTROL_SCHEMA = "fm_bucket INT, fm_seq LONG, fm_ctl_watermark LONG, fm_ctl_ptime LONG, fm_end_of_input BOOLEAN"


class _Entry(InputPartition):
    def __init__(self, seq: int) -> None:
        self.seq = seq


class ControlStreamReader(DataSourceStreamReader):
    def __init__(self, path: str, buckets: int) -> None:
        self.log = ControlLog(path)
        self.buckets = buckets

    def initialOffset(self) -> dict:
        return {"seq": -1}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        latest = self.log.latest_seq()
        if latest is None:
            return start if start is not None else {"seq": -1}
        return {"seq": latest}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if end["seq"] <= start["seq"]:
            return []
        return [_Entry(end["seq"])]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, _Entry)
        entry = self.log.read(partition.seq)
        if entry is None:
            raise RuntimeError(f"floodmark control entry {partition.seq} is missing from {self.log.directory}")
        for bucket in range(self.buckets):
            yield (bucket, entry.seq, entry.watermark, entry.processing_time, entry.end_of_input)

    def commit(self, end: dict) -> None:
        # Entries of committed batches are no longer needed for replays; keep a few for inspection.
        self.log.prune(keep_from=end["seq"] - 100)


class ControlSource(DataSource):
    """``spark.readStream.format("floodmark_control").option("path", dir).option("buckets", B)``."""

    @classmethod
    def name(cls) -> str:
        return "floodmark_control"

    def schema(self) -> str:
        return CONTROL_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        path = self.options.get("path")
        if not path:
            raise ValueError("the floodmark control source needs the 'path' option")
        return ControlStreamReader(path, int(self.options.get("buckets", "1")))
