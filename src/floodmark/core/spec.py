"""``WindowSpec``: everything that defines one windowed aggregation (Beam's ``WindowingStrategy`` + combine)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from floodmark.core.aggregates import Aggregate, ColumnarLayout, Several, columnar_layout
from floodmark.core.compiled_trigger import ColumnarTrigger, compile_trigger
from floodmark.core.panes import AccumulationMode
from floodmark.core.time import Duration, non_negative_millis
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.triggers import Default, Trigger
from floodmark.core.windows import Window, WindowAssigner, horizon, window_expired


@dataclass(frozen=True, init=False)
class WindowSpec:
    """Everything that defines a windowed aggregation.

    :arg window: the window assigner. :arg aggregate: what each pane computes; a ``{name: aggregate}``
        mapping means ``aggregates.several(**mapping)`` (panes carry a dict).
    :arg trigger: when panes fire (default: :class:`~floodmark.core.triggers.Default`).
    :arg allowed_lateness: how long after its max timestamp (in watermark time) a
        window keeps its state and accepts records (ms, timedelta or text such as ``"5 minutes"``; >= 0).
    :arg accumulation: ACCUMULATING or DISCARDING panes.
    :arg timestamp_combiner: the panes' output timestamps.
    """

    window: WindowAssigner
    aggregate: Aggregate
    trigger: Trigger = field(default_factory=Default)
    allowed_lateness: int = 0
    """Milliseconds (the constructor takes any :data:`~floodmark.core.time.Duration`)."""
    accumulation: AccumulationMode = AccumulationMode.DISCARDING
    timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW

    def __init__(
        self,
        window: WindowAssigner,
        aggregate: Aggregate | Mapping[str, Aggregate],
        trigger: Trigger | None = None,
        allowed_lateness: Duration = 0,
        accumulation: AccumulationMode | str = AccumulationMode.DISCARDING,
        timestamp_combiner: TimestampCombiner | str = TimestampCombiner.END_OF_WINDOW,
    ) -> None:
        if not isinstance(window, WindowAssigner):
            raise TypeError(f"window must be a window assigner, got {type(window).__name__}")
        if isinstance(aggregate, Mapping):
            aggregate = Several(dict(aggregate))
        if not isinstance(aggregate, Aggregate):
            raise TypeError(f"aggregate must be an Aggregate, got {type(aggregate).__name__}")
        trigger = Default() if trigger is None else trigger
        if not isinstance(trigger, Trigger):
            raise TypeError(f"trigger must be a Trigger, got {type(trigger).__name__}")
        set_field = object.__setattr__  # frozen: the fields are set once, here
        set_field(self, "window", window)
        set_field(self, "aggregate", aggregate)
        set_field(self, "trigger", trigger)
        set_field(self, "allowed_lateness", non_negative_millis(allowed_lateness, "allowed lateness"))
        set_field(self, "accumulation", AccumulationMode(accumulation))
        set_field(self, "timestamp_combiner", TimestampCombiner(timestamp_combiner))

    def horizon(self, window: Window) -> int:
        """The watermark at which ``window`` is garbage collected: max timestamp + allowed lateness."""
        return horizon(window.end, self.allowed_lateness)

    def expired(self, window: Window, watermark: int) -> bool:
        """Has ``watermark`` reached ``window``'s horizon (its state goes, its records are ``EXPIRED``)?"""
        return bool(window_expired(window.end, self.allowed_lateness, watermark))

    @cached_property
    def columnar_trigger(self) -> ColumnarTrigger | None:
        """The trigger's columnar form, when the columnar policy can run this spec's windows: every form,
        except count firings with merging windows (sessions): a merged window's count is its members'."""
        columnar = compile_trigger(self.trigger, self.allowed_lateness)
        if columnar is not None and self.window.is_merging and columnar.needs_records:
            return None
        return columnar

    @cached_property
    def columnar_layout(self) -> ColumnarLayout | None:
        """The aggregate's columnar form (numeric accumulator columns), if it has one."""
        return columnar_layout(self.aggregate)

    @property
    def is_columnar(self) -> bool:
        """Can the columnar (vectorised) operator run this spec? Both operators give the same panes."""
        return self.columnar_trigger is not None and self.columnar_layout is not None

    @property
    def combines_records(self) -> bool:
        """Can on-time records be aggregated before the shuffle (map-side partials)? Not when panes depend
        on which records arrived in which order (early count firings), nor for merging windows (sessions):
        whether records merge depends on the windows open in the operator's state."""
        if self.window.is_merging or not self.is_columnar:
            return False
        return not self.columnar_trigger.needs_records  # type: ignore[union-attr]

    @property
    def defers_partials(self) -> bool:
        """Can the columnar policy keep partial aggregates apart until the watermark reaches their windows
        (:mod:`floodmark.core.segments`)? When a window's panes depend only on what it holds once the watermark
        reaches it: map-side partials, no early firings (an EARLY pane reads a window the watermark has not
        reached), and the end of the window as output time (a window's hold is then its max timestamp, known
        without reading it)."""
        return (
            self.combines_records
            and self.columnar_trigger.early_delay is None  # type: ignore[union-attr]
            and self.timestamp_combiner is TimestampCombiner.END_OF_WINDOW
        )
