package floodmark.kafka;

import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * Writes a micro-batch's messages to one Kafka topic in one Kafka transaction, once per batch id: the driver
 * side of floodmark's exactly-once {@code KafkaSink} (the specification is the docstring of
 * {@code src/floodmark/spark/outputs/sinks.py}).
 *
 * <p>One writer per transactional id per driver JVM, kept open across batches. Its producer calls
 * {@code initTransactions()} once: that fences an older producer with the same id (a zombie driver) and
 * aborts or completes the transaction it left open. The transaction that carries batch N's messages also
 * commits the marker "batch N of query Q" as the offset N of partition 0 of the topic in the consumer group
 * named after the transactional id ({@code sendOffsetsToTransaction}, Kafka's read-process-write commit):
 * messages and marker are visible together or not at all. After {@code initTransactions()} the writer reads
 * the marker once (stable offsets only, KIP-447), and a replayed batch whose id is at most the marker's is
 * skipped: its messages are already committed.
 *
 * <p>The rows have the columns {@code key} (binary, may be null), {@code value} (binary) and {@code headers}
 * (array of struct key string, value binary); they are read in order, partition by partition
 * ({@code toLocalIterator}), so the driver holds one partition at a time. Messages go to the partition
 * Kafka's default partitioner picks for their key, as Spark's own Kafka writer does.
 */
public final class TransactionalWriter {
  /** Marks the marker: the metadata of its committed offset. */
  static final String MARKER_PREFIX = "floodmark batch ";

  private static final Map<String, TransactionalWriter> WRITERS = new HashMap<>();

  private final String transactionalId;
  private final Map<String, Object> config;
  private KafkaProducer<byte[], byte[]> producer;
  private Marker committed;

  private TransactionalWriter(String transactionalId, Map<String, String> settings) {
    this.transactionalId = transactionalId;
    this.config = new HashMap<>(settings);
  }

  /**
   * The writer of {@code transactionalId} in this JVM (created on first use, and again when the settings
   * change: a query started again with other servers or credentials). {@code settings} are Kafka client
   * settings (bootstrap.servers, security, transaction.timeout.ms, ...) without the "kafka." prefix.
   */
  public static synchronized TransactionalWriter forId(String transactionalId, Map<String, String> settings) {
    TransactionalWriter writer = WRITERS.get(transactionalId);
    if (writer != null && !writer.config.equals(new HashMap<String, Object>(settings))) {
      writer.closeProducer();
      writer = null;
    }
    if (writer == null) {
      writer = new TransactionalWriter(transactionalId, settings);
      WRITERS.put(transactionalId, writer);
    }
    return writer;
  }

  /** Closes every writer of this JVM (their producers abort nothing: no transaction is open between batches). */
  public static synchronized void closeAll() {
    for (TransactionalWriter writer : WRITERS.values()) {
      writer.closeProducer();
    }
    WRITERS.clear();
  }

  /**
   * Writes {@code rows} to {@code topic} and the marker of {@code batchId} in one transaction, unless the
   * marker already holds a batch id >= {@code batchId} (a replay of a committed batch).
   *
   * @return the number of messages committed, or -1 when the batch was already committed.
   * @throws IllegalStateException the marker belongs to another query: two queries share the id.
   */
  public synchronized long write(Dataset<Row> rows, String topic, long batchId, String queryId) throws Exception {
    if (producer == null) {
      open();
    }
    if (committed != null) {
      if (!committed.queryId.isEmpty() && !queryId.isEmpty() && !committed.queryId.equals(queryId)) {
        throw new IllegalStateException("Kafka transactional id '" + transactionalId + "' holds batch "
            + committed.batchId + " of another query (" + committed.queryId + ", this one is " + queryId
            + "): give each query's Kafka sink its own transactional_id_prefix");
      }
      if (batchId <= committed.batchId) {
        return -1;
      }
    }
    long messages = 0;
    producer.beginTransaction();
    try {
      Iterator<Row> iterator = rows.toLocalIterator();
      while (iterator.hasNext()) {
        producer.send(record(topic, iterator.next()));
        messages++;
      }
      Map<TopicPartition, OffsetAndMetadata> marker =
          Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(batchId, MARKER_PREFIX + batchId + " of query " + queryId));
      producer.sendOffsetsToTransaction(marker, new ConsumerGroupMetadata(transactionalId));
      // Flushes every send first, and fails if any of them failed.
      producer.commitTransaction();
    } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException fatal) {
      // The producer cannot go on (another producer took the id, or it is not allowed): a new one on retry.
      closeProducer();
      throw fatal;
    } catch (Exception failure) {
      try {
        producer.abortTransaction();
      } catch (KafkaException abortFailed) {
        closeProducer();
      }
      throw failure;
    }
    committed = new Marker(batchId, queryId);
    return messages;
  }

  private static ProducerRecord<byte[], byte[]> record(String topic, Row row) {
    RecordHeaders headers = new RecordHeaders();
    if (!row.isNullAt(2)) {
      List<Row> entries = row.getList(2);
      for (Row header : entries) {
        headers.add(header.getString(0), header.isNullAt(1) ? null : (byte[]) header.get(1));
      }
    }
    byte[] key = row.isNullAt(0) ? null : (byte[]) row.get(0);
    byte[] value = row.isNullAt(1) ? null : (byte[]) row.get(1);
    return new ProducerRecord<>(topic, null, null, key, value, headers);
  }

  private void open() throws InterruptedException, ExecutionException, TimeoutException {
    Properties properties = new Properties();
    properties.putAll(config);
    properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
    properties.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    properties.put(ProducerConfig.ACKS_CONFIG, "all");
    properties.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    properties.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    KafkaProducer<byte[], byte[]> created = new KafkaProducer<>(properties);
    try {
      created.initTransactions();
      committed = readMarker();
    } catch (Exception failure) {
      created.close();
      throw failure;
    }
    producer = created;
  }

  /** The last committed batch of this id, from the group's stable offsets (null: none yet). */
  private Marker readMarker() throws InterruptedException, ExecutionException, TimeoutException {
    Properties properties = new Properties();
    for (Map.Entry<String, Object> setting : config.entrySet()) {
      if (!setting.getKey().startsWith("transaction") && !setting.getKey().endsWith("serializer")) {
        properties.put(setting.getKey(), setting.getValue());
      }
    }
    try (Admin admin = Admin.create(properties)) {
      Map<TopicPartition, OffsetAndMetadata> offsets = admin
          .listConsumerGroupOffsets(transactionalId, new ListConsumerGroupOffsetsOptions().requireStable(true))
          .partitionsToOffsetAndMetadata()
          .get(60, TimeUnit.SECONDS);
      Marker last = null;
      for (OffsetAndMetadata offset : offsets.values()) {
        Marker marker = offset == null ? null : Marker.parse(offset);
        if (marker != null && (last == null || marker.batchId > last.batchId)) {
          last = marker;
        }
      }
      return last;
    }
  }

  private void closeProducer() {
    if (producer != null) {
      try {
        producer.close();
      } finally {
        producer = null;
        committed = null;
      }
    }
  }

  /** Batch {@code batchId} of the query {@code queryId} (empty: unknown) is committed. */
  record Marker(long batchId, String queryId) {
    static Marker parse(OffsetAndMetadata offset) {
      String metadata = offset.metadata();
      if (metadata == null || !metadata.startsWith(MARKER_PREFIX)) {
        return null;
      }
      int of = metadata.indexOf(" of query ");
      String query = of < 0 ? "" : metadata.substring(of + " of query ".length());
      return new Marker(offset.offset(), query);
    }
  }
}
