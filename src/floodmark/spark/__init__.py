"""floodmark's Spark runtime: the only package that imports pyspark.

It hosts :mod:`floodmark.core` on Spark Structured Streaming: the coordinator
on the driver (:mod:`.controller`) writing each batch's watermark to a control
log (:mod:`.control_log`; the executors get it with the batch's jobs: :mod:`.batch_entry`),
the map-side combiner (:mod:`.combiner`), the core window operator inside a bucketed ``applyInPandasWithState``
(:mod:`.processor`) and a ``foreachBatch`` function (:mod:`.batch_sink`) writing to the
:class:`Outputs` (:mod:`.sinks`: files, tables, Kafka, your function). Users start at
:class:`EventTimeAggregation` with a :class:`SourceTime` (:mod:`.pipeline`) and :func:`local_session`
(or :func:`cluster_session` for a cluster, :func:`configure_spark_with_floodmark` for a session of your own);
Kafka inputs with :func:`read_kafka` and :func:`topic_partitions` (:mod:`.kafka`), JSON-lines files that keep
each line's text for its dead letter with :func:`read_json_lines` (:mod:`.json_lines`). Several chained windowed
stages (seed 003) run as one query through :class:`Pipeline` (:mod:`.stages`).
"""

from typing import TYPE_CHECKING

from floodmark.lazy import lazy_exports

if TYPE_CHECKING:
    from floodmark.spark.json_lines import read_json_lines
    from floodmark.spark.kafka import read_kafka, topic_partitions
    from floodmark.spark.pipeline import EventTimeAggregation, FloodmarkQuery, SourceTime
    from floodmark.spark.session import (
        cluster_session,
        configure_spark_with_floodmark,
        floodmark_jars,
        kafka_connector_jars,
        local_session,
    )
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
    "configure_spark_with_floodmark",
    "floodmark_jars",
    "kafka_connector_jars",
    "local_session",
    "read_json_lines",
    "read_kafka",
    "topic_partitions",
]

# Imported on first use: the tick source's module is unpickled in Spark's data-source planner processes
# (floodmark.lazy), which must not load the whole runtime for it.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "read_json_lines": "floodmark.spark.json_lines",
        "read_kafka": "floodmark.spark.kafka",
        "topic_partitions": "floodmark.spark.kafka",
        "EventTimeAggregation": "floodmark.spark.pipeline",
        "FloodmarkQuery": "floodmark.spark.pipeline",
        "SourceTime": "floodmark.spark.pipeline",
        "cluster_session": "floodmark.spark.session",
        "configure_spark_with_floodmark": "floodmark.spark.session",
        "floodmark_jars": "floodmark.spark.session",
        "kafka_connector_jars": "floodmark.spark.session",
        "local_session": "floodmark.spark.session",
        "FileSink": "floodmark.spark.sinks",
        "FunctionSink": "floodmark.spark.sinks",
        "KafkaSink": "floodmark.spark.sinks",
        "Outputs": "floodmark.spark.sinks",
        "TableSink": "floodmark.spark.sinks",
        "Pipeline": "floodmark.spark.stages",
        "PipelineQuery": "floodmark.spark.stages",
    },
)
