"""floodmark's Spark runtime: the only package that imports pyspark.

It hosts :mod:`floodmark.core` on Spark Structured Streaming; its folders follow a record from source to sink:

* :mod:`.sources`: a source up to the shuffle (:mod:`.sources.inputs`) and the readers: Kafka
  (:func:`read_kafka`, :func:`topic_partitions`), JSON-lines files that keep each line's text for its dead letter
  (:func:`read_json_lines`), history in an order of your choosing (:func:`read_files_in_order`), the tick source;
* :mod:`.map_side`: validation, split statistics and partial aggregates before the shuffle (Python over Arrow, or
  the JVM);
* :mod:`.stateful`: the levels of stateful operators running the core window operator per bucket, the buckets'
  state, and how a batch's tasks get the batch's control entry (:mod:`.batch_entry`);
* :mod:`.outputs`: the ``foreachBatch`` function writing each stage's :class:`Outputs` (files, tables, Kafka,
  your function) and calling the driver's controller (:mod:`floodmark.driver.controller`); reading file outputs
  back (:func:`read_panes`, :func:`read_late`, :func:`read_dead_letters`);
* :mod:`.driver`: the graph of sources and windowed stages (:class:`Pipeline`; :class:`EventTimeAggregation` is
  the graph of one source and one stage), the running query (:class:`FloodmarkQuery`), sessions
  (:func:`local_session`, :func:`cluster_session`, :func:`configure_spark_with_floodmark`, a Spark Connect
  server's :func:`connect_server_conf`; :mod:`.connect` tells the two kinds of session apart).

What every folder shares: :mod:`.plan` (the runtime plan, the Spark types of the protocol's columns),
:mod:`.rows` and :mod:`.blocks` (rows as Arrow and pandas, and how they cross the shuffle).
"""

from typing import TYPE_CHECKING

from floodmark.lazy import lazy_exports

if TYPE_CHECKING:
    from floodmark.jvm.settings import connect_server_conf
    from floodmark.spark.driver.aggregation import EventTimeAggregation
    from floodmark.spark.driver.pipeline import Pipeline
    from floodmark.spark.driver.query import FloodmarkQuery
    from floodmark.spark.driver.restarts import Restarts
    from floodmark.spark.driver.session import (
        cluster_session,
        configure_spark_with_floodmark,
        floodmark_jars,
        kafka_connector_jars,
        local_session,
    )
    from floodmark.spark.driver.source_time import SourceTime
    from floodmark.spark.outputs.results import read_dead_letters, read_late, read_panes
    from floodmark.spark.outputs.sinks import DiscardSink, FileSink, FunctionSink, KafkaSink, Outputs, TableSink
    from floodmark.spark.sources.json_lines import read_json_lines
    from floodmark.spark.sources.kafka import read_kafka, topic_partitions
    from floodmark.spark.sources.ordered_files import read_files_in_order

__all__ = [
    "DiscardSink",
    "EventTimeAggregation",
    "FileSink",
    "FloodmarkQuery",
    "FunctionSink",
    "KafkaSink",
    "Outputs",
    "Pipeline",
    "Restarts",
    "SourceTime",
    "TableSink",
    "cluster_session",
    "configure_spark_with_floodmark",
    "connect_server_conf",
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
        "read_json_lines": "floodmark.spark.sources.json_lines",
        "read_files_in_order": "floodmark.spark.sources.ordered_files",
        "read_panes": "floodmark.spark.outputs.results",
        "read_late": "floodmark.spark.outputs.results",
        "read_dead_letters": "floodmark.spark.outputs.results",
        "read_kafka": "floodmark.spark.sources.kafka",
        "topic_partitions": "floodmark.spark.sources.kafka",
        "EventTimeAggregation": "floodmark.spark.driver.aggregation",
        "FloodmarkQuery": "floodmark.spark.driver.query",
        "Restarts": "floodmark.spark.driver.restarts",
        "SourceTime": "floodmark.spark.driver.source_time",
        "cluster_session": "floodmark.spark.driver.session",
        "configure_spark_with_floodmark": "floodmark.spark.driver.session",
        "connect_server_conf": "floodmark.jvm.settings",
        "floodmark_jars": "floodmark.spark.driver.session",
        "kafka_connector_jars": "floodmark.spark.driver.session",
        "local_session": "floodmark.spark.driver.session",
        "DiscardSink": "floodmark.spark.outputs.sinks",
        "FileSink": "floodmark.spark.outputs.sinks",
        "FunctionSink": "floodmark.spark.outputs.sinks",
        "KafkaSink": "floodmark.spark.outputs.sinks",
        "Outputs": "floodmark.spark.outputs.sinks",
        "TableSink": "floodmark.spark.outputs.sinks",
        "Pipeline": "floodmark.spark.driver.pipeline",
    },
)
