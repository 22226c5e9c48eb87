package floodmark.unpack

import org.apache.spark.sql.classic.SparkSession

import floodmark.batch.BatchEntryValue
import floodmark.combine.RowPosition
import floodmark.input.{TryError, TryValue}

/** Registers floodmark's SQL functions on a session (called from Python through py4j). A streaming query runs in
  * a clone of its session taken at `start()`, so register before starting it. */
object Functions {
  def register(session: SparkSession): Unit = {
    val registry = session.sessionState.functionRegistry
    registry.createOrReplaceTempFunction(UnpackBlock.Name, UnpackBlock.build, "scala_udf")
    registry.createOrReplaceTempFunction(BatchEntryValue.WatermarkName, BatchEntryValue.buildWatermark, "scala_udf")
    registry.createOrReplaceTempFunction(
      BatchEntryValue.ProcessingTimeName, BatchEntryValue.buildProcessingTime, "scala_udf")
    registry.createOrReplaceTempFunction(RowPosition.Name, RowPosition.build, "scala_udf")
    registry.createOrReplaceTempFunction(TryValue.Name, TryValue.build, "scala_udf")
    registry.createOrReplaceTempFunction(TryError.Name, TryError.build, "scala_udf")
  }
}
