package floodmark.host

import java.io.{BufferedReader, InputStreamReader, PrintStream}
import java.nio.charset.StandardCharsets

import com.fasterxml.jackson.databind.ObjectMapper

/** [[PythonJson]]'s rules behind a plain JVM entry point, for the differential test against Python's own `repr` and
  * `json.dumps` (`tests/core/test_python_json.py`): one JSON command per line on stdin, one answer per line on
  * stdout. `{"double_bits": n}` (a double's IEEE bits as a long) answers `{"json": ...}`; `{"text": s}` answers
  * `{"repr": ..., "json": ...}`. */
object PythonJsonMain {
  def main(args: Array[String]): Unit = {
    val json = new ObjectMapper()
    val stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8)
    val stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
    var line = stdin.readLine()
    while (line != null) {
      val command = json.readTree(line)
      val answer = json.createObjectNode()
      if (command.has("double_bits"))
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
