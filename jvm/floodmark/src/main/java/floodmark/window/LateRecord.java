package floodmark.window;

/**
 * A record kept out of a window, with why.
 *
 * @param lateness {@code watermark - timestamp} in ms at arrival
 * @param horizon the window's cleanup time, {@code max timestamp + allowed lateness}
 * @param reason EXPIRED (the watermark had reached the horizon) or WINDOW_CLOSED (the trigger had finished)
 */
public record LateRecord(
    Object key,
    long start,
    long end,
    long timestamp,
    Object payload,
    long watermark,
    long lateness,
    long horizon,
    String reason) {}
