package floodmark.window;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The pane rules, the twin of {@code floodmark.core.window.table} (whose module docstring states them: Beam's
 * {@code ReduceFnRunner} rules, Flink's boundary convention), applied to one {@link WindowRow} at a time:
 *
 * <ul>
 *   <li>holds: records hold their window's output time only while the watermark has not reached its max timestamp
 *       ({@link #addArrivals}); a record's hold is its output time unless behind its key's output watermark
 *       ({@link #holdOf}, {@link #keyOutputWatermarks});
 *   <li>firing ({@link #emit}): the timing (EARLY, then ON_TIME or LATE, then LATE), the indices, the timestamp;
 *       only an ON_TIME pane is emitted empty; after a pane the window starts over, and DISCARDING restarts its
 *       accumulators;
 *   <li>a record of a window that is not merging ({@link #addRecord}): before the watermark reaches the window's max
 *       timestamp it accumulates (an early pane after n records); after, it fires a LATE pane of its own, or waits
 *       for the horizon, or is refused by a closed window (WINDOW_CLOSED), as the trigger says;
 *   <li>the horizon ({@link #expired}, {@link #needsFinalPane}): at max timestamp + allowed lateness (inclusive) a
 *       window is garbage collected, after a last pane if it holds unemitted records and its trigger has not
 *       finished; records for it after that are EXPIRED.
 * </ul>
 */
final class PaneRules {
  private final WindowSpec spec;
  private final OperatorTime time;
  private final WindowTable table;

  PaneRules(WindowSpec spec, OperatorTime time, WindowTable table) {
    this.spec = spec;
    this.time = time;
    this.table = table;
  }

  /**
   * {@code count} records arrived for {@code row} now, with combined output time {@code hold}. Beam's hold rule:
   * they hold the window's output time only before the watermark reaches its max timestamp.
   */
  void addArrivals(WindowRow row, long count, long hold) {
    row.newCount += count;
    if (row.pending == WindowRow.NO_TIME) {
      row.pending = time.processingTime;
    }
    if (!Boundaries.reached(row.end, time.watermark)) {
      row.held = true;
      row.hold = spec.combiner().fold(row.hold, hold);
    }
  }

  /** Fires {@code row} with its accumulators' value; DISCARDING restarts them. */
  void emit(WindowRow row, boolean isLast, Emitted out) {
    Pane pane = fire(row, isLast, row.newCount, row.hold, spec.aggregate().results(row.acc));
    if (pane != null) {
      out.panes.add(pane);
    }
    if (!spec.accumulating()) {
      spec.aggregate().reset(row.acc);
    }
  }

  /**
   * Decides a pane ({@code WindowTable.fire}'s rules) and starts the window over: EARLY before the watermark
   * reaches the max timestamp; then ON_TIME if a record held the window, else LATE; LATE after any ON_TIME or
   * LATE pane. Only an ON_TIME pane is emitted empty; null when the firing emitted nothing.
   */
  private Pane fire(WindowRow row, boolean isLast, long count, long hold, Object[] value) {
    String timing =
        row.hadNonearly
            ? "LATE"
            : Boundaries.reached(row.end, time.watermark) ? (row.held ? "ON_TIME" : "LATE") : "EARLY";
    boolean emitted = count > 0 || timing.equals("ON_TIME");
    boolean nonearly = emitted && !timing.equals("EARLY");
    Pane pane = null;
    if (emitted) {
      pane =
          new Pane(
              row.key,
              row.start,
              row.end,
              value,
              spec.combiner().paneTimestamp(hold, row.maxTimestamp()),
              timing,
              row.paneIndex,
              timing.equals("EARLY") ? -1 : row.nonspec,
              isLast);
      row.paneIndex += 1;
    }
    if (nonearly) {
      row.nonspec += 1;
      row.hadNonearly = true;
      row.held = false;
    }
    row.hold = spec.combiner().emptyHold();
    row.newCount = 0;
    row.pending = WindowRow.NO_TIME;
    return pane;
  }

  /** Whether {@code row} may still fire an EARLY pane: open, not fired, the watermark short of its max timestamp. */
  boolean waitingEarly(WindowRow row) {
    return !row.closed && !row.fired && !Boundaries.reached(row.end, time.watermark);
  }

  /** Whether the watermark has reached the horizon of a window ending at {@code end} (max timestamp + lateness). */
  boolean expired(long end) {
    return Boundaries.expired(end, spec.allowedLateness(), time.watermark);
  }

  /** Garbage collection fires a last pane of {@code row} first: its trigger has not finished, records unemitted. */
  boolean needsFinalPane(WindowRow row) {
    return !row.closed && row.newCount > 0;
  }

  /**
   * One record of a window {@code [start, end)} that is not merging and not past its horizon, with its own
   * accumulators {@code own} and output time {@code outputTime}: see the class comment.
   */
  void addRecord(Record record, long start, long end, double[] own, long outputTime, Emitted out) {
    ColumnarTrigger trigger = spec.trigger();
    WindowRow row = table.rowFor(record.key(), start, end);
    boolean reached = Boundaries.reached(end, time.watermark);
    if (!reached || trigger.late() == LateFirings.AT_HORIZON) {
      spec.aggregate().merge(row.acc, own);
      addArrivals(row, 1, outputTime);
      if (!reached && trigger.earlyCount() != null && row.newCount >= trigger.earlyCount()) {
        emit(row, false, out);
      }
      return;
    }
    if (row.closed) {
      out.late.add(time.late(spec, record, start, end, "WINDOW_CLOSED"));
      return;
    }
    // A late record fires a LATE pane of its own: the record alone (DISCARDING) or everything so far.
    boolean finishes = trigger.finishesOnTime();
    double[] value = own;
    if (spec.accumulating()) {
      spec.aggregate().merge(row.acc, own);
      value = row.acc;
    }
    Pane pane = fire(row, finishes, 1, spec.combiner().emptyHold(), spec.aggregate().results(value));
    if (pane != null) {
      out.panes.add(pane);
    }
    row.fired = true;
    if (finishes) {
      row.closed = true;
    }
    if (!spec.accumulating()) {
      spec.aggregate().reset(row.acc);
    }
  }

  /** The hold {@code record} adds to {@code [start, end)}: its output time, unless behind its key's output watermark. */
  long holdOf(Record record, long start, long end, Map<Object, Long> keyWatermarks) {
    long outputTime = spec.window().outputTime(record.timestamp(), start, end);
    if (outputTime <= time.watermark && keyWatermarks.containsKey(record.key())) {
      return spec.combiner().elementHold(outputTime, keyWatermarks.get(record.key()));
    }
    return outputTime;
  }

  /**
   * For each key of {@code records}: MIN(watermark, one below the lowest output timestamp its pending panes will
   * carry), the output watermark as the key sees it before the batch ({@code WindowTable.key_output_watermarks}).
   * Only keys a combiner other than END_OF_WINDOW asks about are computed.
   */
  Map<Object, Long> keyOutputWatermarks(List<Record> records) {
    Map<Object, Long> out = new HashMap<>();
    if (spec.combiner() == TimestampCombiner.END_OF_WINDOW) {
      return out;
    }
    for (Record record : records) {
      out.put(record.key(), time.watermark);
    }
    for (WindowRow row : table.rows()) {
      if (row.held && !row.closed && out.containsKey(row.key)) {
        long paneTime = spec.combiner().paneTimestamp(row.hold, row.maxTimestamp());
        long below = Math.max(paneTime, Long.MIN_VALUE + 1) - 1;
        out.put(row.key, Math.min(out.get(row.key), below));
      }
    }
    return out;
  }
}
