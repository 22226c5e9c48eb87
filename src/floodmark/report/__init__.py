"""Reports on a run: the *Streaming Systems* event-time / processing-time plot.

Needs matplotlib (the ``cli`` extra). Importing this package does not import it; :func:`plot_timeline`
and :func:`timeline_figure` do, when called.
"""

from floodmark.report.plot import Timeline, downsample_indices, plot_timeline, timeline_figure

__all__ = ["Timeline", "downsample_indices", "plot_timeline", "timeline_figure"]
