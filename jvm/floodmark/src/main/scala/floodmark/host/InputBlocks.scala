package floodmark.host

import java.io.ByteArrayInputStream
import java.time.{ZoneId, ZoneOffset}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.{FieldVector, VarCharVector}
import org.apache.arrow.vector.ipc.ArrowStreamReader
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.types.UTF8String

/** A bucket's IN blocks (`floodmark.spark.blocks.pack`: Arrow IPC streams of the combiner's rows, each tagged with
  * the input partition it came from), read in input-partition order (stable), whatever order they came in: the
  * order decides which records make a count-triggered pane, so a replayed batch reads them alike.
  */
object InputBlocks {
  val PartitionKey = "floodmark.partition"

  private lazy val allocator: BufferAllocator = new RootAllocator(Long.MaxValue)

  /** Calls `each` with every record batch of `blocks`, in partition order; the batch is valid during the call. */
  def foreach(blocks: Seq[Array[Byte]])(each: Columns => Unit): Unit = {
    val readers = blocks.map(block => new ArrowStreamReader(new ByteArrayInputStream(block), allocator))
    try {
      val ordered = readers.sortBy { reader =>
        val metadata = reader.getVectorSchemaRoot.getSchema.getCustomMetadata
        Option(metadata).flatMap(m => Option(m.get(PartitionKey))).map(_.toLong).getOrElse(0L)
      }
      for (reader <- ordered) {
        val root = reader.getVectorSchemaRoot
        val fields = root.getSchema.getFields.asScala.map(field => StructField(field.getName, sparkType(field)))
        val schema = StructType(fields.toSeq)
        val zones = root.getSchema.getFields.asScala.map { field =>
          field.getType match {
            case t: ArrowType.Timestamp if t.getTimezone != null => ZoneId.of(t.getTimezone)
            case _ => ZoneOffset.UTC
          }
        }.toArray
        while (reader.loadNextBatch()) {
          val arrow = root.getFieldVectors.asScala.toArray
          val vectors: Array[ColumnVector] = arrow.map(new ArrowColumnVector(_))
          each(new Columns(schema, zones, new ColumnarBatch(vectors, root.getRowCount), arrow))
        }
      }
    } finally readers.foreach(_.close())
  }

  /** The Spark type of a block's column (Spark's `ArrowUtils.fromArrowType` for the types a combiner row has; it
    * is not public API); other types are read as null: no rule of the host reads them. */
  private def sparkType(field: Field): DataType = field.getType match {
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 => StringType
    case t: ArrowType.Int if t.getBitWidth == 64 => LongType
    case t: ArrowType.Int if t.getBitWidth == 32 => IntegerType
    case t: ArrowType.Int if t.getBitWidth == 16 => ShortType
    case t: ArrowType.Int if t.getBitWidth == 8 => ByteType
    case t: ArrowType.FloatingPoint if t.getPrecision == FloatingPointPrecision.DOUBLE => DoubleType
    case t: ArrowType.FloatingPoint if t.getPrecision == FloatingPointPrecision.SINGLE => FloatType
    case _: ArrowType.Bool => BooleanType
    case t: ArrowType.Date if t.getUnit == DateUnit.DAY => DateType
    case t: ArrowType.Timestamp if t.getTimezone != null => TimestampType
    case _: ArrowType.Timestamp => TimestampNTZType
    case _: ArrowType.Binary | _: ArrowType.LargeBinary => BinaryType
    case _ => NullType
  }

  /** One record batch of a block. Its columns are found by name once per batch ([[find]]) and read by ordinal: a
    * column without nulls in the batch is read without a null check per value, and a long or double column
    * without boxing (a bucket's batch reads millions of values). The by-name reads find the column each time. */
  final class Columns(
      val schema: StructType, zones: Array[ZoneId], val batch: ColumnarBatch, arrow: Array[FieldVector]) {
    private val ordinals = schema.fieldNames.zipWithIndex.toMap
    private val names = schema.fieldNames
    private val vectors: Array[ColumnVector] = Array.tabulate(schema.length)(batch.column)
    private val types: Array[DataType] = schema.fields.map(_.dataType)
    /** Whether the column has no null in this batch (Arrow counts a vector's nulls once, from its validity bits). */
    private val full: Array[Boolean] = vectors.map(_.numNulls == 0)
    /** A text column's Arrow vector, else null: a value [[present]] found is read from its buffers directly
      * (Spark's accessor checks the value's validity bit again, twice). */
    private val texts: Array[VarCharVector] = arrow.map {
      case text: VarCharVector => text
      case _ => null
    }

    def rows: Int = batch.numRows

    def has(name: String): Boolean = ordinals.contains(name)

    def ordinal(name: String): Int =
      ordinals.getOrElse(name, throw new IllegalArgumentException(s"an IN block has no column $name"))

    /** The column's ordinal, -1 when the batch has no such column (read as null everywhere). */
    def find(name: String): Int = ordinals.getOrElse(name, -1)

    def zone(name: String): ZoneId = zones(ordinal(name))

    def dataType(name: String): DataType = types(ordinal(name))

    /** Whether column `at` (an ordinal or -1) has a value at `row`. */
    private def present(at: Int, row: Int): Boolean = at >= 0 && (full(at) || !vectors(at).isNullAt(row))

    def isNull(name: String, row: Int): Boolean = !present(find(name), row)

    def string(name: String, row: Int): String = {
      val at = find(name)
      if (present(at, row)) utf8(at, row).toString else null
    }

    /** The first byte of a text column's value (the combiner's one-letter row kind), 0 when null. */
    def letter(at: Int, row: Int): Char =
      if (present(at, row)) utf8(at, row).getByte(0).toChar else 0.toChar

    /** A text column's value at `row`, which is not null: a view of the block's buffer, valid during the call. */
    private def utf8(at: Int, row: Int): UTF8String = {
      val text = texts(at)
      if (text == null) vectors(at).getUTF8String(row)
      else {
        val start = text.getStartOffset(row)
        UTF8String.fromAddress(null, text.getDataBufferAddress + start, text.getEndOffset(row) - start)
      }
    }

    /** A long column's value, or null. */
    def long(name: String, row: Int): java.lang.Long = long(find(name), row)

    def long(at: Int, row: Int): java.lang.Long =
      if (!present(at, row)) null
      else if (types(at) eq LongType) vectors(at).getLong(row)
      else HostValues.long(names(at), value(at, row))

    /** A long column's value where a null breaks the map side's contract (a partial's bounds, count and hold). */
    def exactLong(at: Int, row: Int): Long =
      if (present(at, row) && (types(at) eq LongType)) vectors(at).getLong(row)
      else {
        val value = long(at, row)
        if (value == null) throw new IllegalArgumentException(s"column ${names(at)} is null in a partial row")
        value
      }

    /** A numeric (or boolean) column's value as a double; NaN when null. */
    def double(at: Int, row: Int): Double =
      if (!present(at, row)) Double.NaN
      else if (types(at) eq DoubleType) vectors(at).getDouble(row)
      else if (types(at) eq LongType) vectors(at).getLong(row).toDouble
      else HostValues.double(names(at), value(at, row))

    /** A key column's value as the window operator keys it ([[HostValues.keyPart]]). */
    def key(at: Int, row: Int): Any = HostValues.keyPart(value(at, row))

    /** The value as Spark holds it internally (`InternalRow.get`), null when null or when the block has no such
      * column. */
    def value(at: Int, row: Int): Any = {
      if (!present(at, row)) return null
      val vector = vectors(at)
      types(at) match {
        case LongType | TimestampType | TimestampNTZType => vector.getLong(row)
        case IntegerType | DateType => vector.getInt(row)
        case DoubleType => vector.getDouble(row)
        case FloatType => vector.getFloat(row)
        case ShortType => vector.getShort(row)
        case ByteType => vector.getByte(row)
        case BooleanType => vector.getBoolean(row)
        case StringType => utf8(at, row)
        case BinaryType => vector.getBinary(row)
        case _ => null
      }
    }

    /** The row, copied out of the batch. */
    def copy(row: Int): InternalRow = batch.getRow(row).copy()
  }
}
