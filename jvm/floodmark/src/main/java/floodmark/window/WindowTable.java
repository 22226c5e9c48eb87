package floodmark.window;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The open windows of one operator, one {@link WindowRow} per (key, window) in insertion order: the rows of
 * {@code WindowTable} in {@code floodmark.core.window.table} (opening, reassigning a merged window, releasing,
 * restoring), indexed by key and window name ({@link WindowAssigner#name}) and, for merging windows, by key. What a
 * row's pane is, is {@link PaneRules}'s; how session rows merge, {@link SessionMerge}'s.
 */
final class WindowTable {
  private final WindowSpec spec;
  private final Map<WindowId, WindowRow> rows = new LinkedHashMap<>();
  /** A key's open windows, for merging windows (sessions) only. */
  private final Map<Object, List<WindowRow>> byKey = new HashMap<>();

  WindowTable(WindowSpec spec) {
    this.spec = spec;
  }

  /** The open rows, in the order they were opened (a window whose name changed in a merge last). */
  Collection<WindowRow> rows() {
    return rows.values();
  }

  int size() {
    return rows.size();
  }

  /** The row of {@code key}'s window {@code [start, end)}, opened (no records, empty accumulators) if not open. */
  WindowRow rowFor(Object key, long start, long end) {
    WindowId id = new WindowId(key, spec.window().name(start, end));
    WindowRow row = rows.get(id);
    if (row == null) {
      row = new WindowRow(key, start, end, spec.combiner().emptyHold(), spec.aggregate().empty());
      rows.put(id, row);
      if (spec.window().isMerging()) {
        byKey.computeIfAbsent(key, k -> new ArrayList<>()).add(row);
      }
    }
    return row;
  }

  /** Whether {@code key}'s window {@code [start, end)} is open. */
  boolean holds(Object key, long start, long end) {
    return !rows.isEmpty() && rows.containsKey(new WindowId(key, spec.window().name(start, end)));
  }

  /** The open windows of {@code key} (merging windows only; do not modify). */
  List<WindowRow> openOf(Object key) {
    return byKey.getOrDefault(key, List.of());
  }

  /** The open windows of {@code key}, as {@code {start, end}} pairs (a scan: for tests and inspection). */
  List<long[]> windowsOf(Object key) {
    List<long[]> out = new ArrayList<>();
    for (WindowRow row : rows.values()) {
      if (Objects.equals(row.key, key)) {
        out.add(new long[] {row.start, row.end});
      }
    }
    return out;
  }

  /** Releases {@code row}: its window is forgotten. */
  void release(WindowRow row) {
    rows.remove(idOf(row));
    List<WindowRow> windows = byKey.get(row.key);
    if (windows != null) {
      windows.remove(row);
      if (windows.isEmpty()) {
        byKey.remove(row.key);
      }
    }
  }

  /**
   * Gives {@code row} another window of its key, {@code [start, end)} (a merge); its other fields are the caller's.
   * Only a window whose name changes moves in the table (a session growing to the right keeps its start, and its
   * entry: a remove and a put per record was half of a sessions batch's operator time).
   */
  void reassign(WindowRow row, long start, long end) {
    long name = spec.window().name(start, end);
    if (name != spec.window().name(row.start, row.end)) {
      rows.remove(idOf(row));
      rows.put(new WindowId(row.key, name), row);
    }
    row.start = start;
    row.end = end;
  }

  /** Puts a row of a snapshot back (restore), after the rows put back before it. */
  void restore(WindowRow row) {
    rows.put(idOf(row), row);
    if (spec.window().isMerging()) {
      byKey.computeIfAbsent(row.key, k -> new ArrayList<>()).add(row);
    }
  }

  private WindowId idOf(WindowRow row) {
    return new WindowId(row.key, spec.window().name(row.start, row.end));
  }
}
