"""How the window operator adds records to windows and fires them: the firing policy, and the time it reads.

The operator (:class:`~floodmark.core.window.operator.WindowOperator`) validates and assigns records, keeps time
and the :class:`~floodmark.core.window.table.WindowTable`; its policy decides, per window, when a pane fires
and holds the accumulators and trigger state. Two policies implement every spec they accept with the same panes
(a property test runs both on random streams):

* ``general`` (:mod:`floodmark.core.window.general`): Beam's trigger state machine, one state object and one
  accumulator object per window, timers on lazy heaps: every trigger, every aggregate;
* ``columnar`` (:mod:`floodmark.core.window.columnar`): the trigger's compiled form
  (:func:`floodmark.core.triggers.compile_trigger`) as vectorised masks over numeric accumulator columns: the
  common triggers and numeric aggregates, many times faster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from floodmark.core.assign import Assigned, late_record
from floodmark.core.combine import Partials
from floodmark.core.emitted import Emitted
from floodmark.core.records import LateReason, LateRecord, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.values import unwrap
from floodmark.core.window.table import WindowTable
from floodmark.core.windows import Window


@dataclass
class OperatorTime:
    """Where an operator stands: the input watermark and the processing time (ms) it was advanced to.

    The operator moves both (never down); its policy reads them.
    """

    watermark: int
    processing_time: int

    def late(
        self, spec: WindowSpec, key: Any, window: Window, timestamp: int, value: Any, reason: LateReason
    ) -> LateRecord:
        """A record kept out of ``window`` now, with how late it is and the window's horizon."""
        return late_record(spec, self.watermark, key, window, timestamp, unwrap(value), reason)


class FiringPolicy(Protocol):
    """One way of running a spec's trigger and aggregate over the operator's table (see the module docstring).

    The operator calls :meth:`on_processing_time` and :meth:`on_watermark` after it moved ``time`` up, and
    :meth:`add` with a batch's assigned (record, window) pairs; every call appends what it emitted to ``out``.
    """

    name: str
    """``"general"`` or ``"columnar"``; a snapshot's header names the policy that took it."""
    table: WindowTable

    def on_processing_time(self, out: Emitted) -> None:
        """Processing time moved up to ``time.processing_time``: fire the processing-time firings that are due."""

    def on_watermark(self, out: Emitted) -> None:
        """The input watermark moved up to ``time.watermark``: fire what is due (ON_TIME panes, watermark
        firings), then the final panes of windows at their horizon, which are released."""

    def add(self, batch: RecordBatch, assigned: Assigned, out: Emitted) -> None:
        """Add ``batch``'s (record, window) pairs (``assigned``) at the current time; pairs kept out go to
        ``out.late``."""

    def add_partials(self, partials: Partials) -> None:
        """Merge map-side partial aggregates of windows the watermark has not reached (columnar policy only)."""

    def next_watermark_deadline(self) -> int | None:
        """The lowest input watermark at which :meth:`on_watermark` would fire or release a window, or None."""

    def next_processing_deadline(self) -> int | None:
        """The lowest processing time at which :meth:`on_processing_time` would fire a pane, or None."""

    def output_hold(self) -> int | None:
        """The lowest output timestamp a pending pane will carry, or None when nothing holds."""

    def oldest_pending(self) -> int | None:
        """The processing time (ms) of the oldest record not yet in a pane, or None."""

    def window_count(self) -> int:
        """Open windows (an upper bound while partials are kept apart)."""

    def gather(self) -> None:
        """Bring whatever the policy keeps apart from the table into it (before a window is looked up)."""

    def trigger_view(self, row: int) -> tuple[Any, tuple[str, ...]]:
        """The trigger state of ``row``'s window as the trigger's own state object, and what else to say."""

    def snapshot(self, apart: bool = False) -> tuple[dict[str, Any], dict[int, bytes], set[int]]:
        """What the policy holds beyond the table (merged into the operator's snapshot); with ``apart``, what
        it keeps apart (deferred partials' segments) comes as the segments made since the last call
        (id -> bytes) and the ids of stored ones to delete, the data holding what is known of them."""

    def restore(self, data: dict[str, Any]) -> None:
        """Take back :meth:`snapshot`'s data, after the table was restored."""
