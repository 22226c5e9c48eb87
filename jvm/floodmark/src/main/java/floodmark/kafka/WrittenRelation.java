package floodmark.kafka;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.types.StructType;

/**
 * What floodmark's write-only data sources ({@link TransactionalSink}, {@link Pauses}) give back to Spark after a
 * write: a relation of the written rows' schema, which nothing reads (Spark's V1 write API asks for one).
 */
final class WrittenRelation extends BaseRelation {
  private final SQLContext context;
  private final StructType schema;

  WrittenRelation(SQLContext context, StructType schema) {
    this.context = context;
    this.schema = schema;
  }

  @Override
  public SQLContext sqlContext() {
    return context;
  }

  @Override
  public StructType schema() {
    return schema;
  }
}
