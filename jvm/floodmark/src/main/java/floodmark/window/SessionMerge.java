package floodmark.window;

import java.util.ArrayList;
import java.util.List;

/**
 * Merging windows (sessions), one record at a time: the twin of {@code floodmark.core.window.sessions}
 * ({@code merge_record}, whose module docstring states the order) and of the table's merge of rows
 * ({@code WindowTable.merge_rows} in {@code floodmark.core.window.table}).
 */
final class SessionMerge {
  private final WindowSpec spec;
  private final OperatorTime time;
  private final WindowTable table;
  private final PaneRules rules;

  SessionMerge(WindowSpec spec, OperatorTime time, WindowTable table, PaneRules rules) {
    this.spec = spec;
    this.time = time;
    this.table = table;
    this.rules = rules;
  }

  /**
   * One record of merging windows: its window {@code [start, end)} against its key's open windows, in this order
   * ({@code floodmark.core.window.sessions.merge_record}; Flink's {@code MergingWindowSet.addWindow}, then
   * {@code isWindowLate}): a closed window it overlaps refuses it (WINDOW_CLOSED, the first by start); it merges
   * with the open windows it overlaps (the first by start keeps its row and becomes their cover, a new window:
   * its pane history restarts); only then, if the watermark has reached the merged window's horizon, it is
   * EXPIRED and nothing changes. If the watermark has reached the merged window's max timestamp, the trigger's
   * late behaviour applies at once.
   */
  void add(Record record, long start, long end, double[] own, long hold, Emitted out) {
    List<WindowRow> open = table.openOf(record.key());
    List<WindowRow> touching = new ArrayList<>();
    WindowRow refusing = null;
    for (WindowRow row : open) {
      if (row.intersects(start, end)) {
        touching.add(row);
        if (row.closed && (refusing == null || WindowRow.byWindow(row, refusing) < 0)) {
          refusing = row;
        }
      }
    }
    if (refusing != null) {
      out.late.add(time.late(spec, record, refusing.start, refusing.end, "WINDOW_CLOSED"));
      return;
    }
    touching.sort(WindowRow::byWindow);
    long mergedStart = start;
    long mergedEnd = end;
    for (WindowRow row : touching) {
      mergedStart = Math.min(mergedStart, row.start);
      mergedEnd = Math.max(mergedEnd, row.end);
    }
    if (rules.expired(mergedEnd)) {
      out.late.add(time.late(spec, record, mergedStart, mergedEnd, "EXPIRED"));
      return;
    }
    WindowRow row;
    if (touching.isEmpty()) {
      row = table.rowFor(record.key(), start, end);
    } else {
      row = touching.get(0);
      if (touching.size() > 1 || row.start != mergedStart || row.end != mergedEnd) {
        merge(row, touching.subList(1, touching.size()), mergedStart, mergedEnd);
      }
    }
    spec.aggregate().merge(row.acc, own);
    rules.addArrivals(row, 1, hold);
    if (!Boundaries.reached(row.end, time.watermark) || spec.trigger().late() == LateFirings.AT_HORIZON) {
      return;
    }
    boolean finishes = spec.trigger().finishesOnTime();
    rules.emit(row, finishes, out);
    row.fired = true;
    if (finishes) {
      row.closed = true;
    }
  }

  /**
   * {@code target} becomes the window {@code [start, end)} and absorbs {@code others} (released), Java Beam's
   * merge: records since the last pane add up, holds combine, the merged window holds if any member did, its
   * oldest pending record is the members' oldest, accumulators merge; pane history starts over and the watermark
   * has not fired the new window.
   */
  private void merge(WindowRow target, List<WindowRow> others, long start, long end) {
    for (WindowRow other : others) {
      target.newCount += other.newCount;
      target.hold = spec.combiner().fold(target.hold, other.hold);
      target.held |= other.held;
      target.pending = Math.min(target.pending, other.pending);
      spec.aggregate().merge(target.acc, other.acc);
      table.release(other);
    }
    table.reassign(target, start, end);
    target.paneIndex = 0;
    target.nonspec = 0;
    target.hadNonearly = false;
    target.fired = false;
  }
}
