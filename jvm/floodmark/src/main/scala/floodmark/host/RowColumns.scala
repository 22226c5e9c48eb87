package floodmark.host

import java.time.ZoneId

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.CatalystTypeConverters
import org.apache.spark.sql.types.DataType
import org.apache.spark.unsafe.types.UTF8String

/** One of the JVM map side's rows as the JVM host reads it: its columns by name, a missing column as null. Keys
  * are keyed as [[InputBlocks.Columns.key]] keys them (integral values as longs, floating ones as doubles). */
final class RowColumns(row: Row) {
  private val schema = row.schema

  private def at(name: String): Int = if (schema.fieldNames.contains(name)) schema.fieldIndex(name) else -1

  private def dataType(name: String): DataType = schema(name).dataType

  /** The value as Spark holds it internally (text as `UTF8String`, timestamps as microseconds, dates as days). */
  private def internal(name: String): Any = {
    val i = at(name)
    if (i < 0 || row.isNullAt(i)) null else CatalystTypeConverters.convertToCatalyst(row.get(i))
  }

  def string(name: String): String = Option(internal(name)).map(_.toString).orNull

  def long(name: String): java.lang.Long = internal(name) match {
    case null => null
    case n: Number => n.longValue
    case other => throw new IllegalArgumentException(s"column $name is not integral: $other")
  }

  /** A numeric (or boolean) column's value as a double; NaN when null. */
  def double(name: String): Double = internal(name) match {
    case null => Double.NaN
    case b: java.lang.Boolean => if (b) 1.0 else 0.0
    case n: Number => n.doubleValue
    case other => throw new IllegalArgumentException(s"column $name is not numeric: $other")
  }

  /** The key of `columns`: one column's value, or the list of several's. */
  def key(columns: Seq[String]): Any = columns match {
    case Seq(one) => keyPart(one)
    case several => java.util.Arrays.asList(several.map(keyPart(_).asInstanceOf[AnyRef]): _*)
  }

  private def keyPart(name: String): Any = internal(name) match {
    case s: UTF8String => s.toString
    case f: java.lang.Float => f.toDouble
    case n @ (_: java.lang.Integer | _: java.lang.Short | _: java.lang.Byte) => n.asInstanceOf[Number].longValue
    case other => other
  }

  /** The split label of column `name`'s value ([[PythonJson.label]]). */
  def label(name: String, zone: ZoneId): String = PythonJson.label(internal(name), dataType(name), zone)

  /** `columns` as the record JSON of the Python host ([[PythonJson.obj]]). */
  def json(columns: Seq[String], zone: ZoneId): String =
    PythonJson.obj(columns.map(name => (name, internal(name), dataType(name), zone)))
}
