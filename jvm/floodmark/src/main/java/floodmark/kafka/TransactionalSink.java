package floodmark.kafka;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;

/**
 * The exactly-once Kafka writer ({@link TransactionalWriter}) as a data source that Spark runs on its driver, so
 * that a classic session and a Spark Connect client reach it the same way, by name and without py4j:
 *
 * <pre>
 * messages.write.format("floodmark.kafka.TransactionalSink").mode("append")
 *     .option("topic", t).option("transactionalId", id).option("batchId", n).option("queryId", q)
 *     .option("kafka.bootstrap.servers", s)  // and any other kafka.* producer setting
 *     .save()
 * </pre>
 *
 * <p>{@code messages} has the columns {@code key}, {@code value} and {@code headers} of {@link TransactionalWriter};
 * Spark calls {@link #createRelation} on the driver with them, in the thread of the {@code save()} (a classic
 * session's {@code foreachBatch} thread, or a Connect server's request handler). A replayed batch whose id the
 * marker already holds writes nothing. Only {@code SaveMode.Append} is meaningful; any other is refused.
 */
public final class TransactionalSink implements CreatableRelationProvider {
  @Override
  public BaseRelation createRelation(
      SQLContext sqlContext, SaveMode mode, scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data) {
    if (mode != SaveMode.Append) {
      throw new IllegalArgumentException("floodmark's transactional Kafka sink only appends (mode " + mode + ")");
    }
    Map<String, String> options = original(parameters);
    Map<String, String> settings = new HashMap<>();
    for (Map.Entry<String, String> option : options.entrySet()) {
      if (option.getKey().startsWith("kafka.")) {
        settings.put(option.getKey().substring("kafka.".length()), option.getValue());
      }
    }
    try {
      TransactionalWriter.forId(required(options, "transactionalId"), settings)
          .write(data, required(options, "topic"), Long.parseLong(required(options, "batchId")),
              options.getOrDefault("queryId", ""));
    } catch (RuntimeException failure) {
      throw failure;
    } catch (Exception failure) {
      throw new IllegalStateException(failure.toString(), failure);
    }
    return new WrittenRelation(sqlContext, data.schema());
  }

  /** The options as given: Kafka's setting names are case-sensitive, Spark's V1 options are lower-cased. */
  private static Map<String, String> original(scala.collection.immutable.Map<String, String> parameters) {
    scala.collection.immutable.Map<String, String> given =
        parameters instanceof CaseInsensitiveMap<String> caseInsensitive ? caseInsensitive.originalMap() : parameters;
    return new HashMap<>(scala.jdk.javaapi.CollectionConverters.asJava(given));
  }

  private static String required(Map<String, String> options, String name) {
    String value = options.get(name);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException("floodmark's transactional Kafka sink needs the option " + name);
    }
    return value;
  }
}
