package floodmark.unpack

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.classic.SparkSession

import floodmark.batch.BatchEntryValue
import floodmark.combine.RowPosition
import floodmark.input.{TryError, TryValue}

/** floodmark's SQL functions, listed once: a session gets them from [[floodmark.Extensions]]
  * (`spark.sql.extensions`, no py4j: what a Spark Connect server needs) or, for a session built without it, from
  * [[register]] (called from Python through py4j). */
object Functions {
  val all: Seq[(String, Seq[Expression] => Expression)] = Seq(
    UnpackBlock.Name -> UnpackBlock.build,
    BatchEntryValue.WatermarkName -> BatchEntryValue.buildWatermark,
    BatchEntryValue.ProcessingTimeName -> BatchEntryValue.buildProcessingTime,
    RowPosition.Name -> RowPosition.build,
    TryValue.Name -> TryValue.build,
    TryError.Name -> TryError.build)

  /** Registers the functions on `session`. A streaming query runs in a clone of its session taken at `start()`,
    * so register before starting it. */
  def register(session: SparkSession): Unit = {
    val registry = session.sessionState.functionRegistry
    all.foreach { case (name, builder) => registry.createOrReplaceTempFunction(name, builder, "scala_udf") }
  }
}
