"""One host for every kind of stage, per bucket of keys, inside Spark: what every kind shares, written once.

Spark groups a stage's rows by ``(fm_stage, fm_bucket)`` (:mod:`floodmark.spark.stateful.bucket_layout`) and the
stage's level (:mod:`floodmark.spark.stateful.levels`) calls :meth:`BucketHost.run` once per bucket and batch with the
bucket's IN blocks (:mod:`floodmark.spark.blocks`), when it has input or a tick. Per batch the host

1. takes the batch's control entry (:mod:`floodmark.spark.batch_entry`) and returns at once when the bucket has no
   input, state stored already and nothing due (:func:`blocks_to_run`);
2. has its kind read the blocks (:meth:`BucketKind.take`): the combiner's refused rows become BAD rows and its split
   statistics STATS rows, the rest what the operator takes;
3. restores the bucket's keyed operator (:mod:`floodmark.core.keyed_operator`), moves it to the batch's processing
   time and the stage's watermark, feeds it the batch's rows (the kind's order: what
   ``floodmark.core.pipeline.MicroBatchPipeline`` does, the reference every host is tested against) and stores it;
4. returns the kind's output rows (PANE, LATE, BAD) and one GAUGE row: the operator's gauges and the counts of what
   the bucket emitted and accepted (the reconciliation's).

What differs per kind is small (:class:`BucketKind`): :mod:`~floodmark.spark.stateful.window_bucket`,
:mod:`~floodmark.spark.stateful.join_bucket`, :mod:`~floodmark.spark.stateful.process_bucket`. No event-time logic
lives here: it is all in :mod:`floodmark.core`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import pandas as pd

from floodmark.core.keyed_operator import KeyedOperator, OperatorGauges
from floodmark.core.values import plain
from floodmark.protocol import output, wire
from floodmark.protocol.columns import names
from floodmark.protocol.control import BucketGauges, ControlEntry
from floodmark.spark import plan as p
from floodmark.spark.batch_entry import CurrentBatchEntry
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


@dataclass
class BucketInput:
    """What a kind read of a bucket's blocks of one batch."""

    rows: list[pd.DataFrame]
    """Rows out as they are: the combiner's refused records as BAD rows, its split statistics as STATS rows."""
    refused: int
    """How many records the combiner refused (dead letters of this stage, counted in the GAUGE row)."""
    taken: Any = None
    """What the kind feeds its operator (:meth:`BucketKind.feed`)."""


@dataclass
class KindOutput:
    """What a kind made of its operator's output of one batch."""

    rows: list[pd.DataFrame] = field(default_factory=list)
    """Emitted rows as objects (late records, dead letters, a kind's rows)."""
    pane_columns: list[dict[str, Any]] = field(default_factory=list)
    """Rows as columns (see :attr:`BucketOutput.pane_columns`)."""
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)
    """The panes (or rows), late records and dead letters emitted, and the records accepted (:func:`gauge_row`)."""
    made: int | None = None
    """Of the dead letters, the ones the stage made of its own work (:func:`gauge_row`)."""


class BucketKind(Protocol):
    """What one kind of stage adds to the host (see the module docstring)."""

    name: str
    """The stage's name."""
    plan: p.RuntimePlan
    """The stage's plan."""

    def take(self, data_blocks: list[Any]) -> BucketInput:
        """The bucket's IN blocks of the batch, read."""
        ...

    def restore(self, state: BucketState) -> KeyedOperator[Any, Any]:
        """The bucket's operator, from ``state`` (a new one where it holds none)."""
        ...

    def feed(self, operator: Any, bucket_input: BucketInput) -> Any:
        """The batch's rows into ``operator`` (after its moves of time), in the kind's order; what they emitted."""
        ...

    def store(self, state: BucketState, operator: Any, gauges: OperatorGauges) -> None:
        """``operator`` into ``state`` (a bucket that never held anything stores nothing)."""
        ...

    def output(self, emitted: Any, bucket_input: BucketInput) -> KindOutput:
        """What the batch emitted as output rows, and its counts."""
        ...


class BucketHost:
    """Runs a stage's :class:`BucketKind` for one bucket per batch (see the module docstring)."""

    def __init__(self, kind: BucketKind) -> None:
        self.kind = kind
        self.current_entry: Callable[[], ControlEntry] = CurrentBatchEntry()

    @property
    def plan(self) -> p.RuntimePlan:
        """The stage's plan."""
        return self.kind.plan

    def run(self, bucket: int, block_values: list[Any], state: BucketState) -> BucketOutput:
        """One bucket's batch: its blocks (ticks carry None) -> its output; ``state`` is read and written."""
        entry = self.current_entry()
        data_blocks = blocks_to_run(entry, self.kind.name, bucket, block_values, state)
        if data_blocks is None:
            return BucketOutput([], [])
        taken = self.kind.take(data_blocks)
        operator = self.kind.restore(state)
        emitted = operator.advance_processing_time(entry.processing_time)
        emitted.extend(operator.advance_watermark(entry.watermark_for(self.kind.name)))
        emitted.extend(self.kind.feed(operator, taken))
        gauges = operator.gauges()
        self.kind.store(state, operator, gauges)
        made = self.kind.output(emitted, taken)
        gauge = gauge_row(entry, bucket, gauges, made.counts, made.made)
        return BucketOutput([*taken.rows, *made.rows, gauge], made.pane_columns)

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
