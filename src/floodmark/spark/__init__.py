"""floodmark's Spark runtime: the only package that imports pyspark.

It hosts :mod:`floodmark.core` on Spark Structured Streaming. A query is a graph of sources and windowed
stages (:class:`Pipeline`, :mod:`.pipeline`; :class:`EventTimeAggregation`, :mod:`.aggregation`, is the graph
of one source and one stage): each source through the map-side combiner (:mod:`.inputs`, :mod:`.combiner`),
the stages hosted per level by stateful operators running the core window operator per bucket
(:mod:`.levels`, :mod:`.processor`), a ``foreachBatch`` function (:mod:`.batch_sink`) writing each stage's
:class:`Outputs` (:mod:`.sinks`: files, tables, Kafka, your function) and calling the driver's controller
(:mod:`floodmark.driver.controller`), which writes each batch's watermarks to a control log that the
executors get with the batch's jobs (:mod:`.batch_entry`). :class:`FloodmarkQuery` (:mod:`.query`) is the
running query. Sessions: :func:`local_session`, :func:`cluster_session`, :func:`configure_spark_with_floodmark`;
Kafka inputs with :func:`read_kafka` and :func:`topic_partitions` (:mod:`.kafka`), JSON-lines files that keep
each line's text for its dead letter with :func:`read_json_lines` (:mod:`.json_lines`), history in an order
of your choosing with :func:`read_files_in_order` (:mod:`.ordered_files`); a query's file outputs read back with
:func:`read_panes`, :func:`read_late` and :func:`read_dead_letters` (:mod:`.results`).
"""

from typing import TYPE_CHECKING

from floodmark.lazy import lazy_exports

if TYPE_CHECKING:
    from floodmark.spark.aggregation import EventTimeAggregation
    from floodmark.spark.json_lines import read_json_lines
    from floodmark.spark.kafka import read_kafka, topic_partitions
    from floodmark.spark.ordered_files import read_files_in_order
    from floodmark.spark.pipeline import Pipeline, SourceTime
    from floodmark.spark.query import FloodmarkQuery
    from floodmark.spark.results import read_dead_letters, read_late, read_panes
    from floodmark.spark.session import (
        cluster_session,
        configure_spark_with_floodmark,
        floodmark_jars,
        kafka_connector_jars,
        local_session,
    )
    from floodmark.spark.sinks import DiscardSink, FileSink, FunctionSink, KafkaSink, Outputs, TableSink

__all__ = [
    "DiscardSink",
    "EventTimeAggregation",
    "FileSink",
    "FloodmarkQuery",
    "FunctionSink",
    "KafkaSink",
    "Outputs",
    "Pipeline",
    "SourceTime",
    "TableSink",
    "cluster_session",
    "configure_spark_with_floodmark",
    "floodmark_jars",
    "kafka_connector_jars",
    "local_session",
    "read_dead_letters",
    "read_files_in_order",
    "read_json_lines",
    "read_kafka",
    "read_late",
    "read_panes",
    "topic_partitions",
]

# Imported on first use: the tick source's module is unpickled in Spark's data-source planner processes
# (floodmark.lazy), which must not load the whole runtime for it.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "read_json_lines": "floodmark.spark.json_lines",
        "read_files_in_order": "floodmark.spark.ordered_files",
        "read_panes": "floodmark.spark.results",
        "read_late": "floodmark.spark.results",
        "read_dead_letters": "floodmark.spark.results",
        "read_kafka": "floodmark.spark.kafka",
        "topic_partitions": "floodmark.spark.kafka",
        "EventTimeAggregation": "floodmark.spark.aggregation",
        "FloodmarkQuery": "floodmark.spark.query",
        "SourceTime": "floodmark.spark.pipeline",
        "cluster_session": "floodmark.spark.session",
        "configure_spark_with_floodmark": "floodmark.spark.session",
        "floodmark_jars": "floodmark.spark.session",
        "kafka_connector_jars": "floodmark.spark.session",
        "local_session": "floodmark.spark.session",
        "DiscardSink": "floodmark.spark.sinks",
        "FileSink": "floodmark.spark.sinks",
        "FunctionSink": "floodmark.spark.sinks",
        "KafkaSink": "floodmark.spark.sinks",
        "Outputs": "floodmark.spark.sinks",
        "TableSink": "floodmark.spark.sinks",
        "Pipeline": "floodmark.spark.pipeline",
    },
)
