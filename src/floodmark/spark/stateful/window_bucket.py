"""The window stage's part of the bucket host (:mod:`floodmark.spark.stateful.bucket_host`): one core window operator
per bucket of keys, inside Spark.

A bucket's blocks hold the map-side combiner's rows (:mod:`floodmark.spark.map_side.combiner`: RAW records, PARTIAL
aggregates, BAD_INPUT and SPLIT_STATS rows) or an upstream stage's panes. The operator is restored from Spark's state
store in the checkpoint's state format (:mod:`floodmark.spark.stateful.bucket_state`), fed the partials, then the
records (the JVM map side's in their input order), and stored back. Its output rows:

* PANE - fired panes, as columns (no Python object per pane); LATE - records beyond allowed lateness or for a
  closed window, with window and lateness, the record as JSON; BAD - records the operator refused;
* the host adds the combiner's dead letters, the STATS rows (per split and input partition: count, min and max
  timestamp of the good records) and the GAUGE row (hold, oldest pending processing time, open windows, deadlines,
  what the bucket emitted and accepted).

No event-time logic lives here: it is all in :mod:`floodmark.core`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql.types import StringType

from floodmark.core.combine import Partials
from floodmark.core.emitted import Emitted
from floodmark.core.keyed_operator import OperatorGauges
from floodmark.core.pipeline import frame_records, key_array
from floodmark.core.values import object_array, plain
from floodmark.core.window import WindowOperator
from floodmark.protocol import output, wire
from floodmark.spark import blocks
from floodmark.spark import plan as p
from floodmark.spark.rows import numpy_type, records_json, result_value
from floodmark.spark.stateful.bucket_host import BucketInput, KindOutput, dead_letter_rows, key_dict, stats_rows
from floodmark.spark.stateful.bucket_state import BucketState


class WindowBucket:
    """The window operator's kind of bucket (see the module docstring), which
    :class:`~floodmark.spark.stateful.bucket_host.BucketHost` runs."""

    def __init__(self, plan: p.RuntimePlan) -> None:
        self.plan = plan
        self.name = plan.stage.name

    def take(self, data_blocks: list[Any]) -> BucketInput:
        """The records (in input order), the partials and the combiner's dead letters and statistics."""
        data = blocks.unpack(data_blocks)
        kinds = data[wire.ROW].to_numpy() if len(data) else np.zeros(0, dtype=object)
        raw = data[kinds == wire.RAW]
        if wire.ORDER in raw.columns and raw[wire.ORDER].notna().any():  # the JVM map side's rows: input order
            raw = raw.sort_values(wire.ORDER, kind="stable")
        raw = raw.reset_index(drop=True)
        bad = data[kinds == wire.BAD_INPUT]
        rows = [
            dead_letter_rows(bad, self.plan.stage.key_columns, self.plan.input.ts_column),
            stats_rows(data[kinds == wire.SPLIT_STATS]),
        ]
        partials = self._partials(data[kinds == wire.PARTIAL])
        batch = frame_records(raw, self.plan.stage.key_columns, self.plan.input.ts_column, self.plan.stage.spec)
        return BucketInput(rows, len(bad), (raw, partials, batch))

    def restore(self, state: BucketState) -> WindowOperator:
        return state.restore(self.plan.stage.spec)

    def feed(self, operator: WindowOperator, bucket_input: BucketInput) -> Emitted:
        """The partials, then the records (the core's ``advance``)."""
        _, partials, batch = bucket_input.taken
        out = Emitted()
        if partials is not None and len(partials):
            out.extend(operator.add_partials(partials))
        if batch is not None and len(batch):
            out.extend(operator.add(batch))
        return out

    def store(self, state: BucketState, operator: WindowOperator, gauges: OperatorGauges) -> None:
        state.save(operator)

    def output(self, emitted: Emitted, bucket_input: BucketInput) -> KindOutput:
        raw = bucket_input.taken[0]
        counts = (emitted.pane_count(), len(emitted.late), bucket_input.refused + len(emitted.bad), emitted.accepted)
        pane_columns = [self._pane_columns(frame) for frame in emitted.pane_frames if len(frame)]
        return KindOutput([pd.DataFrame(self._emitted(emitted, raw))], pane_columns, counts)

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
        # The core's pane frame has the output's columns, by the same names (emitted.pane_frame).
        for name, _ in output.PANE_COLUMNS:
            columns[name] = frame[name].to_numpy()
        columns[output.TIMING] = frame[output.TIMING].to_numpy(dtype=object)
        columns[output.IS_LAST] = frame[output.IS_LAST].to_numpy(dtype=bool)
        result_types = dict(self.plan.stage.result_types)
        for name in self.plan.stage.result_names:
            values = frame[name].to_numpy()
            if values.dtype == object:
                values = object_array(result_value(v, result_types[name]) for v in values.tolist())
            columns[name] = values
        return columns
