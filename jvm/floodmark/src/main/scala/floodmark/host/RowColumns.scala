package floodmark.host

import java.time.ZoneId

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.CatalystTypeConverters
import org.apache.spark.sql.types.DataType

/** One of the JVM map side's rows as the JVM host reads it: its columns by name (`ordinals`: the rows' schema's,
  * made once for a bucket's rows), a missing column as null; values read by [[HostValues]]' rules. */
object RowColumns {

  /** Each column's position in `schema`. */
  def ordinals(schema: org.apache.spark.sql.types.StructType): Map[String, Int] = schema.fieldNames.zipWithIndex.toMap
}

final class RowColumns(row: Row, ordinals: Map[String, Int]) {
  private def at(name: String): Int = ordinals.getOrElse(name, -1)

  private def dataType(name: String): DataType = row.schema.fields(ordinals(name)).dataType

  /** The value as Spark holds it internally (text as `UTF8String`, timestamps as microseconds, dates as days). */
  private def internal(name: String): Any = {
    val i = at(name)
    if (i < 0 || row.isNullAt(i)) null else CatalystTypeConverters.convertToCatalyst(row.get(i))
  }

  /** The value for the operator's reads: text, integers, floats and booleans as the row holds them (a `String`, boxed
    * numbers: no conversion per value), the rest as [[internal]]. */
  private def plain(name: String): Any = {
    val i = at(name)
    if (i < 0 || row.isNullAt(i)) null
    else
      row.get(i) match {
        case v @ (_: String | _: java.lang.Long | _: java.lang.Integer | _: java.lang.Short | _: java.lang.Byte |
            _: java.lang.Double | _: java.lang.Float | _: java.lang.Boolean) =>
          v
        case v => CatalystTypeConverters.convertToCatalyst(v)
      }
  }

  def string(name: String): String = Option(plain(name)).map(_.toString).orNull

  def long(name: String): java.lang.Long = HostValues.long(name, plain(name))

  /** A numeric (or boolean) column's value as a double; NaN when null. */
  def double(name: String): Double = HostValues.double(name, plain(name))

  /** The key of `columns` ([[HostValues.key]]). */
  def key(columns: Seq[String]): Any = HostValues.key(columns.map(name => HostValues.keyPart(plain(name))))

  /** The split label of column `name`'s value ([[PythonJson.label]]). */
  def label(name: String, zone: ZoneId): String = PythonJson.label(internal(name), dataType(name), zone)

  /** `columns` as the record JSON of the Python host ([[PythonJson.obj]]). */
  def json(columns: Seq[String], zone: ZoneId): String =
    PythonJson.obj(columns.map(name => (name, internal(name), dataType(name), zone)))
}
