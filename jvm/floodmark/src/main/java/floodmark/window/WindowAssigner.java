package floodmark.window;

/**
 * Which windows a record belongs to (the assigners of {@code floodmark/core/windows.py}).
 *
 * <p>{@link #assign} lists a record's windows ordered by start, then end, as {@code [start0, end0, start1,
 * end1, ...]}; {@link #outputTime} is the time a record contributes to a window's pane timestamp.
 */
public interface WindowAssigner {
  long[] assign(long timestamp);

  /** The record's output time in {@code [start, end)}: its timestamp unless windows overlap. */
  default long outputTime(long timestamp, long start, long end) {
    return timestamp;
  }

  /** What tells a key's windows apart: the start, or the end when windows share starts (cumulate). */
  default long name(long start, long end) {
    return start;
  }

  /** Windows of one key merge when they overlap (sessions); a record then has one window of its own. */
  default boolean isMerging() {
    return false;
  }

  /** Flink's {@code TimeWindow.getWindowStartWithOffset}, with floor semantics for negative timestamps. */
  static long windowStart(long timestamp, long offset, long slide) {
    return timestamp - Math.floorMod(timestamp - offset, slide);
  }
}
