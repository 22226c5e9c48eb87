package floodmark.window;

/**
 * Flink's {@code CUMULATE}: epochs {@code [e, e + maxSize)} with {@code e = k*maxSize + offset} ({@code offset}
 * already {@code mod maxSize}), each with windows {@code [e, e + j*step)} for {@code j = 1 .. maxSize/step}. A
 * record at {@code ts} is in every window of its epoch that ends after it; its output time there is
 * {@code max(ts, end - step)}. A key's windows share starts: they are named by their end.
 */
public record CumulateWindows(long step, long maxSize, long offset) implements WindowAssigner {
  @Override
  public long[] assign(long timestamp) {
    long epoch = WindowAssigner.windowStart(timestamp, offset, maxSize);
    int steps = (int) (maxSize / step);
    long[] out = new long[2 * steps];
    int n = 0;
    for (int j = steps - 1; j >= 0; j--) {
      long end = epoch + maxSize - j * step;
      if (end > timestamp) {
        out[n++] = epoch;
        out[n++] = end;
      }
    }
    return n == out.length ? out : java.util.Arrays.copyOf(out, n);
  }

  @Override
  public long outputTime(long timestamp, long start, long end) {
    return Math.max(timestamp, end - step);
  }

  @Override
  public long name(long start, long end) {
    return end;
  }
}
