package floodmark.window;

/**
 * The map side's partial aggregate of one key's on-time records in one window ({@code Partials} in
 * {@code floodmark/core/combine.py}).
 *
 * @param start the window's start (ms, inclusive)
 * @param end the window's end (ms, exclusive)
 * @param count the records it was made of
 * @param hold their combined output time (the combiner's empty hold: none holds)
 * @param acc the accumulators, in {@link AggregateLayout#columns}' order
 */
public record Partial(Object key, long start, long end, long count, long hold, double[] acc) {}
