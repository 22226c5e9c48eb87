"""A window's result from the panes it fired: what a reader of a stage's pane output must combine.

A window can fire several panes (EARLY, ON_TIME, LATE). With ``AccumulationMode.ACCUMULATING`` each pane shows
everything the window received so far, so the window's result is its latest pane. With ``DISCARDING`` (the
default) each pane shows only what arrived since the pane before, so the window's result is its panes combined,
column by column:

* ``count()`` and ``sum(f)``: the panes' values added;
* ``min(f)`` / ``max(f)``: the smallest / largest of the panes' values;
* ``collect_list(f)``: the panes' lists concatenated in pane order;
* ``mean(f)``: the panes' means weighted by their record counts, ``sum(mean_i * n_i) / sum(n_i)``, where ``n_i``
  is the pane's value of a ``count()`` in the same spec (every record of a pane has a number in ``f``: one
  without is a dead letter, so the count is the mean's weight); without a ``count()`` it cannot be combined;
* a user-defined or full-window aggregate: cannot be combined from its results (its accumulator is not in the
  pane).

A pane's value of ``None`` (an empty pane's min, max or mean) adds nothing. Merged session windows are not
covered: a session that fired and was later merged into a larger one keeps its own (key, window).
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.core.aggregates import Aggregate, Count, Mean, Several
from floodmark.core.panes import AccumulationMode
from floodmark.core.spec import WindowSpec

LATEST = "latest"
"""The window's result is its latest pane's value (ACCUMULATING panes)."""
WEIGHTED_MEAN = "weighted_mean"
"""A mean's panes combined, weighted by a ``count()`` column's pane values."""


@dataclass(frozen=True)
class ResultFromPanes:
    """How one result column's window value comes from its panes' values.

    :ivar combine: :data:`LATEST`, an :attr:`~floodmark.core.aggregates.Aggregate.results_combine` (``"sum"``,
        ``"min"``, ``"max"``, ``"concat"``), :data:`WEIGHTED_MEAN`, or ``None``: it cannot be combined.
    :ivar weight: the ``count()`` column that weighs a :data:`WEIGHTED_MEAN`.
    :ivar reason: why it cannot be combined (``combine`` is ``None``).
    """

    combine: str | None
    weight: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, str]:
        return {name: value for name, value in vars(self).items() if value is not None}


def results_from_panes(spec: WindowSpec) -> dict[str, ResultFromPanes]:
    """``{result column: how its window value comes from its panes}`` for ``spec``'s panes (one column
    ``"value"`` for an aggregate that is not ``several``)."""
    parts: dict[str, Aggregate] = (
        spec.aggregate.parts if isinstance(spec.aggregate, Several) else {"value": spec.aggregate}
    )
    if spec.accumulation is AccumulationMode.ACCUMULATING:
        return {name: ResultFromPanes(LATEST) for name in parts}
    counts = [name for name, part in parts.items() if isinstance(part, Count)]
    results = {}
    for name, part in parts.items():
        if part.results_combine is not None:
            results[name] = ResultFromPanes(part.results_combine)
        elif isinstance(part, Mean) and counts:
            results[name] = ResultFromPanes(WEIGHTED_MEAN, weight=counts[0])
        elif isinstance(part, Mean):
            results[name] = ResultFromPanes(
                None, reason=f"mean({part.field!r}) of DISCARDING panes needs a count() in the same spec to weigh"
            )
        else:
            results[name] = ResultFromPanes(
                None, reason=f"{type(part).__name__}'s DISCARDING panes hold results, not accumulators"
            )
    return results
