"""The contract every keyed operator keeps: the window operator, the interval and window joins and the keyed process
operator.

A runtime drives one the same way whatever its kind, once per micro-batch (and bucket of keys):

1. :meth:`KeyedOperator.advance_processing_time` to the batch's processing time (ms);
2. :meth:`KeyedOperator.advance_watermark` to the stage's input watermark of the batch (ms);
3. :meth:`KeyedOperator.add` with the batch's rows, in arrival order (a join: its left rows, then its right rows);
4. :meth:`KeyedOperator.gauges` for what the driver needs to decide the next batch, and
   :meth:`KeyedOperator.snapshot` to store the state.

Every move returns what it emitted (the kind's own output type, which has ``extend``). A lower processing time or
watermark than the operator's is ignored: both only move forward. A row at or behind the watermark is judged by
the kind's lateness rule (a window's allowed lateness, a join's, a process function's own timers) and never
silently dropped: it is emitted as late or bad output.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # the joins import this module
    from floodmark.core.join.spec import Side

RowsT = TypeVar("RowsT", contravariant=True)
OutT = TypeVar("OutT", covariant=True)


@dataclass(frozen=True)
class KeyedRows:
    """Rows for a join or a keyed process operator, in arrival order.

    :ivar keys: each row's key. :ivar timestamps: each row's event time (ms; anything else is a bad row).
    :ivar values: each row's value (what a join pairs, what a process function gets).
    :ivar side: which input of a join the rows are (None for an operator of one input).
    """

    keys: Sequence[Hashable]
    timestamps: Sequence[Any]
    values: Sequence[Any]
    side: Side | None = None


@dataclass(frozen=True)
class OperatorGauges:
    """What a keyed operator owes and holds, after its latest move; one set of names for every kind.

    :ivar hold: the lowest event time (ms) an output still owed can carry; the stage keeps its output watermark one
        below it (``floodmark.core.watermarks.stage``). None: nothing is owed.
    :ivar oldest_pending: the processing time (ms) of the oldest input not yet in an output (a window's records
        waiting for their pane), for the processing-time lag; None: nothing waits, or the kind does not track it.
    :ivar open_state: how much the operator keeps: open windows (an upper bound while partials are kept apart),
        buffered join rows, keys with state or timers.
    :ivar next_firing: the lowest input watermark (ms) at which :meth:`KeyedOperator.advance_watermark` emits or
        releases something; None: no watermark would.
    :ivar next_timer: the lowest processing time (ms) at which :meth:`KeyedOperator.advance_processing_time`
        emits something; None: no processing time would.
    """

    hold: int | None
    oldest_pending: int | None
    open_state: int
    next_firing: int | None
    next_timer: int | None


class KeyedOperator(Protocol[RowsT, OutT]):
    """One keyed operator's moves (see the module docstring); ``RowsT`` is what :meth:`add` takes (a
    :class:`~floodmark.core.records.RecordBatch` for windows, :class:`KeyedRows` for joins and process functions),
    ``OutT`` what each move emits."""

    def advance_processing_time(self, processing_time: int) -> OutT:
        """Move processing time up to ``processing_time`` (ms) and emit what it makes due."""
        ...

    def advance_watermark(self, watermark: int) -> OutT:
        """Move the input watermark up to ``watermark`` (ms) and emit what it makes due."""
        ...

    def add(self, rows: RowsT) -> OutT:
        """Take ``rows`` at the current watermark and processing time."""
        ...

    def gauges(self) -> OperatorGauges:
        """What the operator owes and holds now."""
        ...

    def snapshot(self) -> bytes:
        """Everything the operator holds, self-contained (the kind's ``restore_...`` reads it)."""
        ...
