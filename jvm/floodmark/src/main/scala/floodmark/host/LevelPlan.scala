package floodmark.host

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import floodmark.window.WindowSpec
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
  */
final case class StagePlan(
    name: String,
    spec: WindowSpec,
    keyColumns: Seq[String],
    tsColumn: String,
    valueFields: Seq[String],
    accumulators: Seq[String],
    userColumns: Seq[String],
    emitted: StructType)

/** The stages of one level the JVM hosts, by name; the carrier rows' schema; the largest state value (bytes). */
final case class LevelPlan(stages: Map[String, StagePlan], carrier: StructType, stateValueBytes: Int)

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
        DataType.fromJson(stage.path("emitted").asText).asInstanceOf[StructType])
      plan.name -> plan
    }.toMap
    LevelPlan(
      stages,
      DataType.fromJson(node.path("carrier").asText).asInstanceOf[StructType],
      node.path("state_value_bytes").asInt)
  }

  private def strings(array: JsonNode): Seq[String] = array.elements.asScala.map(_.asText).toSeq
}
