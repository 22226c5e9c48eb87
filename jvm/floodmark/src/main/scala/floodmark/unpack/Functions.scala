package floodmark.unpack

import org.apache.spark.sql.classic.SparkSession

/** Registers floodmark's SQL functions on a session (called from Python through py4j). A streaming query runs in
  * a clone of its session taken at `start()`, so register before starting it. */
object Functions {
  def register(session: SparkSession): Unit =
    session.sessionState.functionRegistry.createOrReplaceTempFunction(UnpackBlock.Name, UnpackBlock.build, "scala_udf")
}
