"""The stateful processor: one core window operator per bucket of keys, inside Spark.

Spark groups a stage's rows by ``(fm_stage, fm_bucket)`` (the label of bucket ``pmod(hash(keys), B)``:
:mod:`floodmark.spark.stateful.bucket_layout`) and the stage's level (:mod:`floodmark.spark.stateful.levels`) calls
:meth:`WindowBucketProcessor.run` once per bucket and batch with the bucket's rows from the map-side combiner
(:mod:`floodmark.spark.map_side.combiner`: RAW records, PARTIAL aggregates, BAD_INPUT and SPLIT_STATS rows, packed in
blocks: :mod:`floodmark.spark.blocks`) or an upstream stage's panes, when it has input or a tick. The
watermark and processing time come from the batch's control entry
(:mod:`floodmark.spark.batch_entry`). The processor restores the bucket's
operator from Spark's state store (in the checkpoint's state format: :mod:`floodmark.spark.stateful.bucket_state`),
runs one micro-batch of it (the core's ``advance``: processing time, then watermark, then partials and records),
stores it back and returns one frame of tagged rows:

* PANE - fired panes; LATE - records beyond allowed lateness or for a closed window, with window
  and lateness; BAD - the combiner's rejected records, with the reason;
* STATS - per split and input partition: count, min and max timestamp of the
  good records (what the driver's generators need); GAUGE - per bucket:
  control seq, output hold, oldest pending processing time, open windows, and
  what the bucket emitted and accepted (the run's reconciliation counts).

No event-time logic lives here: it is all in :mod:`floodmark.core`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from pyspark.sql.types import StringType

from floodmark.core.combine import Partials
from floodmark.core.emitted import Emitted
from floodmark.core.keyed_operator import OperatorGauges
from floodmark.core.pipeline import frame_records, key_array
from floodmark.core.values import object_array, plain
from floodmark.core.window import advance
from floodmark.protocol import output, wire
from floodmark.protocol.columns import names
from floodmark.protocol.control import BucketGauges, ControlEntry
from floodmark.spark import blocks
from floodmark.spark import plan as p
from floodmark.spark.batch_entry import CurrentBatchEntry
from floodmark.spark.rows import numpy_type, records_json, result_value
from floodmark.spark.stateful.bucket_state import BucketState


class BucketOutput(NamedTuple):
    """One bucket's output of one batch, in the row form's column names (:meth:`StageSemantics.output_schema`),
    not yet in one frame: the columnar policy's panes, most of a flush, go to Arrow column by column
    without a pandas frame (:meth:`floodmark.spark.stateful.levels.StageLevel.carry`)."""

    rows: list[pd.DataFrame]
    """Dead letters, STATS rows, what the operator emitted as objects (late records, the general policy's
    panes), the GAUGE row."""
    pane_columns: list[dict[str, Any]]
    """The columnar policy's panes: per part, the row form's pane column -> its values (arrays of one
    length; a float NaN is a null)."""


class WindowBucketProcessor:
    """Hosts the core window operator for one bucket of a stage (see the module docstring)."""

    def __init__(self, plan: p.RuntimePlan) -> None:
        self.plan = plan
        self.current_entry: Callable[[], ControlEntry] = CurrentBatchEntry()

    def run(self, bucket: int, block_values: list[Any], state: BucketState) -> BucketOutput:
        """One bucket's batch: its blocks (ticks carry None) -> its output; ``state`` is read and written."""
        entry = self.current_entry()
        data_blocks = blocks_to_run(entry, self.plan.stage.name, bucket, block_values, state)
        if data_blocks is None:
            return BucketOutput([], [])
        data = blocks.unpack(data_blocks)
        kinds = data[wire.ROW].to_numpy() if len(data) else np.zeros(0, dtype=object)
        raw = data[kinds == wire.RAW]
        if wire.ORDER in raw.columns and raw[wire.ORDER].notna().any():  # the JVM map side's rows: input order
            raw = raw.sort_values(wire.ORDER, kind="stable")
        raw = raw.reset_index(drop=True)
        bad = data[kinds == wire.BAD_INPUT]
        out = [
            dead_letter_rows(bad, self.plan.stage.key_columns, self.plan.input.ts_column),
            stats_rows(data[kinds == wire.SPLIT_STATS]),
        ]
        partials = self._partials(data[kinds == wire.PARTIAL])
        batch = frame_records(raw, self.plan.stage.key_columns, self.plan.input.ts_column, self.plan.stage.spec)
        watermark = entry.watermark_for(self.plan.stage.name)
        operator = state.restore(self.plan.stage.spec)
        emitted = advance(operator, batch, watermark, entry.processing_time, partials)
        state.save(operator)
        out.append(pd.DataFrame(self._emitted(emitted, raw)))
        counts = (emitted.pane_count(), len(emitted.late), len(bad) + len(emitted.bad), emitted.accepted)
        out.append(gauge_row(entry, bucket, operator.gauges(), counts))
        pane_columns = [self._pane_columns(frame) for frame in emitted.pane_frames if len(frame)]
        return BucketOutput(out, pane_columns)

    # ------------------------------------------------------------------ input
    def _partials(self, rows: pd.DataFrame) -> Partials | None:
        if not len(rows):
            return None
        accumulators = {}
        for name, column in self.plan.stage.accumulator_columns():
            # Arrow gives long columns with nulls (other row kinds) as float64: cast back by the layout's type.
            accumulators[name] = rows[column.name].to_numpy(dtype=numpy_type(column.type))
        return Partials(
            key_array(rows, self.plan.stage.key_columns),
            rows[wire.WINDOW_START].to_numpy(dtype=np.int64),
            rows[wire.WINDOW_END].to_numpy(dtype=np.int64),
            rows[wire.COUNT].to_numpy(dtype=np.int64),
            rows[wire.HOLD].to_numpy(dtype=np.int64),
            accumulators,
        )

    # ----------------------------------------------------------------- output
    def _key_dict(self, key: Any) -> dict[str, Any]:
        return key_dict(key, self.plan.stage.key_columns, self.plan.input.integral_columns)

    def _emitted(self, emitted: Emitted, data: pd.DataFrame) -> list[dict]:
        rows = []
        if emitted.late:
            positions = np.array([int(r.value) for r in emitted.late], dtype=np.int64)
            for late, record in zip(
                emitted.late,
                records_json(data.iloc[positions], self.plan.input.user_columns, self.plan.input.integral_columns),
                strict=True,
            ):
                row = {
                    wire.KIND: wire.LATE,
                    output.WINDOW_START: late.window.start,
                    output.WINDOW_END: late.window.end,
                    output.EVENT_TIME: late.timestamp,
                    output.WATERMARK: late.watermark,
                    output.LATENESS: late.lateness,
                    output.HORIZON: late.horizon,
                    output.REASON: late.reason.value,
                    output.RECORD: record,
                }
                row.update(self._key_dict(late.key))
                rows.append(row)
        if emitted.bad:
            # The combiner applies the core's record rules first, so this stays empty; if the two ever
            # disagreed, the record still reaches the dead letters rather than vanishing.
            positions = np.array([int(r.value) for r in emitted.bad], dtype=np.int64)
            records = records_json(data.iloc[positions], self.plan.input.user_columns, self.plan.input.integral_columns)
            for bad, record in zip(emitted.bad, records, strict=True):
                row = {
                    wire.KIND: wire.BAD,
                    output.EVENT_TIME: plain(bad.raw_timestamp),
                    output.REASON: bad.reason,
                    output.RECORD: record,
                }
                row.update(self._key_dict(bad.key))
                rows.append(row)
        return rows

    def _pane_columns(self, frame: pd.DataFrame) -> dict[str, Any]:
        """The operator's panes (see ``Emitted.pane_frames``) as the row form's columns, without a Python object
        per pane; results that are not numbers (lists, a user aggregate's values) conformed to their Spark
        types one by one."""
        columns: dict[str, Any] = {wire.KIND: wire.PANE}
        integral = self.plan.input.integral_columns
        if len(self.plan.stage.key_columns) == 1:
            name = self.plan.stage.key_columns[0]
            keys = frame["key"].to_numpy(dtype=object)
            # Strings need no unwrapping (the common case, and one Python call per pane otherwise).
            string_key = isinstance(self.plan.stage.key_types[0], StringType)
            columns[name] = keys if string_key else [plain(v, name in integral) for v in keys.tolist()]
        elif self.plan.stage.key_columns:
            parts = list(zip(*frame["key"].tolist(), strict=True))
            for name, values in zip(self.plan.stage.key_columns, parts, strict=True):
                columns[name] = [plain(v, name in integral) for v in values]
        # The core's pane frame columns, by their names there.
        columns[output.WINDOW_START] = frame["window_start"].to_numpy()
        columns[output.WINDOW_END] = frame["window_end"].to_numpy()
        columns[output.PANE_TIMESTAMP] = frame["timestamp"].to_numpy()
        columns[output.TIMING] = frame["timing"].to_numpy(dtype=object)
        columns[output.PANE_INDEX] = frame["pane_index"].to_numpy()
        columns[output.NONSPECULATIVE_INDEX] = frame["nonspeculative_index"].to_numpy()
        columns[output.IS_LAST] = frame["is_last"].to_numpy(dtype=bool)
        result_types = dict(self.plan.stage.result_types)
        for name in self.plan.stage.result_names:
            values = frame[f"value.{name}"].to_numpy()
            if values.dtype == object:
                values = object_array(result_value(v, result_types[name]) for v in values.tolist())
            columns[name] = values
        return columns

    def close(self) -> None:
        pass


def blocks_to_run(entry: ControlEntry, stage: str, bucket: int, values: list[Any], state: BucketState) -> list | None:
    """A bucket's data blocks of the batch (``values``: its IN rows' blocks; ticks carry None), or None when the
    bucket has nothing to do: no data, state stored already, and nothing due (:func:`due`): its state and last
    report stand."""
    data_blocks = [block for block in values if isinstance(block, bytes | bytearray)]
    if not data_blocks and state.exists() and not due(entry, stage, bucket):
        return None
    return data_blocks


def due(entry: ControlEntry, stage: str, bucket: int) -> bool:
    """Whether ``entry`` lets ``stage``'s ``bucket`` fire, collect or clean up without input, by what it last
    reported (the entry carries every bucket's last GAUGE values); True if it has not reported yet."""
    gauges = BucketGauges(entry.buckets)
    if not gauges.reported(stage, bucket):
        return True
    return gauges.due(stage, entry.watermark_for(stage), entry.processing_time, bucket) is not None


def gauge_row(
    entry: ControlEntry,
    bucket: int,
    gauges: OperatorGauges,
    counts: tuple[int, int, int, int],
    made: int | None = None,
) -> pd.DataFrame:
    """A bucket's GAUGE row after it ran with ``entry``: its operator's ``gauges`` (the hold, what it keeps, its
    deadlines) and ``counts``: the panes (or rows), late records and dead letters it emitted and the records it
    accepted; ``made``: of those dead letters, the ones it made of its own work
    (:data:`~floodmark.protocol.wire.COUNT`)."""
    panes, late, bad, accepted = counts
    return pd.DataFrame(
        [
            {
                wire.KIND: wire.GAUGE,
                wire.SEQ: entry.seq,
                wire.BUCKET: bucket,
                wire.HOLD: gauges.hold,
                wire.OLDEST_PENDING: gauges.oldest_pending,
                wire.OPEN_WINDOWS: gauges.open_state,
                wire.NEXT_FIRE: gauges.next_firing,
                wire.NEXT_TIMER: gauges.next_timer,
                wire.PANE_COUNT: panes,
                wire.LATE_COUNT: late,
                wire.BAD_COUNT: bad,
                wire.ACCEPTED: accepted,
                wire.COUNT: made,
            }
        ]
    )


def dead_letter_rows(rows: pd.DataFrame, key_columns: Sequence[str], ts_column: str) -> pd.DataFrame:
    """The combiner's BAD_INPUT ``rows`` as BAD rows: keys, reason, record, event time (null when it had none)."""
    if not len(rows):
        return pd.DataFrame()
    frame = rows[list(key_columns)].reset_index(drop=True)
    frame[wire.KIND] = wire.BAD
    frame[output.REASON] = rows[wire.REASON].to_numpy()
    frame[output.RECORD] = rows[wire.RECORD].to_numpy()
    frame[output.EVENT_TIME] = rows[ts_column].to_numpy()
    return frame


def stats_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The combiner's SPLIT_STATS ``rows`` as STATS rows (they have the STATS columns)."""
    if not len(rows):
        return pd.DataFrame()
    return pd.DataFrame({wire.KIND: wire.STATS, **{c: rows[c].to_numpy() for c in names(wire.STATS_COLUMNS)}})


def user_values(raw: pd.DataFrame, binding: p.InputBinding) -> list[tuple]:
    """Each row of ``raw`` as a tuple of its input's user columns, plain values (integral columns that pandas made
    floats, for nulls among them: ints again)."""
    integral = set(binding.integral_columns)
    columns = [[plain(v, name in integral) for v in raw[name].tolist()] for name in binding.user_columns]
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(len(raw))]


def key_dict(key: Any, key_columns: Sequence[str], integral: Sequence[str]) -> dict[str, Any]:
    """An operator's ``key`` (a value for one key column, a tuple for several) as ``{column: value}``."""
    if not key_columns:
        return {}
    keys = (key,) if len(key_columns) == 1 else key
    return {c: plain(v, c in integral) for c, v in zip(key_columns, keys, strict=True)}
