package floodmark.host

import org.apache.spark.unsafe.types.UTF8String

/** How the JVM host reads a column's value (as Spark holds it internally, null when null) into the window
  * operator's terms, whichever form its input has ([[InputBlocks.Columns]], [[RowColumns]]). */
private[host] object HostValues {

  /** A key column's value as the operator keys it: strings (from a `UTF8String` or a `String`), longs (every
    * integral type, dates and timestamps), doubles (every floating type), booleans; null. */
  def keyPart(value: Any): Any = value match {
    case s: UTF8String => s.toString
    case f: java.lang.Float => f.toDouble
    case n @ (_: java.lang.Integer | _: java.lang.Short | _: java.lang.Byte) => n.asInstanceOf[Number].longValue
    case other => other
  }

  /** The key of a record whose key columns hold `parts`: the one value, or the list of several. */
  def key(parts: Seq[Any]): Any = parts match {
    case Seq(one) => one
    case several => java.util.Arrays.asList(several.map(_.asInstanceOf[AnyRef]): _*)
  }

  /** An integral column's value, or null. */
  def long(name: String, value: Any): java.lang.Long = value match {
    case null => null
    case n: Number => n.longValue
    case other => throw new IllegalArgumentException(s"column $name is not integral: $other")
  }

  /** A numeric (or boolean) column's value as a double; NaN when null. */
  def double(name: String, value: Any): Double = value match {
    case null => Double.NaN
    case b: java.lang.Boolean => if (b) 1.0 else 0.0
    case n: Number => n.doubleValue
    case other => throw new IllegalArgumentException(s"column $name is not numeric: $other")
  }
}
