package floodmark.window;

/**
 * An operator's gauges, read from its table and its deferred partials without changing them: the twin of the
 * gauges section of {@code floodmark.core.window.operator} ({@code WindowOperator.gauges}, an
 * {@code OperatorGauges} of {@code floodmark.core.keyed_operator}; the table's {@code output_hold} and
 * {@code oldest_pending}, the columnar policy's deadlines). {@link WindowOperator}'s gauge methods state each.
 */
final class OperatorGauges {
  private final WindowSpec spec;
  private final WindowTable table;
  private final PaneRules rules;
  /** Deferred partials; null when the operator does not defer. */
  private final PartialSegments segments;

  OperatorGauges(WindowSpec spec, WindowTable table, PaneRules rules, PartialSegments segments) {
    this.spec = spec;
    this.table = table;
    this.rules = rules;
    this.segments = segments;
  }

  /** {@link WindowOperator#outputHold}. */
  Long outputHold() {
    Long lowest = null;
    for (WindowRow row : table.rows()) {
      if (row.held && !row.closed) {
        long time = spec.combiner().paneTimestamp(row.hold, row.maxTimestamp());
        lowest = lowest == null ? time : Math.min(lowest, time);
      }
    }
    Long firstEnd = segments == null ? null : segments.firstEnd();
    if (firstEnd != null) { // a segment's windows hold at their max timestamps (END_OF_WINDOW: defersPartials)
      long pending = Boundaries.maxTimestamp(firstEnd);
      lowest = lowest == null ? pending : Math.min(lowest, pending);
    }
    return lowest;
  }

  /** {@link WindowOperator#oldestPending}. */
  Long oldestPending() {
    Long oldest = null;
    for (WindowRow row : table.rows()) {
      if (row.pending != WindowRow.NO_TIME) {
        oldest = oldest == null ? row.pending : Math.min(oldest, row.pending);
      }
    }
    Long arrival = segments == null ? null : segments.oldestArrival();
    if (arrival != null) {
      oldest = oldest == null ? arrival : Math.min(oldest, arrival);
    }
    return oldest;
  }

  /** {@link WindowOperator#windowCount}. */
  long windowCount() {
    return table.size() + (segments == null ? 0 : segments.rows());
  }

  /** {@link WindowOperator#nextWatermarkDeadline}: a window's horizon, or its max timestamp before its ON_TIME pane. */
  Long nextWatermarkDeadline() {
    Long next = null;
    for (WindowRow row : table.rows()) {
      long due = spec.horizon(row.end);
      if (spec.trigger().onTime() && !row.closed && !row.fired) {
        due = Math.min(due, row.maxTimestamp());
      }
      next = next == null ? due : Math.min(next, due);
    }
    Long firstEnd = segments == null ? null : segments.firstEnd();
    if (firstEnd != null) { // the segments' earliest window: its ON_TIME pane, or its horizon under Never()
      long due = spec.trigger().onTime() ? Boundaries.maxTimestamp(firstEnd) : spec.horizon(firstEnd);
      next = next == null ? due : Math.min(next, due);
    }
    return next;
  }

  /** {@link WindowOperator#nextProcessingDeadline}: the oldest arrival of a window waiting early, plus the delay. */
  Long nextProcessingDeadline() {
    Long delay = spec.trigger().earlyDelay();
    if (delay == null) {
      return null;
    }
    Long next = null;
    for (WindowRow row : table.rows()) {
      if (rules.waitingEarly(row) && row.pending != WindowRow.NO_TIME) {
        next = next == null ? row.pending : Math.min(next, row.pending);
      }
    }
    return next == null ? null : next + delay;
  }
}
