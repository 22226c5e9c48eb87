package floodmark.host

import java.math.{BigDecimal, MathContext, RoundingMode}
import java.time.{Instant, LocalDate, LocalDateTime, ZoneId, ZoneOffset}

import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/** A record's columns as JSON text exactly as the Python host writes it (`floodmark.spark.rows.records_json`:
  * `json.dumps` of each column's plain value, pandas' view of the row), so that a late record's `record` is the
  * same text whichever host ran the stage.
  *
  * The rules of `json.dumps` (default separators `", "` and `": "`, `ensure_ascii`), Python's `repr` of a float
  * (the shortest digits that read back as the same double; exponent form below 1e-4 and from 1e16), null for
  * NaN and missing values, and `str()` of what pandas makes of the column: a timestamp is the wall-clock time
  * in its column's zone, `YYYY-MM-DD HH:MM:SS` with `.ffffff` when it has microseconds; a date `YYYY-MM-DD`.
  * [[PythonJson.supports]] says which Spark types it writes (others make the stage stay on the Python host).
  */
object PythonJson {

  /** Whether a column of `dataType` can be written (the types above, and every integral and floating type). */
  def supports(dataType: DataType): Boolean = dataType match {
    case StringType | LongType | IntegerType | ShortType | ByteType | DoubleType | FloatType | BooleanType |
        DateType | TimestampType | TimestampNTZType =>
      true
    case _ => false
  }

  /** `{"name": value, ...}` of `columns`: (name, the value as Spark holds it internally, its type, its zone). */
  def obj(columns: Seq[(String, Any, DataType, ZoneId)]): String = {
    val out = new java.lang.StringBuilder("{")
    var first = true
    for ((name, value, dataType, zone) <- columns) {
      if (!first) out.append(", ")
      first = false
      string(out, name)
      out.append(": ")
      this.value(out, value, dataType, zone)
    }
    out.append('}').toString
  }

  private def value(out: java.lang.StringBuilder, value: Any, dataType: DataType, zone: ZoneId): Unit =
    if (value == null) out.append("null")
    else
      dataType match {
        case StringType => string(out, value.asInstanceOf[UTF8String].toString)
        case LongType | IntegerType | ShortType | ByteType => out.append(value.asInstanceOf[Number].longValue)
        case DoubleType => out.append(double(value.asInstanceOf[Double]))
        case FloatType => out.append(double(value.asInstanceOf[Float].toDouble))
        case BooleanType => out.append(if (value.asInstanceOf[Boolean]) "true" else "false")
        case DateType => string(out, LocalDate.ofEpochDay(value.asInstanceOf[Int].toLong).toString)
        case TimestampType => string(out, wallClock(value.asInstanceOf[Long], zone))
        case TimestampNTZType => string(out, wallClock(value.asInstanceOf[Long], ZoneOffset.UTC))
        case other => throw new IllegalArgumentException(s"no Python JSON form of ${other.simpleString}")
      }

  /** `str()` of a pandas timestamp: `micros` since the epoch as wall-clock time in `zone`. */
  private def wallClock(micros: Long, zone: ZoneId): String = {
    val instant = Instant.ofEpochSecond(Math.floorDiv(micros, 1000000L), Math.floorMod(micros, 1000000L) * 1000L)
    val time = LocalDateTime.ofInstant(instant, zone)
    val text = f"${time.getYear}%04d-${time.getMonthValue}%02d-${time.getDayOfMonth}%02d " +
      f"${time.getHour}%02d:${time.getMinute}%02d:${time.getSecond}%02d"
    val fraction = time.getNano / 1000
    if (fraction == 0) text else f"$text.$fraction%06d"
  }

  /** Python's `json.dumps` of a float: `repr`, with NaN as null (floodmark's `plain` makes NaN None). */
  def double(d: Double): String =
    if (d.isNaN) "null"
    else if (d.isInfinite) (if (d > 0) "Infinity" else "-Infinity")
    else if (d == 0.0) (if (1.0 / d < 0) "-0.0" else "0.0")
    else {
      val exact = new BigDecimal(d)
      // The shortest decimal that reads back as d (Python's repr, David Gay's algorithm's result).
      val shortest = (1 to 17).iterator
        .map(p => exact.round(new MathContext(p, RoundingMode.HALF_EVEN)))
        .find(_.doubleValue == d)
        .get
        .stripTrailingZeros
      val digits = shortest.unscaledValue.abs.toString
      val exponent = digits.length - 1 - shortest.scale // of the first digit
      val sign = if (d < 0) "-" else ""
      if (exponent >= -4 && exponent < 16) {
        val plain = shortest.abs.toPlainString
        sign + (if (plain.contains('.')) plain else plain + ".0")
      } else {
        val mantissa = if (digits.length == 1) digits else digits.head.toString + "." + digits.tail
        val magnitude = Math.abs(exponent)
        sign + mantissa + "e" + (if (exponent < 0) "-" else "+") + (if (magnitude < 10) "0" else "") + magnitude
      }
    }

  /** A JSON string as Python writes it with `ensure_ascii`: `\uXXXX` (lower-case hex) for every character outside
    * printable ASCII but the short escapes. */
  private def string(out: java.lang.StringBuilder, text: String): Unit = {
    out.append('"')
    var i = 0
    while (i < text.length) {
      val c = text.charAt(i)
      c match {
        case '"' => out.append("\\\"")
        case '\\' => out.append("\\\\")
        case '\n' => out.append("\\n")
        case '\r' => out.append("\\r")
        case '\t' => out.append("\\t")
        case '\b' => out.append("\\b")
        case '\f' => out.append("\\f")
        case _ if c < 0x20 || c > 0x7e => out.append(f"\\u${c.toInt}%04x")
        case _ => out.append(c)
      }
      i += 1
    }
    out.append('"')
  }
}
