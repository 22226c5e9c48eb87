package floodmark

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo

import floodmark.combine.PartialAggregateStrategy
import floodmark.unpack.Functions

/** floodmark's session extensions, for `spark.sql.extensions=floodmark.Extensions`: its SQL functions
  * ([[floodmark.unpack.Functions]]), its plan nodes named by hints ([[PlanHints]]: the JVM host and the JVM map
  * side) and the JVM map side's planner strategy, in every session of the JVM and their clones, without py4j (a
  * Spark Connect server is configured this way). floodmark's own sessions set it (`floodmark.spark.driver.session`);
  * a session built without it gets the functions through py4j, and its stages run on the Python host. */
class Extensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    Functions.all.foreach { case (name, builder) =>
      extensions.injectFunction((FunctionIdentifier(name), new ExpressionInfo(getClass.getName, name), builder))
    }
    extensions.injectResolutionRule(session => PlanHints(session))
    extensions.injectPlannerStrategy(_ => PartialAggregateStrategy)
  }
}
