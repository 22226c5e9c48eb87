"""The map side: validate records and combine them before the shuffle (``mapInArrow``).

Runs on the executors, once per input partition and micro-batch, before the
rows are shuffled to their buckets. It

* rejects bad records (a line that is not a record, a missing or unparsable
  timestamp, one outside the supported event-time range or more than
  ``max_future_skew`` ahead of the batch's processing time, an aggregate input
  that is not a finite number): BAD_INPUT rows with the reason and the record's
  original text where the input kept it (``InputBinding.text_column``, Spark's
  corrupt-record column), else the record as JSON, so nothing is dropped silently. The timestamp
  range and the numeric rule are the core's (``core/time.py``,
  ``core.assign.validate_numbers``);
* counts each split's good records and their min and max timestamp
  (SPLIT_STATS rows, what the driver's watermark generators need);
* for specs of the columnar policy, aggregates the records whose windows
  are all still open into one PARTIAL row per (key, window), as native Spark
  does before its shuffle; every other record (late, or any record of a
  general-operator spec) goes on as a RAW row with its columns untouched.

The rows cross the shuffle packed, one Arrow IPC block per bucket
(:mod:`floodmark.spark.blocks`).

The work is done on Arrow columns with Arrow's C++ kernels (hash group-by):
no Python object per record. Only bad records (rare) go through pandas, to
write their reasons and JSON. Which records may be aggregated, and how each
accumulator is reduced, come from the core
(:func:`floodmark.core.combine.open_window_pairs`,
:func:`~floodmark.core.combine.accumulator_reductions`), so the partials are
exactly what the core's own ``combine`` would make.

The watermark and processing time are those of the batch's control entry,
which the stateful processor reads too (:mod:`floodmark.spark.batch_entry`),
so a replayed batch decides exactly as the original did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.types import StructType

from floodmark.core.assign import validate_future_skew, validate_numbers
from floodmark.core.combine import accumulator_reductions, open_window_pairs
from floodmark.core.time import event_time_in_range, out_of_range_reason
from floodmark.core.values import plain
from floodmark.protocol import wire
from floodmark.spark import blocks
from floodmark.spark import plan as p
from floodmark.spark.batch_entry import CurrentBatchEntry
from floodmark.spark.rows import arrow_table, records_json, spark_like_pandas

_START, _END, _HOLD = "fm_c_start", "fm_c_end", "fm_c_hold"  # scratch columns of the group-by


UNPARSABLE = "unparsable input: not a record of the expected schema (the original text is in record)"


class MapSideCombiner:
    """``mapInArrow`` function: input rows -> RAW, PARTIAL, BAD_INPUT and SPLIT_STATS rows, packed per bucket.

    :arg plan: the runtime plan (the batch's watermark and processing time come with the job,
        :mod:`floodmark.spark.batch_entry`).
    :arg schema: the rows' schema (the input's columns plus ``plan.stage.combiner_fields()``); Spark gets them
        as one ``(fm_bucket, fm_block)`` row per bucket (:mod:`floodmark.spark.blocks`).
    """

    def __init__(self, plan: p.RuntimePlan, schema: StructType) -> None:
        self.plan = plan
        self.current_entry = CurrentBatchEntry()
        self.schema = schema
        self.user_columns = [f.name for f in schema.fields if f.name in plan.input.user_columns]
        self.reductions = accumulator_reductions(plan.stage.spec) if plan.stage.combines else []

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [batch for batch in batches if batch.num_rows]
        if not parts:
            return
        entry = self.current_entry()
        partition = _partition_id()
        out = self.process(
            pa.Table.from_batches(parts), entry.watermark_for(self.plan.stage.name), entry.processing_time, partition
        )
        yield blocks.pack(out, partition, self.plan.input.side)

    def process(self, data: pa.Table, watermark: int, processing_time: int, partition: int = 0) -> pa.Table:
        """One partition's rows -> the rows to shuffle (pure; unit-tested without Spark)."""
        return arrow_table(self.parts(data, watermark, processing_time, partition), self.schema, like=data.schema)

    def parts(self, data: pa.Table, watermark: int, processing_time: int, partition: int) -> list[dict[str, Any]]:
        """The rows to shuffle as :func:`~floodmark.spark.rows.arrow_table` parts (see :meth:`process`)."""
        ts = data.column(self.plan.input.ts_column)
        timestamps = pc.fill_null(ts, 0).to_numpy()
        values, rejected, reasons, unread = self._validate(data, timestamps, processing_time)
        bad = np.flatnonzero(rejected)
        good = np.flatnonzero(~rejected) if len(bad) else None  # None: every row is good
        rows = data if good is None else data.take(good)
        good_ts = timestamps if good is None else timestamps[good]
        # The source's statistics count its records, whatever this stage makes of them (a record whose aggregate
        # input is missing is this stage's dead letter, not its source's), and its rows that are no record.
        records = np.flatnonzero(~unread) if unread.any() else None
        read = data if records is None else data.take(records)
        read_ts = timestamps if records is None else timestamps[records]
        out = [
            self._bad(data, bad, reasons[bad]),
            self._stats(read, read_ts, partition),
            self._dead_letter_stats(int(unread.sum()), partition),
        ]
        raw = np.arange(rows.num_rows)
        if self.plan.stage.combines and rows.num_rows:
            pairs, starts, ends, out_times, raw = open_window_pairs(self.plan.stage.spec, watermark, good_ts)
            good_values = {f: v if good is None else v[good] for f, v in values.items()}
            out.append(self._partials(rows, pairs, starts, ends, out_times, good_values))
        if len(raw):
            out.append({**_columns(rows if len(raw) == rows.num_rows else rows.take(raw)), wire.ROW: wire.RAW})
        return out

    # ------------------------------------------------------------- validation
    def _validate(
        self, data: pa.Table, timestamps: np.ndarray, processing_time: int
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """Numeric inputs as float64, which rows are bad and why (the first reason found), never dropped silently,
        and which of them are no record of the source (not parsed, no usable event time: bad for every stage)."""
        n = data.num_rows
        reasons = np.full(n, None, dtype=object)
        rejected = np.zeros(n, dtype=bool)

        def reject(mask: np.ndarray, reason: Callable[[int], str]) -> None:
            for i in np.flatnonzero(mask & ~rejected).tolist():
                reasons[i] = reason(i)
            rejected[mask] = True

        if self.plan.input.corrupt_column is not None:
            corrupt = data.column(self.plan.input.corrupt_column).is_valid().to_numpy(zero_copy_only=False)
            reject(corrupt, lambda i: UNPARSABLE)
        missing = data.column(self.plan.input.ts_column).is_null().to_numpy(zero_copy_only=False)
        if missing.any():
            raw = data.column(p.TS_RAW).to_pylist() if p.TS_RAW in data.column_names else [None] * n
            error = data.column(p.TS_ERROR).to_pylist() if p.TS_ERROR in data.column_names else [None] * n
            reject(missing, lambda i: missing_timestamp_reason(raw[i], error[i]))
        if self.plan.input.max_future_skew_ms is not None:
            ahead, why_ahead = validate_future_skew(timestamps, processing_time, self.plan.input.max_future_skew_ms)
            reject(~missing & ahead, why_ahead)
        outside = ~missing & ~event_time_in_range(timestamps)
        reject(outside, lambda i: out_of_range_reason(int(timestamps[i])))
        unread = rejected.copy()
        values: dict[str, np.ndarray] = {}
        for name in self.plan.stage.numeric_fields:
            column = data.column(name)
            if _is_numeric(column.type):
                # Arrow's cast: nulls become NaN ("missing"), decimals beyond float64 become inf ("not finite").
                given = pc.fill_null(pc.cast(column, pa.float64(), safe=False), np.nan).to_numpy()
            else:  # e.g. numbers as text: the core parses them value by value
                given = column.to_numpy(zero_copy_only=False)
            values[name], invalid, number_reasons = validate_numbers(name, given)
            why = dict(zip(np.flatnonzero(invalid).tolist(), number_reasons, strict=True))
            reject(invalid, lambda i, why=why: why[i])
        return values, rejected, reasons, unread

    def _bad(self, data: pa.Table, positions: np.ndarray, reasons: np.ndarray) -> dict[str, Any]:
        if not len(positions):
            return {}
        rows = data.take(positions)
        columns = _columns(
            rows.select(list(dict.fromkeys([*self.plan.stage.key_columns, wire.BUCKET, self.plan.input.ts_column])))
        )
        frame = spark_like_pandas(rows.select(self.user_columns))
        records = records_json(frame, self.user_columns, self.plan.input.integral_columns)
        # A record is its original text where the input kept it (the text column last: it has every row's),
        # else its parsed columns as JSON: for an unparsable line those are nulls or fragments, and for one
        # that parsed they lose its spacing, key order and number forms and add the fields it lacks as nulls.
        for column in (self.plan.input.corrupt_column, self.plan.input.text_column):
            if column is not None:
                texts = rows.column(column).to_pylist()
                records = [record if text is None else text for record, text in zip(records, texts, strict=True)]
        return {**columns, wire.ROW: wire.BAD_INPUT, wire.REASON: reasons.tolist(), wire.RECORD: records}

    # ------------------------------------------------------------- statistics
    def _stats(self, rows: pa.Table, timestamps: np.ndarray, partition: int) -> dict[str, Any]:
        if rows.num_rows == 0 or not self.plan.input.split_stats:
            return {}
        column = self.plan.input.split_column
        if column is None:  # one split: its three numbers, no group-by
            low, high = int(timestamps.min()), int(timestamps.max())
            return self.split_stats(None, [rows.num_rows], [low], [high], partition)
        ones = np.ones(len(timestamps), dtype=np.int64)
        return self.split_stats(rows.column(column), ones, timestamps, timestamps, partition)

    def split_stats(self, splits: Any, counts: Any, lows: Any, highs: Any, partition: int) -> dict[str, Any]:
        """SPLIT_STATS rows of groups of good records: each group's split value (``splits``, None: the one split
        ``"0"``), record count and lowest and highest timestamp (ms); groups of one split are merged."""
        one_split = np.zeros(len(lows), dtype=np.int8)
        frame = pa.table({"split": one_split if splits is None else splits, "n": counts, "lo": lows, "hi": highs})
        stats = frame.group_by("split", use_threads=False).aggregate([("n", "sum"), ("lo", "min"), ("hi", "max")])
        # Labelled per distinct value, not per record; the driver merges equal labels.
        labels = ["0"] if splits is None else [split_label(v) for v in stats.column("split").to_pylist()]
        if self.plan.input.source is not None:
            labels = [f"{self.plan.input.source}/{label}" for label in labels]
        return {
            wire.ROW: wire.SPLIT_STATS,
            wire.SPLIT: labels,
            wire.COUNT: stats.column("n_sum"),
            wire.MIN_TS: stats.column("lo_min"),
            wire.MAX_TS: stats.column("hi_max"),
            # Statistics of one partition go to one bucket (any will do: the driver merges them).
            wire.BUCKET: self.plan.state.bucket_values[partition % max(self.plan.state.buckets, 1)],
        }

    def _dead_letter_stats(self, count: int, partition: int) -> dict[str, Any]:
        """A SPLIT_STATS row counting ``count`` rows that are no record of the source
        (:data:`~floodmark.protocol.wire.DEAD_LETTERS_SPLIT`), when this stage reports its source's statistics."""
        if not count or not self.plan.input.split_stats:
            return {}
        label = wire.DEAD_LETTERS_SPLIT
        if self.plan.input.source is not None:
            label = f"{self.plan.input.source}/{label}"
        return {
            wire.ROW: wire.SPLIT_STATS,
            wire.SPLIT: [label],
            wire.COUNT: np.array([count], dtype=np.int64),
            wire.MIN_TS: np.zeros(1, dtype=np.int64),
            wire.MAX_TS: np.zeros(1, dtype=np.int64),
            wire.BUCKET: self.plan.state.bucket_values[partition % max(self.plan.state.buckets, 1)],
        }

    # --------------------------------------------------------------- partials
    def _partials(
        self,
        rows: pa.Table,
        pairs: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        out_times: np.ndarray,
        values: dict[str, np.ndarray],
    ) -> dict[str, Any]:
        """One PARTIAL row per (key, window) of the (record, window) pairs (see ``Partials``)."""
        if not len(pairs):
            return {}
        identity = len(pairs) == rows.num_rows and bool((pairs == np.arange(len(pairs))).all())
        group_columns = [*self.plan.stage.key_columns, wire.BUCKET]
        columns = {c: rows.column(c) if identity else rows.column(c).take(pairs) for c in group_columns}
        columns.update({_START: starts, _END: ends, _HOLD: out_times})
        columns.update({f"fm_c_{f}": v[pairs] for f, v in values.items()})
        reduced = dict.fromkeys((f"fm_c_{f}", r) for _, r, f in self.reductions if f is not None)
        aggregations = [(_HOLD, self.plan.stage.spec.timestamp_combiner.reduction), ([], "count_all"), *reduced]
        grouped = pa.table(columns).group_by([*group_columns, _START, _END], use_threads=False).aggregate(aggregations)
        out = _columns(grouped.select(group_columns))
        counts = grouped.column("count_all")
        out.update(
            {
                wire.ROW: wire.PARTIAL,
                wire.WINDOW_START: grouped.column(_START),
                wire.WINDOW_END: grouped.column(_END),
                wire.COUNT: counts,
                wire.HOLD: grouped.column(f"{_HOLD}_{aggregations[0][1]}"),
            }
        )
        accumulators = zip(self.reductions, self.plan.stage.accumulator_columns(), strict=True)
        for (_, reduction, field), (_, column) in accumulators:
            out[column.name] = counts if field is None else grouped.column(f"fm_c_{field}_{reduction}")
        return out


class AggregatedInJvm:
    """``mapInArrow`` function after the JVM map side (:mod:`floodmark.spark.map_side.jvm_combine`): its rows ->
    the rows
    to shuffle, packed per bucket, as :class:`MapSideCombiner` makes them.

    The JVM's rows are of two kinds. An aggregated row (``fm_order`` null) is one (key, window[, split]) of
    records that were good and on time: it becomes a PARTIAL row, and its ``fm_row_count`` / ``fm_min_ts`` /
    ``fm_max_ts`` (records, lowest and highest event time) become the SPLIT_STATS rows. Every other row is a
    whole record the JVM could not decide on (bad, late, or held by an output time): those go through
    :meth:`MapSideCombiner.parts` in input order (``fm_order``), which finds their reasons and keeps them RAW.

    :arg combiner: the Arrow combiner of the same plan (its schema has ``fm_order``).
    :arg record_columns: the input's columns as the combiner reads them.
    """

    RECORDS = "fm_row_count"
    """An aggregated row's number of records (its COUNT counts (record, window) pairs)."""

    def __init__(self, combiner: MapSideCombiner, record_columns: list[str]) -> None:
        self.combiner = combiner
        self.plan = combiner.plan
        self.record_columns = record_columns

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [batch for batch in batches if batch.num_rows]
        if not parts:
            return
        entry = self.combiner.current_entry()
        partition = _partition_id()
        out = self.process(
            pa.Table.from_batches(parts), entry.watermark_for(self.plan.stage.name), entry.processing_time, partition
        )
        yield blocks.pack(out, partition, self.plan.input.side)

    def process(self, table: pa.Table, watermark: int, processing_time: int, partition: int = 0) -> pa.Table:
        """One partition of the JVM's rows -> the rows to shuffle (pure; tests/spark/test_jvm_combine.py)."""
        records = table.column(wire.ORDER).is_valid()
        aggregated = table.filter(pc.invert(records))
        out: list[dict[str, Any]] = []
        if aggregated.num_rows:
            partial = _columns(aggregated.select([*self.plan.stage.key_columns, wire.BUCKET]))
            names = [wire.WINDOW_START, wire.WINDOW_END, wire.COUNT, wire.HOLD]
            names += [column.name for _, column in self.plan.stage.accumulator_columns()]
            partial.update({name: aggregated.column(name) for name in names})
            out.append({**partial, wire.ROW: wire.PARTIAL})
            if self.plan.input.split_stats:
                column = self.plan.input.split_column
                stats = [aggregated.column(c) for c in (self.RECORDS, wire.MIN_TS, wire.MAX_TS)]
                splits = None if column is None else aggregated.column(column)
                out.append(self.combiner.split_stats(splits, *stats, partition))
        whole = table.filter(records)
        if whole.num_rows:
            whole = whole.select([*self.record_columns, wire.ORDER]).sort_by(wire.ORDER)
            out.extend(self.combiner.parts(whole, watermark, processing_time, partition))
        return arrow_table(out, self.combiner.schema, like=table.schema)


def missing_timestamp_reason(raw: str | None, error: str | None) -> str:
    """A dead letter's reason for a record without an event time: the event-time expression failed (``error``,
    its first line), the value could not be read as a time (``raw``, as text), or there was none."""
    if error is not None:
        return f"the event-time expression failed: {error}"
    return "missing timestamp" if raw is None else f"unparsable timestamp: {raw!r}"


def _columns(table: pa.Table) -> dict[str, Any]:
    return {name: table.column(name) for name in table.column_names}


def _is_numeric(dtype: pa.DataType) -> bool:
    types = pa.types
    return types.is_integer(dtype) or types.is_floating(dtype) or types.is_decimal(dtype) or types.is_boolean(dtype)


def split_label(value: Any) -> str:
    """A split's name: ``str`` of its value (integral floats as integers), ``""`` for null."""
    value = plain(value, integral=True)
    return "" if value is None else str(value)


def _partition_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
