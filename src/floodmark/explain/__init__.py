"""Why has this window not fired? ``floodmark explain``, read from the core's views, for any stage.

* :mod:`~floodmark.explain.window`: one window of one stage, from the operator's view of the window
  (``WindowOperator.window_view``), the sources' coordinators and the generators' views
  (``WatermarkGenerator.view``), with a projection of the watermark when no record arrives;
* :mod:`~floodmark.explain.stage`: any stage of a query, from its control log.

Engine-free: it reads the core and the driver, never Spark.
"""

from floodmark.explain.window import Explanation, WindowStatus, explain_window

__all__ = ["Explanation", "WindowStatus", "explain_window"]
