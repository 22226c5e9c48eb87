package floodmark.window;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongFunction;

/**
 * Windowed aggregation of one stage for many keys in the JVM: the semantics of the Python core's window operator
 * ({@code floodmark.core.window.WindowOperator}, the reference) for built-in specs ({@link WindowSpec}), checked
 * against it by a differential property test ({@code tests/core/test_jvm_window_operator.py}).
 *
 * <p>Three moves, each returning what it emitted: {@link #advanceProcessingTime}, {@link #advanceWatermark} and
 * {@link #addRecords}; a micro-batch calls them in that order. Boundaries are {@link Boundaries}': a window fires
 * ON_TIME when the watermark reaches its max timestamp ({@code end - 1}, inclusive), is garbage collected at its
 * horizon (max timestamp + allowed lateness, inclusive) after a last pane if it holds unemitted records, and
 * records for it after that go to the late output (EXPIRED); in between, late records fire LATE panes, wait for
 * the horizon or are refused (WINDOW_CLOSED), as the trigger says. Records without a usable timestamp or value
 * are bad records. Nothing is dropped silently.
 *
 * <p>Records are taken one by one in arrival order, which gives the panes the Python core gives for a batch (it
 * states that cutting a batch never changes them); the output watermark each key sees (the hold rule) is taken
 * before a batch, as there. Sums are IEEE doubles added in arrival order.
 *
 * <p>A deferring operator (constructed with {@link SegmentLimits}, for specs where {@link WindowSpec#defersPartials})
 * keeps the map side's partials of windows the watermark has not reached apart from its table, as segments
 * ({@link PartialSegments}), until the watermark reaches them or a record arrives for an open window: the panes
 * are the same, and a runtime that stores the segments on their own ({@link #snapshotParts}) reads and writes per
 * batch what the batch touches, not every open window.
 */
public final class WindowOperator {
  /**
   * 1: time and the table; 2: and the deferred partials (format 1 is read as an operator without segments); 3: its
   * keys, and its segments' keys, with back-references ({@link Keys.Writer}). Every format up to this one is read.
   */
  private static final int SNAPSHOT_FORMAT = 3;

  private final WindowSpec spec;
  private long watermark;
  private long processingTime;
  private final Map<WindowId, WindowRow> rows = new LinkedHashMap<>();
  /** A key's open windows, for merging windows (sessions) only. */
  private final Map<Object, List<WindowRow>> byKey = new HashMap<>();
  /** Deferred partials; null when the operator does not defer. */
  private final PartialSegments segments;

  /** What is known of each segment of deferred partials without reading it, oldest first (none without). */
  List<SegmentInfo> segmentInfos() {
    return segments == null ? List.of() : segments.infos();
  }

  public WindowOperator(WindowSpec spec, long watermark, long processingTime) {
    this(spec, watermark, processingTime, null, null);
  }

  /**
   * An operator that defers partials within {@code limits} if the spec allows it (otherwise an operator that does
   * not: null limits too); {@code load} reads segments stored apart (null: all in memory).
   */
  public WindowOperator(
      WindowSpec spec, long watermark, long processingTime, SegmentLimits limits, LongFunction<byte[]> load) {
    this.spec = spec;
    this.watermark = watermark;
    this.processingTime = processingTime;
    this.segments = limits != null && spec.defersPartials() ? new PartialSegments(spec, limits, load) : null;
  }

  public long watermark() {
    return watermark;
  }

  public long processingTime() {
    return processingTime;
  }

  // ------------------------------------------------------------------------------------------------ moves

  /** Moves processing time up (a lower value is ignored) and fires the EARLY panes due by processing time. */
  public Emitted advanceProcessingTime(long to) {
    Emitted out = new Emitted();
    if (to <= processingTime) {
      return out;
    }
    processingTime = to;
    Long delay = spec.trigger().earlyDelay();
    if (delay == null) {
      return out;
    }
    for (WindowRow row : rows.values()) {
      if (waitingEarly(row) && row.pending != WindowRow.NO_TIME && row.pending <= processingTime - delay) {
        emit(row, false, out);
      }
    }
    return out;
  }

  /**
   * Moves the input watermark up (a lower value is ignored): ON_TIME panes of the windows it reached, then the
   * last panes of windows at their horizon that hold unemitted records, which are released.
   */
  public Emitted advanceWatermark(long to) {
    Emitted out = new Emitted();
    if (to <= watermark) {
      return out;
    }
    watermark = to;
    List<Pane> passed = segments == null ? List.of() : mergeSegments(watermark);
    boolean onTime = spec.trigger().onTime();
    boolean finishes = spec.trigger().finishesOnTime();
    List<WindowRow> due = new ArrayList<>();
    for (WindowRow row : rows.values()) {
      if (Boundaries.reached(row.end, watermark)) { // every window at its horizon has been reached too
        due.add(row);
      }
    }
    due.sort(WindowOperator::byWindow); // panes in window order; a window's keys in their arrival order
    for (WindowRow row : due) {
      boolean firing = onTime && !row.closed && !row.fired;
      boolean gone = Boundaries.expired(row.end, spec.allowedLateness(), watermark);
      boolean last = gone && !row.closed && row.newCount > 0;
      if (firing || last) {
        boolean finished = firing && finishes;
        emit(row, finished || gone, out);
        if (firing) {
          row.fired = true;
        }
        if (finished) {
          row.closed = true;
        }
      }
      if (gone) {
        rows.remove(idOf(row));
        forget(row);
      }
    }
    if (!passed.isEmpty()) {
      out.panes.addAll(passed);
      out.panes.sort(WindowOperator::byWindow); // stable: a window's table rows first, as they were inserted first
    }
    return out;
  }

  private static int byWindow(Pane a, Pane b) {
    int byStart = Long.compare(a.start(), b.start());
    return byStart != 0 ? byStart : Long.compare(a.end(), b.end());
  }

  /** Adds records at the current watermark and processing time. */
  public Emitted addRecords(List<Record> records) {
    Emitted out = new Emitted();
    List<Record> good = new ArrayList<>(records.size());
    for (Record record : records) {
      String reason = badReason(record);
      if (reason == null) {
        good.add(record);
      } else {
        out.bad.add(new BadRecord(record.key(), record.payload(), record.timestamp(), reason));
      }
    }
    if (segments != null && !segments.isEmpty() && anyOpenWindow(good)) {
      mergeSegments(null); // a record for a window the watermark has not reached: merge them all
    }
    Map<Object, Long> keyWatermarks = keyOutputWatermarks(good);
    long pairs = 0;
    for (Record record : good) {
      long ts = record.timestamp();
      long[] windows = spec.window().assign(ts);
      double[] own = spec.aggregate().of(record.values());
      if (spec.window().isMerging()) {
        pairs++;
        addSession(record, windows[0], windows[1], own, holdOf(record, windows[0], windows[1], keyWatermarks), out);
        continue;
      }
      for (int i = 0; i < windows.length; i += 2) {
        long start = windows[i];
        long end = windows[i + 1];
        pairs++;
        if (Boundaries.expired(end, spec.allowedLateness(), watermark)) {
          out.late.add(late(record, start, end, "EXPIRED"));
          continue;
        }
        add(record, start, end, own, holdOf(record, start, end, keyWatermarks), out);
      }
    }
    out.accepted = pairs - out.late.size();
    return out;
  }

  /**
   * Merges the map side's partial aggregates: the same panes as {@link #addRecords} of the records they were
   * made of. Every window must be open (the watermark has not reached its max timestamp): records of windows it
   * reached come as records (they fire LATE panes one by one or go to the late output with their payload).
   *
   * @throws IllegalArgumentException for a partial of a window the watermark has reached
   */
  public Emitted addPartials(List<Partial> partials) {
    Emitted out = new Emitted();
    for (Partial partial : partials) {
      if (Boundaries.reached(partial.end(), watermark)) {
        throw new IllegalArgumentException(
            "partial aggregates for a window the watermark has already reached: the combiner and the operator "
                + "disagree on the watermark");
      }
      out.accepted += partial.count();
    }
    if (partials.isEmpty()) {
      return out;
    }
    // One row per (key, window) first, as the core reduces them: a window's sum adds the batch's partials up
    // before it adds them to what it holds.
    Segment reduced =
        PartialSegments.reduce(spec, Segment.of(partials, spec.aggregate().columns.size(), processingTime));
    if (segments != null && segments.defers(rows.size(), reduced.size)) {
      segments.add(reduced);
      return out;
    }
    for (int i = 0; i < reduced.size; i++) {
      WindowRow row = rowFor(reduced.keys[i], reduced.starts[i], reduced.ends[i]);
      spec.aggregate().merge(row.acc, 0, reduced.acc, i * reduced.width);
      addArrivals(row, reduced.counts[i], reduced.holds[i]);
    }
    return out;
  }

  /** Whether a good record of {@code records} belongs to a window the watermark has not reached. */
  private boolean anyOpenWindow(List<Record> records) {
    for (Record record : records) {
      long[] windows = spec.window().assign(record.timestamp());
      for (int i = 1; i < windows.length; i += 2) {
        if (!Boundaries.reached(windows[i], watermark)) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * Merges into the table, oldest first, the segments whose earliest window {@code to} has reached (all when
   * null), as {@link #addPartials} would have when their partials arrived: every window of a segment was open
   * then, so its records hold, and each row's oldest pending record is its arrival.
   *
   * <p>With a watermark, a row whose window it takes past its horizon and that the table does not hold is not
   * added to the table only to fire and go: its one pane is returned instead, the pane {@link #advanceWatermark}
   * would fire for it (its records held the window and nothing was emitted for it: ON_TIME, the first, the last),
   * in merge order. A flush of millions of windows makes no table row for them.
   */
  private List<Pane> mergeSegments(Long to) {
    List<Segment> due = segments.take(to);
    if (due.isEmpty()) {
      return List.of();
    }
    Segment merged = segments.merge(due);
    List<Pane> passed = new ArrayList<>();
    double[] acc = spec.aggregate().empty();
    for (int i = 0; i < merged.size; i++) {
      boolean gone = to != null && Boundaries.expired(merged.ends[i], spec.allowedLateness(), to);
      if (gone && (rows.isEmpty() || !rows.containsKey(new WindowId(merged.keys[i], spec.window().name(
          merged.starts[i], merged.ends[i]))))) {
        spec.aggregate().reset(acc);
        spec.aggregate().merge(acc, 0, merged.acc, i * merged.width); // onto an empty window's, as in the table
        long hold = spec.combiner().fold(spec.combiner().emptyHold(), merged.holds[i]);
        long end = merged.ends[i];
        passed.add(
            new Pane(
                merged.keys[i],
                merged.starts[i],
                end,
                spec.aggregate().results(acc),
                spec.combiner().paneTimestamp(hold, Boundaries.maxTimestamp(end)),
                "ON_TIME",
                0,
                0,
                true));
        continue;
      }
      WindowRow row = rowFor(merged.keys[i], merged.starts[i], merged.ends[i]);
      spec.aggregate().merge(row.acc, 0, merged.acc, i * merged.width);
      row.newCount += merged.counts[i];
      if (row.pending == WindowRow.NO_TIME) {
        row.pending = merged.arrivals[i];
      }
      row.held = true;
      row.hold = spec.combiner().fold(row.hold, merged.holds[i]);
    }
    return passed;
  }

  /** The hold {@code record} adds to {@code [start, end)}: its output time, unless behind its key's output watermark. */
  private long holdOf(Record record, long start, long end, Map<Object, Long> keyWatermarks) {
    long outputTime = spec.window().outputTime(record.timestamp(), start, end);
    if (outputTime <= watermark && keyWatermarks.containsKey(record.key())) {
      return spec.combiner().elementHold(outputTime, keyWatermarks.get(record.key()));
    }
    return outputTime;
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
  private void addSession(Record record, long start, long end, double[] own, long hold, Emitted out) {
    List<WindowRow> open = byKey.getOrDefault(record.key(), List.of());
    List<WindowRow> touching = new ArrayList<>();
    WindowRow refusing = null;
    for (WindowRow row : open) {
      if (row.intersects(start, end)) {
        touching.add(row);
        if (row.closed && (refusing == null || byWindow(row, refusing) < 0)) {
          refusing = row;
        }
      }
    }
    if (refusing != null) {
      out.late.add(late(record, refusing.start, refusing.end, "WINDOW_CLOSED"));
      return;
    }
    touching.sort(WindowOperator::byWindow);
    long mergedStart = start;
    long mergedEnd = end;
    for (WindowRow row : touching) {
      mergedStart = Math.min(mergedStart, row.start);
      mergedEnd = Math.max(mergedEnd, row.end);
    }
    if (Boundaries.expired(mergedEnd, spec.allowedLateness(), watermark)) {
      out.late.add(late(record, mergedStart, mergedEnd, "EXPIRED"));
      return;
    }
    WindowRow row;
    if (touching.isEmpty()) {
      row = rowFor(record.key(), start, end);
    } else {
      row = touching.get(0);
      if (touching.size() > 1 || row.start != mergedStart || row.end != mergedEnd) {
        merge(row, touching.subList(1, touching.size()), mergedStart, mergedEnd);
      }
    }
    spec.aggregate().merge(row.acc, own);
    addArrivals(row, 1, hold);
    if (!Boundaries.reached(row.end, watermark) || spec.trigger().late() == LateFirings.AT_HORIZON) {
      return;
    }
    boolean finishes = spec.trigger().finishesOnTime();
    emit(row, finishes, out);
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
      rows.remove(idOf(other));
      forget(other);
    }
    long name = spec.window().name(start, end);
    if (name != spec.window().name(target.start, target.end)) {
      // Only a window whose name changes moves in the table (a session growing to the right keeps its start, and
      // its entry: a remove and a put per record was half of a sessions batch's operator time).
      rows.remove(idOf(target));
      rows.put(new WindowId(target.key, name), target);
    }
    target.start = start;
    target.end = end;
    target.paneIndex = 0;
    target.nonspec = 0;
    target.hadNonearly = false;
    target.fired = false;
  }

  private static int byWindow(WindowRow a, WindowRow b) {
    int byStart = Long.compare(a.start, b.start);
    return byStart != 0 ? byStart : Long.compare(a.end, b.end);
  }

  private WindowId idOf(WindowRow row) {
    return new WindowId(row.key, spec.window().name(row.start, row.end));
  }

  private void forget(WindowRow row) {
    List<WindowRow> windows = byKey.get(row.key);
    if (windows != null) {
      windows.remove(row);
      if (windows.isEmpty()) {
        byKey.remove(row.key);
      }
    }
  }

  private void add(Record record, long start, long end, double[] own, long outputTime, Emitted out) {
    ColumnarTrigger trigger = spec.trigger();
    WindowRow row = rowFor(record.key(), start, end);
    boolean reached = Boundaries.reached(end, watermark);
    if (!reached || trigger.late() == LateFirings.AT_HORIZON) {
      spec.aggregate().merge(row.acc, own);
      addArrivals(row, 1, outputTime);
      if (!reached && trigger.earlyCount() != null && row.newCount >= trigger.earlyCount()) {
        emit(row, false, out);
      }
      return;
    }
    if (row.closed) {
      out.late.add(late(record, start, end, "WINDOW_CLOSED"));
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

  // ------------------------------------------------------------------------------------------------ rules

  /**
   * {@code count} records arrived for {@code row} now, with combined output time {@code hold}. Beam's hold rule:
   * they hold the window's output time only before the watermark reaches its max timestamp.
   */
  private void addArrivals(WindowRow row, long count, long hold) {
    row.newCount += count;
    if (row.pending == WindowRow.NO_TIME) {
      row.pending = processingTime;
    }
    if (!Boundaries.reached(row.end, watermark)) {
      row.held = true;
      row.hold = spec.combiner().fold(row.hold, hold);
    }
  }

  /** Fires {@code row} with its accumulators' value; DISCARDING restarts them. */
  private void emit(WindowRow row, boolean isLast, Emitted out) {
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
        row.hadNonearly ? "LATE" : Boundaries.reached(row.end, watermark) ? (row.held ? "ON_TIME" : "LATE") : "EARLY";
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

  private boolean waitingEarly(WindowRow row) {
    return !row.closed && !row.fired && !Boundaries.reached(row.end, watermark);
  }

  private WindowRow rowFor(Object key, long start, long end) {
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

  private LateRecord late(Record record, long start, long end, String reason) {
    long ts = record.timestamp();
    return new LateRecord(
        record.key(), start, end, ts, record.payload(), watermark, watermark - ts, spec.horizon(end), reason);
  }

  /**
   * Whether a record with {@code timestamp} and {@code values} may come out of a batch at {@code batchWatermark}
   * as a late or bad record (so a host keeps what it needs to write it out). Not when it is good and after the
   * watermark: every window holding {@code ts} ends after it and is reached only when {@code end - 1 <= watermark};
   * a session it would merge into, or a closed one refusing it, overlaps {@code [ts, ts + gap)} and ends after it
   * too. The operator's own watermark is never ahead of the batch's.
   */
  public static boolean mayReport(WindowSpec spec, Long timestamp, double[] values, long batchWatermark) {
    return badReason(spec, new Record(null, timestamp, values, null)) != null || timestamp <= batchWatermark;
  }

  private String badReason(Record record) {
    return badReason(spec, record);
  }

  private static String badReason(WindowSpec spec, Record record) {
    Long ts = record.timestamp();
    if (ts == null) {
      return "missing timestamp";
    }
    if (!Boundaries.inRange(ts)) {
      return Boundaries.outOfRangeReason(ts);
    }
    List<String> labels = spec.aggregate().labels;
    for (int i = 0; i < labels.size(); i++) {
      double value = record.values()[i];
      String label = labels.get(i);
      if (Double.isNaN(value)) {
        return label + " is missing";
      }
      if (Double.isInfinite(value)) {
        return label + " is not a finite number: " + (value > 0 ? "inf" : "-inf");
      }
    }
    return null;
  }

  /**
   * For each key of {@code records}: MIN(watermark, one below the lowest output timestamp its pending panes will
   * carry), the output watermark as the key sees it before the batch ({@code WindowTable.key_output_watermarks}).
   * Only keys a combiner other than END_OF_WINDOW asks about are computed.
   */
  private Map<Object, Long> keyOutputWatermarks(List<Record> records) {
    Map<Object, Long> out = new HashMap<>();
    if (spec.combiner() == TimestampCombiner.END_OF_WINDOW) {
      return out;
    }
    for (Record record : records) {
      out.put(record.key(), watermark);
    }
    for (WindowRow row : rows.values()) {
      if (row.held && !row.closed && out.containsKey(row.key)) {
        long time = spec.combiner().paneTimestamp(row.hold, row.maxTimestamp());
        long below = Math.max(time, Long.MIN_VALUE + 1) - 1;
        out.put(row.key, Math.min(out.get(row.key), below));
      }
    }
    return out;
  }

  // ----------------------------------------------------------------------------------------------- gauges

  /** The lowest output timestamp a pending pane will carry (holds the output watermark), or null. */
  public Long outputHold() {
    Long lowest = null;
    for (WindowRow row : rows.values()) {
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

  /** Processing time of the oldest record not yet emitted in a pane, or null. */
  public Long oldestPending() {
    Long oldest = null;
    for (WindowRow row : rows.values()) {
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

  /**
   * The open windows of {@code key}, as {@code {start, end}} pairs (for tests and inspection: a scan, after merging
   * every deferred partial into the table).
   */
  public List<long[]> windowsOf(Object key) {
    if (segments != null) {
      mergeSegments(null);
    }
    List<long[]> out = new ArrayList<>();
    for (WindowRow row : rows.values()) {
      if (java.util.Objects.equals(row.key, key)) {
        out.add(new long[] {row.start, row.end});
      }
    }
    return out;
  }

  /** Open windows: an upper bound while partials are deferred (a window counts once per segment holding it). */
  public long windowCount() {
    return rows.size() + (segments == null ? 0 : segments.rows());
  }

  /** The lowest watermark at which {@link #advanceWatermark} would fire or release a window, or null. */
  public Long nextWatermarkDeadline() {
    Long next = null;
    for (WindowRow row : rows.values()) {
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

  /** The lowest processing time at which {@link #advanceProcessingTime} would fire an EARLY pane, or null. */
  public Long nextProcessingDeadline() {
    Long delay = spec.trigger().earlyDelay();
    if (delay == null) {
      return null;
    }
    Long next = null;
    for (WindowRow row : rows.values()) {
      if (waitingEarly(row) && row.pending != WindowRow.NO_TIME) {
        next = next == null ? row.pending : Math.min(next, row.pending);
      }
    }
    return next == null ? null : next + delay;
  }

  // --------------------------------------------------------------------------------------------- snapshot

  /** Everything the operator holds, self-contained. Keys are strings, longs, doubles, booleans or null. */
  public byte[] snapshot() {
    return write(segments == null ? Map.of() : segments.bodies());
  }

  /**
   * The snapshot in parts, for a runtime that stores deferred partials apart: the head (time, the table, what is
   * known of the segments), the segments made since the last call and the stored ones to delete. {@link
   * #restore(WindowSpec, byte[], SegmentLimits, LongFunction)} restores the head, reading segments through its
   * loader.
   */
  public SnapshotParts snapshotParts() {
    if (segments == null) {
      return new SnapshotParts(write(Map.of()), Map.of(), java.util.Set.of());
    }
    return new SnapshotParts(write(Map.of()), segments.takeAdded(), segments.takeDropped());
  }

  private byte[] write(Map<Long, byte[]> bodies) {
    SnapshotOut out = new SnapshotOut(64 + rows.size() * 96);
    try {
      out.writeInt(SNAPSHOT_FORMAT);
      out.writeLong(watermark);
      out.writeLong(processingTime);
      out.writeInt(rows.size());
      Keys.Writer keyWriter = new Keys.Writer(rows.size());
      for (WindowRow row : rows.values()) {
        keyWriter.write(out, row.key);
        out.writeLong(row.start);
        out.writeLong(row.end);
        out.writeLong(row.newCount);
        out.writeLong(row.hold);
        out.writeLong(row.paneIndex);
        out.writeLong(row.nonspec);
        out.writeLong(row.pending);
        out.writeBoolean(row.held);
        out.writeBoolean(row.hadNonearly);
        out.writeBoolean(row.closed);
        out.writeBoolean(row.fired);
        for (double value : row.acc) {
          out.writeDouble(value);
        }
      }
      out.writeBoolean(segments != null);
      if (segments != null) {
        out.writeLong(segments.nextId());
        out.writeInt(segments.infos().size());
        for (SegmentInfo info : segments.infos()) {
          out.writeLong(info.id());
          out.writeInt(info.level());
          out.writeInt(info.rows());
          out.writeLong(info.firstEnd());
          out.writeLong(info.oldestArrival());
        }
        out.writeInt(bodies.size());
        for (Map.Entry<Long, byte[]> body : bodies.entrySet()) {
          out.writeLong(body.getKey());
          out.writeInt(body.getValue().length);
          out.write(body.getValue());
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /**
   * The operator that took {@code snapshot} (self-contained), restored; one with deferred partials defers within
   * the default limits.
   */
  public static WindowOperator restore(WindowSpec spec, byte[] snapshot) {
    return restore(spec, snapshot, null, null);
  }

  /**
   * The operator that took {@code snapshot} (or the head of {@link #snapshotParts}, whose segments {@code load}
   * reads), restored. A snapshot with deferred partials restores a deferring operator within {@code limits}; one
   * without restores an operator that defers only if {@code limits} is not null (a format-1 snapshot has none).
   */
  public static WindowOperator restore(
      WindowSpec spec, byte[] snapshot, SegmentLimits limits, LongFunction<byte[]> load) {
    SnapshotIn in = new SnapshotIn(snapshot);
    try {
      int format = in.readInt();
      if (format < 1 || format > SNAPSHOT_FORMAT) {
        throw new IllegalArgumentException("window operator snapshot format " + format + " is not readable here");
      }
      long watermark = in.readLong();
      long processingTime = in.readLong();
      int count = in.readInt();
      int width = spec.aggregate().columns.size();
      List<WindowRow> rows = new ArrayList<>(count);
      Keys.Reader keyReader = new Keys.Reader();
      for (int i = 0; i < count; i++) {
        Object key = keyReader.read(in);
        long start = in.readLong();
        long end = in.readLong();
        WindowRow row = new WindowRow(key, start, end, spec.combiner().emptyHold(), new double[width]);
        row.newCount = in.readLong();
        row.hold = in.readLong();
        row.paneIndex = in.readLong();
        row.nonspec = in.readLong();
        row.pending = in.readLong();
        row.held = in.readBoolean();
        row.hadNonearly = in.readBoolean();
        row.closed = in.readBoolean();
        row.fired = in.readBoolean();
        for (int j = 0; j < width; j++) {
          row.acc[j] = in.readDouble();
        }
        rows.add(row);
      }
      boolean deferred = format >= 2 && in.readBoolean();
      if (deferred && limits == null) {
        throw new IllegalArgumentException("a snapshot with deferred partials is restored with its segment limits");
      }
      WindowOperator operator = new WindowOperator(spec, watermark, processingTime, limits, load);
      if (deferred && operator.segments == null) {
        throw new IllegalArgumentException("a snapshot with deferred partials needs a spec that defers them");
      }
      for (WindowRow row : rows) {
        operator.rows.put(operator.idOf(row), row);
        if (spec.window().isMerging()) {
          operator.byKey.computeIfAbsent(row.key, k -> new ArrayList<>()).add(row);
        }
      }
      if (deferred) {
        long nextId = in.readLong();
        int infoCount = in.readInt();
        List<SegmentInfo> infos = new ArrayList<>(infoCount);
        for (int i = 0; i < infoCount; i++) {
          infos.add(new SegmentInfo(in.readLong(), in.readInt(), in.readInt(), in.readLong(), in.readLong()));
        }
        int bodyCount = in.readInt();
        Map<Long, byte[]> bodies = new java.util.TreeMap<>();
        for (int i = 0; i < bodyCount; i++) {
          long id = in.readLong();
          byte[] body = new byte[in.readInt()];
          in.readFully(body);
          bodies.put(id, body);
        }
        operator.segments.restore(infos, nextId, bodies);
      }
      return operator;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The limits the operator defers partials within, or null when it does not defer. */
  public SegmentLimits segmentLimits() {
    return segments == null ? null : segments.limits();
  }
}
