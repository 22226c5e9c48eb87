"""The stateful processor: one core :class:`WindowOperator` per bucket of keys, inside Spark.

Spark groups rows by ``__fm_bucket`` (``pmod(hash(keys), B)``) and calls
:meth:`WindowBucketProcessor.handleInputRows` once per bucket and batch with
the bucket's data rows and one control row (watermark, processing time, control
seq). The processor restores the bucket's operator from its RocksDB value state,
runs the core's pure ``step`` (processing time, then watermark, then records),
writes the new snapshot back and returns one frame of tagged rows:

* PANE - fired panes; LATE - records beyond allowed lateness or for a closed
  window, with window and lateness; BAD - records without a usable timestamp,
  too far in the future, or with a non-numeric aggregate input, with the reason;
* STATS - per split: count, min and max timestamp of the good records (what the
  driver's generators need); GAUGE - per bucket: control seq, output hold,
  oldest pending processing time, open windows.

No event-time logic lives here: it is all in :mod:`floodmark.core`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from floodmark.core.operator import Emitted
from floodmark.core.records import RecordBatch
from floodmark.core.step import restore_operator, step
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.spark import plan as p

STATE_SCHEMA = StructType([StructField("blob", BinaryType())])


def _dtype(spark_type: Any) -> Any:
    if isinstance(spark_type, LongType):
        return "Int64"
    if isinstance(spark_type, IntegerType):
        return "Int32"
    if isinstance(spark_type, DoubleType):
        return "float64"
    if isinstance(spark_type, BooleanType):
        return "boolean"
    return object


class WindowBucketProcessor(StatefulProcessor):
    """Hosts the core window operator for one bucket of keys (see the module docstring)."""

    def __init__(self, plan: p.RuntimePlan) -> None:
        self.plan = plan
        self.schema = plan.output_schema()

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("operator", STATE_SCHEMA)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
        bucket = int(key[0]) if isinstance(key, tuple) else int(key)
        stored = self.state.get() if self.state.exists() else None
        snapshot = stored[0] if stored is not None else None
        control = frame[frame[p.SEQ].notna()]
        data = frame[frame[p.SEQ].isna()].reset_index(drop=True)
        seq = watermark = processing_time = None
        if len(control):
            seq = int(control[p.SEQ].max())
            watermark = int(control[p.CTL_WATERMARK].max())
            processing_time = int(control[p.CTL_PTIME].max())
        out_rows: list[dict[str, Any]] = []
        good, bad_rows = self._validate(data, processing_time)
        out_rows += bad_rows
        out_rows += self._stats(good, data)
        batch = self._batch(good, data)
        if watermark is None:
            # No control row (should not happen: every batch carries one per bucket): keep time still.
            current = restore_operator(self.plan.spec, snapshot) if snapshot else None
            watermark = current.watermark if current else MIN_TIMESTAMP
            processing_time = current.processing_time if current else 0
        new_snapshot, emitted, operator = step(self.plan.spec, snapshot, batch, watermark, processing_time)
        if operator.window_count() or snapshot is not None:
            self.state.update((new_snapshot,))
        out_rows += self._emitted(emitted, data)
        pane_frames = [self._pane_frame(frame) for frame in emitted.pane_frames if len(frame)]
        out_rows.append(
            {
                "fm_kind": p.GAUGE,
                "seq": seq,
                "bucket": bucket,
                "hold": operator.output_hold(),
                "oldest_pending": operator.oldest_pending_processing_time(),
                "open_windows": operator.window_count(),
                "pane_count": emitted.pane_count(),
                "late_count": len(emitted.late),
                "bad_count": len(bad_rows),
            }
        )
        yield self._frame(out_rows, pane_frames)

    # ------------------------------------------------------------------ input
    def _validate(self, data: pd.DataFrame, processing_time: int | None) -> tuple[np.ndarray, list[dict]]:
        """Positions of usable rows, and BAD rows for the others (never dropped silently)."""
        n = len(data)
        if n == 0:
            return np.zeros(0, dtype=np.int64), []
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
        if skew is not None and processing_time is not None:
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
        rows = []
        if bad.any():
            records = self._records(data, np.flatnonzero(bad))
            for i, record in zip(np.flatnonzero(bad), records, strict=True):
                row = {"fm_kind": p.BAD, "reason": reasons[i], "record": record}
                row.update(self._key_fields(data, i))
                if not missing[i]:
                    row["event_time"] = int(ts.iloc[i])
                rows.append(row)
        return np.flatnonzero(~bad), rows

    def _stats(self, good: np.ndarray, data: pd.DataFrame) -> list[dict]:
        if len(good) == 0:
            return []
        codes, splits = pd.factorize(data[p.SPLIT].to_numpy()[good])
        ts = data[self.plan.ts_column].to_numpy()[good].astype(np.int64)
        counts = np.bincount(codes, minlength=len(splits))
        low = np.full(len(splits), np.iinfo(np.int64).max)
        high = np.full(len(splits), np.iinfo(np.int64).min)
        np.minimum.at(low, codes, ts)
        np.maximum.at(high, codes, ts)
        return [
            {"fm_kind": p.STATS, "split": str(split), "count": int(c), "min_ts": int(lo), "max_ts": int(hi)}
            for split, c, lo, hi in zip(splits.tolist(), counts, low, high, strict=True)
        ]

    def _batch(self, good: np.ndarray, data: pd.DataFrame) -> RecordBatch | None:
        if len(good) == 0:
            return None
        rows = data.iloc[good]
        if len(self.plan.key_columns) == 1:
            keys = rows[self.plan.key_columns[0]].to_numpy(dtype=object)
        else:
            keys = np.empty(len(rows), dtype=object)
            keys[:] = list(zip(*(rows[c].tolist() for c in self.plan.key_columns), strict=True))
        columns: dict[str | None, np.ndarray] = {None: good}
        for name in self.plan.spec.aggregate.fields:
            if name is not None and name not in columns:
                column = rows[name]
                columns[name] = (
                    pd.to_numeric(column).to_numpy(dtype=np.float64)
                    if name in self.plan.numeric_fields
                    else column.to_numpy(dtype=object)
                )
        return RecordBatch(keys, rows[self.plan.ts_column].to_numpy(dtype=np.int64), columns, payload=good)

    # ----------------------------------------------------------------- output
    def _key_fields(self, data: pd.DataFrame, position: int) -> dict[str, Any]:
        return {c: _plain(data[c].iloc[position], c in self.plan.integral_columns) for c in self.plan.key_columns}

    def _key_dict(self, key: Any) -> dict[str, Any]:
        keys = (key,) if len(self.plan.key_columns) == 1 else key
        integral = self.plan.integral_columns
        return {c: _plain(v, c in integral) for c, v in zip(self.plan.key_columns, keys, strict=True)}

    def _records(self, data: pd.DataFrame, positions: np.ndarray) -> list[str]:
        subset = data.iloc[positions][list(self.plan.user_columns)]
        integral = set(self.plan.integral_columns)
        return [
            json.dumps({k: _plain(v, k in integral) for k, v in row.items()}, default=str)
            for row in subset.to_dict("records")
        ]

    def _emitted(self, emitted: Emitted, data: pd.DataFrame) -> list[dict]:
        rows = []
        names = self.plan.result_names
        result_types = dict(self.plan.result_types)
        for pane in emitted.panes:
            row = {
                "fm_kind": p.PANE,
                "window_start": pane.window.start,
                "window_end": pane.window.end,
                "pane_timestamp": pane.timestamp,
                "timing": pane.timing.value,
                "pane_index": pane.index,
                "nonspeculative_index": pane.nonspeculative_index,
                "is_last": pane.is_last,
            }
            row.update(self._key_dict(pane.key))
            for name in names:
                row[name] = _result(pane.value[name], result_types[name])
            rows.append(row)
        if emitted.late:
            positions = np.array([int(r.value) for r in emitted.late], dtype=np.int64)
            for late, record in zip(emitted.late, self._records(data, positions), strict=True):
                row = {
                    "fm_kind": p.LATE,
                    "window_start": late.window.start,
                    "window_end": late.window.end,
                    "event_time": late.timestamp,
                    "watermark": late.watermark,
                    "lateness": late.lateness,
                    "horizon": late.horizon,
                    "reason": late.reason.value,
                    "record": record,
                }
                row.update(self._key_dict(late.key))
                rows.append(row)
        return rows

    def _pane_frame(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Columnar panes (see ``Emitted.pane_frames``) as output rows, without a Python object per pane."""
        columns: dict[str, Any] = {"fm_kind": np.full(len(frame), p.PANE, dtype=object)}
        integral = self.plan.integral_columns
        if len(self.plan.key_columns) == 1:
            name = self.plan.key_columns[0]
            columns[name] = [_plain(v, name in integral) for v in frame["key"].tolist()]
        else:
            parts = list(zip(*frame["key"].tolist(), strict=True))
            for name, values in zip(self.plan.key_columns, parts, strict=True):
                columns[name] = [_plain(v, name in integral) for v in values]
        columns.update(
            window_start=frame["window_start"].to_numpy(),
            window_end=frame["window_end"].to_numpy(),
            pane_timestamp=frame["timestamp"].to_numpy(),
            timing=frame["timing"].to_numpy(dtype=object),
            pane_index=frame["index"].to_numpy(),
            nonspeculative_index=frame["nonspeculative_index"].to_numpy(),
            is_last=frame["is_last"].to_numpy(dtype=bool),
        )
        for name in self.plan.result_names:
            columns[name] = frame[f"value.{name}"].to_numpy()
        return pd.DataFrame(columns)

    def _frame(self, rows: list[dict[str, Any]], frames: list[pd.DataFrame] = ()) -> pd.DataFrame:
        base = pd.DataFrame({f.name: [row.get(f.name) for row in rows] for f in self.schema.fields})
        parts = [part for part in [base, *frames] if len(part)]
        with warnings.catch_warnings():
            # pandas warns that all-NA columns will stop being ignored when inferring dtypes; every column
            # is cast to its schema type just below, so the inference does not matter.
            warnings.simplefilter("ignore", FutureWarning)
            combined = pd.concat(parts, ignore_index=True) if len(parts) > 1 else (parts[0] if parts else base)
        columns = {}
        for field in self.schema.fields:
            values = combined[field.name] if field.name in combined else pd.Series([None] * len(combined))
            columns[field.name] = values.astype(_dtype(field.dataType)) if len(values) else values
        return pd.DataFrame(columns)

    def close(self) -> None:
        pass


def _plain(value: Any, integral: bool = False) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if value is pd.NA or value is pd.NaT or (isinstance(value, float) and np.isnan(value)):
        return None
    if integral and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _result(value: Any, spark_type: Any) -> Any:
    if isinstance(spark_type, StringType) and not isinstance(value, str):
        return json.dumps(value, default=str)
    if isinstance(spark_type, ArrayType):
        return [_plain(v) for v in value]
    return _plain(value)
