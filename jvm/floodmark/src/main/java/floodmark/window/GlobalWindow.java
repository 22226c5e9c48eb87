package floodmark.window;

/** One window for all time, {@code [Long.MIN_VALUE, Long.MAX_VALUE)}: it fires ON_TIME at the end of input. */
public record GlobalWindow() implements WindowAssigner {
  @Override
  public long[] assign(long timestamp) {
    return new long[] {Long.MIN_VALUE, Long.MAX_VALUE};
  }
}
