package floodmark.window;

/**
 * What the operator knows of a segment of deferred partials without reading it ({@code SegmentInfo} in
 * {@code floodmark/core/segments.py}).
 *
 * @param id unique within the operator
 * @param level 0 for a batch's partials, {@code n + 1} for a merge of segments of level {@code n}, {@link
 *     PartialSegments#PIECE} for a piece of a split segment
 * @param rows its (key, window) rows
 * @param firstEnd the earliest end (ms, exclusive) of its windows
 * @param oldestArrival the earliest processing time (ms) at which its records arrived
 */
public record SegmentInfo(long id, int level, int rows, long firstEnd, long oldestArrival) {}
