"""The map side: validate records and combine them before the shuffle (``mapInPandas``).

Runs on the executors, once per input partition and micro-batch, before the
rows are shuffled to their buckets. It

* rejects bad records (missing or unparsable timestamp, a timestamp more than
  ``max_future_skew`` ahead of the batch's processing time, a missing or
  non-numeric aggregate input): BAD_INPUT rows with the reason and the record
  as JSON, so nothing is dropped silently;
* counts each split's good records and their min and max timestamp
  (SPLIT_STATS rows, what the driver's watermark generators need);
* for specs of the columnar operator, aggregates the records whose windows
  are all still open into one PARTIAL row per (key, window), as native Spark
  does before its shuffle (:func:`floodmark.core.columnar.combine`); every other
  record (late, or any record of a general-operator spec) goes on as a RAW row.

The watermark and processing time are those of the batch's control entry,
which the stateful processor reads too (:mod:`floodmark.spark.batch_entry`),
so a replayed batch decides exactly as the original did.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from pyspark import TaskContext
from pyspark.sql.types import StructType

from floodmark.core.columnar import combine
from floodmark.core.records import RecordBatch
from floodmark.spark import plan as p
from floodmark.spark.batch_entry import CurrentBatchEntry
from floodmark.spark.rows import conform, keys_array, plain, records_json


class MapSideCombiner:
    """``mapInPandas`` function: input rows -> RAW, PARTIAL, BAD_INPUT and SPLIT_STATS rows.

    :arg plan: the runtime plan. :arg control_dir: the control log directory
        (readable from the executors, as for the stateful processor).
    :arg schema: the output schema (the input's columns plus ``plan.combiner_fields()``).
    """

    def __init__(self, plan: p.RuntimePlan, control_dir: str, schema: StructType) -> None:
        self.plan = plan
        self.current_entry = CurrentBatchEntry(control_dir)
        self.schema = schema
        self.user_columns = [f.name for f in schema.fields if f.name in plan.user_columns]

    def __call__(self, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        parts = [frame for frame in frames if len(frame)]
        if not parts:
            return
        data = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)
        entry = self.current_entry()
        yield self.process(data, entry.watermark, entry.processing_time, _partition_id())

    def process(self, data: pd.DataFrame, watermark: int, processing_time: int, partition: int = 0) -> pd.DataFrame:
        """One partition's rows -> the rows to shuffle (pure; unit-tested without Spark)."""
        for name in self.plan.integral_columns:
            if name in data and data[name].dtype.kind in "if":
                data[name] = data[name].astype("Int64")  # nulls later in the frame must not turn ids into floats
        good, bad_frame = self._validate(data, processing_time)
        out = [bad_frame, self._stats(data, good, partition)]
        raw = good
        if self.plan.combines and len(good):
            rows = data if len(good) == len(data) else data.iloc[good]
            partials, raw_in_good = combine(self.plan.spec, watermark, self._batch(rows))
            raw = good[raw_in_good]
            if len(partials):
                origin = good[partials.origin]
                frame = data.iloc[origin][[*self.plan.key_columns, p.BUCKET]].reset_index(drop=True)
                frame[p.ROW] = p.PARTIAL
                frame[p.WINDOW_START] = partials.starts
                frame[p.WINDOW_END] = partials.ends
                frame[p.COUNT] = partials.counts
                frame[p.HOLD] = partials.hold
                for name, column, _ in self.plan.accumulator_columns():
                    frame[column] = partials.accumulators[name]
                out.append(frame)
        if len(raw):
            frame = data.iloc[raw].reset_index(drop=True)
            frame[p.ROW] = p.RAW
            out.append(frame)
        return conform(out, self.schema, keep=self.user_columns)

    def _batch(self, rows: pd.DataFrame) -> RecordBatch:
        columns: dict[str | None, Any] = {None: np.arange(len(rows))}
        for name in self.plan.spec.aggregate.fields:
            if name is not None:
                columns[name] = pd.to_numeric(rows[name]).to_numpy(dtype=np.float64)
        keys = keys_array(rows, self.plan.key_columns)
        return RecordBatch(keys, rows[self.plan.ts_column].to_numpy(dtype=np.int64), columns)

    def _validate(self, data: pd.DataFrame, processing_time: int) -> tuple[np.ndarray, pd.DataFrame]:
        """Positions of usable rows, and BAD_INPUT rows for the others (never dropped silently)."""
        n = len(data)
        reasons = np.full(n, None, dtype=object)
        ts = data[self.plan.ts_column]
        missing = ts.isna().to_numpy()
        if missing.any():
            raw = data[p.TS_RAW] if p.TS_RAW in data else pd.Series([None] * n)
            for i in np.flatnonzero(missing):
                value = raw.iloc[i]
                reasons[i] = (
                    "missing timestamp" if value is None or pd.isna(value) else f"unparsable timestamp: {value!r}"
                )
        skew = self.plan.max_future_skew_ms
        if skew is not None:
            ahead = (~missing) & (ts.fillna(0).to_numpy(dtype=np.int64) > processing_time + skew)
            for i in np.flatnonzero(ahead & pd.isna(reasons)):
                reasons[i] = (
                    f"timestamp {int(ts.iloc[i])} is more than {skew} ms ahead of processing time {processing_time}"
                )
        for name in self.plan.numeric_fields:
            column = data[name]
            numeric = pd.to_numeric(column, errors="coerce")
            missing_value = column.isna().to_numpy()
            for i in np.flatnonzero(missing_value & pd.isna(reasons)):
                reasons[i] = f"field {name!r} is missing"
            not_numeric = (numeric.isna() & column.notna()).to_numpy()
            for i in np.flatnonzero(not_numeric & pd.isna(reasons)):
                reasons[i] = f"field {name!r} is not a number: {column.iloc[i]!r}"
        bad = ~pd.isna(reasons)
        if not bad.any():
            return np.arange(n), pd.DataFrame()
        positions = np.flatnonzero(bad)
        rows = data.iloc[positions]
        frame = rows[list(dict.fromkeys([*self.plan.key_columns, p.BUCKET, self.plan.ts_column]))]
        frame = frame.reset_index(drop=True)
        frame[p.ROW] = p.BAD_INPUT
        frame[p.REASON] = reasons[positions]
        frame[p.RECORD] = records_json(rows, self.user_columns, self.plan.integral_columns)
        return np.flatnonzero(~bad), frame

    def _stats(self, data: pd.DataFrame, good: np.ndarray, partition: int) -> pd.DataFrame:
        if len(good) == 0:
            return pd.DataFrame()
        ts = data[self.plan.ts_column].to_numpy()[good].astype(np.int64)
        column = self.plan.split_column
        if column is None:
            values = np.zeros(len(good), dtype=np.int64)
        else:
            values = data[column].to_numpy()
            values = values if len(good) == len(data) else values[good]
        frame = pd.DataFrame({"split": values, "ts": ts})
        stats = frame.groupby("split", sort=True, dropna=False)["ts"].agg(["count", "min", "max"]).reset_index()
        return pd.DataFrame(
            {
                p.ROW: p.SPLIT_STATS,
                # Labelled per distinct value, not per record; the driver merges equal labels.
                p.SPLIT: [_split_label(v) for v in stats["split"].tolist()],
                p.COUNT: stats["count"].astype(np.int64),
                p.MIN_TS: stats["min"].astype(np.int64),
                p.MAX_TS: stats["max"].astype(np.int64),
                # Statistics of one partition go to one bucket (any will do: the driver merges them).
                p.BUCKET: np.int32(partition % max(self.plan.buckets, 1)),
            }
        )


def _split_label(value: Any) -> str:
    """A split's name: ``str`` of its value (integral floats as integers), ``""`` for null."""
    value = plain(value, integral=True)
    return "" if value is None else str(value)


def _partition_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
