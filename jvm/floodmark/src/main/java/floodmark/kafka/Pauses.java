package floodmark.kafka;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.types.StructType;

/**
 * Watermark alignment's pauses ({@link AlignedKafkaSource#pause}) as a data source that Spark runs on its driver, so
 * that floodmark's controller reaches them by name from a classic session and from a Spark Connect server's
 * {@code foreachBatch} process alike (no py4j):
 *
 * <pre>
 * spark.range(0).write.format("floodmark.kafka.Pauses").mode("append")
 *     .option("key", k).option("partitions", "0,2")   // every partition of source k paused from now on
 *     .save()
 * </pre>
 *
 * <p>The rows written are ignored; the source {@code key} reads nothing more of the listed partitions from the next
 * batch Spark plans, and reads again every partition not listed (empty: none paused).
 */
public final class Pauses implements CreatableRelationProvider {
  @Override
  public BaseRelation createRelation(
      SQLContext sqlContext, SaveMode mode, scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data) {
    String key = parameters.get("key").getOrElse(() -> "");
    if (key.isEmpty()) {
      throw new IllegalArgumentException("floodmark's pauses need the option key (the source's alignment key)");
    }
    AlignedKafkaSource.pause(key, parameters.get("partitions").getOrElse(() -> ""));
    return new WrittenRelation(sqlContext, new StructType());
  }
}
