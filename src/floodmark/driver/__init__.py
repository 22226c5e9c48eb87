"""The engine-free driver side of a streaming run: what happens between micro-batches.

* :mod:`.controller` - :class:`~.controller.BatchController`: a batch's per-split statistics in,
  the core's :class:`~floodmark.core.watermarks.SourceWatermarks` run, the next batch's control entry out;
* :mod:`.control_log` - the immutable per-batch control entries (watermark, processing time, coordinator
  snapshot) that make a replayed batch decide as its first attempt did;
* :mod:`.checkpoint_files` - the small file interface they live on (local disk here; Hadoop file systems
  in :mod:`floodmark.spark.hadoop_files`).

Plain Python with no Spark import: ``floodmark explain`` reads a finished run's control log with it, and
the unit tests drive the controller without a session. :mod:`floodmark.spark` calls it from its sink.
"""
