package floodmark.window;

/**
 * A trigger in the form the JVM host runs: the shapes {@code floodmark.core.compiled_trigger.compile_trigger}
 * recognises, as data.
 *
 * @param onTime an ON_TIME pane when the watermark reaches the window's max timestamp (false: {@code Never()},
 *     whose only pane is the garbage-collection pane at the horizon)
 * @param late what records arriving after that do
 * @param earlyDelay EARLY panes this many ms (> 0) of processing time after a window's first record since its
 *     last pane, or null
 * @param earlyCount an EARLY pane after every n-th record of a window, in arrival order, or null
 */
public record ColumnarTrigger(boolean onTime, LateFirings late, Long earlyDelay, Integer earlyCount) {
  /** The ON_TIME (or first LATE) pane is the window's last; later records are refused (WINDOW_CLOSED). */
  public boolean finishesOnTime() {
    return late == LateFirings.NONE;
  }
}
