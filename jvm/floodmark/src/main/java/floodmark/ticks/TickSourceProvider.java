package floodmark.ticks;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.Set;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * floodmark's tick source in the JVM: a micro-batch with tick rows runs only when the driver asked for one.
 *
 * <p>The same source as {@code floodmark/spark/sources/ticks.py} (whose module docstring is the specification),
 * without a Python process: Spark runs a Python data source's planning in Python processes of the driver,
 * which cost seconds at a query's start and in its first batch. Options: {@code path}, the request file
 * the driver writes ({@code {"seq": s, "due": t}}, t in ms since the epoch); {@code rows}, the ticks per
 * batch. {@code spark.readStream.format("floodmark.ticks.TickSourceProvider")}.
 *
 * <p>Offsets are {@code {"seq": s}}. {@code latestOffset} is the request's {@code seq} once the clock has
 * reached {@code due} and {@code seq} is above the start offset, else the start offset (no batch unless
 * the input has data). A batch whose offset moved reads {@code rows} rows, {@code tick} = 0 .. rows - 1;
 * a replay reads the same.
 */
public final class TickSourceProvider implements TableProvider {
  public static final String NAME = "floodmark_ticks_jvm";
  static final StructType SCHEMA = new StructType().add("tick", DataTypes.IntegerType, true);

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return SCHEMA;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new TickTable();
  }

  static final class TickTable implements SupportsRead {
    @Override
    public String name() {
      return NAME;
    }

    @Override
    @SuppressWarnings("deprecation") // the table's columns() are derived from it
    public StructType schema() {
      return SCHEMA;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Set.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      Path path = Paths.get(required(options, "path"));
      int rows = Integer.parseInt(required(options, "rows"));
      return () -> new TickScan(path, rows);
    }

    private static String required(CaseInsensitiveStringMap options, String key) {
      String value = options.get(key);
      if (value == null) {
        throw new IllegalArgumentException("the floodmark tick source needs the option " + key);
      }
      return value;
    }
  }

  static final class TickScan implements Scan {
    private final Path path;
    private final int rows;

    TickScan(Path path, int rows) {
      this.path = path;
      this.rows = rows;
    }

    @Override
    public StructType readSchema() {
      return SCHEMA;
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new TickStream(path, rows);
    }
  }

  /** The driver's side of the source: offsets from the request file. */
  public static final class TickStream implements MicroBatchStream, SupportsAdmissionControl {
    private static final Pattern SEQ = Pattern.compile("\"seq\"\\s*:\\s*(-?\\d+)");
    private static final Pattern DUE = Pattern.compile("\"due\"\\s*:\\s*(-?\\d+)");
    private final Path path;
    private final int rows;
    private final LongSupplier clockMillis;

    public TickStream(Path path, int rows) {
      this(path, rows, System::currentTimeMillis);
    }

    public TickStream(Path path, int rows, LongSupplier clockMillis) {
      this.path = path;
      this.rows = rows;
      this.clockMillis = clockMillis;
    }

    @Override
    public Offset initialOffset() {
      return new SeqOffset(0);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException("latestOffset(start, limit) is the one to call");
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      long[] request = readRequest(path);
      SeqOffset from = (SeqOffset) start;
      if (request[0] > from.seq && clockMillis.getAsLong() >= request[1]) {
        return new SeqOffset(request[0]);
      }
      return start;
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      if (((SeqOffset) end).seq > ((SeqOffset) start).seq) {
        return new InputPartition[] {new TickPartition(rows)};
      }
      return new InputPartition[0];
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new TickReaderFactory();
    }

    @Override
    public Offset deserializeOffset(String json) {
      return new SeqOffset(number(SEQ, json, json));
    }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {}

    /** {@code {seq, due}} of the newest request, {@code {0, 0}} when there is none yet (or half a file). */
    static long[] readRequest(Path path) {
      String text;
      try {
        text = Files.readString(path);
      } catch (NoSuchFileException e) {
        return new long[] {0, 0};
      } catch (IOException e) {
        throw new IllegalStateException("cannot read the floodmark tick request " + path, e);
      }
      try {
        return new long[] {number(SEQ, text, path.toString()), number(DUE, text, path.toString())};
      } catch (IllegalArgumentException e) {
        return new long[] {0, 0};
      }
    }

    private static long number(Pattern field, String text, String where) {
      Matcher match = field.matcher(text);
      if (!match.find()) {
        throw new IllegalArgumentException("no " + field.pattern() + " in " + where);
      }
      return Long.parseLong(match.group(1));
    }
  }

  /** Offset {@code {"seq": s}}: the same JSON as the Python source's, so either can resume the other's log. */
  static final class SeqOffset extends Offset {
    final long seq;

    SeqOffset(long seq) {
      this.seq = seq;
    }

    @Override
    public String json() {
      return "{\"seq\": " + seq + "}";
    }
  }

  static final class TickPartition implements InputPartition {
    final int rows;

    TickPartition(int rows) {
      this.rows = rows;
    }
  }

  static final class TickReaderFactory implements PartitionReaderFactory {
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      int rows = ((TickPartition) partition).rows;
      return new PartitionReader<>() {
        private int next = -1;

        @Override
        public boolean next() {
          next += 1;
          return next < rows;
        }

        @Override
        public InternalRow get() {
          return new GenericInternalRow(new Object[] {next});
        }

        @Override
        public void close() {}
      };
    }
  }
}
