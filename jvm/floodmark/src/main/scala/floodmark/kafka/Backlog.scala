package floodmark.kafka

import scala.jdk.CollectionConverters._

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{Row, SQLContext}
import org.apache.spark.sql.sources.{BaseRelation, RelationProvider, TableScan}
import org.apache.spark.sql.types.{IntegerType, LongType, StringType, StructField, StructType}

/** What the aligned Kafka sources planned last ([[AlignedKafkaSource.planned]]), as a batch data source that Spark
  * resolves on its driver, reached by name from a classic session and from a Spark Connect server's `foreachBatch`
  * process alike (no py4j), as [[Pauses]] is:
  *
  * {{{
  * spark.read.format("floodmark.kafka.Backlog").option("keys", "k1,k2").load()
  *   // one row per partition of each source that planned a batch: key STRING, end STRING, partition INT, unread LONG
  * }}}
  *
  * `end` is the planned batch's end offsets as Spark logs them, so that the caller knows which batch it is;
  * `unread` the partition's records beyond them as Spark planned it. The plans are read when Spark resolves the
  * relation, on the driver where the sources planned them.
  */
class Backlog extends RelationProvider {
  override def createRelation(context: SQLContext, parameters: Map[String, String]): BaseRelation = {
    val keys = parameters.getOrElse("keys", "").split(",").map(_.trim).filter(_.nonEmpty).toSeq
    val rows = for {
      key <- keys
      plan <- Option(AlignedKafkaSource.planned(key)).toSeq
      (partition, unread) <- plan.unread.asScala.toSeq.sortBy(_._1.intValue)
    } yield Row(key, plan.end, partition.intValue, unread.longValue)
    new BaseRelation with TableScan {
      override def sqlContext: SQLContext = context
      override def schema: StructType = Backlog.Schema
      override def buildScan(): RDD[Row] = context.sparkContext.parallelize(rows, 1)
    }
  }
}

object Backlog {
  val Schema: StructType = StructType(Seq(
    StructField("key", StringType, nullable = false),
    StructField("end", StringType, nullable = false),
    StructField("partition", IntegerType, nullable = false),
    StructField("unread", LongType, nullable = false)))
}
