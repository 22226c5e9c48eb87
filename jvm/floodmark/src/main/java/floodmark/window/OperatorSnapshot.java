package floodmark.window;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.LongFunction;

/**
 * An operator's snapshot as bytes and back: the twin of the snapshot section of {@code floodmark.core.window.operator}
 * ({@code snapshot}, {@code snapshot_parts}, {@code restore_operator}; the table's rows as
 * {@code WindowTable.snapshot} gives them). Its own format, not the core's pickle: the format number, time, the
 * table's rows in order (keys through {@link Keys.Writer}, every field of a {@link WindowRow}, its accumulators),
 * then whether the operator defers partials and, if so, what is known of its segments and the segments' bodies
 * held with it. {@link WindowOperator}'s snapshot methods state what each holds.
 */
final class OperatorSnapshot {
  /**
   * 1: time and the table; 2: and the deferred partials (format 1 is read as an operator without segments); 3: its
   * keys, and its segments' keys, with back-references ({@link Keys.Writer}). Every format up to this one is read.
   */
  private static final int SNAPSHOT_FORMAT = 3;

  private OperatorSnapshot() {}

  /** {@link WindowOperator#snapshot}. */
  static byte[] snapshot(WindowOperator operator) {
    PartialSegments segments = operator.segments;
    return write(operator, segments == null ? Map.of() : segments.bodies());
  }

  /** {@link WindowOperator#snapshotParts}. */
  static SnapshotParts parts(WindowOperator operator) {
    PartialSegments segments = operator.segments;
    if (segments == null) {
      Set<Long> retired = operator.retired;
      operator.retired = Set.of();
      return new SnapshotParts(write(operator, Map.of()), Map.of(), retired);
    }
    return new SnapshotParts(write(operator, Map.of()), segments.takeAdded(), segments.takeDropped());
  }

  /** The snapshot of {@code operator}, holding the segment {@code bodies} (none: a head). */
  private static byte[] write(WindowOperator operator, Map<Long, byte[]> bodies) {
    WindowTable table = operator.table;
    PartialSegments segments = operator.segments;
    SnapshotOut out = new SnapshotOut(64 + table.size() * 96);
    try {
      out.writeInt(SNAPSHOT_FORMAT);
      out.writeLong(operator.time.watermark);
      out.writeLong(operator.time.processingTime);
      out.writeInt(table.size());
      Keys.Writer keyWriter = new Keys.Writer(table.size());
      for (WindowRow row : table.rows()) {
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

  /** {@link WindowOperator#restore(WindowSpec, byte[], SegmentLimits, LongFunction)}. */
  static WindowOperator restore(WindowSpec spec, byte[] snapshot, SegmentLimits limits, LongFunction<byte[]> load) {
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
      for (WindowRow row : rows) {
        operator.table.restore(row);
      }
      if (deferred) {
        long nextId = in.readLong();
        int infoCount = in.readInt();
        List<SegmentInfo> infos = new ArrayList<>(infoCount);
        for (int i = 0; i < infoCount; i++) {
          infos.add(new SegmentInfo(in.readLong(), in.readInt(), in.readInt(), in.readLong(), in.readLong()));
        }
        int bodyCount = in.readInt();
        Map<Long, byte[]> bodies = new TreeMap<>();
        for (int i = 0; i < bodyCount; i++) {
          long id = in.readLong();
          byte[] body = new byte[in.readInt()];
          in.readFully(body);
          bodies.put(id, body);
        }
        if (operator.segments != null) {
          operator.segments.restore(infos, nextId, bodies);
        } else { // a spec that no longer defers partials (early firings added on a restart)
          PartialSegments saved = new PartialSegments(spec, limits, load);
          saved.restore(infos, nextId, bodies);
          operator.mergeRetired(saved);
        }
      }
      return operator;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
