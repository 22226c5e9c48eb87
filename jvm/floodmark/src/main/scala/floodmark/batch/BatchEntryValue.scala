package floodmark.batch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, LeafExpression, Nondeterministic}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.types.{DataType, LongType}

/** `fm_batch_watermark(stage)` and `fm_batch_processing_time()`: a value of the running micro-batch's floodmark
  * control entry, in ms: `stage`'s input watermark (`stage_watermarks[stage]`) or the batch's processing time.
  *
  * The entry is read with [[ControlEntry.current]] (the Python side reads it with
  * `floodmark.spark.batch_entry.CurrentBatchEntry`: the same rule), once per task partition
  * (`Nondeterministic.initialize`), not per row: it is constant in a batch but differs between batches of one plan,
  * so Spark must not fold it.
  */
case class BatchEntryValue(field: String, stage: String)
    extends LeafExpression
    with Nondeterministic
    with CodegenFallback {

  @transient private var value: Long = _

  override protected def initializeInternal(partitionIndex: Int): Unit =
    value = BatchEntryValue.read(field, stage)

  override protected def evalInternal(input: InternalRow): Any = value

  override def nullable: Boolean = false

  override def dataType: DataType = LongType

  override def prettyName: String =
    if (field == BatchEntryValue.ProcessingTime) BatchEntryValue.ProcessingTimeName else BatchEntryValue.WatermarkName

  override def sql: String =
    if (field == BatchEntryValue.ProcessingTime) s"$prettyName()" else s"$prettyName('$stage')"
}

object BatchEntryValue {
  val WatermarkName = "fm_batch_watermark"
  val ProcessingTimeName = "fm_batch_processing_time"
  private[batch] val Watermark = "watermark"
  private[batch] val ProcessingTime = ControlEntry.ProcessingTime

  /** The entry's `field` for the running task (`stage` names the watermark's stage). */
  def read(field: String, stage: String): Long = {
    val entry = ControlEntry.current()
    if (field == ProcessingTime) entry.processingTime else entry.watermark(stage)
  }

  def buildWatermark(arguments: Seq[Expression]): Expression = arguments match {
    case Seq(stage) if stage.foldable => BatchEntryValue(Watermark, stage.eval().toString)
    case _ => throw new IllegalArgumentException(s"$WatermarkName takes one literal argument: the stage's name")
  }

  def buildProcessingTime(arguments: Seq[Expression]): Expression = arguments match {
    case Seq() => BatchEntryValue(ProcessingTime, "")
    case _ => throw new IllegalArgumentException(s"$ProcessingTimeName takes no argument")
  }
}
