package floodmark.kafka

import java.util.Properties
import java.util.concurrent.TimeUnit

import scala.jdk.CollectionConverters._

import org.apache.kafka.clients.admin.Admin
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{Row, SQLContext}
import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap
import org.apache.spark.sql.sources.{BaseRelation, RelationProvider, TableScan}
import org.apache.spark.sql.types.{IntegerType, StructField, StructType}

/** The partitions of a Kafka topic, from the broker's metadata, as a batch data source reached by name, from a
  * classic session and over Spark Connect alike (`floodmark.spark.sources.kafka.topic_partitions`):
  *
  * {{{
  * spark.read.format("floodmark.kafka.TopicPartitions").option("topic", t)
  *   .option("kafka.bootstrap.servers", s)  // and any other kafka.* client setting (security)
  *   .load()                                // one row per partition: partition INT
  * }}}
  *
  * Kafka's admin client asks the broker on the driver when Spark resolves the relation. A failure is one line
  * after [[TopicPartitions.Marker]]: the topic does not exist, or the client's own reason (Kafka's error, then its
  * innermost cause: a TLS handshake's, wrong credentials').
  */
class TopicPartitions extends RelationProvider {
  override def createRelation(context: SQLContext, parameters: Map[String, String]): BaseRelation = {
    // Kafka's setting names are case-sensitive; Spark's V1 options are lower-cased.
    val options = parameters match {
      case given: CaseInsensitiveMap[String @unchecked] => given.originalMap
      case given => given
    }
    val topic = options.getOrElse("topic", throw new IllegalArgumentException(s"${TopicPartitions.Marker} no topic"))
    val servers = options.getOrElse("kafka.bootstrap.servers", "")
    val partitions = TopicPartitions.list(topic, servers, options)
    new BaseRelation with TableScan {
      override def sqlContext: SQLContext = context
      override def schema: StructType = StructType(Seq(StructField("partition", IntegerType, nullable = false)))
      override def buildScan(): RDD[Row] = context.sparkContext.parallelize(partitions.map(Row(_)), 1)
    }
  }
}

object TopicPartitions {

  /** Starts the one line of a failure, so that Python finds it in any error text that wraps it. */
  val Marker = "[floodmark topic_partitions]"

  private val KafkaErrors = "org.apache.kafka.common.errors."

  def list(topic: String, servers: String, options: Map[String, String]): Seq[Int] = {
    val properties = new Properties()
    options.foreach { case (name, value) =>
      if (name.startsWith("kafka.")) properties.put(name.stripPrefix("kafka."), value)
    }
    val admin = Admin.create(properties)
    try {
      val topics = admin.listTopics().names().get(30, TimeUnit.SECONDS)
      if (!topics.contains(topic))
        throw new IllegalArgumentException(s"$Marker Kafka topic '$topic' does not exist at $servers")
      val description = admin.describeTopics(java.util.List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
      description.get(topic).partitions().asScala.map(_.partition()).toSeq.sorted
    } catch {
      case refused: IllegalArgumentException => throw refused
      case failure: Exception =>
        throw new IllegalStateException(
          s"$Marker cannot list the partitions of '$topic' at $servers: ${reason(failure)}", failure)
    } finally {
      admin.close()
    }
  }

  /** Kafka's error in the chain (if one wraps the cause), then the innermost cause, each its first line: what
    * `floodmark.spark.outputs.batch_sink.root_cause` says of a Java error. */
  private def reason(error: Throwable): String = {
    val chain = Iterator.iterate(error)(_.getCause).takeWhile(_ != null).take(50).toSeq
    val lines = chain.map(cause => cause.toString.linesIterator.nextOption().getOrElse("").trim)
    lines.init.find(_.startsWith(KafkaErrors)) match {
      case Some(kafka) => s"$kafka; caused by ${lines.last}"
      case None => lines.last
    }
  }
}
