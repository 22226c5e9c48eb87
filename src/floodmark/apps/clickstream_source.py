"""The clickstream simulator as a PySpark streaming source (Python data source API, PySpark 4.3).

Usage::

    spark.dataSource.register(ClickstreamSource)
    config = ClickstreamConfig.demo()
    events = (spark.readStream.format("floodmark_clickstream")
              .options(**config.as_options(), ticks_per_second="4").load())

or :func:`read_clickstream` (registers and loads). Schema: :data:`CLICKSTREAM_SCHEMA`.

Offsets are ticks, ``{"tick": n}``: a batch with offsets ``(start, end]`` reads ticks ``start+1 .. end``
(both inclusive); the initial offset is ``{"tick": -1}``, so the first batch starts at tick 0. There is one
input partition per split, so splits are read in parallel. ``read`` is a pure function of the config and
the partition (:func:`~floodmark.simulator.clickstream.generate_tick`): a batch replayed after a restart
reads exactly the same rows.

Pacing (time acceleration): ``latestOffset`` makes ticks available at ``ticks_per_second`` per wall second,
counted from the reader's construction and from the first offset it was asked about (the committed one
after a restart: offsets never go backwards); see
:func:`~floodmark.simulator.clickstream.paced_latest_tick`. After the last tick the offset stays put (a
bounded input). ``ticks_per_second=inf`` serves everything at once. Under ``Trigger.AvailableNow`` pacing
is off (Spark ends such a query at the first batch without new data) and the whole run is the target.
``max_records_per_batch`` (optional) caps a batch at whole ticks holding at most that many records (at
least one tick), which also splits an AvailableNow run into several batches deterministically.

Where things run: ``initialOffset``/``latestOffset``/``partitions``/``commit`` in a long-lived Python process
started by the JVM (one reader instance per query run), ``read`` in executor Python workers.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from floodmark.simulator.clickstream import (
    DEMO_TICKS_PER_SECOND,
    ClickstreamConfig,
    generate_tick,
    limit_end_tick,
    paced_latest_tick,
)

SOURCE_NAME = "floodmark_clickstream"
CLICKSTREAM_SCHEMA = "ts LONG, channel STRING, id LONG, behavior STRING, split INT"
ARROW_SCHEMA = pa.schema(
    [("ts", pa.int64()), ("channel", pa.string()), ("id", pa.int64()), ("behavior", pa.string()), ("split", pa.int32())]
)
#: Options of the source itself; every other option is a :class:`ClickstreamConfig` field.
SOURCE_OPTIONS = ("ticks_per_second", "max_records_per_batch")
CONFIG_OPTIONS = tuple(field.name for field in dataclasses.fields(ClickstreamConfig))
_ROWS_PER_ARROW_BATCH = 65_536


def parse_source_options(options: Mapping[str, str]) -> tuple[ClickstreamConfig, float, int | None]:
    """Split string options into (config, ticks_per_second, max_records_per_batch). ValueError names the option.

    ``ticks_per_second``: a float > 0 or ``inf``; default :data:`DEMO_TICKS_PER_SECOND`.
    ``max_records_per_batch``: an integer >= 1, or absent for no cap.
    """
    lowered = {str(key).lower(): value for key, value in options.items()}
    known = [*CONFIG_OPTIONS, *SOURCE_OPTIONS]
    for key in lowered:
        if key not in known:
            raise ValueError(f"unknown clickstream option {key!r}; known options: {', '.join(known)}")
    raw_rate = lowered.pop("ticks_per_second", None)
    raw_cap = lowered.pop("max_records_per_batch", None)
    ticks_per_second = DEMO_TICKS_PER_SECOND
    if raw_rate is not None:
        try:
            ticks_per_second = float(raw_rate)
        except ValueError:
            raise ValueError(f"clickstream option 'ticks_per_second' must be a number, got {raw_rate!r}") from None
        if math.isnan(ticks_per_second) or ticks_per_second <= 0:
            raise ValueError(f"clickstream option 'ticks_per_second' must be > 0 (or inf), got {raw_rate!r}")
    max_records: int | None = None
    if raw_cap is not None and str(raw_cap).strip().lower() not in ("", "none"):
        try:
            max_records = int(raw_cap)
        except ValueError:
            raise ValueError(
                f"clickstream option 'max_records_per_batch' must be an integer, got {raw_cap!r}"
            ) from None
        if max_records < 1:
            raise ValueError(f"clickstream option 'max_records_per_batch' must be >= 1, got {raw_cap!r}")
    return ClickstreamConfig.from_options(lowered), ticks_per_second, max_records


class TickRange(InputPartition):
    """One split's ticks ``start_tick+1 .. end_tick`` (inclusive)."""

    def __init__(self, split: int, start_tick: int, end_tick: int) -> None:
        super().__init__((split, start_tick, end_tick))
        self.split = split
        self.start_tick = start_tick
        self.end_tick = end_tick


class ClickstreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"tick": n}``; see the module docstring. ``clock`` returns wall seconds (monotonic)."""

    def __init__(
        self,
        config: ClickstreamConfig,
        ticks_per_second: float = DEMO_TICKS_PER_SECOND,
        max_records_per_batch: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.ticks_per_second = ticks_per_second
        self.max_records_per_batch = max_records_per_batch
        self.clock = clock
        self._began = clock()
        self._first_tick: int | None = None  # the first start offset seen: pacing counts from there
        self._available_now = False

    def initialOffset(self) -> dict:
        return {"tick": -1}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_records_per_batch is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_records_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def available_tick(self, start_tick: int) -> int:
        """The last tick readable now (>= ``start_tick``), before any read limit."""
        if self._first_tick is None:
            self._first_tick = start_tick
        if self._available_now:
            latest = self.config.ticks - 1
        else:
            elapsed = self.clock() - self._began
            latest = paced_latest_tick(self.config, self._first_tick, elapsed, self.ticks_per_second)
        return max(start_tick, latest)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_tick = int(start["tick"])
        end_tick = self.available_tick(start_tick)
        if isinstance(limit, ReadMaxRows):
            end_tick = limit_end_tick(self.config, start_tick, end_tick, limit.max_rows)
        return {"tick": end_tick}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        start_tick, end_tick = int(start["tick"]), int(end["tick"])
        if end_tick <= start_tick:
            return []
        return [TickRange(split, start_tick, end_tick) for split in range(self.config.splits)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TickRange)
        yield from read_tick_range(self.config, partition.split, partition.start_tick, partition.end_tick)

    def commit(self, end: dict) -> None:
        """Nothing to release: every tick can be regenerated."""


def read_tick_range(config: ClickstreamConfig, split: int, start_tick: int, end_tick: int) -> Iterator[pa.RecordBatch]:
    """Arrow batches (:data:`ARROW_SCHEMA`) of ``split``'s records for ticks ``start_tick+1 .. end_tick``, in tick
    order, about :data:`_ROWS_PER_ARROW_BATCH` rows each."""
    pending: list[pd.DataFrame] = []
    rows = 0
    for tick in range(start_tick + 1, end_tick + 1):
        frame = generate_tick(config, split, tick)
        if len(frame):
            pending.append(frame)
            rows += len(frame)
        if rows >= _ROWS_PER_ARROW_BATCH or (tick == end_tick and pending):
            yield pa.RecordBatch.from_pandas(
                pd.concat(pending, ignore_index=True), schema=ARROW_SCHEMA, preserve_index=False
            )
            pending, rows = [], 0


class ClickstreamSource(DataSource):
    """``spark.readStream.format("floodmark_clickstream").options(**config.as_options(), ticks_per_second=...)``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        # Spark asks for the schema at ``load()``: validating here reports a bad option there, not at query start.
        parse_source_options(dict(self.options))
        return CLICKSTREAM_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        config, ticks_per_second, max_records = parse_source_options(dict(self.options))
        return ClickstreamStreamReader(config, ticks_per_second, max_records)


def read_clickstream(
    spark: SparkSession,
    config: ClickstreamConfig,
    ticks_per_second: float = DEMO_TICKS_PER_SECOND,
    max_records_per_batch: int | None = None,
) -> DataFrame:
    """Register the source and return the streaming DataFrame of ``config`` (schema :data:`CLICKSTREAM_SCHEMA`)."""
    spark.dataSource.register(ClickstreamSource)
    options = {**config.as_options(), "ticks_per_second": str(ticks_per_second)}
    if max_records_per_batch is not None:
        options["max_records_per_batch"] = str(max_records_per_batch)
    return spark.readStream.format(SOURCE_NAME).options(**options).load()
