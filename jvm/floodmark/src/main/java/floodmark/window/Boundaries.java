package floodmark.window;

/**
 * A window's boundaries against the watermark, stated once for the JVM host (the same rules as
 * {@code floodmark/core/windows.py}, Flink's convention; a differential test holds the two equal).
 *
 * <p>A window is the half-open interval {@code [start, end)} of event time in ms. With W the input watermark:
 *
 * <ul>
 *   <li>{@link #maxTimestamp} = {@code end - 1}, the last instant the window contains;
 *   <li>{@link #reached}: {@code W >= end - 1} (inclusive): the window fires ON_TIME, a record for it is late;
 *   <li>{@link #horizon} = {@code end - 1 + allowedLateness}, saturating at {@code Long.MAX_VALUE};
 *       {@link #expired}: {@code W >= horizon} (inclusive): the state goes, records for it are EXPIRED.
 * </ul>
 */
public final class Boundaries {
  /** 0001-01-01T00:00:00.000Z: the earliest event time a record may carry (inclusive). */
  public static final long EARLIEST_EVENT_TIME = -62_135_596_800_000L;
  /** 9999-12-31T23:59:59.999Z: the latest event time a record may carry (inclusive). */
  public static final long LATEST_EVENT_TIME = 253_402_300_799_999L;

  private Boundaries() {}

  public static long maxTimestamp(long end) {
    return end - 1;
  }

  public static boolean reached(long end, long watermark) {
    return maxTimestamp(end) <= watermark;
  }

  /** {@code end - 1 + allowedLateness}, saturating at {@code Long.MAX_VALUE} (the global window's horizon). */
  public static long horizon(long end, long allowedLateness) {
    return Math.min(maxTimestamp(end), Long.MAX_VALUE - allowedLateness) + allowedLateness;
  }

  public static boolean expired(long end, long allowedLateness, long watermark) {
    return horizon(end, allowedLateness) <= watermark;
  }

  /** Is {@code timestamp} (ms) within [{@link #EARLIEST_EVENT_TIME}, {@link #LATEST_EVENT_TIME}]? */
  public static boolean inRange(long timestamp) {
    return timestamp >= EARLIEST_EVENT_TIME && timestamp <= LATEST_EVENT_TIME;
  }

  /** The dead-letter reason for a record whose event time is outside the supported range. */
  public static String outOfRangeReason(long timestamp) {
    return "timestamp " + timestamp + " ms is outside the supported event-time range ["
        + EARLIEST_EVENT_TIME + ", " + LATEST_EVENT_TIME + "] (0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z)";
  }
}
