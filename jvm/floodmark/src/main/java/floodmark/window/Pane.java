package floodmark.window;

/**
 * One pane of a window: Beam's {@code PaneInfo} and the window's value.
 *
 * @param start the window's start (ms, inclusive)
 * @param end the window's end (ms, exclusive)
 * @param values each aggregate part's result, in {@link AggregateLayout#parts}' order (whose names name them:
 *     {@code "value"} for a single aggregate)
 * @param timestamp the output timestamp (ms): the combiner's, capped at {@code end - 1}
 * @param timing EARLY, ON_TIME or LATE
 * @param paneIndex the window's emitted panes before this one
 * @param nonspeculativeIndex its ON_TIME and LATE panes before this one (-1 for EARLY panes)
 * @param isLast no pane follows for the window
 */
public record Pane(
    Object key,
    long start,
    long end,
    Object[] values,
    long timestamp,
    String timing,
    long paneIndex,
    long nonspeculativeIndex,
    boolean isLast) {}
