package floodmark.window;

/**
 * One input record.
 *
 * @param key the record's key (equals and hashCode tell keys apart)
 * @param timestamp event time in ms, or null (a bad record: "missing timestamp")
 * @param values the aggregate's fields ({@link AggregateLayout#fields}' order); NaN is a missing value
 * @param payload what a late or bad record carries as its value (the original row, or its position)
 */
public record Record(Object key, Long timestamp, double[] values, Object payload) {}
