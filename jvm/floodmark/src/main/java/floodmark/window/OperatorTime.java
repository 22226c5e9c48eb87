package floodmark.window;

/**
 * Where an operator stands: the input watermark and the processing time (ms) it was advanced to; the twin of
 * {@code OperatorTime} in {@code floodmark.core.window.policy}. {@link WindowOperator}'s moves move both (never
 * down); its parts ({@link PaneRules}, {@link SessionMerge}) read them.
 */
final class OperatorTime {
  long watermark;
  long processingTime;

  OperatorTime(long watermark, long processingTime) {
    this.watermark = watermark;
    this.processingTime = processingTime;
  }

  /**
   * {@code record} kept out of the window {@code [start, end)} now, with how late it is ({@code watermark -
   * timestamp}) and the window's horizon; {@code reason}: EXPIRED or WINDOW_CLOSED.
   */
  LateRecord late(WindowSpec spec, Record record, long start, long end, String reason) {
    long ts = record.timestamp();
    return new LateRecord(
        record.key(), start, end, ts, record.payload(), watermark, watermark - ts, spec.horizon(end), reason);
  }
}
