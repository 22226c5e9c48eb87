package floodmark.window;

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The window operator behind a plain JVM entry point, without Spark: one JSON command per line on stdin, one
 * JSON answer per line on stdout. The differential test drives it and the Python core with the same streams
 * ({@code floodmark_dev.jvm_window} in {@code devtools/floodmark_dev}, for {@code tests/core/test_jvm_window_operator.py}).
 *
 * <p>Commands: {@code {"op": "new", "id", "spec", "watermark", "processing_time", "deferred"}} ({@code "deferred"}:
 * absent, or {@code {"defer_above", "fanout"}}: {@link SegmentLimits}), {@code {"op": "add", "id",
 * "records": [{"key", "ts", "values": [...], "payload"}]}}, {@code {"op": "partials", "id", "partials": [{"key",
 * "start", "end", "count", "hold", "acc": [...]}]}}, {@code {"op": "wm" | "pt", "id", "to"}}, {@code
 * {"op": "roundtrip", "id", "spec"}} (snapshot and restore; under {@code "spec"} where given, as a restart with
 * changed settings restores it), {@code {"op": "roundtrip_apart", "id", "spec"}} (the snapshot in
 * parts, its segments kept in a store of the operator's as a runtime keeps them, and the head restored reading
 * them from there), {@code {"op": "windows", "id", "key"}} (the key's open
 * windows, as {@code "windows": [[start, end], ...]}), {@code {"op": "drop", "id"}}. Every answer carries what the
 * move emitted, the operator's time and its gauges after it; an error answers {@code {"error": "..."}}.
 */
public final class OperatorMain {
  /** Python's json writes NaN and Infinity as such: bad values the operator must see to report them. */
  private static final ObjectMapper JSON =
      JsonMapper.builder().enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();

  private OperatorMain() {}

  public static void main(String[] args) throws Exception {
    Map<String, WindowOperator> operators = new HashMap<>();
    Map<String, WindowSpec> specs = new HashMap<>();
    Map<String, Map<Long, byte[]>> stores = new HashMap<>();
    PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = stdin.readLine(); line != null; line = stdin.readLine()) {
      ObjectNode answer;
      try {
        answer = handle(JSON.readTree(line), operators, specs, stores);
      } catch (RuntimeException e) {
        answer = JSON.createObjectNode().put("error", String.valueOf(e));
      }
      stdout.println(JSON.writeValueAsString(answer));
      stdout.flush();
    }
  }

  private static ObjectNode handle(
      JsonNode command,
      Map<String, WindowOperator> operators,
      Map<String, WindowSpec> specs,
      Map<String, Map<Long, byte[]>> stores) {
    String id = command.path("id").asText();
    String op = command.path("op").asText();
    if (op.equals("new")) {
      WindowSpec spec = WindowSpec.fromJson(command.path("spec"));
      specs.put(id, spec);
      JsonNode deferred = command.path("deferred");
      SegmentLimits limits =
          deferred.isObject()
              ? new SegmentLimits(deferred.path("defer_above").asInt(), deferred.path("fanout").asInt())
              : null;
      operators.put(
          id,
          new WindowOperator(
              spec, command.path("watermark").asLong(), command.path("processing_time").asLong(), limits, null));
      stores.put(id, new HashMap<>());
      return answer(new Emitted(), operators.get(id), spec);
    }
    if (op.equals("drop")) {
      operators.remove(id);
      specs.remove(id);
      stores.remove(id);
      return JSON.createObjectNode();
    }
    WindowOperator operator = operators.get(id);
    if (operator == null) {
      throw new IllegalArgumentException("no operator " + id);
    }
    if (op.equals("windows")) {
      ObjectNode answer = answer(new Emitted(), operator, specs.get(id));
      ArrayNode windows = answer.putArray("windows");
      for (long[] window : operator.windowsOf(plain(command.path("key")))) {
        windows.addArray().add(window[0]).add(window[1]);
      }
      return answer;
    }
    Emitted emitted =
        switch (op) {
          case "add" -> operator.addRecords(records(command.path("records")));
          case "partials" -> operator.addPartials(partials(command.path("partials")));
          case "wm" -> operator.advanceWatermark(command.path("to").asLong());
          case "pt" -> operator.advanceProcessingTime(command.path("to").asLong());
          case "roundtrip" -> {
            if (command.has("spec")) { // a restart with changed settings: restored under the new spec
              specs.put(id, WindowSpec.fromJson(command.path("spec")));
            }
            operator = WindowOperator.restore(specs.get(id), operator.snapshot(), operator.segmentLimits(), null);
            operators.put(id, operator);
            yield new Emitted();
          }
          case "roundtrip_apart" -> {
            if (command.has("spec")) {
              specs.put(id, WindowSpec.fromJson(command.path("spec")));
            }
            Map<Long, byte[]> store = stores.get(id);
            SnapshotParts parts = operator.snapshotParts();
            store.putAll(parts.added());
            for (long dropped : parts.dropped()) {
              if (store.remove(dropped) == null) {
                throw new IllegalStateException("segment " + dropped + " dropped but never stored");
              }
            }
            operator = WindowOperator.restore(specs.get(id), parts.head(), operator.segmentLimits(), store::get);
            operators.put(id, operator);
            yield new Emitted();
          }
          default -> throw new IllegalArgumentException("unknown op " + op);
        };
    return answer(emitted, operator, specs.get(id));
  }

  private static List<Record> records(JsonNode array) {
    List<Record> records = new ArrayList<>();
    for (Iterator<JsonNode> it = array.elements(); it.hasNext(); ) {
      JsonNode node = it.next();
      JsonNode ts = node.path("ts");
      JsonNode values = node.path("values");
      double[] numbers = new double[values.size()];
      for (int i = 0; i < numbers.length; i++) {
        JsonNode value = values.get(i);
        numbers[i] = value.isNull() ? Double.NaN : value.asDouble();
      }
      // The payload goes back as it came (any JSON), in the record's late or bad output.
      records.add(new Record(plain(node.path("key")), ts.isNull() ? null : ts.asLong(), numbers, node.path("payload")));
    }
    return records;
  }

  private static List<Partial> partials(JsonNode array) {
    List<Partial> partials = new ArrayList<>();
    for (Iterator<JsonNode> it = array.elements(); it.hasNext(); ) {
      JsonNode node = it.next();
      JsonNode acc = node.path("acc");
      double[] values = new double[acc.size()];
      for (int i = 0; i < values.length; i++) {
        values[i] = acc.get(i).isNull() ? Double.NaN : acc.get(i).asDouble();
      }
      partials.add(
          new Partial(
              plain(node.path("key")),
              node.path("start").asLong(),
              node.path("end").asLong(),
              node.path("count").asLong(),
              node.path("hold").asLong(),
              values));
    }
    return partials;
  }

  /** A JSON scalar as a key or payload: integers as Long (a key's type is part of its identity). */
  private static Object plain(JsonNode node) {
    if (node.isNull() || node.isMissingNode()) {
      return null;
    }
    if (node.isIntegralNumber()) {
      return node.asLong();
    }
    if (node.isNumber()) {
      return node.asDouble();
    }
    if (node.isBoolean()) {
      return node.asBoolean();
    }
    return node.asText();
  }

  private static ObjectNode answer(Emitted emitted, WindowOperator operator, WindowSpec spec) {
    ObjectNode out = JSON.createObjectNode();
    ArrayNode panes = out.putArray("panes");
    for (Pane pane : emitted.panes) {
      ObjectNode node = panes.addObject();
      node.putPOJO("key", pane.key());
      node.put("start", pane.start()).put("end", pane.end());
      ObjectNode value = node.putObject("value");
      for (int i = 0; i < pane.values().length; i++) {
        value.set(spec.aggregate().parts.get(i).name(), JSON.valueToTree(pane.values()[i]));
      }
      node.put("timestamp", pane.timestamp()).put("timing", pane.timing());
      node.put("pane_index", pane.paneIndex()).put("nonspeculative_index", pane.nonspeculativeIndex());
      node.put("is_last", pane.isLast());
    }
    ArrayNode late = out.putArray("late");
    for (LateRecord record : emitted.late) {
      ObjectNode node = late.addObject();
      node.putPOJO("key", record.key());
      node.put("start", record.start()).put("end", record.end()).put("timestamp", record.timestamp());
      node.putPOJO("payload", record.payload());
      node.put("watermark", record.watermark()).put("lateness", record.lateness());
      node.put("horizon", record.horizon()).put("reason", record.reason());
    }
    ArrayNode bad = out.putArray("bad");
    for (BadRecord record : emitted.bad) {
      ObjectNode node = bad.addObject();
      node.putPOJO("key", record.key());
      node.putPOJO("payload", record.payload());
      node.putPOJO("timestamp", record.timestamp());
      node.put("reason", record.reason());
    }
    out.put("accepted", emitted.accepted);
    out.put("watermark", operator.watermark()).put("processing_time", operator.processingTime());
    ObjectNode gauges = out.putObject("gauges");
    gauges.putPOJO("output_hold", operator.outputHold());
    gauges.putPOJO("oldest_pending", operator.oldestPending());
    gauges.put("window_count", operator.windowCount());
    gauges.putPOJO("next_watermark_deadline", operator.nextWatermarkDeadline());
    gauges.putPOJO("next_processing_deadline", operator.nextProcessingDeadline());
    ArrayNode segments = out.putArray("segments");
    for (SegmentInfo info : operator.segmentInfos()) {
      segments.addArray().add(info.level()).add(info.rows()).add(info.firstEnd()).add(info.oldestArrival());
    }
    return out;
  }
}
