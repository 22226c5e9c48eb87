package floodmark.unpack

import java.io.ByteArrayInputStream

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.ipc.ArrowStreamReader
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.types.UTF8String

/** `fm_unpack(block, kind_column, kind, schema, times)`: the rows of one OUTPUT block of floodmark's carrier (an Arrow
  * IPC stream in a stage's emitted schema) whose column `kind_column` (the protocol's `wire.KIND`, sent by the caller:
  * this code restates no name of the protocol) is `kind`, in the columns of `schema`.
  *
  * Each column of `schema` is the block's column of the same name (same Spark type), except the columns that
  * `times` names: `times` maps such a timestamp column to the block's column of milliseconds since the epoch it
  * shows (the window bounds), null where the milliseconds lie beyond what a Spark timestamp (a long of
  * microseconds) holds, as the global window's bounds do. A null block gives no rows.
  *
  * What the Python sink's `mapInArrow` (floodmark.spark.outputs.unpack.UnpackOutput) does, without a Python worker: the
  * block's vectors are read as Spark's `ArrowColumnVector`s and each kept row is copied once into an `UnsafeRow`.
  */
case class UnpackBlock(
    child: Expression, kindColumn: String, kind: String, schema: StructType, times: Map[String, String])
    extends UnaryExpression
    with Generator
    with CodegenFallback {

  override def elementSchema: StructType = schema

  override def checkInputDataTypes(): TypeCheckResult =
    if (child.dataType == BinaryType) TypeCheckResult.TypeCheckSuccess
    else TypeCheckResult.TypeCheckFailure(s"fm_unpack reads a binary block, not ${child.dataType.simpleString}")

  override def prettyName: String = UnpackBlock.Name

  /** The projection for one block layout (its column names), made once per layout and task. */
  @transient private lazy val projections = scala.collection.mutable.Map.empty[Seq[String], UnsafeProjection]

  override def eval(input: InternalRow): IterableOnce[InternalRow] = {
    val block = child.eval(input).asInstanceOf[Array[Byte]]
    if (block == null) Iterator.empty else rows(block)
  }

  private def rows(block: Array[Byte]): Seq[InternalRow] = {
    val out = ArrayBuffer.empty[InternalRow]
    val reader = new ArrowStreamReader(new ByteArrayInputStream(block), UnpackBlock.allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val names = root.getSchema.getFields.asScala.map(_.getName).toSeq
      val kindAt = names.indexOf(kindColumn)
      require(kindAt >= 0, s"an OUTPUT block has no $kindColumn column: ${names.mkString(", ")}")
      val project = projections.getOrElseUpdate(names, projection(names))
      val wanted = UTF8String.fromString(kind)
      while (reader.loadNextBatch()) {
        val vectors: Array[ColumnVector] = root.getFieldVectors.asScala.map(new ArrowColumnVector(_)).toArray
        val batch = new ColumnarBatch(vectors, root.getRowCount)
        val kinds = vectors(kindAt)
        var i = 0
        while (i < batch.numRows) {
          if (!kinds.isNullAt(i) && kinds.getUTF8String(i) == wanted) out += project(batch.getRow(i)).copy()
          i += 1
        }
      }
    } finally reader.close()
    out.toSeq
  }

  private def projection(names: Seq[String]): UnsafeProjection = {
    def column(name: String, dataType: DataType): Expression = {
      val at = names.indexOf(name)
      require(at >= 0, s"an OUTPUT block has no column $name: ${names.mkString(", ")}")
      BoundReference(at, dataType, nullable = true)
    }
    val expressions = schema.fields.toSeq.map { field =>
      times.get(field.name) match {
        case Some(source) =>
          val millis = column(source, LongType)
          val inRange = And(
            GreaterThanOrEqual(millis, Literal(UnpackBlock.MinMillis)),
            LessThanOrEqual(millis, Literal(UnpackBlock.MaxMillis)))
          CaseWhen(Seq(inRange -> MillisToTimestamp(millis)), None)
        case None => column(field.name, field.dataType)
      }
    }
    UnsafeProjection.create(expressions)
  }

  override protected def withNewChildInternal(newChild: Expression): UnpackBlock = copy(child = newChild)
}

object UnpackBlock {
  val Name = "fm_unpack"

  /** The milliseconds a Spark timestamp (microseconds since the epoch in a long) can hold. */
  val MinMillis: Long = Long.MinValue / 1000 + 1
  val MaxMillis: Long = Long.MaxValue / 1000

  private[unpack] lazy val allocator: BufferAllocator = new RootAllocator(Long.MaxValue)

  /** Builds the expression from `fm_unpack`'s arguments: a binary column, then four foldable strings: the kind
    * column's name, the kind, the output schema as Spark's JSON form of a `StructType`, the timestamp columns as
    * `name=source,...`. */
  def build(arguments: Seq[Expression]): Expression = arguments match {
    case Seq(block, kindColumn, kind, schema, times) =>
      UnpackBlock(
        block,
        text(kindColumn),
        text(kind),
        DataType.fromJson(text(schema)).asInstanceOf[StructType],
        text(times).split(",").iterator.filter(_.nonEmpty).map { pair =>
          val Array(name, source) = pair.split("=", 2)
          name -> source
        }.toMap)
    case _ =>
      throw new IllegalArgumentException(s"$Name takes 5 arguments (block, kind_column, kind, schema, times)")
  }

  private def text(argument: Expression): String = {
    require(argument.foldable, s"$Name's arguments after the block must be literals: $argument")
    argument.eval().toString
  }
}
