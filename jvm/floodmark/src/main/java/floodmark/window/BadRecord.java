package floodmark.window;

/** A record the operator could not use (the dead-letter output), with the reason. */
public record BadRecord(Object key, Object payload, Long timestamp, String reason) {}
