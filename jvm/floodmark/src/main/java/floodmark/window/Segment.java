package floodmark.window;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Partial aggregates of several batches, one row per (key, window) unless merged from segments that share one,
 * with the processing time (ms) each row's first record arrived at ({@code Segment} in
 * {@code floodmark/core/segments.py}). Stored as bytes of its own ({@link #toBytes}).
 */
final class Segment {
  final List<Partial> partials;
  final long[] arrivals;

  Segment(List<Partial> partials, long[] arrivals) {
    this.partials = partials;
    this.arrivals = arrivals;
  }

  /** The rows the watermark has reached ({@code reached}) or not, in their order. */
  Segment subset(long watermark, boolean reached) {
    List<Partial> rows = new ArrayList<>();
    long[] times = new long[partials.size()];
    for (int i = 0; i < partials.size(); i++) {
      Partial partial = partials.get(i);
      if (Boundaries.reached(partial.end(), watermark) == reached) {
        times[rows.size()] = arrivals[i];
        rows.add(partial);
      }
    }
    return new Segment(rows, java.util.Arrays.copyOf(times, rows.size()));
  }

  long firstEnd() {
    long first = Long.MAX_VALUE;
    for (Partial partial : partials) {
      first = Math.min(first, partial.end());
    }
    return first;
  }

  long oldestArrival() {
    long oldest = Long.MAX_VALUE;
    for (long arrival : arrivals) {
      oldest = Math.min(oldest, arrival);
    }
    return oldest;
  }

  byte[] toBytes() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeInt(partials.size());
      out.writeInt(partials.isEmpty() ? 0 : partials.get(0).acc().length);
      for (int i = 0; i < partials.size(); i++) {
        Partial partial = partials.get(i);
        Keys.write(out, partial.key());
        out.writeLong(partial.start());
        out.writeLong(partial.end());
        out.writeLong(partial.count());
        out.writeLong(partial.hold());
        out.writeLong(arrivals[i]);
        for (double value : partial.acc()) {
          out.writeDouble(value);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  static Segment fromBytes(byte[] blob) {
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(blob))) {
      int count = in.readInt();
      int width = in.readInt();
      List<Partial> partials = new ArrayList<>(count);
      long[] arrivals = new long[count];
      for (int i = 0; i < count; i++) {
        Object key = Keys.read(in);
        long start = in.readLong();
        long end = in.readLong();
        long records = in.readLong();
        long hold = in.readLong();
        arrivals[i] = in.readLong();
        double[] acc = new double[width];
        for (int j = 0; j < width; j++) {
          acc[j] = in.readDouble();
        }
        partials.add(new Partial(key, start, end, records, hold, acc));
      }
      return new Segment(partials, arrivals);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
