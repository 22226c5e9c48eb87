package floodmark.window;

/** Fixed windows {@code [k*size + offset, (k+1)*size + offset)}; {@code offset} is already {@code mod size}. */
public record TumblingWindows(long size, long offset) implements WindowAssigner {
  @Override
  public long[] assign(long timestamp) {
    long start = WindowAssigner.windowStart(timestamp, offset, size);
    return new long[] {start, start + size};
  }
}
