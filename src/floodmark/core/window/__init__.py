"""The window operator: one operator, its table of windows, and two firing policies that give the same panes.

* :mod:`~floodmark.core.window.operator`: :class:`WindowOperator` (the three moves, gauges, snapshot and
  restore) and :func:`restore_operator`;
* :mod:`~floodmark.core.window.table`: the open windows as columns, and the pane rules, written once;
* :mod:`~floodmark.core.window.policy`: what a firing policy does; :mod:`~floodmark.core.window.general` (Beam's
  trigger state machine, any aggregate) and :mod:`~floodmark.core.window.columnar` (compiled triggers,
  vectorised) implement it;
* :mod:`~floodmark.core.window.sessions`: the per-record merge step of merging windows, which both policies take;
* :mod:`~floodmark.core.window.step`: the operator as a pure step function, as runtimes call it.
"""

from floodmark.core.window.operator import POLICIES, WindowOperator, policy_name, restore_operator
from floodmark.core.window.step import advance, step

__all__ = ["POLICIES", "WindowOperator", "advance", "policy_name", "restore_operator", "step"]
