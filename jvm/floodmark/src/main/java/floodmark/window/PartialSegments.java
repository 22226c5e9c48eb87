package floodmark.window;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.LongFunction;

/**
 * The deferred partials of one operator, oldest first: what batches add to windows the watermark has not reached,
 * kept apart from the window table as segments so that a runtime storing each segment on its own reads and writes
 * per batch what the batch touches ({@code floodmark/core/segments.py}, the reference, whose docstring states the
 * rule). A segment is read again only when
 *
 * <ul>
 *   <li>the watermark reaches its earliest window's max timestamp ({@link #take} with a watermark): its rows of the
 *       windows the watermark reached merge into the table before those fire, the rest is split by window end into
 *       at most {@link SegmentLimits#fanout} pieces in its place ({@link #split}), each read again when the
 *       watermark reaches its own first end;
 *   <li>a record arrives for a window the watermark has not reached ({@link #take} of everything);
 *   <li>more than {@link SegmentLimits#fanout} segments of one level follow each other: they merge into one
 *       segment of the next level, so a batch's partials are rewritten about {@code log_fanout(batches)} times.
 *       Pieces ({@link #PIECE}) never merge so: they stop a run of one level.
 * </ul>
 *
 * <p>Segments merge into the table in arrival order, as the operator would have merged each batch's partials when
 * it arrived. Without reading a segment its rows, earliest window end and oldest arrival are known (the gauges);
 * a (key, window) counts once per segment that holds it, so {@link #rows} is an upper bound.
 */
final class PartialSegments {
  /** The level of a piece of a segment split when the watermark reached its earliest window (never compacted). */
  static final int PIECE = -1;

  private final WindowSpec spec;
  private final SegmentLimits limits;
  private final LongFunction<byte[]> load;
  private List<SegmentInfo> infos = new ArrayList<>();
  private long nextId;
  private final Map<Long, Segment> inMemory = new HashMap<>();
  /** Segments made since the last {@link #takeAdded} (not stored yet). */
  private final Set<Long> added = new TreeSet<>();
  /** Stored segments merged since the last {@link #takeAdded} (to delete). */
  private final Set<Long> dropped = new TreeSet<>();

  /** @param load reads a stored segment's bytes by id; null when every segment is in memory */
  PartialSegments(WindowSpec spec, SegmentLimits limits, LongFunction<byte[]> load) {
    this.spec = spec;
    this.limits = limits;
    this.load = load;
  }

  SegmentLimits limits() {
    return limits;
  }

  /**
   * Whether {@code rows} new partials become a segment, with {@code tableWindows} windows in the table. Once a
   * segment exists every batch's partials do, until the segments merge: a window's partials then reach the table
   * in arrival order.
   */
  boolean defers(int tableWindows, int rows) {
    return !infos.isEmpty() || (long) tableWindows + rows > limits.deferAbove();
  }

  /** Keeps one batch's reduced partials (one row per (key, window), arrived now) as a new level-0 segment. */
  void add(Segment partials) {
    infos.add(register(partials, 0));
    compact();
  }

  /**
   * Removes and returns, oldest first, the rows of the windows {@code watermark} has reached (every row when null).
   * Only segments whose earliest window it reached are read; such a segment's other rows stay in its place as
   * pieces of whole window ends ({@link #split}).
   */
  List<Segment> take(Long watermark) {
    List<Segment> taken = new ArrayList<>();
    List<SegmentInfo> kept = new ArrayList<>();
    for (SegmentInfo info : infos) {
      if (watermark != null && !Boundaries.reached(info.firstEnd(), watermark)) {
        kept.add(info);
        continue;
      }
      Segment segment = read(info.id());
      forget(info.id());
      Segment rest = watermark == null ? null : segment.subset(watermark, false);
      if (rest == null || rest.size == 0) {
        taken.add(segment);
      } else {
        taken.add(segment.subset(watermark, true));
        for (Segment piece : split(rest, limits.fanout())) {
          kept.add(register(piece, PIECE));
        }
      }
    }
    infos = kept;
    return taken;
  }

  /**
   * {@code segment}'s rows in {@code k = min(n, fanout)} pieces by window end, earliest ends first, each row in its
   * order: of its {@code n} distinct ends (ascending, indexed from 0), piece {@code g} holds those of index
   * {@code floor(g * n / k)} to {@code floor((g + 1) * n / k)}, exclusive (at least one each).
   */
  static List<Segment> split(Segment segment, int fanout) {
    long[] distinct = segment.ends.clone();
    Arrays.sort(distinct);
    int n = 0;
    for (int i = 0; i < distinct.length; i++) {
      if (n == 0 || distinct[i] != distinct[n - 1]) {
        distinct[n++] = distinct[i];
      }
    }
    int k = Math.min(n, fanout);
    if (k <= 1) {
      return List.of(segment);
    }
    long[] firsts = new long[k - 1]; // each later piece's first end
    for (int g = 1; g < k; g++) {
      firsts[g - 1] = distinct[(int) ((long) g * n / k)];
    }
    int[] piece = new int[segment.size];
    int[] sizes = new int[k];
    for (int i = 0; i < segment.size; i++) {
      int found = Arrays.binarySearch(firsts, segment.ends[i]);
      piece[i] = found >= 0 ? found + 1 : -found - 1; // how many later pieces start at or before this end
      sizes[piece[i]]++;
    }
    List<Segment> pieces = new ArrayList<>(k);
    for (int g = 0; g < k; g++) {
      pieces.add(new Segment(sizes[g], segment.width));
    }
    int[] filled = new int[k];
    for (int i = 0; i < segment.size; i++) {
      int g = piece[i];
      pieces.get(g).copyRow(segment, i, filled[g]++);
    }
    return pieces;
  }

  /** The segments to store (id to bytes) since the last call; {@link #takeDropped} the stored ones to delete. */
  Map<Long, byte[]> takeAdded() {
    Map<Long, byte[]> out = new TreeMap<>();
    for (long id : added) {
      out.put(id, inMemory.get(id).toBytes());
    }
    added.clear();
    return out;
  }

  Set<Long> takeDropped() {
    Set<Long> out = new TreeSet<>(dropped);
    dropped.clear();
    return out;
  }

  // ------------------------------------------------------------------------------------------------ gauges

  boolean isEmpty() {
    return infos.isEmpty();
  }

  long rows() {
    long rows = 0;
    for (SegmentInfo info : infos) {
      rows += info.rows();
    }
    return rows;
  }

  Long firstEnd() {
    Long first = null;
    for (SegmentInfo info : infos) {
      first = first == null ? info.firstEnd() : Math.min(first, info.firstEnd());
    }
    return first;
  }

  Long oldestArrival() {
    Long oldest = null;
    for (SegmentInfo info : infos) {
      oldest = oldest == null ? info.oldestArrival() : Math.min(oldest, info.oldestArrival());
    }
    return oldest;
  }

  // ---------------------------------------------------------------------------------------------- snapshot

  List<SegmentInfo> infos() {
    return infos;
  }

  long nextId() {
    return nextId;
  }

  /** Every segment's bytes (a self-contained snapshot). */
  Map<Long, byte[]> bodies() {
    Map<Long, byte[]> out = new TreeMap<>();
    for (SegmentInfo info : infos) {
      out.put(info.id(), read(info.id()).toBytes());
    }
    return out;
  }

  /**
   * Restores the infos and, for a self-contained snapshot, the bodies: those are not stored yet for a runtime that
   * stores segments apart.
   */
  void restore(List<SegmentInfo> infos, long nextId, Map<Long, byte[]> bodies) {
    this.infos = new ArrayList<>(infos);
    this.nextId = nextId;
    for (Map.Entry<Long, byte[]> body : bodies.entrySet()) {
      inMemory.put(body.getKey(), Segment.fromBytes(body.getValue()));
      added.add(body.getKey());
    }
  }

  // ------------------------------------------------------------------------------------------------ inside

  private SegmentInfo register(Segment segment, int level) {
    SegmentInfo info =
        new SegmentInfo(nextId++, level, segment.size, segment.firstEnd(), segment.oldestArrival());
    inMemory.put(info.id(), segment);
    added.add(info.id());
    return info;
  }

  /**
   * Merges the newest segments while more than {@code fanout} of one level other than {@link #PIECE} follow each
   * other at the end (between two pieces, levels never rise towards the end: merged segments are older than the
   * level-0 ones after them).
   */
  private void compact() {
    while (true) {
      int level = infos.get(infos.size() - 1).level();
      if (level == PIECE) {
        return;
      }
      int run = 0;
      while (run < infos.size() && infos.get(infos.size() - 1 - run).level() == level) {
        run++;
      }
      if (run <= limits.fanout()) {
        return;
      }
      List<SegmentInfo> merging = new ArrayList<>(infos.subList(infos.size() - run, infos.size()));
      infos = new ArrayList<>(infos.subList(0, infos.size() - run));
      List<Segment> segments = new ArrayList<>();
      for (SegmentInfo info : merging) {
        segments.add(read(info.id()));
        forget(info.id());
      }
      infos.add(register(merge(segments), level + 1));
    }
  }

  /** One segment of {@code segments} (oldest first): rows of one (key, window) reduced in that order. */
  Segment merge(List<Segment> segments) {
    return segments.size() == 1 ? segments.get(0) : reduce(spec, segments);
  }

  /** {@link #reduce(WindowSpec, List)} of one segment's rows. */
  static Segment reduce(WindowSpec spec, Segment rows) {
    return reduce(spec, List.of(rows));
  }

  /**
   * One row per (key, window) of the rows of {@code parts} (one after the other), in the order each first appears:
   * counts add up, holds combine, accumulators merge in order, and the row arrived when its oldest part did. The
   * one part itself when its rows are distinct. The parts are read where they are, not concatenated first (a flush
   * merges millions of rows).
   */
  static Segment reduce(WindowSpec spec, List<Segment> parts) {
    int total = 0;
    for (Segment part : parts) {
      total += part.size;
    }
    WindowIndex groups = new WindowIndex(total);
    int[][] group = new int[parts.size()][];
    for (int p = 0; p < parts.size(); p++) {
      Segment rows = parts.get(p);
      group[p] = new int[rows.size];
      for (int i = 0; i < rows.size; i++) {
        group[p][i] = groups.numberOf(rows.keys[i], spec.window().name(rows.starts[i], rows.ends[i]));
      }
    }
    int count = groups.size();
    if (parts.size() == 1 && count == total) {
      return parts.get(0);
    }
    int width = parts.get(0).width;
    Segment out = new Segment(count, width);
    boolean[] seen = new boolean[count];
    for (int p = 0; p < parts.size(); p++) {
      Segment rows = parts.get(p);
      for (int i = 0; i < rows.size; i++) {
        int g = group[p][i];
        if (!seen[g]) {
          seen[g] = true;
          out.copyRow(rows, i, g);
          continue;
        }
        spec.aggregate().merge(out.acc, g * width, rows.acc, i * width);
        out.counts[g] += rows.counts[i];
        out.holds[g] = spec.combiner().fold(out.holds[g], rows.holds[i]);
        out.arrivals[g] = Math.min(out.arrivals[g], rows.arrivals[i]);
      }
    }
    return out;
  }

  private Segment read(long id) {
    Segment segment = inMemory.get(id);
    if (segment == null) {
      if (load == null) {
        throw new IllegalStateException("segment " + id + " is neither in memory nor stored");
      }
      byte[] stored = load.apply(id);
      if (stored == null) {
        throw new IllegalStateException("segment " + id + " is not in the store");
      }
      segment = Segment.fromBytes(stored);
    }
    return segment;
  }

  private void forget(long id) {
    inMemory.remove(id);
    if (!added.remove(id)) { // an added one was never stored
      dropped.add(id);
    }
  }
}
