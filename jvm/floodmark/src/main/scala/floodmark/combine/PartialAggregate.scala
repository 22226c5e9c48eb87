package floodmark.combine

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, AttributeSet, Expression, LeafExpression, Nondeterministic}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete, Count, Max, Min, Sum}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.aggregate.AggUtils
import org.apache.spark.sql.types.{DataType, LongType}

/** Spark's partial aggregation, alone: the rows of each partition grouped by `grouping` and reduced by
  * `aggregates`, with no shuffle and no final aggregation after it, and no state across micro-batches.
  *
  * It is what Spark's own aggregation does before its exchange (`HashAggregateExec` in Partial mode, whole-stage
  * code generation included, planned by `AggUtils.planAggregateWithoutDistinct`), for floodmark's map side
  * (`floodmark.spark.map_side.jvm_combine`): a `groupBy` in a streaming query is a stateful aggregation across batches,
  * which a map-side combine must not be. Each row of the output is one group of one partition (a group can
  * appear once per partition); `output` names the aggregates' partial results: `aggregates(i)` has exactly one
  * (count, sum of doubles, min, max do), renamed to `output(i)`.
  */
case class PartialAggregate(
    grouping: Seq[Attribute],
    reductions: Seq[String],
    inputs: Seq[Attribute],
    results: Seq[Attribute],
    child: LogicalPlan)
    extends UnaryNode {

  /** The aggregate expressions, built when planned (the analyzer allows them in its own Aggregate only). */
  def aggregates: Seq[AggregateExpression] = reductions.zip(inputs).map { case (reduction, input) =>
    AggregateExpression(PartialAggregate.function(reduction, input), Complete, isDistinct = false)
  }

  override def output: Seq[Attribute] = grouping ++ results

  override def producedAttributes: AttributeSet = AttributeSet(results)

  override protected def withNewChildInternal(newChild: LogicalPlan): PartialAggregate = copy(child = newChild)
}

/** Plans [[PartialAggregate]]: the partial half of Spark's own aggregation, its buffers renamed. */
object PartialAggregateStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case node @ PartialAggregate(grouping, _, _, results, child) =>
      val aggregates = node.aggregates
      val planned = AggUtils.planAggregateWithoutDistinct(
        grouping, aggregates, grouping ++ aggregates.map(_.resultAttribute), planLater(child))
      // [final aggregate over partial aggregate]; the exchange between them is added later, and not needed.
      val partial = planned.head.children.head
      val buffers = partial.output.drop(grouping.size)
      require(buffers.size == results.size, s"one partial result per aggregate expected, not $buffers")
      val renamed = buffers.zip(results).map { case (buffer, result) => Alias(buffer, result.name)(result.exprId) }
      ProjectExec(grouping ++ renamed, partial) :: Nil
    case _ => Nil
  }
}

object PartialAggregate {

  /** The plan of [[PartialAggregate]] over `child`'s columns (what the hint `floodmark_partial_aggregate` asks for,
    * [[floodmark.PlanHints]]).
    *
    * @param group the grouping columns.
    * @param aggregates `name=reduction:column`: `count` counts the column's non-null values, `sum` / `min` /
    *   `max` reduce it (`sum` of a double column).
    */
  def plan(child: LogicalPlan, group: Array[String], aggregates: Array[String]): LogicalPlan = {
    def column(name: String): Attribute =
      child.output.find(_.name == name).getOrElse(throw new IllegalArgumentException(s"no column $name"))
    val parsed = aggregates.toSeq.map { spec =>
      val Array(name, rest) = spec.split("=", 2)
      val Array(reduction, input) = rest.split(":", 2)
      val value = column(input)
      (reduction, value, AttributeReference(name, function(reduction, value).dataType, nullable = true)())
    }
    PartialAggregate(group.toSeq.map(column), parsed.map(_._1), parsed.map(_._2), parsed.map(_._3), child)
  }

  private[combine] def function(reduction: String, value: Attribute) = reduction match {
    case "count" => Count(Seq(value))
    case "sum" => Sum(value)
    case "min" => Min(value)
    case "max" => Max(value)
    case other => throw new IllegalArgumentException(s"unknown reduction $other")
  }

}

/** `fm_row_position()`: `(partition index << 33) + n` for the n-th row of a partition that evaluates it, as
  * Spark's `monotonically_increasing_id()`, which Spark refuses in streaming queries. floodmark's map side uses it
  * only within one micro-batch, to restore the input order of the records it leaves alone: a replayed batch
  * reads the same partitions in the same order, so it numbers them alike. */
case class RowPosition() extends LeafExpression with Nondeterministic with CodegenFallback {
  @transient private var next: Long = _

  override protected def initializeInternal(partitionIndex: Int): Unit = next = partitionIndex.toLong << 33

  override protected def evalInternal(input: InternalRow): Any = {
    val position = next
    next += 1
    position
  }

  override def nullable: Boolean = false

  override def dataType: DataType = LongType

  override def prettyName: String = RowPosition.Name
}

object RowPosition {
  val Name = "fm_row_position"

  def build(arguments: Seq[Expression]): Expression = {
    require(arguments.isEmpty, s"$Name takes no argument")
    RowPosition()
  }
}
