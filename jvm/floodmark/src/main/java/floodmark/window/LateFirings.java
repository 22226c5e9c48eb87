package floodmark.window;

/** What a trigger does with records of a window the watermark has reached, within allowed lateness. */
public enum LateFirings {
  /** Each late record fires a LATE pane of its own ({@code Default()}, {@code late=AfterCount(1)}). */
  EVERY_RECORD,
  /**
   * The ON_TIME pane is the last ({@code AfterWatermark()} without late firings): later records go to the late
   * output (WINDOW_CLOSED); a window first seen after its end fires one LATE pane with its first record, then
   * closes.
   */
  NONE,
  /** The trigger never fires ({@code Never()}): late records accumulate for the garbage-collection pane. */
  AT_HORIZON
}
