package floodmark.batch

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, LeafExpression, Nondeterministic}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.types.{DataType, LongType}

/** `fm_batch_watermark(stage)` and `fm_batch_processing_time()`: a value of the running micro-batch's floodmark
  * control entry, in ms: `stage`'s input watermark (`stage_watermarks[stage]`) or the batch's processing time.
  *
  * The driver publishes entry N as the SQL conf `spark.floodmark.control.entry` of the query's session, which Spark
  * hands to batch N's jobs as the job property of that name (the Python
  * side reads it with `floodmark.spark.stateful.batch_entry.CurrentBatchEntry`; this is the same rule for expressions).
  * The value is read once per task partition (`Nondeterministic.initialize`), not per row: it is constant in a
  * batch but differs between batches of one plan, so Spark must not fold it. An entry whose `seq` is not the
  * task's batch id (`streaming.sql.batchId`), or a task outside a micro-batch, is an error, never a silent use of
  * another batch's watermark.
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
  val EntryProperty = "spark.floodmark.control.entry"
  val BatchIdProperty = "streaming.sql.batchId"
  private[batch] val Watermark = "watermark"
  private[batch] val ProcessingTime = "processing_time"

  private val mapper = new ObjectMapper()

  /** The entry's `field` for the running task (`stage` names the watermark's stage). */
  def read(field: String, stage: String): Long = {
    val context = TaskContext.get()
    val batchId = if (context == null) null else context.getLocalProperty(BatchIdProperty)
    if (batchId == null)
      throw new IllegalStateException("floodmark's operators run only inside a streaming micro-batch (no batch id)")
    val text = context.getLocalProperty(EntryProperty)
    if (text == null)
      throw new IllegalStateException(
        s"micro-batch $batchId carries no floodmark control entry: the query must be started by floodmark " +
          "(classic PySpark, pinned threads: the default)")
    val entry = mapper.readTree(text)
    val seq = entry.path("seq").asLong(-1)
    if (seq != batchId.toLong)
      throw new IllegalStateException(s"micro-batch $batchId carries floodmark control entry $seq, not its own")
    val node = if (field == ProcessingTime) entry.path(ProcessingTime) else entry.path("stage_watermarks").path(stage)
    if (!node.canConvertToLong)
      throw new IllegalStateException(s"floodmark control entry $seq has no $field for stage '$stage'")
    node.asLong
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
