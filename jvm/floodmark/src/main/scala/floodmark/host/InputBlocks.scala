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

  /** One record batch of a block, its columns by name. */
  final class Columns(val schema: StructType, zones: Array[ZoneId], val batch: ColumnarBatch) {
    private val ordinals = schema.fieldNames.zipWithIndex.toMap

    def rows: Int = batch.numRows

    def has(name: String): Boolean = ordinals.contains(name)

    def ordinal(name: String): Int =
      ordinals.getOrElse(name, throw new IllegalArgumentException(s"an IN block has no column $name"))

    def zone(name: String): ZoneId = zones(ordinal(name))

    def dataType(name: String): DataType = schema(ordinal(name)).dataType

    private def vector(name: String): ColumnVector = batch.column(ordinal(name))

    def isNull(name: String, row: Int): Boolean = !has(name) || vector(name).isNullAt(row)

    def string(name: String, row: Int): String =
      if (isNull(name, row)) null else vector(name).getUTF8String(row).toString

    /** A long column's value, or null. */
    def long(name: String, row: Int): java.lang.Long = HostValues.long(name, value(name, row))

    /** A numeric (or boolean) column's value as a double; NaN when null. */
    def double(name: String, row: Int): Double = HostValues.double(name, value(name, row))

    /** A key column's value as the window operator keys it ([[HostValues.keyPart]]). */
    def key(name: String, row: Int): Any = HostValues.keyPart(value(name, row))

    /** The value as Spark holds it internally, null when null or when the block has no such column. */
    def value(name: String, row: Int): Any =
      if (isNull(name, row)) null else batch.getRow(row).get(ordinal(name), dataType(name))

    /** The row, copied out of the batch. */
    def copy(row: Int): InternalRow = batch.getRow(row).copy()
  }
}
