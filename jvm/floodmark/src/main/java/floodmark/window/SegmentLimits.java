package floodmark.window;

/**
 * When a deferring operator keeps a batch's partials apart as a segment, and how segments merge
 * ({@code floodmark.core.segments}' {@code DEFER_ABOVE} and {@code FANOUT}, which the JVM host's level plan carries;
 * {@link PartialSegments} states the rule).
 *
 * @param deferAbove partials go straight into the table while there is no segment and the table would hold at most
 *     this many windows with them: a small table costs little to store every batch
 * @param fanout consecutive segments of one level that stay apart; one more and they merge into one of the next level
 */
public record SegmentLimits(int deferAbove, int fanout) {
  public SegmentLimits {
    if (deferAbove < 0 || fanout < 1) {
      throw new IllegalArgumentException("segment limits need deferAbove >= 0 and fanout >= 1");
    }
  }
}
