package floodmark.window;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.List;

/**
 * Partial aggregates of several batches, one row per (key, window) unless merged from segments that share one,
 * with the processing time (ms) each row's first record arrived at ({@code Segment} in
 * {@code floodmark/core/segments.py}). Held in columns (primitive arrays; the accumulators of row {@code i} at
 * {@code acc[i * width .. (i + 1) * width)}), not an object per row: a flush reads millions of rows. Stored as bytes
 * of its own ({@link #toBytes}).
 */
final class Segment {
  final int size;
  final int width;
  final Object[] keys;
  final long[] starts;
  final long[] ends;
  final long[] counts;
  final long[] holds;
  final long[] arrivals;
  final double[] acc;

  Segment(int size, int width) {
    this.size = size;
    this.width = width;
    keys = new Object[size];
    starts = new long[size];
    ends = new long[size];
    counts = new long[size];
    holds = new long[size];
    arrivals = new long[size];
    acc = new double[size * width];
  }

  /** {@code partials} (the map side's, accumulators {@code width} wide) as arrived at {@code processingTime}. */
  static Segment of(List<Partial> partials, int width, long processingTime) {
    Segment segment = new Segment(partials.size(), width);
    for (int i = 0; i < partials.size(); i++) {
      Partial partial = partials.get(i);
      segment.keys[i] = partial.key();
      segment.starts[i] = partial.start();
      segment.ends[i] = partial.end();
      segment.counts[i] = partial.count();
      segment.holds[i] = partial.hold();
      segment.arrivals[i] = processingTime;
      System.arraycopy(partial.acc(), 0, segment.acc, i * width, width);
    }
    return segment;
  }

  /** Row {@code from} of {@code source} as row {@code to} of this segment. */
  void copyRow(Segment source, int from, int to) {
    keys[to] = source.keys[from];
    starts[to] = source.starts[from];
    ends[to] = source.ends[from];
    counts[to] = source.counts[from];
    holds[to] = source.holds[from];
    arrivals[to] = source.arrivals[from];
    System.arraycopy(source.acc, from * width, acc, to * width, width);
  }

  /** The rows the watermark has reached ({@code reached}) or not, in their order. */
  Segment subset(long watermark, boolean reached) {
    int[] rows = new int[size];
    int count = 0;
    for (int i = 0; i < size; i++) {
      if (Boundaries.reached(ends[i], watermark) == reached) {
        rows[count++] = i;
      }
    }
    Segment out = new Segment(count, width);
    for (int i = 0; i < count; i++) {
      out.copyRow(this, rows[i], i);
    }
    return out;
  }

  long firstEnd() {
    return Arrays.stream(ends).min().orElse(Long.MAX_VALUE);
  }

  long oldestArrival() {
    return Arrays.stream(arrivals).min().orElse(Long.MAX_VALUE);
  }

  byte[] toBytes() {
    SnapshotOut out = new SnapshotOut(64 + size * (64 + 8 * width)); // room for short keys
    try {
      out.writeInt(size);
      out.writeInt(width);
      Keys.Writer keyWriter = new Keys.Writer(size);
      for (int i = 0; i < size; i++) {
        keyWriter.write(out, keys[i]);
        out.writeLong(starts[i]);
        out.writeLong(ends[i]);
        out.writeLong(counts[i]);
        out.writeLong(holds[i]);
        out.writeLong(arrivals[i]);
        for (int j = i * width; j < (i + 1) * width; j++) {
          out.writeDouble(acc[j]);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  static Segment fromBytes(byte[] blob) {
    SnapshotIn in = new SnapshotIn(blob);
    try {
      Segment segment = new Segment(in.readInt(), in.readInt());
      Keys.Reader keyReader = new Keys.Reader();
      for (int i = 0; i < segment.size; i++) {
        segment.keys[i] = keyReader.read(in);
        segment.starts[i] = in.readLong();
        segment.ends[i] = in.readLong();
        segment.counts[i] = in.readLong();
        segment.holds[i] = in.readLong();
        segment.arrivals[i] = in.readLong();
        for (int j = i * segment.width; j < (i + 1) * segment.width; j++) {
          segment.acc[j] = in.readDouble();
        }
      }
      return segment;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
