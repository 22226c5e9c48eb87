package floodmark.kafka;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.StringJoiner;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.kafka010.KafkaSourceProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's own Kafka source with watermark alignment: a partition that floodmark's driver pauses is not read
 * further until it is resumed (the specification is the module docstring of
 * {@code src/floodmark/core/watermarks/alignment.py}; the Spark side is {@code floodmark.spark.sources.kafka}).
 *
 * <p>Every read is Spark's connector's ({@link KafkaSourceProvider}'s table, scan and micro-batch stream,
 * wrapped). Only {@code latestOffset(start, limit)} changes: the next batch's end offset keeps a paused partition
 * at its start offset, and a {@code maxOffsetsPerTrigger} limit is shared among the partitions that may be read
 * ({@link #share}; the connector would give the paused ones their share too). When no partition that may be
 * read has anything new, the stream's own end offset stands: alignment never stops reading altogether (a
 * bounded replay whose slowest partition has ended would otherwise end early). Offsets
 * are the connector's ({@code {"topic":{"partition":offset}}}), logged by Spark before the batch runs, so a
 * replayed batch reads what its first attempt planned.
 *
 * <p>The option {@link #KEY_OPTION} names the source for {@link #pause} and {@link #planned};
 * {@link floodmark.SourceOptions#valuesIn} finds the names in a DataFrame's plan. {@code spark.readStream.format("floodmark.kafka.AlignedKafkaSource")} with the connector's
 * options.
 */
public final class AlignedKafkaSource implements TableProvider {
  /** The option naming this source (any text unique in the JVM; floodmark passes a random id). */
  public static final String KEY_OPTION = "floodmark.alignment.key";

  private static final Map<String, Set<Integer>> PAUSED = new ConcurrentHashMap<>();
  private static final Map<String, Plan> PLANS = new ConcurrentHashMap<>();
  private static final Pattern TOPIC = Pattern.compile("\"([^\"]+)\"\\s*:\\s*\\{([^}]*)\\}");
  private static final Pattern PARTITION = Pattern.compile("\"(-?\\d+)\"\\s*:\\s*(-?\\d+)");

  private final KafkaSourceProvider kafka = new KafkaSourceProvider();

  /** Pauses the partitions listed in {@code partitions} (comma-separated numbers; empty: none) of source {@code key}. */
  public static void pause(String key, String partitions) {
    Set<Integer> paused = ConcurrentHashMap.newKeySet();
    for (String partition : partitions.split(",")) {
      if (!partition.isBlank()) {
        paused.add(Integer.parseInt(partition.trim()));
      }
    }
    PAUSED.put(key, paused);
  }

  /**
   * What source {@code key} planned last: the end offsets of the batch (JSON, as Spark logs them in the query's
   * offset log) and, per partition, how many records were there to read beyond them as Spark planned it (the
   * partition's latest offset then, as the connector fetched it, minus the batch's end: records held back by
   * {@code maxOffsetsPerTrigger} or a pause). Null before the source planned a batch in this JVM (a batch replayed
   * after a restart was planned by the run before).
   */
  public static Plan planned(String key) {
    return PLANS.get(key);
  }

  /** A planned batch of one source: see {@link #planned}. */
  public record Plan(String end, Map<Integer, Long> unread) {}

  /** Per partition of {@code end} (JSON offsets), {@code available} minus {@code end} (at least 0). */
  static Map<Integer, Long> unread(String end, String available) {
    Map<String, Map<Integer, Long>> ends = parse(end);
    Map<String, Map<Integer, Long>> latest = parse(available);
    Map<Integer, Long> unread = new LinkedHashMap<>();
    for (Map.Entry<String, Map<Integer, Long>> topic : ends.entrySet()) {
      Map<Integer, Long> tops = latest.getOrDefault(topic.getKey(), Map.of());
      topic.getValue().forEach((partition, at) -> {
        Long top = tops.get(partition);
        unread.merge(partition, top == null ? 0L : Math.max(0L, top - at), Long::sum);
      });
    }
    return unread;
  }

  /** The partitions of source {@code key} paused now, comma-separated. */
  public static String paused(String key) {
    StringJoiner joined = new StringJoiner(",");
    PAUSED.getOrDefault(key, Set.of()).stream().sorted().forEach(p -> joined.add(p.toString()));
    return joined.toString();
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return kafka.inferSchema(options);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    String key = new CaseInsensitiveStringMap(properties).get(KEY_OPTION);
    return new AlignedTable((SupportsRead) kafka.getTable(schema, partitioning, properties), key == null ? "" : key);
  }

  @Override
  public boolean supportsExternalMetadata() {
    return kafka.supportsExternalMetadata();
  }

  /** {@code end} with every paused partition of {@code start} kept at its start offset (JSON offsets). */
  public static String hold(String start, String end, Set<Integer> paused) {
    Map<String, Map<Integer, Long>> from = parse(start);
    Map<String, Map<Integer, Long>> to = parse(end);
    for (Map.Entry<String, Map<Integer, Long>> topic : to.entrySet()) {
      Map<Integer, Long> starts = from.getOrDefault(topic.getKey(), Map.of());
      for (Integer partition : paused) {
        Long at = starts.get(partition);
        if (at != null && topic.getValue().containsKey(partition)) {
          topic.getValue().put(partition, at);
        }
      }
    }
    return render(to);
  }

  /**
   * The end offsets for reading at most {@code limit} records from {@code start}, up to {@code available}, from
   * the partitions not {@code paused} (each gets a share of the limit in proportion to what it has to read, at
   * least one record, as the connector's own rate limit gives them); paused partitions stay at their start.
   * Null when no partition that may be read has anything to read.
   */
  public static String share(String start, String available, Set<Integer> paused, long limit) {
    Map<String, Map<Integer, Long>> from = parse(start);
    Map<String, Map<Integer, Long>> to = parse(available);
    double total = 0;
    for (Map.Entry<String, Map<Integer, Long>> topic : to.entrySet()) {
      Map<Integer, Long> starts = from.getOrDefault(topic.getKey(), Map.of());
      for (Map.Entry<Integer, Long> end : topic.getValue().entrySet()) {
        Long begin = starts.get(end.getKey());
        if (begin != null && !paused.contains(end.getKey()) && end.getValue() > begin) {
          total += end.getValue() - begin;
        }
      }
    }
    if (total <= 0) {
      return null;
    }
    for (Map.Entry<String, Map<Integer, Long>> topic : to.entrySet()) {
      Map<Integer, Long> starts = from.getOrDefault(topic.getKey(), Map.of());
      for (Map.Entry<Integer, Long> end : topic.getValue().entrySet()) {
        Long begin = starts.get(end.getKey());
        if (begin == null) {
          continue; // a partition new to the query: where the connector starts it
        }
        if (paused.contains(end.getKey()) || end.getValue() <= begin) {
          end.setValue(begin);
          continue;
        }
        long lag = end.getValue() - begin;
        long portion = Math.max(1, (long) Math.floor(limit * (lag / total)));
        end.setValue(begin + Math.min(lag, portion));
      }
    }
    return render(to);
  }

  static Map<String, Map<Integer, Long>> parse(String json) {
    Map<String, Map<Integer, Long>> offsets = new LinkedHashMap<>();
    Matcher topics = TOPIC.matcher(json);
    while (topics.find()) {
      Map<Integer, Long> partitions = new LinkedHashMap<>();
      Matcher entries = PARTITION.matcher(topics.group(2));
      while (entries.find()) {
        partitions.put(Integer.parseInt(entries.group(1)), Long.parseLong(entries.group(2)));
      }
      offsets.put(topics.group(1), partitions);
    }
    return offsets;
  }

  static String render(Map<String, Map<Integer, Long>> offsets) {
    StringJoiner topics = new StringJoiner(",", "{", "}");
    for (Map.Entry<String, Map<Integer, Long>> topic : offsets.entrySet()) {
      StringJoiner partitions = new StringJoiner(",", "{", "}");
      topic.getValue().forEach((partition, offset) -> partitions.add("\"" + partition + "\":" + offset));
      topics.add("\"" + topic.getKey() + "\":" + partitions);
    }
    return topics.toString();
  }

  record AlignedTable(SupportsRead kafka, String key) implements SupportsRead {
    @Override
    public String name() {
      return kafka.name();
    }

    @Override
    @SuppressWarnings("deprecation") // the table's columns() are derived from it
    public StructType schema() {
      return kafka.schema();
    }

    @Override
    public Set<TableCapability> capabilities() {
      return kafka.capabilities();
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      ScanBuilder builder = kafka.newScanBuilder(options);
      return () -> new AlignedScan(builder.build(), key);
    }
  }

  record AlignedScan(Scan kafka, String key) implements Scan {
    @Override
    public StructType readSchema() {
      return kafka.readSchema();
    }

    @Override
    public String description() {
      return kafka.description() + " (floodmark: aligned)";
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new AlignedStream(kafka.toMicroBatchStream(checkpointLocation), key);
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return kafka.supportedCustomMetrics();
    }
  }

  /** Spark's Kafka micro-batch stream, its proposed end offsets held for paused partitions. */
  static final class AlignedStream implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
    private final MicroBatchStream kafka;
    private final String key;

    AlignedStream(MicroBatchStream kafka, String key) {
      this.kafka = kafka;
      this.key = key;
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      Offset end = plannedEnd(start, limit);
      Offset available = ((SupportsAdmissionControl) kafka).reportLatestOffset();
      if (end != null && available != null) {
        PLANS.put(key, new Plan(end.json(), unread(end.json(), available.json())));
      }
      return end;
    }

    private Offset plannedEnd(Offset start, ReadLimit limit) {
      SupportsAdmissionControl admission = (SupportsAdmissionControl) kafka;
      Set<Integer> paused = PAUSED.getOrDefault(key, Set.of());
      if (paused.isEmpty() || start == null) {
        return admission.latestOffset(start, limit);
      }
      if (limit instanceof ReadMaxRows max) {
        // The connector would share the limit among every partition by its lag, the paused ones too: share it
        // among the partitions that may be read instead, so that the slow ones catch up at the full rate.
        Offset available = admission.latestOffset(start, ReadLimit.allAvailable());
        String shared = available == null ? null : share(start.json(), available.json(), paused, max.maxRows());
        if (shared != null) {
          return kafka.deserializeOffset(shared);
        }
      }
      Offset proposed = admission.latestOffset(start, limit);
      if (proposed == null) {
        return null;
      }
      String held = hold(start.json(), proposed.json(), paused);
      if (parse(held).equals(parse(start.json()))) {
        return proposed; // every partition that may be read has nothing new: read the paused ones
      }
      return kafka.deserializeOffset(held);
    }

    @Override
    public Offset latestOffset() {
      return kafka.latestOffset();
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return ((SupportsAdmissionControl) kafka).getDefaultReadLimit();
    }

    @Override
    public Offset reportLatestOffset() {
      return ((SupportsAdmissionControl) kafka).reportLatestOffset();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
      ((SupportsTriggerAvailableNow) kafka).prepareForTriggerAvailableNow();
    }

    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
      return kafka instanceof ReportsSourceMetrics reports ? reports.metrics(latestConsumedOffset) : Map.of();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      return kafka.planInputPartitions(start, end);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return kafka.createReaderFactory();
    }

    @Override
    public Offset initialOffset() {
      return kafka.initialOffset();
    }

    @Override
    public Offset deserializeOffset(String json) {
      return kafka.deserializeOffset(json);
    }

    @Override
    public void commit(Offset end) {
      kafka.commit(end);
    }

    @Override
    public void stop() {
      kafka.stop();
    }
  }
}
