package floodmark.window;

/**
 * What the operator holds for one open (key, window), a row of its {@link WindowTable}: the pane bookkeeping of the
 * core's {@code WindowTable} ({@code floodmark/core/window/table.py}, whose module docstring states the pane rules;
 * {@link PaneRules} applies them) and the accumulators.
 */
final class WindowRow {
  static final long NO_TIME = Long.MAX_VALUE;

  final Object key;
  /** The window {@code [start, end)}; a session's grows when it merges. */
  long start;
  long end;
  /** Records since the last pane. */
  long newCount;
  /** Their combined output time (the combiner's empty hold: none). */
  long hold;
  /** The next pane's index and non-speculative index. */
  long paneIndex;
  long nonspec;
  /** Processing time (ms) of the oldest record since the last pane ({@link #NO_TIME}: none). */
  long pending = NO_TIME;
  /** A record arrived before the watermark reached the max timestamp, and no ON_TIME/LATE pane fired since. */
  boolean held;
  /** An ON_TIME or LATE pane was emitted. */
  boolean hadNonearly;
  /** The trigger finished: records go to the late output (WINDOW_CLOSED) until garbage collection. */
  boolean closed;
  /** The watermark fired the window (its ON_TIME or first late pane). */
  boolean fired;
  final double[] acc;

  WindowRow(Object key, long start, long end, long emptyHold, double[] acc) {
    this.key = key;
    this.start = start;
    this.end = end;
    this.hold = emptyHold;
    this.acc = acc;
  }

  boolean intersects(long otherStart, long otherEnd) {
    return start < otherEnd && otherStart < end;
  }

  long maxTimestamp() {
    return Boundaries.maxTimestamp(end);
  }

  /** Windows by start, then end. */
  static int byWindow(WindowRow a, WindowRow b) {
    int byStart = Long.compare(a.start, b.start);
    return byStart != 0 ? byStart : Long.compare(a.end, b.end);
  }
}
