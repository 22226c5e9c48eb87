"""floodmark's Spark runtime: the only package that imports pyspark.

It hosts :mod:`floodmark.core` on Spark Structured Streaming: the coordinator
on the driver (:mod:`.controller`) writing each batch's watermark to a control
log (:mod:`.control_log`; the executors get it with the batch's jobs: :mod:`.batch_entry`),
the map-side combiner (:mod:`.combiner`), the core window operator inside a bucketed ``applyInPandasWithState``
(:mod:`.processor`) and a ``foreachBatch`` function (:mod:`.batch_sink`) writing to the
:class:`Outputs` (:mod:`.sinks`: files, tables, Kafka, your function). Users start at
:class:`EventTimeAggregation` with a :class:`SourceTime` (:mod:`.pipeline`) and :func:`local_session`
(or :func:`cluster_session` for a cluster);
Kafka inputs with :func:`read_kafka` and :func:`topic_partitions` (:mod:`.kafka`). Several chained windowed
stages (seed 003) run as one query through :class:`Pipeline` (:mod:`.stages`).
"""

from floodmark.spark.kafka import read_kafka, topic_partitions
from floodmark.spark.pipeline import EventTimeAggregation, FloodmarkQuery, SourceTime
from floodmark.spark.session import cluster_session, kafka_connector_jars, local_session
from floodmark.spark.sinks import FileSink, FunctionSink, KafkaSink, Outputs, TableSink
from floodmark.spark.stages import Pipeline, PipelineQuery

__all__ = [
    "EventTimeAggregation",
    "FileSink",
    "FloodmarkQuery",
    "FunctionSink",
    "KafkaSink",
    "Outputs",
    "Pipeline",
    "PipelineQuery",
    "SourceTime",
    "TableSink",
    "cluster_session",
    "kafka_connector_jars",
    "local_session",
    "read_kafka",
    "topic_partitions",
]
