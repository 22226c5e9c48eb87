package floodmark.window;

import java.util.Map;
import java.util.Set;

/**
 * A deferring operator's snapshot in parts ({@link WindowOperator#snapshotParts}), for a runtime that stores each
 * segment of deferred partials on its own.
 *
 * @param head time, the window table and what is known of the segments
 * @param added the segments made since the last snapshot (id to bytes), to store
 * @param dropped the ids of stored segments merged since then, to delete
 */
public record SnapshotParts(byte[] head, Map<Long, byte[]> added, Set<Long> dropped) {}
