package floodmark.host

/** The map-side combiner's record rules (`MapSideCombiner._validate` in `floodmark/spark/map_side/combiner.py`, with
  * `missing_timestamp_reason`, `core/assign.py`'s `validate_future_skew` and `_not_finite`, and `core/time.py`'s
  * `out_of_range_reason`), for the records the JVM map side leaves alone when the JVM host reads its rows itself:
  * the first reason that applies, in the combiner's order, or null for a good record. The texts are the Python
  * ones; `tests/spark/test_jvm_host.py` holds the dead letters of both paths equal.
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
      return s"timestamp $ts is more than $skew ms ahead of processing time $processingTime"
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
}

object RecordRules {
  val Unparsable = "unparsable input: not a record of the expected schema (the original text is in record)"
}
