package floodmark.window;

/**
 * Which timestamp a pane carries and holds the stage's output watermark at (Beam's {@code TimestampCombiner};
 * {@code floodmark/core/timestamps.py} states the rules and is the reference).
 *
 * <p>A window's hold is a ms value; {@link #emptyHold} means "no record holds" and is the identity of {@link
 * #fold}: {@code Long.MAX_VALUE} for EARLIEST and END_OF_WINDOW, {@code Long.MIN_VALUE} for LATEST. A pane's
 * timestamp is the hold capped at the window's max timestamp, or the max timestamp itself (END_OF_WINDOW, or
 * nothing holds).
 */
public enum TimestampCombiner {
  END_OF_WINDOW,
  EARLIEST,
  LATEST;

  public long emptyHold() {
    return this == LATEST ? Long.MIN_VALUE : Long.MAX_VALUE;
  }

  /** The hold after adding a record (or a partial hold) with output time {@code time}. */
  public long fold(long hold, long time) {
    switch (this) {
      case EARLIEST:
        return Math.min(hold, time);
      case LATEST:
        return Math.max(hold, time);
      default:
        return hold;
    }
  }

  /**
   * The hold a record adds: its output time, or none when that time is at or behind the output watermark its
   * key sees as it arrives (Java Beam's {@code WatermarkHold.addElementHold}); END_OF_WINDOW: unchanged.
   */
  public long elementHold(long outputTime, long outputWatermark) {
    if (this == END_OF_WINDOW) {
      return outputTime;
    }
    return outputTime <= outputWatermark ? emptyHold() : outputTime;
  }

  public long paneTimestamp(long hold, long maxTimestamp) {
    if (this == END_OF_WINDOW || hold == emptyHold()) {
      return maxTimestamp;
    }
    return Math.min(hold, maxTimestamp);
  }
}
