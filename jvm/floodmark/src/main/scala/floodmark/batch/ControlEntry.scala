package floodmark.batch

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import org.apache.spark.TaskContext

/** The running micro-batch's floodmark control entry (`floodmark.protocol.control.ControlEntry`, as JSON): its
  * batch (`seq`), processing time and stages' input watermarks (ms), and what each state bucket last reported.
  *
  * The driver publishes entry N as the SQL conf `spark.floodmark.control.entry` of the query's session, which Spark
  * hands to batch N's jobs as the job property of that name. [[ControlEntry.current]] refuses an entry whose `seq`
  * is not the task's batch id (`streaming.sql.batchId`), or a task without an entry: never a silent use of another
  * batch's watermark.
  */
final class ControlEntry private (node: JsonNode) {
  val seq: Long = node.path("seq").asLong(-1)

  /** The batch's processing time (ms). */
  def processingTime: Long = number(node.path(ControlEntry.ProcessingTime), ControlEntry.ProcessingTime)

  /** `stage`'s input watermark for the batch (ms). */
  def watermark(stage: String): Long = number(node.path("stage_watermarks").path(stage), s"watermark for stage '$stage'")

  /** Whether the batch lets `stage`'s `bucket` fire, collect or clean up without input, by what it last reported
    * (`BucketGauges.due` for one bucket, `floodmark/protocol/control.py`: its watermark deadline reached, or its
    * processing-time deadline); true if it has not reported yet. A report holds a bucket's gauges in `wire.GAUGES`'
    * order: `nextFireAt` and `nextTimerAt` are where those two deadlines stand in it (`floodmark.host.Wire.gaugeAt`). */
  def due(stage: String, bucket: Int, nextFireAt: Int, nextTimerAt: Int): Boolean = {
    val report = node.path("buckets").path(s"$stage/$bucket")
    if (report.isMissingNode || report.isNull) return true
    val nextFire = report.path(nextFireAt)
    val nextTimer = report.path(nextTimerAt)
    (nextFire.canConvertToLong && watermark(stage) >= nextFire.asLong) ||
    (nextTimer.canConvertToLong && processingTime >= nextTimer.asLong)
  }

  private def number(value: JsonNode, what: String): Long = {
    if (!value.canConvertToLong) throw new IllegalStateException(s"floodmark control entry $seq has no $what")
    value.asLong
  }
}

object ControlEntry {
  val EntryProperty = "spark.floodmark.control.entry"
  val BatchIdProperty = "streaming.sql.batchId"
  private[batch] val ProcessingTime = "processing_time"

  private val mapper = new ObjectMapper()

  /** The entry whose JSON text (`floodmark.spark.batch_entry.encode`'s) is `text`, unchecked: for tests of
    * its rules outside a micro-batch; a task takes [[current]]. */
  def parse(text: String): ControlEntry = new ControlEntry(mapper.readTree(text))

  /** The entry of the micro-batch the running task belongs to: [[forBatch]] of what its job carries. */
  def current(): ControlEntry = {
    val context = TaskContext.get()
    if (context == null) forBatch(null, null)
    else forBatch(context.getLocalProperty(EntryProperty), context.getLocalProperty(BatchIdProperty))
  }

  /** The entry whose text is `text` (null: none published), which must be batch `batchId`'s when Spark gave the task
    * a batch id (null: none; over Spark Connect the sink's jobs run on the server's Connect thread, which has none,
    * and the entry is taken as the batch's). The rule and its texts are `floodmark.spark.batch_entry`'s
    * `entry_for_batch`, held equal by `tests/spark/test_jvm_host_texts.py`. */
  def forBatch(text: String, batchId: String): ControlEntry = {
    if (text == null)
      throw new IllegalStateException(
        s"${if (batchId == null) "this task" else s"micro-batch $batchId"} carries no floodmark control entry: " +
          "floodmark's operators run only in the micro-batches of a query started with EventTimeAggregation.start() " +
          "or Pipeline.start()")
    val entry = parse(text)
    if (batchId != null && entry.seq != batchId.toLong)
      throw new IllegalStateException(s"micro-batch $batchId carries floodmark control entry ${entry.seq}, not its own")
    entry
  }
}
