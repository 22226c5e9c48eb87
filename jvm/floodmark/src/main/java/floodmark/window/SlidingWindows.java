package floodmark.window;

/**
 * Windows of length {@code size} starting every {@code slide} ({@code offset} already {@code mod slide}). A record
 * is in up to {@code ceil(size / slide)} windows; its output time in a window is at least the previous window's
 * end, {@code max(ts, end - slide)} (Beam's overlapping-window rule).
 */
public record SlidingWindows(long size, long slide, long offset) implements WindowAssigner {
  @Override
  public long[] assign(long timestamp) {
    long lastStart = WindowAssigner.windowStart(timestamp, offset, slide);
    int perRecord = (int) ((size + slide - 1) / slide);
    long[] out = new long[2 * perRecord];
    int n = 0;
    for (int step = perRecord - 1; step >= 0; step--) {
      long start = lastStart - step * slide;
      if (start + size > timestamp) {
        out[n++] = start;
        out[n++] = start + size;
      }
    }
    return n == out.length ? out : java.util.Arrays.copyOf(out, n);
  }

  @Override
  public long outputTime(long timestamp, long start, long end) {
    return Math.max(timestamp, end - slide);
  }
}
