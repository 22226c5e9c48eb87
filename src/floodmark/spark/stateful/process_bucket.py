"""The process stage's part of the bucket host (:mod:`floodmark.spark.stateful.bucket_host`): your keyed process
function per bucket of keys, inside Spark.

Per bucket and batch the host restores the bucket's operator (every key's state and timers), moves its clock to the
batch's processing time and its watermark to the stage's (the timers they reach fire); this kind hands it the
bucket's records in input-partition order (what ``floodmark.core.pipeline.MicroBatchPipeline`` does, the reference
this is tested against) and gives:

* PANE rows: your rows (keys, your output columns, ``output_time``); BAD rows: the combiner's rejected records,
  the calls of your function that raised (the record or timer, and the error), and rows that do not fit the
  stage's output (its columns, its types);
* STATS rows; the host's GAUGE row has the hold (the lowest output time of the pending timers), keys with state or
  timers as open windows, the next event-time and processing-time timers as the deadlines (so the driver asks for a
  batch without input when one is due), and the counts.

No timer logic lives here: it is all in :mod:`floodmark.core.process`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type

from floodmark.core.keyed_operator import KeyedRows, OperatorGauges
from floodmark.core.pipeline import ProcessStage, key_array
from floodmark.core.process import KeyedProcessOperator, ProcessEmitted, ProcessOutput
from floodmark.core.values import plain
from floodmark.protocol import output, wire
from floodmark.spark import blocks
from floodmark.spark import plan as p
from floodmark.spark.stateful.bucket_host import (
    BucketInput,
    KindOutput,
    dead_letter_rows,
    key_dict,
    stats_rows,
    user_values,
)
from floodmark.spark.stateful.bucket_state import BucketState


class ProcessBucket:
    """Your keyed process function's kind of bucket (see the module docstring), which
    :class:`~floodmark.spark.stateful.bucket_host.BucketHost` runs.

    :arg plan: the stage's plan (:class:`~floodmark.spark.plan.ProcessSemantics`). :arg stage: its definition (your
        function, pickled with the plan).

    A record your function gets is its input row as a dict of the input's user columns (plain Python values).
    """

    def __init__(self, plan: p.RuntimePlan, stage: ProcessStage) -> None:
        assert isinstance(plan.stage, p.ProcessSemantics)
        self.plan = plan
        self.semantics: p.ProcessSemantics = plan.stage
        self.stage = stage
        self.name = plan.stage.name
        self._arrow_types = {name: to_arrow_type(dtype) for name, dtype in self.semantics.output}

    def take(self, data_blocks: list[Any]) -> BucketInput:
        """The records in input-partition order, and the combiner's dead letters and statistics."""
        data = blocks.unpack(data_blocks)
        kinds = data[wire.ROW].to_numpy() if len(data) else np.zeros(0, dtype=object)
        bad = data[kinds == wire.BAD_INPUT]
        rows = [
            dead_letter_rows(bad, self.semantics.key_columns, self.plan.input.ts_column),
            stats_rows(data[kinds == wire.SPLIT_STATS]),
        ]
        raw = data[kinds == wire.RAW].reset_index(drop=True)
        return BucketInput(rows, len(bad), raw)

    def restore(self, state: BucketState) -> KeyedProcessOperator:
        return self.stage.operator(state.load())

    def feed(self, operator: KeyedProcessOperator, bucket_input: BucketInput) -> ProcessEmitted:
        raw = bucket_input.taken
        if not len(raw):
            return ProcessEmitted()
        times = raw[self.plan.input.ts_column].to_numpy(dtype=np.int64).tolist()
        return operator.add(KeyedRows(key_array(raw, self.semantics.key_columns), times, self._records(raw)))

    def store(self, state: BucketState, operator: KeyedProcessOperator, gauges: OperatorGauges) -> None:
        if state.exists() or gauges.open_state:
            state.store(operator.snapshot())

    def output(self, emitted: ProcessEmitted, bucket_input: BucketInput) -> KindOutput:
        """Your rows that fit the stage's output as columns; the rest, and your calls that raised, as dead letters
        the stage made itself. Every good record was handed to the function (a call that raised too): all are
        accepted."""
        fitting, misfits = self._fitting(emitted.rows)
        made = len(emitted.bad) + len(misfits)
        counts = (len(fitting), 0, bucket_input.refused + made, len(bucket_input.taken))
        columns = [self._columns(fitting)] if fitting else []
        return KindOutput([self._bad(emitted, misfits)], columns, counts, made)

    # ------------------------------------------------------------------ input
    def _records(self, raw: pd.DataFrame) -> list[dict[str, Any]]:
        """Each row's user columns as a dict of plain values."""
        names = self.plan.input.user_columns
        return [dict(zip(names, values, strict=True)) for values in user_values(raw, self.plan.input)]

    # ----------------------------------------------------------------- output
    def _fitting(self, emitted: list[ProcessOutput]) -> tuple[list[tuple[ProcessOutput, tuple]], list[tuple]]:
        """Your rows split into those that fit the output (with their values) and those that do not (with why)."""
        fitting, misfits = [], []
        for out in emitted:
            try:
                values = self.stage.row_values(out.row)
                for (name, arrow_type), value in zip(self._arrow_types.items(), values, strict=True):
                    try:
                        pa.array([value], type=arrow_type)
                    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as error:
                        raise ValueError(f"column {name!r}: {value!r} is not {arrow_type}: {error}") from error
            except ValueError as error:
                misfits.append((out, f"the row does not fit the stage's output: {error}"))
                continue
            fitting.append((out, values))
        return fitting, misfits

    def _columns(self, fitting: list[tuple[ProcessOutput, tuple]]) -> dict[str, Any]:
        """The fitting rows as the row form's columns."""
        columns: dict[str, Any] = {wire.KIND: wire.PANE}
        keys = [key_dict(out.key, self.semantics.key_columns, ()) for out, _ in fitting]
        for name in self.semantics.key_columns:
            columns[name] = [k[name] for k in keys]
        for i, (name, arrow_type) in enumerate(self._arrow_types.items()):
            columns[name] = pa.array([values[i] for _, values in fitting], type=arrow_type)
        columns[p.OUTPUT_TIME] = np.array([out.timestamp for out, _ in fitting], dtype=np.int64)
        return columns

    def _bad(self, emitted: ProcessEmitted, misfits: list[tuple]) -> pd.DataFrame:
        """Calls that raised (the record or the timer) and rows that do not fit, as BAD rows."""
        dead = [
            {
                wire.KIND: wire.BAD,
                **key_dict(bad.key, self.semantics.key_columns, ()),
                output.EVENT_TIME: plain(bad.raw_timestamp),
                output.REASON: bad.reason,
                output.RECORD: json.dumps(
                    bad.value if isinstance(bad.value, dict) else {"timer": dataclasses.asdict(bad.value)}, default=str
                ),
            }
            for bad in emitted.bad
        ]
        dead += [
            {
                wire.KIND: wire.BAD,
                **key_dict(out.key, self.semantics.key_columns, ()),
                output.EVENT_TIME: out.timestamp,
                output.REASON: reason,
                output.RECORD: json.dumps(out.row, default=str),
            }
            for out, reason in misfits
        ]
        return pd.DataFrame(dead) if dead else pd.DataFrame()
