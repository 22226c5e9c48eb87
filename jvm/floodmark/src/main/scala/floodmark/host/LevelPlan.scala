package floodmark.host

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import floodmark.window.{SegmentLimits, WindowSpec}
import org.apache.spark.sql.types.{DataType, StructType}

/** What the JVM host needs to run one window stage: written by the Python plan
  * (`floodmark.spark.stateful.jvm_level.level_plan`), where every rule about columns is kept.
  *
  * @param spec the stage's built-in form (`floodmark.core.built_in_spec.built_in_form`)
  * @param keyColumns the user key columns, in order (one: the key is its value; several: a list of their values)
  * @param tsColumn the combiner rows' event-time column (ms)
  * @param valueFields the columns a RAW row's values are read from, in `AggregateLayout`'s field order
  * @param accumulators a PARTIAL row's accumulator columns, in `AggregateLayout`'s column order
  * @param userColumns what a late record's `record` JSON holds, in order
  * @param emitted the stage's emitted schema (`StageSemantics.emitted_schema`): an OUTPUT block's columns
  * @param direct how to read the JVM map side's rows when they come as they are (no IN blocks), or None
  */
final case class StagePlan(
    name: String,
    spec: WindowSpec,
    keyColumns: Seq[String],
    tsColumn: String,
    valueFields: Seq[String],
    accumulators: Seq[String],
    userColumns: Seq[String],
    emitted: StructType,
    direct: Option[DirectInput])

/** What the JVM host needs to read the JVM map side's rows itself (`floodmark.spark.map_side.jvm_combine`): its
  * aggregated rows (`fm_order` null: partials of one key and window, with the records, lowest and highest event time
  * of their split) and the records it left alone (`fm_order`: their place in the input), whose reasons and split
  * statistics the Arrow combiner finds otherwise (`AggregatedInJvm`).
  *
  * @param split the split column (None: the one split "0"); @param source the prefix of split labels (several
  *   sources); @param splitStats whether the stage reports its source's splits
  * @param corrupt Spark's corrupt-record column; @param text the original-text column (a dead letter's record)
  * @param tsRaw the event-time value as text; @param tsError why the event-time expression failed
  * @param numeric the numeric aggregate inputs; @param records an aggregated row's record count column
  * @param timeZone the session's time zone (a timestamp's wall-clock text)
  */
final case class DirectInput(
    split: Option[String],
    source: Option[String],
    splitStats: Boolean,
    corrupt: Option[String],
    text: Option[String],
    tsRaw: String,
    tsError: String,
    numeric: Seq[String],
    records: String,
    rules: RecordRules,
    timeZone: java.time.ZoneId)

/** The stages of one level the JVM hosts, by name; the carrier rows' schema; the largest state value (bytes); the most
  * rows an OUTPUT block holds (`wire.OUTPUT_BLOCK_ROWS`); when a bucket keeps partials apart as segments
  * (`core.segments`' `DEFER_ABOVE` and `FANOUT`); the protocol's names ([[Wire]]). */
final case class LevelPlan(
    stages: Map[String, StagePlan],
    carrier: StructType,
    stateValueBytes: Int,
    outputBlockRows: Int,
    segmentLimits: SegmentLimits,
    wire: Wire)

object LevelPlan {
  private val mapper = new ObjectMapper()

  def parse(text: String): LevelPlan = {
    val node = mapper.readTree(text)
    val stages = node.path("stages").elements.asScala.map { stage =>
      val plan = StagePlan(
        stage.path("name").asText,
        WindowSpec.fromJson(stage.path("spec")),
        strings(stage.path("keys")),
        stage.path("ts").asText,
        strings(stage.path("values")),
        strings(stage.path("accumulators")),
        strings(stage.path("user_columns")),
        DataType.fromJson(stage.path("emitted").asText).asInstanceOf[StructType],
        direct(stage.path("direct")))
      plan.name -> plan
    }.toMap
    LevelPlan(
      stages,
      DataType.fromJson(node.path("carrier").asText).asInstanceOf[StructType],
      node.path("state_value_bytes").asInt,
      node.path("output_block_rows").asInt,
      new SegmentLimits(
        required(node, "segment_limits").path("defer_above").asInt, node.path("segment_limits").path("fanout").asInt),
      Wire.fromJson(node.path("wire")))
  }

  private def direct(node: JsonNode): Option[DirectInput] =
    if (node.isMissingNode || node.isNull) None
    else
      Some(
        DirectInput(
          text(node.path("split")),
          text(node.path("source")),
          node.path("split_stats").asBoolean,
          text(node.path("corrupt")),
          text(node.path("text")),
          node.path("ts_raw").asText,
          node.path("ts_error").asText,
          strings(node.path("numeric")),
          node.path("records").asText,
          RecordRules(
            node.path("earliest").asLong,
            node.path("latest").asLong,
            if (node.path("max_future_skew").canConvertToLong) Some(node.path("max_future_skew").asLong) else None),
          java.time.ZoneId.of(node.path("time_zone").asText)))

  private def required(node: JsonNode, field: String): JsonNode =
    if (node.hasNonNull(field)) node.path(field)
    else throw new IllegalArgumentException(s"a level plan without $field (a floodmark jar and package of other versions?)")

  private def text(node: JsonNode): Option[String] = if (node.isMissingNode || node.isNull) None else Some(node.asText)

  private def strings(array: JsonNode): Seq[String] = array.elements.asScala.map(_.asText).toSeq
}
