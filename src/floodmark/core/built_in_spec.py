"""A window spec as data, for an engine whose window operator has the semantics built in (the JVM host).

The Python core is the reference: :func:`built_in_form` describes a :class:`~floodmark.core.spec.WindowSpec` only
when it is one the JVM window operator (``jvm/floodmark``, package ``floodmark.window``) runs with the same panes,
late records, holds, gauges and deadlines, which a differential property test checks
(``tests/core/test_jvm_window_operator.py``). That is the columnar policy's specs:

* windows: tumbling, sliding, cumulate, global and sessions;
* triggers: the compiled forms (:func:`~floodmark.core.compiled_trigger.compile_trigger`): ``Default()``,
  ``Never()``, ``AfterWatermark`` with early firings every n records or d > 0 ms and late firings on every record
  or none, ``Repeatedly(AfterProcessingTime(d > 0))`` without allowed lateness (not count firings with sessions:
  :attr:`~floodmark.core.spec.WindowSpec.columnar_trigger`);
* aggregates: count, sum, min, max, mean, alone or in ``several`` (not ``collect_list`` or your own);
* any allowed lateness, accumulation mode and timestamp combiner.

Every other spec returns ``None`` and runs on the Python host.
"""

from __future__ import annotations

from typing import Any

from floodmark.core.aggregates import Aggregate, Count, Max, Mean, Min, Several, Sum
from floodmark.core.assign import field_label
from floodmark.core.spec import WindowSpec
from floodmark.core.windows import Cumulate, Global, Sessions, Sliding, Tumbling, WindowAssigner

BUILT_IN_AGGREGATES: dict[type[Aggregate], str] = {Count: "count", Sum: "sum", Min: "min", Max: "max", Mean: "mean"}
"""The aggregates whose reductions the JVM host has, by the name its form gives them."""


def built_in_form(spec: WindowSpec) -> dict[str, Any] | None:
    """``spec`` as the JVM window operator reads it (JSON-ready), or ``None`` when its semantics are not built in
    there (see the module docstring).

    ``{"window": {"kind", ...}, "aggregate": {"single", "parts": [{"name", "kind", "field", "label"}]}, "trigger":
    {"on_time", "late", "early_delay", "early_count"}, "allowed_lateness", "accumulation", "timestamp_combiner"}``;
    durations in ms; ``late`` is a :class:`~floodmark.core.compiled_trigger.LateFirings` member's name.
    """
    window = _window_form(spec.window)
    trigger = spec.columnar_trigger
    aggregate = _aggregate_form(spec.aggregate)
    if window is None or trigger is None or aggregate is None:
        return None
    return {
        "window": window,
        "aggregate": aggregate,
        "trigger": {
            "on_time": trigger.on_time,
            "late": trigger.late.name,
            "early_delay": trigger.early_delay,
            "early_count": trigger.early_count,
        },
        "allowed_lateness": spec.allowed_lateness,
        "accumulation": spec.accumulation.name,
        "timestamp_combiner": spec.timestamp_combiner.name,
    }


def _window_form(window: WindowAssigner) -> dict[str, Any] | None:
    if type(window) is Tumbling:
        return {"kind": "tumbling", "size": window.size, "offset": window.offset}
    if type(window) is Sliding:
        return {"kind": "sliding", "size": window.size, "slide": window.slide, "offset": window.offset}
    if type(window) is Cumulate:
        return {"kind": "cumulate", "step": window.step, "max_size": window.max_size, "offset": window.offset}
    if type(window) is Global:
        return {"kind": "global"}
    if type(window) is Sessions:
        return {"kind": "sessions", "gap": window.gap}
    return None


def _aggregate_form(aggregate: Aggregate) -> dict[str, Any] | None:
    single = not isinstance(aggregate, Several)
    parts = {"value": aggregate} if single else aggregate.parts  # type: ignore[attr-defined]
    forms = []
    for name, part in parts.items():
        kind = BUILT_IN_AGGREGATES.get(type(part))
        if kind is None:
            return None
        field = part.field  # type: ignore[attr-defined]
        forms.append({"name": name, "kind": kind, "field": field, "label": field_label(field)})
    return {"single": single, "parts": forms}
