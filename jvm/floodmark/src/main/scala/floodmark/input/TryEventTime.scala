package floodmark.input

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, TryEval, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.types.{DataType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/** `fm_try(expr)`: `expr`, or null where evaluating it throws (Spark's own `TryEval`, which backs its `try_*`
  * functions). floodmark evaluates a user's event-time expression with it, so that a value the expression
  * cannot take (`to_timestamp` of `'yesterday'` under ANSI mode) makes one dead letter, not a failed batch. */
object TryValue {
  val Name = "fm_try"

  def build(arguments: Seq[Expression]): Expression = {
    require(arguments.length == 1, s"$Name takes one argument")
    TryEval(arguments.head)
  }
}

/** `fm_try_error(expr)`: null where `expr` evaluates, else the first line of the error it throws (at most
  * [[TryError.MaxLength]] characters): the dead letter's reason. Evaluated only for the rows `fm_try` gave null,
  * so it is interpreted, not compiled. */
case class TryError(child: Expression) extends UnaryExpression with CodegenFallback {
  override def eval(input: InternalRow): Any =
    try {
      child.eval(input)
      null
    } catch {
      case error: Exception => UTF8String.fromString(TryError.firstLine(error))
    }

  override def dataType: DataType = StringType

  override def nullable: Boolean = true

  override def prettyName: String = TryError.Name

  override protected def withNewChildInternal(newChild: Expression): TryError = copy(child = newChild)
}

object TryError {
  val Name = "fm_try_error"
  val MaxLength = 300

  def build(arguments: Seq[Expression]): Expression = {
    require(arguments.length == 1, s"$Name takes one argument")
    TryError(arguments.head)
  }

  def firstLine(error: Throwable): String = {
    val text = Option(error.getMessage).map(_.trim).filter(_.nonEmpty).getOrElse(error.getClass.getName)
    val line = text.linesIterator.next()
    if (line.length <= MaxLength) line else line.take(MaxLength - 3) + "..."
  }
}
