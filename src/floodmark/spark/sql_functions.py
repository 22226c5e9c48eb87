"""floodmark's SQL functions on a Spark session (``fm_unpack``, ``fm_batch_watermark``, ``fm_try``, ...), from its
jar: what the sources, the levels and the sink's unpacking call by name."""

from __future__ import annotations

from pyspark.sql import SparkSession

from floodmark.spark.connect import is_connect

JVM_FUNCTIONS = "floodmark.unpack.Functions"
"""The JVM object that registers floodmark's SQL functions on a session (``jvm/floodmark``)."""
FUNCTION = "fm_unpack"
"""The function whose presence says a session has them all."""


def register_functions(spark: SparkSession) -> bool:
    """Whether ``spark`` has floodmark's SQL functions (``fm_unpack``, ``fm_batch_watermark``, ...): from its
    session extensions (``floodmark.Extensions``, which floodmark's sessions and
    :func:`~floodmark.spark.driver.session.configure_spark_with_floodmark` set), else registered here through py4j
    when its driver can load :data:`JVM_FUNCTIONS` (never over Spark Connect: no py4j). Call before the
    query's DataFrames are built (they are
    analysed as they are built) and before it starts."""
    if spark.catalog.functionExists(FUNCTION):
        return True
    if is_connect(spark):  # a Connect server's JVM is reached only through its extensions
        return False
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    if not jvm.org.apache.spark.util.Utils.classIsLoadable(JVM_FUNCTIONS):
        return False
    jvm.floodmark.unpack.Functions.register(spark._jsparkSession)
    return True
