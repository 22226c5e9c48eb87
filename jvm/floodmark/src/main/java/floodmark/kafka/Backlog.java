package floodmark.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * What the aligned Kafka sources planned last ({@link AlignedKafkaSource#planned}), as a batch data source that
 * Spark answers on its driver without a job (a {@link LocalScan}), reached by name from a classic session and from a
 * Spark Connect server's {@code foreachBatch} process alike (no py4j), as {@link Pauses} is:
 *
 * <pre>
 * spark.read.format("floodmark.kafka.Backlog").option("keys", "k1,k2").load()
 *     // one row per partition of each source that planned a batch: key STRING, end STRING, partition INT, unread LONG
 * </pre>
 *
 * <p>{@code end} is the planned batch's end offsets as Spark logs them, so that the caller knows which batch it is;
 * {@code unread} the partition's records beyond them as Spark planned it. The plans are read when Spark plans the
 * read, on the driver where the sources planned them.
 */
public final class Backlog implements TableProvider {
  static final StructType SCHEMA = new StructType()
      .add("key", DataTypes.StringType, false)
      .add("end", DataTypes.StringType, false)
      .add("partition", DataTypes.IntegerType, false)
      .add("unread", DataTypes.LongType, false);

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return SCHEMA;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new BacklogTable();
  }

  /** The rows for the sources named in {@code keys} (comma-separated). */
  static InternalRow[] rows(String keys) {
    List<InternalRow> rows = new ArrayList<>();
    for (String key : keys.split(",")) {
      AlignedKafkaSource.Plan plan = key.isBlank() ? null : AlignedKafkaSource.planned(key.trim());
      if (plan == null) {
        continue;
      }
      plan.unread().entrySet().stream().sorted(Map.Entry.comparingByKey()).forEach(entry -> rows.add(
          new GenericInternalRow(new Object[] {
            UTF8String.fromString(key.trim()), UTF8String.fromString(plan.end()), entry.getKey(), entry.getValue()
          })));
    }
    return rows.toArray(new InternalRow[0]);
  }

  static final class BacklogTable implements SupportsRead {
    @Override
    public String name() {
      return "floodmark.kafka.Backlog";
    }

    @Override
    @SuppressWarnings("deprecation") // the table's columns() are derived from it
    public StructType schema() {
      return SCHEMA;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Set.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      String keys = options.getOrDefault("keys", "");
      return () -> new LocalScan() {
        @Override
        public InternalRow[] rows() {
          return Backlog.rows(keys);
        }

        @Override
        public StructType readSchema() {
          return SCHEMA;
        }
      };
    }
  }
}
