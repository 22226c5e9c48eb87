"""The window operator: windowed aggregation of one stage for many keys, as a pure function of its inputs.

:class:`WindowOperator` holds the state; three moves take it forward, each returning what it emitted as an
:class:`~floodmark.core.emitted.Emitted` (panes, late records, bad records):

* :meth:`WindowOperator.add`: a batch of records (many keys at once) arrives while the watermark and
  processing time stand still;
* :meth:`WindowOperator.advance_watermark`: the input watermark moves up;
* :meth:`WindowOperator.advance_processing_time`: processing time moves up.

A micro-batch runtime calls ``advance_processing_time(now)``, ``advance_watermark(w)`` then
``add(batch)`` for every batch (:func:`floodmark.core.window.step.advance`); the harness calls them one by one.
Cutting a batch of records into several ``add`` calls never changes the panes. It keeps the contract of every
keyed operator (:mod:`floodmark.core.keyed_operator`); :meth:`WindowOperator.add_partials` is its own fourth move.

The operator validates records and assigns their windows (:func:`~floodmark.core.assign.assign_batch`: records
without a usable timestamp become bad records; a (record, window) pair whose window is past its horizon goes to
the late output, ``EXPIRED``; for merging windows that test is made on the window the record merges into,
:mod:`floodmark.core.window.sessions`), keeps time and the windows' table
(:class:`~floodmark.core.window.table.WindowTable`: the pane rules, written once), and leaves to its firing
policy (:mod:`floodmark.core.window.policy`) when each window fires: the ``columnar`` policy where the spec has
a columnar form, else the ``general`` one. Both give the same panes.

Boundaries (see :mod:`floodmark.core.windows`): a window fires ON_TIME when the watermark reaches its max
timestamp; its state is garbage collected at its horizon (max timestamp + allowed lateness) and later records for
it go to the late output; in between, records make LATE panes if the trigger has late firings. Nothing is
dropped silently.
"""

from __future__ import annotations

import pickle
from collections.abc import Hashable
from functools import partial
from typing import Any

from floodmark.core.assign import assign_batch
from floodmark.core.combine import Partials
from floodmark.core.emitted import Emitted
from floodmark.core.keyed_operator import OperatorGauges
from floodmark.core.records import RecordBatch
from floodmark.core.segments import SegmentLoader
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.window.columnar import ColumnarPolicy
from floodmark.core.window.general import GeneralPolicy
from floodmark.core.window.policy import FiringPolicy, OperatorTime
from floodmark.core.window.table import WindowTable, WindowView
from floodmark.core.windows import Window

POLICIES = ("general", "columnar")
"""The firing policies by name (``WindowOperator(policy=...)``, ``WindowHarness(policy=...)``)."""

SNAPSHOT_FORMAT = 2
"""Version of the snapshot's header. 2: ``{"format", "policy", "watermark", "processing_time", "keys", "cols"}``
plus the policy's own keys. Snapshots without a header (format 1) are read too: their policy is general when the
table has an ``acc`` column (one accumulator object per window), else columnar."""


def policy_name(spec: WindowSpec, policy: str = "auto") -> str:
    """The firing policy for ``spec``: ``"general"``, ``"columnar"`` or ``"auto"`` (columnar where it fits)."""
    if policy == "auto":
        return "columnar" if spec.is_columnar else "general"
    if policy not in POLICIES:
        raise ValueError(f"unknown firing policy {policy!r}: use 'general', 'columnar' or 'auto'")
    return policy


class WindowOperator:
    """Windowed aggregation of one stage for many keys; see the module docstring.

    :arg spec: the windowing, trigger, lateness, accumulation and aggregation.
    :arg watermark: the initial input watermark (ms).
    :arg processing_time: the initial processing time (ms).
    :arg policy: ``"auto"`` (columnar where the spec has a columnar form), ``"general"`` or ``"columnar"``.
    :arg deferred: keep map-side partials apart until the watermark reaches their windows, where the spec allows
        (columnar policy, ``WindowSpec.defers_partials``; :mod:`floodmark.core.segments`).
    :arg load_segment: reads a segment stored apart (a :meth:`snapshot_parts` head being restored).
    """

    def __init__(
        self,
        spec: WindowSpec,
        watermark: int = MIN_TIMESTAMP,
        processing_time: int = 0,
        policy: str = "auto",
        deferred: bool = False,
        load_segment: SegmentLoader | None = None,
    ) -> None:
        self.spec = spec
        self.time = OperatorTime(watermark, processing_time)
        self.policy: FiringPolicy
        if policy_name(spec, policy) == "columnar":
            self.policy = ColumnarPolicy(spec, self.time, deferred, load_segment)
        else:
            self.policy = GeneralPolicy(spec, self.time)

    @property
    def watermark(self) -> int:
        """The input watermark (ms) the operator was advanced to."""
        return self.time.watermark

    @property
    def processing_time(self) -> int:
        """The processing time (ms) the operator was advanced to."""
        return self.time.processing_time

    @property
    def table(self) -> WindowTable:
        return self.policy.table

    # ------------------------------------------------------------------ moves
    def advance_watermark(self, watermark: int) -> Emitted:
        """Move the input watermark to ``watermark`` (a lower value is ignored) and fire every window that is
        due: on-time panes, watermark-driven trigger firings, and the final pane of windows whose horizon was
        reached (then released)."""
        out = Emitted()
        if watermark > self.time.watermark:
            self.time.watermark = watermark
            self.policy.on_watermark(out)
        return out

    def advance_processing_time(self, processing_time: int) -> Emitted:
        """Move processing time to ``processing_time`` (a lower value is ignored) and fire the processing-time
        firings that are due."""
        out = Emitted()
        if processing_time > self.time.processing_time:
            self.time.processing_time = processing_time
            self.policy.on_processing_time(out)
        return out

    def add(self, batch: RecordBatch) -> Emitted:
        """Process a batch of records at the current watermark and processing time."""
        out = Emitted()
        if len(batch) == 0:
            return out
        watermarks = partial(self.table.key_output_watermarks, watermark=self.time.watermark)
        assigned = assign_batch(
            self.spec, self.time.watermark, batch, out.bad, out.late, watermarks, self.spec.window.is_merging
        )
        if assigned is None:
            return out
        self.policy.add(batch, assigned, out)
        out.accepted = assigned.pairs - len(out.late)
        return out

    def add_partials(self, partials: Partials) -> Emitted:
        """Merge the partial aggregates of on-time records (from :func:`~floodmark.core.combine.combine`,
        possibly several of them): the same result as :meth:`add` of the records they were made of.

        Every window must still be open (the watermark has not reached its max timestamp): records of windows
        the watermark has reached come as records (they fire LATE panes one by one or go to the late output
        with their payload). Only the columnar policy takes partials (``WindowSpec.combines_records``).
        """
        if len(partials) == 0:
            return Emitted()
        self.policy.add_partials(partials)
        return Emitted(accepted=int(partials.counts.sum()))

    # ----------------------------------------------------------------- gauges
    def gauges(self) -> OperatorGauges:
        """The hold (the lowest output timestamp a pending pane will carry), the processing time of the oldest
        record not yet in a pane, the open windows (an upper bound while partials are kept apart), the lowest
        watermark at which :meth:`advance_watermark` fires or releases a window and the lowest processing time at
        which :meth:`advance_processing_time` fires a pane."""
        policy = self.policy
        return OperatorGauges(
            policy.output_hold(),
            policy.oldest_pending(),
            policy.window_count(),
            policy.next_watermark_deadline(),
            policy.next_processing_deadline(),
        )

    def window_view(self, key: Hashable, window: Window) -> WindowView | None:
        """What the operator holds for ``key``'s ``window`` (a session overlapping it stands in), or None."""
        self.policy.gather()
        row, note = self.table.lookup(key, window, self.spec.window.is_merging)
        if row is None:
            return None
        state, details = self.policy.trigger_view(row)
        engine = f"window operator, {self.policy.name} policy"
        return WindowView(self.table.book(row), state, engine, details, note)

    # --------------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """Everything the operator holds, self-contained (timers are derived and rebuilt on restore)."""
        data, _, _ = self.policy.snapshot()
        return self._pickle(data)

    def snapshot_parts(self) -> tuple[bytes, dict[int, bytes], set[int]]:
        """The snapshot in parts, for a runtime that stores deferred partials apart: the *head* (header, time,
        the table and what is known of the segments), the segments made since the last call (id -> bytes) and
        the ids of stored segments to delete. :func:`restore_operator` restores the head, reading segments
        through its ``load_segment``."""
        data, added, dropped = self.policy.snapshot(apart=True)
        return self._pickle(data), added, dropped

    def _pickle(self, policy_data: dict[str, Any]) -> bytes:
        header = {"format": SNAPSHOT_FORMAT, "policy": self.policy.name}
        time = {"watermark": self.time.watermark, "processing_time": self.time.processing_time}
        data = header | time | self.table.snapshot() | policy_data
        return pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)


def restore_operator(spec: WindowSpec, snapshot: bytes, load_segment: SegmentLoader | None = None) -> WindowOperator:
    """The operator that took ``snapshot`` (or the head of :meth:`WindowOperator.snapshot_parts`, whose segments
    ``load_segment`` reads), restored, on the policy its header names (a snapshot stays with its policy: state
    written by the general policy resumes on it even where ``"auto"`` now picks the columnar one)."""
    data = pickle.loads(snapshot)
    policy = data.get("policy") or ("general" if "acc" in data["cols"] else policy_name(spec))
    deferred = load_segment is not None or "segments" in data
    operator = WindowOperator(spec, data["watermark"], data["processing_time"], policy, deferred, load_segment)
    operator.table.restore(data)
    operator.policy.restore(data)
    return operator
