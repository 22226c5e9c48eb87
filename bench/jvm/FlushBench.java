import com.fasterxml.jackson.databind.ObjectMapper;
import floodmark.window.Emitted;
import floodmark.window.Pane;
import floodmark.window.Partial;
import floodmark.window.SegmentLimits;
import floodmark.window.SnapshotParts;
import floodmark.window.WindowOperator;
import floodmark.window.WindowSpec;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One bucket of the JVM host's flush without Spark: a tumbling 60-minute count over {@code keys} keys, 8 batches of
 * the map side's partials (a window per key each), the operator restored from its bytes before every batch and its
 * segments kept apart, as {@code floodmark.host.WindowLevel} keeps them; then the end of input fires every window.
 * Prints each round's milliseconds (batches, flush) and a checksum of the panes. See {@code bench/jvm_flush.sh}.
 */
public final class FlushBench {
  private static final String SPEC = "{\"window\": {\"kind\": \"tumbling\", \"size\": 3600000, \"offset\": 0},"
      + " \"aggregate\": {\"single\": true, \"parts\": [{\"name\": \"n\", \"kind\": \"count\", \"field\": null, \"label\": \"value\"}]},"
      + " \"trigger\": {\"on_time\": true, \"late\": \"EVERY_RECORD\", \"early_delay\": null, \"early_count\": null},"
      + " \"allowed_lateness\": 0, \"accumulation\": \"DISCARDING\", \"timestamp_combiner\": \"END_OF_WINDOW\"}";

  public static void main(String[] args) throws Exception {
    int keys = args.length > 0 ? Integer.parseInt(args[0]) : 432_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 4;
    // The core's floodmark.core.segments.DEFER_ABOVE and FANOUT (bench/jvm_flush.sh passes them).
    SegmentLimits limits = new SegmentLimits(Integer.parseInt(args[2]), Integer.parseInt(args[3]));
    WindowSpec spec = WindowSpec.fromJson(new ObjectMapper().readTree(SPEC));
    String[] names = new String[keys];
    for (int k = 0; k < keys; k++) {
      names[k] = "key-" + k;
    }
    for (int round = 0; round < rounds; round++) {
      Map<Long, byte[]> store = new HashMap<>();
      byte[] head = null;
      long started = System.nanoTime();
      for (int batch = 0; batch < 8; batch++) {
        WindowOperator operator = head == null
            ? new WindowOperator(spec, Long.MIN_VALUE, 0L, limits, store::get)
            : WindowOperator.restore(spec, head, limits, store::get);
        operator.advanceWatermark(batch * 60_000L);
        List<Partial> partials = new ArrayList<>(keys);
        for (int k = 0; k < keys; k++) {
          partials.add(new Partial(names[(k * 7 + batch) % keys], 0L, 3_600_000L, 3, 3_599_999L, new double[] {3}));
        }
        operator.addPartials(partials);
        SnapshotParts parts = operator.snapshotParts();
        store.putAll(parts.added());
        parts.dropped().forEach(store::remove);
        head = parts.head();
      }
      long batches = System.nanoTime();
      Emitted out = WindowOperator.restore(spec, head, limits, store::get).advanceWatermark(Long.MAX_VALUE);
      long flushed = System.nanoTime();
      long checksum = 0;
      for (Pane pane : out.panes) {
        checksum += pane.end() + pane.timestamp() + ((Number) pane.values()[0]).longValue() + pane.key().hashCode();
      }
      System.out.printf("round %d: batches %.0f ms, flush %.0f ms, %d panes, checksum %d%n", round,
          (batches - started) / 1e6, (flushed - batches) / 1e6, out.panes.size(), checksum);
    }
  }
}
