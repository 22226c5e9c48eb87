"""floodmark's engine-free core: every event-time semantic lives here, with no Spark import.

* :mod:`~floodmark.core.time`, :mod:`~floodmark.core.clock` - milliseconds, MIN/MAX, injected clocks;
* :mod:`~floodmark.core.watermarks` - generators, idleness, per-split MIN, stages, percentiles;
* :mod:`~floodmark.core.windows` - window assigners;
* :mod:`~floodmark.core.triggers` - Beam's triggers;
* :mod:`~floodmark.core.aggregates` - incremental and full-window aggregations;
* :mod:`~floodmark.core.panes`, :mod:`~floodmark.core.timestamps`, :mod:`~floodmark.core.records`
  - what comes out: panes, output timestamps, late and bad records;
* :mod:`~floodmark.core.window` - the window operator: its table of windows and its two firing policies;
* :mod:`~floodmark.core.pipeline` - stages chained with stage watermarks.
"""
