package floodmark

import java.nio.charset.StandardCharsets
import java.util.Base64

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper
import floodmark.combine.PartialAggregate
import floodmark.host.WindowLevel
import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
import org.apache.spark.sql.catalyst.expressions.Literal
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnresolvedHint}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreePattern.UNRESOLVED_HINT
import org.apache.spark.sql.classic
import org.apache.spark.sql.types.StringType

/** floodmark's plan nodes, named in a DataFrame by a hint: Python reaches them the same way from a classic session
  * and over Spark Connect, where a hint is part of the relation the client sends and there is no py4j.
  *
  *  - `rows.hint("floodmark_window_level", plan)`: the JVM host of a level of window stages over the carrier rows
  *    `rows` ([[floodmark.host.WindowLevel]]; `plan`: `LevelPlan`'s JSON);
  *  - `inputs.hint("floodmark_partial_aggregate", group, aggregates)`: Spark's partial aggregation alone over
  *    `inputs` ([[floodmark.combine.PartialAggregate.plan]]; `group`, `aggregates`: JSON arrays of texts).
  *
  * Each parameter is a text in URL-safe base64: a Connect server reads a hint's text parameter as a column name
  * and splits it at dots. The rule runs in the analyzer's Resolution batch and replaces a hint once its child is
  * resolved, before the batch that drops the hints Spark does not know. Installed by [[Extensions]]: a session
  * without floodmark's extensions keeps the hint, which Spark then drops (the Python side does not ask for it).
  */
case class PlanHints(session: org.apache.spark.sql.SparkSession) extends Rule[LogicalPlan] {
  import PlanHints._

  override def apply(plan: LogicalPlan): LogicalPlan =
    plan.resolveOperatorsUpWithPruning(_.containsPattern(UNRESOLVED_HINT)) {
      case UnresolvedHint(WindowLevelHint, Seq(level), child) if child.resolved =>
        val rows = new classic.Dataset[Row](session.asInstanceOf[classic.SparkSession], child, Encoders.row(child.schema))
        WindowLevel(rows, text(level)).asInstanceOf[classic.Dataset[Row]].queryExecution.analyzed
      case UnresolvedHint(PartialAggregateHint, Seq(group, aggregates), child) if child.resolved =>
        PartialAggregate.plan(child, texts(group), texts(aggregates))
    }
}

object PlanHints {
  val WindowLevelHint = "floodmark_window_level"
  val PartialAggregateHint = "floodmark_partial_aggregate"

  private val Json = new ObjectMapper()

  /** A hint parameter's text: base64 in a string literal (a classic session), a plain string, or a column name
    * (Spark Connect); dots cannot occur in base64, so the name has one part. */
  private[floodmark] def text(parameter: Any): String = {
    val encoded = parameter match {
      case Literal(value, StringType) if value != null => value.toString
      case value: String => value
      case attribute: UnresolvedAttribute => attribute.nameParts.mkString(".")
      case other => throw new IllegalArgumentException(s"a floodmark hint parameter must be a text, not $other")
    }
    new String(Base64.getUrlDecoder.decode(encoded), StandardCharsets.UTF_8)
  }

  private def texts(parameter: Any): Array[String] =
    Json.readTree(text(parameter)).elements().asScala.map(_.asText()).toArray
}
