package floodmark.window;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Everything that defines one windowed aggregation the JVM host runs: a built-in spec, as
 * {@code floodmark.core.built_in_spec.built_in_form} describes it (tumbling, sliding, cumulate, global and session
 * windows, the columnar triggers, count, sum, min, max and mean).
 *
 * @param allowedLateness ms (>= 0) after a window's max timestamp, in watermark time, that it keeps its state
 * @param accumulating ACCUMULATING panes (each shows everything so far) rather than DISCARDING ones
 */
public record WindowSpec(
    WindowAssigner window,
    AggregateLayout aggregate,
    ColumnarTrigger trigger,
    long allowedLateness,
    boolean accumulating,
    TimestampCombiner combiner) {

  public long horizon(long end) {
    return Boundaries.horizon(end, allowedLateness);
  }

  /**
   * Can on-time records be aggregated before the shuffle (map-side partials)? Not when panes depend on which
   * records arrived in which order (early count firings), nor for merging windows ({@code combines_records}).
   */
  public boolean combinesRecords() {
    return !window.isMerging() && trigger.earlyCount() == null;
  }

  /**
   * Can partials wait apart until the watermark reaches their windows ({@link PartialSegments})? When a window's
   * panes depend only on what it holds once the watermark reaches it: map-side partials, no early firings, and the
   * end of the window as output time ({@code defers_partials}).
   */
  public boolean defersPartials() {
    return combinesRecords() && trigger.earlyDelay() == null && combiner == TimestampCombiner.END_OF_WINDOW;
  }

  /** The spec from its JSON form ({@code built_in_form}'s dict). */
  public static WindowSpec fromJson(JsonNode node) {
    JsonNode window = node.path("window");
    WindowAssigner assigner =
        switch (window.path("kind").asText()) {
          case "tumbling" -> new TumblingWindows(window.path("size").asLong(), window.path("offset").asLong());
          case "sliding" -> new SlidingWindows(
              window.path("size").asLong(), window.path("slide").asLong(), window.path("offset").asLong());
          case "cumulate" -> new CumulateWindows(
              window.path("step").asLong(), window.path("max_size").asLong(), window.path("offset").asLong());
          case "global" -> new GlobalWindow();
          case "sessions" -> new SessionWindows(window.path("gap").asLong());
          default -> throw new IllegalArgumentException("no built-in window " + window.path("kind").asText());
        };
    JsonNode aggregate = node.path("aggregate");
    Map<String, String[]> parts = new LinkedHashMap<>();
    for (Iterator<JsonNode> it = aggregate.path("parts").elements(); it.hasNext(); ) {
      JsonNode part = it.next();
      String field = part.path("field").isNull() ? null : part.path("field").asText();
      if (!part.hasNonNull("label")) {
        throw new IllegalArgumentException("a built-in aggregate part without its label: " + part);
      }
      String label = part.path("label").asText();
      parts.put(part.path("name").asText(), new String[] {part.path("kind").asText(), field, label});
    }
    JsonNode trigger = node.path("trigger");
    ColumnarTrigger columnar =
        new ColumnarTrigger(
            trigger.path("on_time").asBoolean(),
            LateFirings.valueOf(trigger.path("late").asText()),
            trigger.path("early_delay").isNull() ? null : trigger.path("early_delay").asLong(),
            trigger.path("early_count").isNull() ? null : trigger.path("early_count").asInt());
    return new WindowSpec(
        assigner,
        new AggregateLayout(aggregate.path("single").asBoolean(), parts),
        columnar,
        node.path("allowed_lateness").asLong(),
        node.path("accumulation").asText().equals("ACCUMULATING"),
        TimestampCombiner.valueOf(node.path("timestamp_combiner").asText()));
  }
}
