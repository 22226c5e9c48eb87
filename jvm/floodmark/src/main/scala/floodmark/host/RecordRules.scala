package floodmark.host

import java.time.{Instant, ZoneOffset}
import java.time.format.DateTimeFormatter

/** The map-side combiner's record rules (`MapSideCombiner._validate` in `floodmark/spark/map_side/combiner.py`, with
  * `missing_timestamp_reason`, `core/assign.py`'s `validate_future_skew` and `_not_finite`, and `core/time.py`'s
  * `out_of_range_reason` and `future_skew_reason`), for the records the JVM map side leaves alone when the JVM host
  * reads its rows itself: the first reason that applies, in the combiner's order, or null for a good record. The
  * texts are the Python ones; `tests/spark/test_jvm_host.py` holds the dead letters of both paths equal, and
  * `tests/spark/test_jvm_host_texts.py` the reasons of random records.
  *
  * @param earliest the lowest event time floodmark takes (ms, inclusive; `EARLIEST_EVENT_TIME`)
  * @param latest the highest (ms, inclusive; `LATEST_EVENT_TIME`)
  */
final case class RecordRules(earliest: Long, latest: Long, maxFutureSkew: Option[Long]) {

  /** Why a record is bad, or null.
    *
    * @param corrupt Spark's corrupt-record column holds the record's text (it could not be parsed)
    * @param ts its event time (ms), null when the event-time expression gave none
    * @param raw the event-time value as text (null: there was none), for a record without an event time
    * @param error why the event-time expression failed (null: it did not)
    * @param numbers each numeric aggregate input's value as a double (NaN: missing)
    */
  def reason(
      corrupt: Boolean,
      ts: java.lang.Long,
      raw: String,
      error: String,
      processingTime: Long,
      numbers: Seq[(String, Double)]): String = {
    if (corrupt) return RecordRules.Unparsable
    if (ts == null)
      return if (error != null) s"the event-time expression failed: $error"
      else if (raw == null) "missing timestamp"
      else s"unparsable timestamp: ${PythonJson.repr(raw)}"
    for (skew <- maxFutureSkew if ts > processingTime + skew)
      return s"timestamp $ts (${eventTime(ts)}) is more than ${RecordRules.skew(skew)} ahead of processing time " +
        s"$processingTime (${eventTime(processingTime)})"
    if (ts < earliest || ts > latest)
      return s"timestamp $ts ms is outside the supported event-time range [$earliest, $latest] " +
        "(0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z)"
    for ((field, value) <- numbers if value.isNaN || value.isInfinite) {
      val label = s"field ${PythonJson.repr(field)}"
      return if (value.isNaN) s"$label is missing"
      else s"$label is not a finite number: ${if (value > 0) "inf" else "-inf"}"
    }
    null
  }

  /** `core/time.py`'s `_event_time_text`: ISO-8601 UTC to the ms, or which side of the range `ms` is on. */
  private def eventTime(ms: Long): String =
    if (ms > latest) s"after ${RecordRules.iso(latest)}"
    else if (ms < earliest) s"before ${RecordRules.iso(earliest)}"
    else RecordRules.iso(ms)
}

object RecordRules {
  val Unparsable = "unparsable input: not a record of the expected schema (the original text is in record)"

  private val Iso = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC)

  /** `2026-01-01T08:00:00.000Z` (`core/time.py`'s `format_timestamp` for a time in the event-time range). */
  def iso(ms: Long): String = Iso.format(Instant.ofEpochMilli(ms))

  /** `future_skew_reason`'s skew: `core/time.py`'s `format_duration`, and the ms from a second up. */
  def skew(ms: Long): String = if (ms >= 1000L) s"${duration(ms)} ($ms ms)" else duration(ms)

  /** `core/time.py`'s `format_duration`: `1 min 10.5 s`, `250 ms`; `unbounded` from 10**15 ms. */
  def duration(ms: Long): String = {
    if (ms >= 1000000000000000L || ms <= -1000000000000000L) return "unbounded"
    val sign = if (ms < 0) "-" else ""
    var rest = Math.abs(ms)
    if (rest < 1000L) return s"$sign$rest ms"
    val parts = scala.collection.mutable.ArrayBuffer[String]()
    for ((size, unit) <- Seq((86400000L, "d"), (3600000L, "h"), (60000L, "min"))) {
      val count = rest / size
      rest = rest % size
      if (count != 0) parts += s"$count $unit"
    }
    val (seconds, millis) = (rest / 1000L, rest % 1000L)
    if (millis != 0) parts += f"$seconds.$millis%03d".replaceAll("0+$", "") + " s"
    else if (seconds != 0) parts += s"$seconds s"
    sign + parts.mkString(" ")
  }
}
