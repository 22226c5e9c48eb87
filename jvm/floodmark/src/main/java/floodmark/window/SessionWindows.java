package floodmark.window;

/**
 * Per-key sessions: a record opens {@code [ts, ts + gap)}; a key's windows that overlap merge into their cover
 * (Beam's rule: records strictly less than {@code gap} apart share a session). {@link SessionMerge} merges them
 * record by record ({@code floodmark/core/window/sessions.py} states the order: a closed window refuses, then the
 * merge, then lateness on the merged window).
 */
public record SessionWindows(long gap) implements WindowAssigner {
  @Override
  public long[] assign(long timestamp) {
    return new long[] {timestamp, timestamp + gap};
  }

  @Override
  public boolean isMerging() {
    return true;
  }
}
