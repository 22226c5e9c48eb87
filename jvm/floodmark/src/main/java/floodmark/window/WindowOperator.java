package floodmark.window;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
 *
 * <p>This class is the twin of {@code floodmark.core.window.operator}: it validates records, keeps time
 * ({@link OperatorTime}) and makes the moves; the rest is its parts', each the twin of a Python file: the open
 * windows ({@link WindowTable}) and the pane rules ({@link PaneRules}) of {@code table.py}, the merge of session
 * windows ({@link SessionMerge}) of {@code sessions.py}, the gauges ({@link OperatorGauges}) and the snapshot
 * ({@link OperatorSnapshot}) of {@code operator.py}'s sections.
 */
public final class WindowOperator {
  private final WindowSpec spec;
  final OperatorTime time;
  final WindowTable table;
  /** Deferred partials; null when the operator does not defer. */
  final PartialSegments segments;

  /**
   * Stored segments merged into the table on a restore under a spec that no longer defers partials (to delete at
   * the next {@link #snapshotParts}).
   */
  Set<Long> retired = Set.of();

  private final PaneRules rules;
  private final SessionMerge sessions;
  private final OperatorGauges gauges;

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
    this.time = new OperatorTime(watermark, processingTime);
    this.segments = limits != null && spec.defersPartials() ? new PartialSegments(spec, limits, load) : null;
    this.table = new WindowTable(spec);
    this.rules = new PaneRules(spec, time, table);
    this.sessions = new SessionMerge(spec, time, table, rules);
    this.gauges = new OperatorGauges(spec, table, rules, segments);
  }

  public long watermark() {
    return time.watermark;
  }

  public long processingTime() {
    return time.processingTime;
  }

  // ------------------------------------------------------------------------------------------------ moves

  /** Moves processing time up (a lower value is ignored) and fires the EARLY panes due by processing time. */
  public Emitted advanceProcessingTime(long to) {
    Emitted out = new Emitted();
    if (to <= time.processingTime) {
      return out;
    }
    time.processingTime = to;
    Long delay = spec.trigger().earlyDelay();
    if (delay == null) {
      return out;
    }
    for (WindowRow row : table.rows()) {
      if (rules.waitingEarly(row) && row.pending != WindowRow.NO_TIME && row.pending <= time.processingTime - delay) {
        rules.emit(row, false, out);
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
    if (to <= time.watermark) {
      return out;
    }
    time.watermark = to;
    List<Pane> passed = segments == null ? List.of() : mergeSegments(time.watermark);
    boolean onTime = spec.trigger().onTime();
    boolean finishes = spec.trigger().finishesOnTime();
    List<WindowRow> due = new ArrayList<>();
    for (WindowRow row : table.rows()) {
      if (Boundaries.reached(row.end, time.watermark)) { // every window at its horizon has been reached too
        due.add(row);
      }
    }
    due.sort(WindowRow::byWindow); // panes in window order; a window's keys in their arrival order
    for (WindowRow row : due) {
      boolean firing = onTime && !row.closed && !row.fired;
      boolean gone = rules.expired(row.end);
      boolean last = gone && rules.needsFinalPane(row);
      if (firing || last) {
        boolean finished = firing && finishes;
        rules.emit(row, finished || gone, out);
        if (firing) {
          row.fired = true;
        }
        if (finished) {
          row.closed = true;
        }
      }
      if (gone) {
        table.release(row);
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
      String reason = badReason(spec, record);
      if (reason == null) {
        good.add(record);
      } else {
        out.bad.add(new BadRecord(record.key(), record.payload(), record.timestamp(), reason));
      }
    }
    if (segments != null && !segments.isEmpty() && anyOpenWindow(good)) {
      mergeSegments(null); // a record for a window the watermark has not reached: merge them all
    }
    Map<Object, Long> keyWatermarks = rules.keyOutputWatermarks(good);
    long pairs = 0;
    for (Record record : good) {
      long ts = record.timestamp();
      long[] windows = spec.window().assign(ts);
      double[] own = spec.aggregate().of(record.values());
      if (spec.window().isMerging()) {
        pairs++;
        long hold = rules.holdOf(record, windows[0], windows[1], keyWatermarks);
        sessions.add(record, windows[0], windows[1], own, hold, out);
        continue;
      }
      for (int i = 0; i < windows.length; i += 2) {
        long start = windows[i];
        long end = windows[i + 1];
        pairs++;
        if (rules.expired(end)) {
          out.late.add(time.late(spec, record, start, end, "EXPIRED"));
          continue;
        }
        rules.addRecord(record, start, end, own, rules.holdOf(record, start, end, keyWatermarks), out);
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
      if (Boundaries.reached(partial.end(), time.watermark)) {
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
        PartialSegments.reduce(spec, Segment.of(partials, spec.aggregate().columns.size(), time.processingTime));
    if (segments != null && segments.defers(table.size(), reduced.size)) {
      segments.add(reduced);
      return out;
    }
    for (int i = 0; i < reduced.size; i++) {
      WindowRow row = table.rowFor(reduced.keys[i], reduced.starts[i], reduced.ends[i]);
      spec.aggregate().merge(row.acc, 0, reduced.acc, i * reduced.width);
      rules.addArrivals(row, reduced.counts[i], reduced.holds[i]);
    }
    return out;
  }

  /** Whether a good record of {@code records} belongs to a window the watermark has not reached. */
  private boolean anyOpenWindow(List<Record> records) {
    for (Record record : records) {
      long[] windows = spec.window().assign(record.timestamp());
      for (int i = 1; i < windows.length; i += 2) {
        if (!Boundaries.reached(windows[i], time.watermark)) {
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
    return mergeSegments(segments, to);
  }

  /** {@link #mergeSegments(Long)} from {@code from}'s segments. */
  private List<Pane> mergeSegments(PartialSegments from, Long to) {
    List<Segment> due = from.take(to);
    if (due.isEmpty()) {
      return List.of();
    }
    Segment merged = from.merge(due);
    List<Pane> passed = new ArrayList<>();
    double[] acc = spec.aggregate().empty();
    for (int i = 0; i < merged.size; i++) {
      boolean gone = to != null && Boundaries.expired(merged.ends[i], spec.allowedLateness(), to);
      if (gone && !table.holds(merged.keys[i], merged.starts[i], merged.ends[i])) {
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
      WindowRow row = table.rowFor(merged.keys[i], merged.starts[i], merged.ends[i]);
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

  /** Why {@code record} is a bad record (no usable timestamp or value), or null when it is good. */
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

  // ----------------------------------------------------------------------------------------------- gauges

  /** The lowest output timestamp a pending pane will carry (holds the output watermark), or null. */
  public Long outputHold() {
    return gauges.outputHold();
  }

  /** Processing time of the oldest record not yet emitted in a pane, or null. */
  public Long oldestPending() {
    return gauges.oldestPending();
  }

  /**
   * The open windows of {@code key}, as {@code {start, end}} pairs (for tests and inspection: a scan, after merging
   * every deferred partial into the table).
   */
  public List<long[]> windowsOf(Object key) {
    if (segments != null) {
      mergeSegments(null);
    }
    return table.windowsOf(key);
  }

  /** Open windows: an upper bound while partials are deferred (a window counts once per segment holding it). */
  public long windowCount() {
    return gauges.windowCount();
  }

  /** The lowest watermark at which {@link #advanceWatermark} would fire or release a window, or null. */
  public Long nextWatermarkDeadline() {
    return gauges.nextWatermarkDeadline();
  }

  /** The lowest processing time at which {@link #advanceProcessingTime} would fire an EARLY pane, or null. */
  public Long nextProcessingDeadline() {
    return gauges.nextProcessingDeadline();
  }

  // --------------------------------------------------------------------------------------------- snapshot

  /** Everything the operator holds, self-contained. Keys are strings, longs, doubles, booleans or null. */
  public byte[] snapshot() {
    return OperatorSnapshot.snapshot(this);
  }

  /**
   * The snapshot in parts, for a runtime that stores deferred partials apart: the head (time, the table, what is
   * known of the segments), the segments made since the last call and the stored ones to delete. {@link
   * #restore(WindowSpec, byte[], SegmentLimits, LongFunction)} restores the head, reading segments through its
   * loader.
   */
  /**
   * The segments {@code saved} of a snapshot restored under a spec that no longer defers partials (early firings
   * added on a restart): every one merged into the table now, as the watermark would have merged it, and the stored
   * ones deleted at the next {@link #snapshotParts} (the columnar policy's {@code _merge_retired}).
   */
  void mergeRetired(PartialSegments saved) {
    mergeSegments(saved, null);
    retired = saved.takeDropped();
  }

  public SnapshotParts snapshotParts() {
    return OperatorSnapshot.parts(this);
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
    return OperatorSnapshot.restore(spec, snapshot, limits, load);
  }

  /** The limits the operator defers partials within, or null when it does not defer. */
  public SegmentLimits segmentLimits() {
    return segments == null ? null : segments.limits();
  }
}
