package floodmark.window;

import java.util.Objects;

/**
 * A key's window as the operator tells windows apart: the key and the window's name ({@link WindowAssigner#name}).
 *
 * <p>{@code equals} and {@code hashCode} are written out: a record's generated ones go through method handles that
 * the JIT did not inline here, and a flush looks up millions of these (a quarter of a 432k-window flush's samples).
 */
record WindowId(Object key, long name) {
  @Override
  public boolean equals(Object other) {
    return other instanceof WindowId id && name == id.name && Objects.equals(key, id.key);
  }

  @Override
  public int hashCode() {
    return 31 * Objects.hashCode(key) + Long.hashCode(name);
  }
}
