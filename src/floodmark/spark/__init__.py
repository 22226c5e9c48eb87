"""floodmark's Spark runtime: the only package that imports pyspark.

It hosts :mod:`floodmark.core` on Spark Structured Streaming: the coordinator
on the driver (:mod:`.controller`) writing each batch's watermark to a control
log (:mod:`.control_log`; the executors get it with the batch's jobs: :mod:`.batch_entry`),
the map-side combiner (:mod:`.combiner`), the core window operator inside a bucketed ``applyInPandasWithState``
(:mod:`.processor`) and a ``foreachBatch`` sink (:mod:`.sinks`). Users start at
:class:`EventTimeAggregation` with a :class:`SourceTime` (:mod:`.pipeline`) and :func:`local_session`.
"""

from floodmark.spark.pipeline import EventTimeAggregation, FloodmarkQuery, SourceTime
from floodmark.spark.session import local_session
from floodmark.spark.sinks import FileOutputs

__all__ = ["EventTimeAggregation", "FileOutputs", "FloodmarkQuery", "SourceTime", "local_session"]
