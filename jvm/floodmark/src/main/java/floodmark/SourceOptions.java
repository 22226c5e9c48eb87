package floodmark;

import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;

/**
 * The options of the streaming sources a DataFrame reads, found in its plan whatever the user did to it after
 * reading (floodmark's sources name themselves by an option: the Kafka source's alignment key, the list of files
 * read in order). Over Spark Connect, Python finds them in the relation the client sends instead.
 */
public final class SourceOptions {
  private static final ObjectMapper JSON = new ObjectMapper();

  private SourceOptions() {}

  /** The values of option {@code name} of the streaming sources of {@code frame}'s plan, as a JSON array of texts. */
  public static String valuesIn(org.apache.spark.sql.classic.Dataset<?> frame, String name) {
    List<String> values = new ArrayList<>();
    LogicalPlan plan = frame.queryExecution().logical();
    for (LogicalPlan leaf : scala.jdk.javaapi.CollectionConverters.asJava(plan.collectLeaves())) {
      if (leaf instanceof StreamingRelationV2 relation) {
        String value = relation.extraOptions().get(name);
        if (value != null) {
          values.add(value);
        }
      }
    }
    try {
      return JSON.writeValueAsString(values);
    } catch (JsonProcessingException impossible) {
      throw new IllegalStateException(impossible); // a list of strings always serializes
    }
  }
}
