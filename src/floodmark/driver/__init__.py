"""The engine-free driver side of a streaming run: what happens between micro-batches.

* :mod:`.controller` - :class:`~.controller.Controller`: a batch's per-split statistics and per-bucket
  gauges in, the core's :class:`~floodmark.core.watermarks.SourceWatermarks` (one per source) and
  :class:`~floodmark.core.watermarks.graph.StageGraph` run, the next batch's control entry out;
* :mod:`.control_log` - the immutable per-batch control entries (watermark, processing time, coordinator
  snapshot: :class:`~floodmark.protocol.control.ControlEntry`) that make a replayed batch decide as its first
  attempt did;
* :mod:`.prometheus` - :class:`~.prometheus.PrometheusMetrics`: a batch listener serving the reports as
  Prometheus metrics over HTTP (opt in: ``start(metrics_port=...)``);
* :mod:`.reconciliation` - where every input row went, over a run and per stage;
* :mod:`.checkpoint_files` - the small file interface they live on (local disk here; Hadoop file systems
  in :mod:`floodmark.spark.hadoop_files`).

Plain Python with no Spark import: ``floodmark explain`` reads a finished run's control log with it, and
the unit tests drive the controller without a session. :mod:`floodmark.spark` calls it from its sink.
"""
