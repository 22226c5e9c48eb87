package floodmark.host

import java.io.ByteArrayInputStream
import java.time.{ZoneId, ZoneOffset}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.ipc.ArrowStreamReader
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnVector, ColumnarBatch}

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
          val vectors: Array[ColumnVector] = root.getFieldVectors.asScala.map(new ArrowColumnVector(_)).toArray
          each(new Columns(schema, zones, new ColumnarBatch(vectors, root.getRowCount)))
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

  /** One record batch of a block, its columns by name (found once per batch, not per value). */
  final class Columns(val schema: StructType, zones: Array[ZoneId], val batch: ColumnarBatch) {
    private val ordinals = schema.fieldNames.zipWithIndex.toMap
    private val vectors: Array[ColumnVector] = Array.tabulate(schema.length)(batch.column)
    private val types: Array[DataType] = schema.fields.map(_.dataType)

    def rows: Int = batch.numRows

    def has(name: String): Boolean = ordinals.contains(name)

    def ordinal(name: String): Int =
      ordinals.getOrElse(name, throw new IllegalArgumentException(s"an IN block has no column $name"))

    def zone(name: String): ZoneId = zones(ordinal(name))

    def dataType(name: String): DataType = types(ordinal(name))

    /** The column's ordinal if the batch has it and its value at `row` is not null, else -1. */
    private def present(name: String, row: Int): Int = {
      val at = ordinals.getOrElse(name, -1)
      if (at < 0 || vectors(at).isNullAt(row)) -1 else at
    }

    def isNull(name: String, row: Int): Boolean = present(name, row) < 0

    def string(name: String, row: Int): String = {
      val at = present(name, row)
      if (at < 0) null else vectors(at).getUTF8String(row).toString
    }

    /** The first byte of a text column's value (the combiner's one-letter row kind), 0 when null. */
    def letter(name: String, row: Int): Char = {
      val at = present(name, row)
      if (at < 0) 0.toChar else vectors(at).getUTF8String(row).getByte(0).toChar
    }

    /** A long column's value, or null. */
    def long(name: String, row: Int): java.lang.Long = HostValues.long(name, value(name, row))

    /** A numeric (or boolean) column's value as a double; NaN when null. */
    def double(name: String, row: Int): Double = HostValues.double(name, value(name, row))

    /** A key column's value as the window operator keys it ([[HostValues.keyPart]]). */
    def key(name: String, row: Int): Any = HostValues.keyPart(value(name, row))

    /** The value as Spark holds it internally (`InternalRow.get`), null when null or when the block has no such
      * column. */
    def value(name: String, row: Int): Any = {
      val at = present(name, row)
      if (at < 0) return null
      val vector = vectors(at)
      types(at) match {
        case LongType | TimestampType | TimestampNTZType => vector.getLong(row)
        case IntegerType | DateType => vector.getInt(row)
        case DoubleType => vector.getDouble(row)
        case FloatType => vector.getFloat(row)
        case ShortType => vector.getShort(row)
        case ByteType => vector.getByte(row)
        case BooleanType => vector.getBoolean(row)
        case StringType => vector.getUTF8String(row)
        case BinaryType => vector.getBinary(row)
        case _ => null
      }
    }

    /** The row, copied out of the batch. */
    def copy(row: Int): InternalRow = batch.getRow(row).copy()
  }
}
