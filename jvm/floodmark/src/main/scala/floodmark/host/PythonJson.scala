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
      // The shortest decimal that reads back as d, the nearest of that length (Python's repr, David Gay's
      // algorithm's result): at each length, the two decimals around d, the nearer first.
      def candidates(digits: Int): Seq[BigDecimal] = {
        val down = exact.round(new MathContext(digits, RoundingMode.DOWN))
        val up = exact.round(new MathContext(digits, RoundingMode.UP))
        val nearest = exact.round(new MathContext(digits, RoundingMode.HALF_EVEN))
        Seq(nearest, if (nearest.compareTo(down) == 0) up else down)
      }
      val shortest = (1 to 17).iterator
        .flatMap(candidates)
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

  /** Python's `repr` of a string (a reason quotes the raw text it could not read): single quotes unless the text
    * has one and no double quote; backslash escapes for the quote, backslash, tab, newline and return; `\xNN`,
    * `\uNNNN` or `\UNNNNNNNN` for what Python does not print (controls, separators but the space, format,
    * private-use and lone surrogate characters). Characters the JVM's Unicode tables do not assign are printed:
    * Python's newer tables assign many of them (those unassigned in both are escaped by Python only), except the
    * format characters assigned since Unicode 13 (Java 17's tables), which every declared Python escapes
    * ([[NewerFormats]]). */
  def repr(text: String): String = {
    val quote = if (text.contains('\'') && !text.contains('"')) '"' else '\''
    val out = new java.lang.StringBuilder().append(quote)
    text.codePoints.forEach { c =>
      if (c == quote || c == '\\') out.append('\\').appendCodePoint(c)
      else if (c == '\t') out.append("\\t")
      else if (c == '\n') out.append("\\n")
      else if (c == '\r') out.append("\\r")
      else if (c < 0x20 || c == 0x7f) out.append(f"\\x$c%02x")
      else if (c < 0x7f) out.appendCodePoint(c)
      else if (printable(c)) out.appendCodePoint(c)
      else if (c <= 0xff) out.append(f"\\x$c%02x")
      else if (c <= 0xffff) out.append(f"\\u$c%04x")
      else out.append(f"\\U$c%08x")
    }
    out.append(quote).toString
  }

  /** The format characters (`Cf`) Unicode assigned after version 13, the JVM 17's tables: U+0890 and U+0891
    * (Unicode 14: Python 3.11), U+13439 to U+1343F (15.0: Python 3.12 and 3.13). Every other character that Python
    * 3.11-3.13 assigns and the JVM does not is printable in both (checked over every code point against each
    * declared Python; `tests/spark/test_jvm_host_texts.py` holds them in its examples). */
  private val NewerFormats: Set[Int] = Set(0x890, 0x891) ++ (0x13439 to 0x1343f)

  private def printable(c: Int): Boolean = !NewerFormats.contains(c) && (Character.getType(c) match {
    case Character.CONTROL | Character.FORMAT | Character.PRIVATE_USE | Character.SURROGATE |
        Character.LINE_SEPARATOR | Character.PARAGRAPH_SEPARATOR | Character.SPACE_SEPARATOR =>
      false
    case _ => true
  })

  /** `str()` of a split column's value as floodmark labels a split (`combiner._split_label`: integral floats as
    * integers, `""` for null), from the value as Spark holds it internally. */
  def label(value: Any, dataType: DataType, zone: ZoneId): String =
    if (value == null) ""
    else
      dataType match {
        case StringType => value.toString
        case LongType | IntegerType | ShortType | ByteType => value.asInstanceOf[Number].longValue.toString
        case DoubleType | FloatType =>
          val d = value.asInstanceOf[Number].doubleValue
          if (d.isNaN) ""
          else if (!d.isInfinite && d == Math.rint(d)) new BigDecimal(d).toBigInteger.toString
          else if (d.isInfinite) (if (d > 0) "inf" else "-inf")
          else double(d)
        case BooleanType => if (value.asInstanceOf[Boolean]) "True" else "False"
        case DateType => LocalDate.ofEpochDay(value.asInstanceOf[Int].toLong).toString
        case TimestampType => wallClock(value.asInstanceOf[Long], zone)
        case TimestampNTZType => wallClock(value.asInstanceOf[Long], ZoneOffset.UTC)
        case _ => value.toString
      }

  /** `text` as a JSON string, as Python's `json.dumps` writes it. */
  def jsonString(text: String): String = {
    val out = new java.lang.StringBuilder()
    string(out, text)
    out.toString
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
