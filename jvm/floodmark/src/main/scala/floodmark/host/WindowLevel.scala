package floodmark.host

import java.io.ByteArrayOutputStream

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import floodmark.batch.ControlEntry
import floodmark.window.{Partial, Record, WindowOperator}
import org.apache.arrow.vector.ipc.ArrowStreamWriter
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.SpecificInternalRow
import org.apache.spark.sql.execution.arrow.ArrowWriter
import org.apache.spark.sql.streaming.{
  ListState, MapState, OutputMode, StatefulProcessor, TTLConfig, TimeMode, TimerValues}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/** The JVM host of a level of window stages: Spark's own `transformWithState` over the carrier rows, grouped by
  * `(fm_stage, fm_bucket)`, running `floodmark.window.WindowOperator` per bucket; what the Python host
  * (`floodmark.spark.stateful.levels.StageLevel` with `floodmark.spark.stateful.window_bucket.WindowBucket`)
  * does for the same stages, in the same carrier protocol (`floodmark/protocol/wire.py`): IN blocks and TICK rows
  * in; STATS rows, one GAUGE row and OUTPUT blocks (Arrow IPC in the stage's emitted schema, at most
  * `LevelPlan.outputBlockRows` rows each) per bucket that ran out. Rows of stages of other levels pass through
  * unchanged.
  *
  * A bucket's state is its operator in parts, as the Python host stores it (`bucket_state.py`): the *head* (time, the
  * window table, what is known of the segments of deferred partials) in a `ListState`, and each segment under its
  * own id in a `MapState`, each in chunks of at most `LevelPlan.stateValueBytes` (no 1 GiB cliff). A batch reads the
  * head and the segments its operator asks for, writes the segments it made and the head, and deletes the merged
  * ones: for specs that defer partials (`WindowSpec.defersPartials`) its cost follows what it touches, not every
  * open window.
  */
object WindowLevel {

  /** `rows` (carrier rows) through the level `plan` describes (`LevelPlan`'s JSON): what the hint
    * `floodmark_window_level` asks for ([[floodmark.PlanHints]]). */
  def apply(rows: DataFrame, plan: String): DataFrame = {
    val level = LevelPlan.parse(plan)
    val carrier = level.carrier
    val stage = rows.schema.fieldIndex(level.wire.stage)
    val bucket = rows.schema.fieldIndex(level.wire.bucket)
    rows
      .groupByKey((row: Row) => (row.getString(stage), row.getInt(bucket)))(
        Encoders.tuple(Encoders.STRING, Encoders.scalaInt))
      .transformWithState(new WindowLevelProcessor(plan), TimeMode.None(), OutputMode.Append())(Encoders.row(carrier))
  }
}

/** See [[WindowLevel]]. */
final class WindowLevelProcessor(planText: String) extends StatefulProcessor[(String, Int), Row, Row] {
  @transient private lazy val plan = LevelPlan.parse(planText)
  @transient private var chunks: ListState[Array[Byte]] = _
  @transient private var segments: MapState[(Long, Int), Array[Byte]] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    chunks = getHandle.getListState[Array[Byte]]("operator", Encoders.BINARY, TTLConfig.NONE)
    segments = getHandle.getMapState[(Long, Int), Array[Byte]](
      "segments", Encoders.tuple(Encoders.scalaLong, Encoders.scalaInt), Encoders.BINARY, TTLConfig.NONE)
  }

  override def handleInputRows(key: (String, Int), rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] =
    plan.stages.get(key._1) match {
      case None => // another level's rows, in the carrier's columns
        rows.map { row =>
          val ordinals = RowColumns.ordinals(row.schema)
          Row.fromSeq(plan.carrier.fieldNames.toSeq.map(name => ordinals.get(name).map(row.get).orNull))
        }.toList.iterator
      case Some(stage) =>
        val wire = plan.wire
        val in = rows.filter(_.getAs[String](wire.kind) == wire.In).toList
        val bucket = new WindowBucket(stage, key._2, plan, chunks, segments)
        val out =
          try {
            if (stage.direct.isDefined) bucket.runDirect(in)
            else bucket.run(in.flatMap(row => Option(row.getAs[Array[Byte]](wire.block))))
          } finally bucket.close()
        out.iterator
    }
}

/** One bucket's batch (see [[WindowLevel]]). */
private final class WindowBucket(
    stage: StagePlan,
    bucket: Int,
    plan: LevelPlan,
    chunks: ListState[Array[Byte]],
    segments: MapState[(Long, Int), Array[Byte]]) {
  private val out = ArrayBuffer.empty[Row]
  private val wire = plan.wire
  private val (nextFireAt, nextTimerAt) = (wire.gaugeAt(wire.nextFire), wire.gaugeAt(wire.nextTimer))
  /** The OUTPUT block's rows are written as they are made, through one reused row of typed fields (no object per
    * output row: a flush writes millions); the block is made at the end ([[outputBlock]]). */
  private val row = new SpecificInternalRow(stage.emitted.fields.map(_.dataType).toSeq)
  private var writer: ArrowWriter = _
  private var written = 0L
  private val emittedOrdinals = stage.emitted.fieldNames.zipWithIndex.toMap
  // Found once per bucket, not per output row (a flush writes millions).
  private val keyOrdinals = stage.keyColumns.map(emittedOrdinals).toArray
  private val keyTypes = stage.keyColumns.map(stage.emitted(_).dataType).toArray
  /** Each aggregate part's output column (ordinal, type), in the order of a pane's values. */
  private val resultColumns = stage.spec.aggregate.parts.asScala.map(_.name).map(name =>
    (emittedOrdinals(name), stage.emitted(name).dataType)).toArray
  private val texts = scala.collection.mutable.HashMap.empty[String, UTF8String]
  private val (startAt, endAt, timestampAt, timingAt, indexAt, nonspecAt, lastAt) = (
    emittedOrdinals(wire.out.windowStart), emittedOrdinals(wire.out.windowEnd), emittedOrdinals(wire.out.paneTimestamp),
    emittedOrdinals(wire.out.timing), emittedOrdinals(wire.out.paneIndex),
    emittedOrdinals(wire.out.nonspeculativeIndex), emittedOrdinals(wire.out.isLast))

  /** A record of the batch: its place in the input and, for its late output, its columns as JSON. */
  private final case class Raw(
      order: java.lang.Long,
      key: Any,
      ts: java.lang.Long,
      values: Array[Double],
      record: () => String)

  private val raws = ArrayBuffer.empty[Raw]
  private val partials = new java.util.ArrayList[Partial]()
  private var deadLetters = 0L

  /** The batch with the IN blocks the map side packed (the Arrow combiner's, or `AggregatedInJvm`'s). */
  def run(blocks: Seq[Array[Byte]]): Seq[Row] = {
    val entry = ControlEntry.current()
    val stored = chunks.exists()
    if (blocks.isEmpty && stored && !entry.due(stage.name, bucket, nextFireAt, nextTimerAt)) return Nil
    val watermark = entry.watermark(stage.name)
    InputBlocks.foreach(blocks) { columns =>
      // Each column found once per record batch, then read by ordinal.
      val kindAt = columns.find(wire.row)
      val tsAt = columns.find(stage.tsColumn)
      val orderAt = columns.find(wire.order)
      val keyAts = stage.keyColumns.map(columns.find).toArray
      val valueAts = stage.valueFields.map(columns.find).toArray
      val (windowStartAt, windowEndAt, countAt, holdAt) =
        (columns.find(wire.windowStart), columns.find(wire.windowEnd), columns.find(wire.count),
          columns.find(wire.hold))
      val accumulatorAts = stage.accumulators.map(columns.find).toArray
      def key(row: Int): Any =
        if (keyAts.length == 1) columns.key(keyAts(0), row)
        else HostValues.key(keyAts.toSeq.map(columns.key(_, row)))
      def doubles(ats: Array[Int], row: Int): Array[Double] = {
        val values = new Array[Double](ats.length)
        var j = 0
        while (j < ats.length) {
          values(j) = columns.double(ats(j), row)
          j += 1
        }
        values
      }
      var i = 0
      while (i < columns.rows) {
        val letter = columns.letter(kindAt, i)
        if (letter == wire.Raw) {
            val ts = columns.long(tsAt, i)
            val values = doubles(valueAts, i)
            // Only a late or bad record's columns are written out: copy those rows out of the block, not every one.
            val record: () => String =
              if (WindowOperator.mayReport(stage.spec, ts, values, watermark)) {
                val row = columns.copy(i)
                () => json(row, columns)
              } else () => throw new IllegalStateException(
                s"a record at $ts, after the watermark $watermark and with finite values, was reported late or bad")
            raws += Raw(columns.long(orderAt, i), key(i), ts, values, record)
        } else if (letter == wire.Partial) {
            partials.add(
              new Partial(
                key(i),
                columns.exactLong(windowStartAt, i),
                columns.exactLong(windowEndAt, i),
                columns.exactLong(countAt, i),
                columns.exactLong(holdAt, i),
                doubles(accumulatorAts, i)))
        } else if (letter == wire.BadInput) {
          deadLetters += 1
          val row = emittedRow(wire.Bad, key(i))
          set(row, wire.out.eventTime, columns.long(tsAt, i))
          set(row, wire.out.reason, utf8(columns.string(wire.reason, i)))
          set(row, wire.out.record, utf8(columns.string(wire.record, i)))
          emit(row)
        } else if (letter == wire.SplitStats) {
          out += carrierRow(wire.Stats, Map(
            wire.split -> columns.string(wire.split, i), wire.count -> columns.long(countAt, i),
            wire.minTs -> columns.long(wire.minTs, i), wire.maxTs -> columns.long(wire.maxTs, i)))
        } else throw new IllegalStateException(s"unknown combiner row kind $letter")
        i += 1
      }
    }
    advance(entry, stored)
  }

  /** The batch with the JVM map side's rows as they are (see [[DirectInput]]): the aggregated rows become partials
    * and split statistics; the records it left alone are checked by the combiner's rules ([[RecordRules]]), the
    * bad ones becoming dead letters and the good ones records, in input order, counted in the statistics. */
  def runDirect(rows: Seq[Row]): Seq[Row] = {
    val entry = ControlEntry.current()
    val stored = chunks.exists()
    if (rows.isEmpty && stored && !entry.due(stage.name, bucket, nextFireAt, nextTimerAt)) return Nil
    val direct = stage.direct.get
    val stats = scala.collection.mutable.LinkedHashMap.empty[String, Array[Long]]
    def count(split: String, records: Long, low: Long, high: Long): Unit =
      if (direct.splitStats) {
        val label = direct.source.fold(split)(source => s"$source/$split")
        val known = stats.getOrElseUpdate(label, Array(0L, Long.MaxValue, Long.MinValue))
        known(0) += records
        known(1) = Math.min(known(1), low)
        known(2) = Math.max(known(2), high)
      }
    def split(row: RowColumns): String = direct.split.fold("0")(name => row.label(name, direct.timeZone))
    val ordinals = rows.headOption.fold(Map.empty[String, Int])(row => RowColumns.ordinals(row.schema))
    val (aggregated, numbered) = rows.iterator
      .map(new RowColumns(_, ordinals))
      .map(row => (row.long(wire.order), row))
      .toArray
      .partition(_._1 == null)
    // The records left alone in input order; each row's place read once (not in every comparison).
    val alone = numbered.sortBy(_._1.longValue).iterator.map(_._2)
    for ((_, row) <- aggregated) {
      partials.add(new Partial(row.key(stage.keyColumns), row.long(wire.windowStart), row.long(wire.windowEnd),
        row.long(wire.count), row.long(wire.hold), stage.accumulators.map(row.double).toArray))
      val records = row.long(direct.records)
      if (records != null && records > 0) count(split(row), records, row.long(wire.minTs), row.long(wire.maxTs))
    }
    var unread = 0L
    for (row <- alone) {
      val ts = row.long(stage.tsColumn)
      // First the source's rules (no record: every stage refuses it), then this stage's numeric inputs.
      val corrupt = direct.corrupt.exists(row.string(_) != null)
      val (raw, error) = (row.string(direct.tsRaw), row.string(direct.tsError))
      val noRecord = direct.rules.reason(corrupt, ts, raw, error, entry.processingTime, Nil)
      val reason =
        if (noRecord != null) noRecord
        else direct.rules.reason(false, ts, raw, error, entry.processingTime,
          direct.numeric.map(name => name -> row.double(name)))
      val key = row.key(stage.keyColumns)
      // The source's statistics count its records, whatever this stage makes of them, and apart its rows that
      // are no record (the Arrow combiner's rule, `MapSideCombiner.parts`).
      if (noRecord != null) unread += 1 else count(split(row), 1, ts, ts)
      if (reason != null) {
        deadLetters += 1
        val dead = emittedRow(wire.Bad, key)
        set(dead, wire.out.eventTime, ts)
        set(dead, wire.out.reason, utf8(reason))
        // The original text where the input kept it (the text column has every row's), else the columns as JSON.
        val text = (direct.text ++ direct.corrupt).flatMap(column => Option(row.string(column))).headOption
        set(dead, wire.out.record, utf8(text.getOrElse(row.json(stage.userColumns, direct.timeZone))))
        emit(dead)
      } else {
        raws += Raw(row.long(wire.order), key, ts, stage.valueFields.map(row.double).toArray,
          () => row.json(stage.userColumns, direct.timeZone))
      }
    }
    if (unread > 0 && direct.splitStats) {
      val label = direct.source.fold(wire.deadLettersSplit)(source => s"$source/${wire.deadLettersSplit}")
      out += carrierRow(wire.Stats, Map(wire.split -> label, wire.count -> unread, wire.minTs -> 0L, wire.maxTs -> 0L))
    }
    for ((label, Array(records, low, high)) <- stats)
      out += carrierRow(
        wire.Stats,
        Map(wire.split -> label, wire.count -> records, wire.minTs -> low, wire.maxTs -> high))
    advance(entry, stored)
  }

  /** The bucket's operator through the batch (processing time, watermark, partials, records: the core's
    * `advance`), stored again; its output as carrier rows. */
  private def advance(entry: ControlEntry, stored: Boolean): Seq[Row] = {
    // The JVM map side's records cross a second shuffle: their input order is their fm_order (nulls last).
    def place(raw: Raw): Long = if (raw.order == null) Long.MaxValue else raw.order.longValue
    val ordered =
      if (raws.indices.drop(1).forall(i => place(raws(i - 1)) <= place(raws(i)))) raws else raws.sortBy(place)
    val records = new java.util.ArrayList[Record](ordered.size)
    ordered.zipWithIndex.foreach { case (raw, at) =>
      records.add(new Record(raw.key, raw.ts, raw.values, Integer.valueOf(at)))
    }

    val load: java.util.function.LongFunction[Array[Byte]] = id => readSegment(id)
    val operator =
      if (stored) WindowOperator.restore(stage.spec, read(), plan.segmentLimits, load)
      else new WindowOperator(stage.spec, Long.MinValue, 0L, plan.segmentLimits, load)
    val moves = Seq(
      operator.advanceProcessingTime(entry.processingTime),
      operator.advanceWatermark(entry.watermark(stage.name))) ++
      (if (partials.isEmpty) Nil else Seq(operator.addPartials(partials))) ++
      (if (records.isEmpty) Nil else Seq(operator.addRecords(records)))
    val parts = operator.snapshotParts()
    for ((id, body) <- parts.added.asScala) writeSegment(id, body)
    for (id <- parts.dropped.asScala) deleteSegment(id)
    write(parts.head)

    var panes, late, bad, accepted = 0L
    for (move <- moves) {
      accepted += move.accepted
      for (record <- move.late.asScala) {
        late += 1
        val raw = ordered(record.payload.asInstanceOf[Integer].intValue)
        val row = emittedRow(wire.Late, record.key)
        set(row, wire.out.windowStart, record.start)
        set(row, wire.out.windowEnd, record.end)
        set(row, wire.out.eventTime, record.timestamp)
        set(row, wire.out.watermark, record.watermark)
        set(row, wire.out.lateness, record.lateness)
        set(row, wire.out.horizon, record.horizon)
        set(row, wire.out.reason, utf8(record.reason))
        set(row, wire.out.record, utf8(raw.record()))
        emit(row)
      }
      for (record <- move.bad.asScala) {
        bad += 1
        val raw = ordered(record.payload.asInstanceOf[Integer].intValue)
        val row = emittedRow(wire.Bad, record.key)
        set(row, wire.out.eventTime, record.timestamp)
        set(row, wire.out.reason, utf8(record.reason))
        set(row, wire.out.record, utf8(raw.record()))
        emit(row)
      }
    }
    for (move <- moves; pane <- move.panes.asScala) {
      panes += 1
      val row = emittedRow(wire.Pane, pane.key)
      row.setLong(startAt, pane.start)
      row.setLong(endAt, pane.end)
      row.setLong(timestampAt, pane.timestamp)
      row.update(timingAt, text(pane.timing))
      row.setLong(indexAt, pane.paneIndex)
      row.setLong(nonspecAt, pane.nonspeculativeIndex)
      row.setBoolean(lastAt, pane.isLast)
      var part = 0
      while (part < resultColumns.length) {
        val (at, dataType) = resultColumns(part)
        row.update(at, result(pane.values()(part), dataType))
        part += 1
      }
      emit(row)
    }
    if (writer != null) out += carrierRow(wire.Output, Map(wire.block -> outputBlock()))
    out += carrierRow(wire.Gauge, Map(
      wire.seq -> entry.seq, wire.hold -> operator.outputHold, wire.oldestPending -> operator.oldestPending,
      wire.openWindows -> operator.windowCount.toLong, wire.nextFire -> operator.nextWatermarkDeadline,
      wire.nextTimer -> operator.nextProcessingDeadline, wire.paneCount -> panes, wire.lateCount -> late,
      wire.badCount -> (deadLetters + bad), wire.accepted -> accepted))
    out.toSeq
  }

  // ------------------------------------------------------------------ input
  private def json(row: InternalRow, columns: InputBlocks.Columns): String = PythonJson.obj(stage.userColumns.map {
    name =>
      val dataType = columns.dataType(name)
      (name, row.get(columns.ordinal(name), dataType), dataType, columns.zone(name))
  })

  // ------------------------------------------------------------------ state
  private def read(): Array[Byte] = {
    val parts = chunks.get().toArray
    if (parts.length == 1) parts(0) else parts.flatten
  }

  private def write(snapshot: Array[Byte]): Unit = chunks.put(chunked(snapshot))

  private def chunked(bytes: Array[Byte]): Array[Array[Byte]] = {
    val size = plan.stateValueBytes
    if (bytes.length <= size) Array(bytes) else bytes.grouped(size).toArray
  }

  /** A segment's chunks, under `(id, 0)`, `(id, 1)`, ... */
  private def readSegment(id: Long): Array[Byte] = {
    val parts = Iterator.from(0).map(at => (id, at)).takeWhile(segments.containsKey).map(segments.getValue).toArray
    if (parts.isEmpty) null else if (parts.length == 1) parts(0) else parts.flatten
  }

  private def writeSegment(id: Long, body: Array[Byte]): Unit =
    chunked(body).zipWithIndex.foreach { case (part, at) => segments.updateValue((id, at), part) }

  private def deleteSegment(id: Long): Unit =
    Iterator.from(0).map(at => (id, at)).takeWhile(segments.containsKey).foreach(segments.removeKey)

  // ----------------------------------------------------------------- output
  /** The output row, emptied, for a row of `kind` and `key` (valid until [[emit]]). */
  private def emittedRow(kind: String, key: Any): SpecificInternalRow = {
    var i = 0
    while (i < row.numFields) { row.setNullAt(i); i += 1 }
    row.update(emittedOrdinals(wire.kind), text(kind))
    if (keyOrdinals.length == 1) row.update(keyOrdinals(0), keyValue(key, keyTypes(0)))
    else {
      val parts = key.asInstanceOf[java.util.List[_]]
      for (i <- keyOrdinals.indices) row.update(keyOrdinals(i), keyValue(parts.get(i), keyTypes(i)))
    }
    row
  }

  /** A text of few values (a kind, a timing) as one shared `UTF8String` (immutable) per bucket. */
  private def text(value: String): UTF8String = texts.getOrElseUpdate(value, UTF8String.fromString(value))

  private def set(row: SpecificInternalRow, name: String, value: Any): Unit = row.update(emittedOrdinals(name), value)

  /** Writes `row` into the OUTPUT block; a block that reaches `LevelPlan.outputBlockRows` rows goes out as it is and
    * the next row starts another (Python's `wire.OUTPUT_BLOCK_ROWS`: a flush of millions of windows is many blocks). */
  private def emit(row: InternalRow): Unit = {
    if (writer == null) writer = ArrowWriter.create(stage.emitted, "UTC", true, false)
    writer.write(row)
    written += 1
    if (written % plan.outputBlockRows == 0) out += carrierRow(wire.Output, Map(wire.block -> outputBlock()))
  }

  /** Releases the OUTPUT block's memory if the batch failed before [[outputBlock]]. */
  def close(): Unit = if (writer != null) { writer.root.close(); writer = null }

  private def utf8(text: String): UTF8String = if (text == null) null else UTF8String.fromString(text)

  /** A key as its column holds it (the operator keys integral columns as longs, floating ones as doubles). */
  private def keyValue(value: Any, dataType: DataType): Any = (value, dataType) match {
    case (null, _) => null
    case (s: String, _) => UTF8String.fromString(s)
    case (n: java.lang.Long, IntegerType | DateType) => n.intValue
    case (n: java.lang.Long, ShortType) => n.shortValue
    case (n: java.lang.Long, ByteType) => n.byteValue
    case (d: java.lang.Double, FloatType) => d.floatValue
    case (other, _) => other
  }

  /** A pane's result as its column holds it: a NaN or missing result is null (as in the Python host's Arrow
    * conversion, `nan_is_null`). */
  private def result(value: Any, dataType: DataType): Any = (value, dataType) match {
    case (null, _) => null
    case (n: Number, LongType) => n.longValue
    case (n: Number, DoubleType) => if (n.doubleValue.isNaN) null else n.doubleValue
    case (other, _) => throw new IllegalStateException(s"a pane result $other for a column of ${dataType.simpleString}")
  }

  private def outputBlock(): Array[Byte] = {
    val root = writer.root
    try {
      writer.finish()
      val bytes = new ByteArrayOutputStream()
      val stream = new ArrowStreamWriter(root, null, bytes)
      stream.start()
      stream.writeBatch()
      stream.end()
      bytes.toByteArray
    } finally close()
  }

  private def carrierRow(kind: String, values: Map[String, Any]): Row = {
    val all = values ++ Map(wire.stage -> stage.name, wire.kind -> kind, wire.bucket -> bucket)
    Row.fromSeq(plan.carrier.fieldNames.toSeq.map(name => all.getOrElse(name, null)))
  }
}
