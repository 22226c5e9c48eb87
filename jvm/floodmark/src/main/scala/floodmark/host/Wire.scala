package floodmark.host

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.JsonNode

/** The carrier protocol's names as the Python package declares them (`floodmark/protocol/wire.py`: the carrier's and
  * the combiner's columns, row kinds and letters; `floodmark/protocol/output.py`: the emitted columns), read from the
  * level plan (`floodmark.spark.stateful.jvm_level.level_plan`'s `wire`). The JVM host restates none of them:
  * `tests/core/test_wire_declared_once.py` fails on a literal of one in its sources.
  *
  * @param carrier `wire.py`'s names (its constants, by their Python names)
  * @param emitted `output.py`'s names (its constants, by their Python names)
  * @param gauges `wire.GAUGES`: the order of a bucket's gauges in a GAUGE row and in a control entry's `buckets`
  */
final class Wire(carrier: Map[String, String], emitted: Map[String, String], val gauges: Seq[String]) {
  private def name(names: Map[String, String], key: String): String =
    names.getOrElse(key, throw new IllegalArgumentException(
      s"the level plan's wire lacks $key (a floodmark jar and Python package of different versions?)"))

  private def c(key: String): String = name(carrier, key)
  private def letter(key: String): Char = {
    val value = c(key)
    require(value.length == 1, s"the combiner's row kind $key is one letter, not '$value'")
    value.charAt(0)
  }

  // The carrier's columns (`CARRIER_COLUMNS`) and the combiner's (`COMBINER_COLUMNS`, `REJECTED_COLUMNS`).
  val stage: String = c("STAGE")
  val kind: String = c("KIND")
  val bucket: String = c("BUCKET")
  val block: String = c("BLOCK")
  val row: String = c("ROW")
  val order: String = c("ORDER")
  val split: String = c("SPLIT")
  val count: String = c("COUNT")
  val minTs: String = c("MIN_TS")
  val maxTs: String = c("MAX_TS")
  val windowStart: String = c("WINDOW_START")
  val windowEnd: String = c("WINDOW_END")
  val hold: String = c("HOLD")
  val reason: String = c("REASON")
  val record: String = c("RECORD")
  val seq: String = c("SEQ")
  val oldestPending: String = c("OLDEST_PENDING")
  val openWindows: String = c("OPEN_WINDOWS")
  val nextFire: String = c("NEXT_FIRE")
  val nextTimer: String = c("NEXT_TIMER")
  val paneCount: String = c("PANE_COUNT")
  val lateCount: String = c("LATE_COUNT")
  val badCount: String = c("BAD_COUNT")
  val accepted: String = c("ACCEPTED")
  /** The split label of the STATS row that counts a source's rows that are no record. */
  val deadLettersSplit: String = c("DEAD_LETTERS_SPLIT")

  // A carrier row's and an emitted row's kinds.
  val In: String = c("IN")
  val Output: String = c("OUTPUT")
  val Stats: String = c("STATS")
  val Gauge: String = c("GAUGE")
  val Pane: String = c("PANE")
  val Late: String = c("LATE")
  val Bad: String = c("BAD")

  // The combiner's row kinds (`fm_row`), one letter each.
  val Raw: Char = letter("RAW")
  val Partial: Char = letter("PARTIAL")
  val BadInput: Char = letter("BAD_INPUT")
  val SplitStats: Char = letter("SPLIT_STATS")

  /** `output.py`'s column names: a pane's, a late record's and a dead letter's. */
  object out {
    private def o(key: String): String = name(emitted, key)
    val windowStart: String = o("WINDOW_START")
    val windowEnd: String = o("WINDOW_END")
    val paneTimestamp: String = o("PANE_TIMESTAMP")
    val timing: String = o("TIMING")
    val paneIndex: String = o("PANE_INDEX")
    val nonspeculativeIndex: String = o("NONSPECULATIVE_INDEX")
    val isLast: String = o("IS_LAST")
    val eventTime: String = o("EVENT_TIME")
    val watermark: String = o("WATERMARK")
    val lateness: String = o("LATENESS")
    val horizon: String = o("HORIZON")
    val reason: String = o("REASON")
    val record: String = o("RECORD")
  }

  /** Where `gauge` (one of `wire.GAUGES`' names, e.g. [[nextFire]]) stands in a bucket's reported gauges. */
  def gaugeAt(gauge: String): Int = {
    val at = gauges.indexOf(gauge)
    require(at >= 0, s"$gauge is not one of the gauges ${gauges.mkString(", ")}")
    at
  }
}

object Wire {
  /** The `wire` object of a level plan: `{"carrier": {...}, "emitted": {...}, "gauges": [...]}`. */
  def fromJson(node: JsonNode): Wire = {
    require(node.isObject, "a level plan without its wire (a floodmark jar and Python package of different versions?)")
    def names(of: JsonNode): Map[String, String] =
      of.fields.asScala.map(entry => entry.getKey -> entry.getValue.asText).toMap
    new Wire(names(node.path("carrier")), names(node.path("emitted")),
      node.path("gauges").elements.asScala.map(_.asText).toSeq)
  }
}
