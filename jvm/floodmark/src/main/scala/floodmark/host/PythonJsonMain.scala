package floodmark.host

import java.io.{BufferedReader, InputStreamReader, PrintStream}
import java.nio.charset.StandardCharsets

import com.fasterxml.jackson.databind.ObjectMapper
import floodmark.batch.ControlEntry

/** The rules the JVM host repeats from Python behind a plain JVM entry point, for the differential tests against
  * Python (`tests/spark/test_jvm_host_texts.py`): [[PythonJson]]'s against Python's own `repr` and `json.dumps`,
  * [[RecordRules]]' against the Arrow combiner's, `ControlEntry.due` against the Python host's. One JSON command
  * per line on stdin, one answer per line on stdout. `{"double_bits": n}` (a double's IEEE bits as a long) answers `{"json": ...}`; `{"text": s}` answers
  * `{"repr": ..., "json": ...}`; `{"reason": {"earliest", "latest", "max_future_skew", "corrupt", "ts", "raw",
  * "error", "processing_time", "numbers": [[field, double bits], ...]}}` answers [[RecordRules]]' `{"reason": ...}`
  * (null for a good record); `{"due": {"entry": text, "stage", "bucket", "next_fire_at", "next_timer_at"}}` answers
  * `{"due": ...}`, whether the entry lets the bucket run without input (`floodmark.batch.ControlEntry.due`);
  * `{"for_batch": {"text": t or null,
  * "batch_id": n or null}}` answers `{"seq": ...}` or `{"refused": message}` (`ControlEntry.forBatch`). */
object PythonJsonMain {
  def main(args: Array[String]): Unit = {
    val json = new ObjectMapper()
    val stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8)
    val stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
    var line = stdin.readLine()
    while (line != null) {
      val command = json.readTree(line)
      val answer = json.createObjectNode()
      if (command.has("for_batch")) {
        val f = command.path("for_batch")
        def text(name: String): String = if (f.path(name).isNull) null else f.path(name).asText
        try answer.put("seq", ControlEntry.forBatch(text("text"), text("batch_id")).seq)
        catch { case refused: IllegalStateException => answer.put("refused", refused.getMessage) }
      } else if (command.has("due")) {
        val d = command.path("due")
        val entry = ControlEntry.parse(d.path("entry").asText)
        answer.put("due", entry.due(d.path("stage").asText, d.path("bucket").asInt, d.path("next_fire_at").asInt,
          d.path("next_timer_at").asInt))
      } else if (command.has("reason")) {
        val r = command.path("reason")
        def text(name: String): String = if (r.path(name).isNull) null else r.path(name).asText
        val skew = if (r.path("max_future_skew").isNull) None else Some(r.path("max_future_skew").asLong)
        val rules = RecordRules(r.path("earliest").asLong, r.path("latest").asLong, skew)
        val numbers = (0 until r.path("numbers").size).map { i =>
          val pair = r.path("numbers").get(i)
          pair.get(0).asText -> java.lang.Double.longBitsToDouble(pair.get(1).asLong)
        }
        val ts = if (r.path("ts").isNull) null else java.lang.Long.valueOf(r.path("ts").asLong)
        answer.put(
          "reason",
          rules.reason(r.path("corrupt").asBoolean, ts, text("raw"), text("error"), r.path("processing_time").asLong,
            numbers))
      } else if (command.has("double_bits"))
        answer.put("json", PythonJson.double(java.lang.Double.longBitsToDouble(command.path("double_bits").asLong)))
      else {
        val text = command.path("text").asText
        answer.put("repr", PythonJson.repr(text)).put("json", PythonJson.jsonString(text))
      }
      stdout.println(json.writeValueAsString(answer))
      stdout.flush()
      line = stdin.readLine()
    }
  }
}
