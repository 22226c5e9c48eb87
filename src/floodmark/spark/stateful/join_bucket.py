"""The join stage's part of the bucket host (:mod:`floodmark.spark.stateful.bucket_host`): one core join operator
(interval or window) per bucket of keys, inside Spark.

Both inputs of a join reach the same ``(fm_stage, fm_bucket)`` group (their keys hash alike: the plan refuses key
columns of different types), each block tagged with its side (:func:`floodmark.spark.blocks.pack`). Per bucket and
batch the host restores the bucket's operator and moves it to the stage's watermark of the batch's control entry;
this kind adds the left rows, then the right rows (each side in input-partition order: what
``floodmark.core.pipeline.MicroBatchPipeline`` does, the reference this is tested against), and gives:

* PANE rows: the joined rows (keys, ``left_<column>``, ``right_<column>``, ``join_time``); LATE rows: the rows
  that came too late to join, with their side, lateness and the record as JSON; BAD rows: the combiner's
  rejected records;
* STATS rows (the sides' split statistics); the host's GAUGE row has the hold (the lowest event time an output
  still owed can carry), buffered rows as open windows, the next cleanup as the next watermark deadline, and the
  counts (accepted: the rows that were not late).

A window join's rows also say which pane paired them (window, timing, pane index). No join logic lives here: it is
all in :mod:`floodmark.core.join`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from floodmark.core.join import (
    JoinEmitted,
    JoinOperator,
    Side,
    WindowJoinedRow,
    WindowJoinEmitted,
    WindowJoinOperator,
    join_operator,
)
from floodmark.core.join.interval import LateRow
from floodmark.core.keyed_operator import KeyedRows, OperatorGauges
from floodmark.core.pipeline import key_array
from floodmark.core.records import LateReason
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


class JoinBucket:
    """The join's kind of bucket (see the module docstring), which
    :class:`~floodmark.spark.stateful.bucket_host.BucketHost` runs.

    :arg plan: the stage's plan (:class:`~floodmark.spark.plan.JoinSemantics`, both sides' inputs).

    A buffered row's value is the tuple of its input's user columns (plain Python values, stored in the bucket's
    snapshot): the joined row takes the columns that are not keys, a late row's record is all of them as JSON.
    """

    def __init__(self, plan: p.RuntimePlan) -> None:
        assert isinstance(plan.stage, p.JoinSemantics)
        self.plan = plan
        self.stage: p.JoinSemantics = plan.stage
        self.name = plan.stage.name

    def take(self, data_blocks: list[Any]) -> BucketInput:
        """Each side's records, and its combiner's dead letters and statistics."""
        sides = blocks.unpack_sides(data_blocks)
        rows: list[pd.DataFrame] = []
        taken: list[KeyedRows] = []
        refused = 0
        for side in (Side.LEFT, Side.RIGHT):
            data = sides.get(side.value)
            if data is None or not len(data):
                continue
            binding = self.plan.side_input(side)
            kinds = data[wire.ROW].to_numpy()
            bad = data[kinds == wire.BAD_INPUT]
            refused += len(bad)
            rows += [
                dead_letter_rows(bad, self.stage.key_columns, binding.ts_column),
                stats_rows(data[kinds == wire.SPLIT_STATS]),
            ]
            raw = data[kinds == wire.RAW].reset_index(drop=True)
            if not len(raw):
                continue
            values = user_values(raw, binding)
            times = raw[binding.ts_column].to_numpy(dtype=np.int64).tolist()  # a float column where other rows had none
            taken.append(KeyedRows(key_array(raw, self.stage.key_columns), times, values, side))
        return BucketInput(rows, refused, taken)

    def restore(self, state: BucketState) -> JoinOperator:
        return join_operator(self.stage.spec, state.load())

    def feed(self, operator: JoinOperator, bucket_input: BucketInput) -> JoinEmitted | WindowJoinEmitted:
        """The left rows, then the right rows."""
        out = WindowJoinEmitted() if isinstance(operator, WindowJoinOperator) else JoinEmitted()
        for rows in bucket_input.taken:
            out.extend(operator.add(rows))  # type: ignore[arg-type]
        return out

    def store(self, state: BucketState, operator: JoinOperator, gauges: OperatorGauges) -> None:
        if state.exists() or gauges.open_state:
            state.store(operator.snapshot())

    def output(self, emitted: JoinEmitted | WindowJoinEmitted, bucket_input: BucketInput) -> KindOutput:
        """Joined rows as columns, late rows and refused rows; accepted: the rows that were not late."""
        counts = (len(emitted.joined), len(emitted.late), bucket_input.refused + len(emitted.bad), emitted.accepted)
        joined = [self._joined(emitted)] if emitted.joined else []
        return KindOutput([self._late(emitted.late), self._bad(emitted)], joined, counts)

    # ----------------------------------------------------------------- output
    def _joined(self, emitted: JoinEmitted | WindowJoinEmitted) -> dict[str, Any]:
        """The joined rows as the row form's columns (lists of plain values)."""
        columns: dict[str, Any] = {wire.KIND: wire.PANE}
        keys = [key_dict(row.key, self.stage.key_columns, ()) for row in emitted.joined]
        for name in self.stage.key_columns:
            columns[name] = [k[name] for k in keys]
        for side, prefix in ((Side.LEFT, "left_"), (Side.RIGHT, "right_")):
            user = self.plan.side_input(side).user_columns
            positions = [user.index(name) for name in self.stage.value_columns(side)]
            values = [row.left if side is Side.LEFT else row.right for row in emitted.joined]
            for name, at in zip(self.stage.value_columns(side), positions, strict=True):
                columns[prefix + name] = [None if v is None else v[at] for v in values]
        if self.stage.window_columns:
            windowed = [row for row in emitted.joined if isinstance(row, WindowJoinedRow)]
            columns[output.WINDOW_START] = np.array([row.window.start for row in windowed], dtype=np.int64)
            columns[output.WINDOW_END] = np.array([row.window.end for row in windowed], dtype=np.int64)
            columns[output.TIMING] = [row.timing.value for row in windowed]
            columns[output.PANE_INDEX] = np.array([row.pane_index for row in windowed], dtype=np.int64)
        columns[p.JOIN_TIME] = np.array([row.timestamp for row in emitted.joined], dtype=np.int64)
        return columns

    def _late(self, late: list[LateRow]) -> pd.DataFrame:
        if not late:
            return pd.DataFrame()
        frame = pd.DataFrame(
            [
                {
                    wire.KIND: wire.LATE,
                    **key_dict(row.key, self.stage.key_columns, ()),
                    output.SIDE: row.side.value,
                    output.EVENT_TIME: row.timestamp,
                    output.WATERMARK: row.watermark,
                    output.LATENESS: row.lateness,
                    output.HORIZON: row.horizon,
                    output.REASON: LateReason.EXPIRED.value,
                    output.RECORD: self._record(row.side, row.value),
                }
                for row in late
            ]
        )
        return frame

    def _bad(self, emitted: JoinEmitted | WindowJoinEmitted) -> pd.DataFrame:
        """Rows the operator refused (the combiner applies the same rules first, so this stays empty; if the two
        ever disagreed, the row still reaches the dead letters rather than vanishing)."""
        if not emitted.bad:
            return pd.DataFrame()
        return pd.DataFrame(
            [
                {
                    wire.KIND: wire.BAD,
                    **key_dict(bad.key, self.stage.key_columns, ()),
                    output.EVENT_TIME: plain(bad.raw_timestamp),
                    output.REASON: bad.reason,
                    output.RECORD: json.dumps(bad.value, default=str),
                }
                for bad in emitted.bad
            ]
        )

    def _record(self, side: Side, value: tuple) -> str:
        """A buffered value as its input row's JSON (what a window stage's late record holds)."""
        return json.dumps(dict(zip(self.plan.side_input(side).user_columns, value, strict=True)), default=str)
