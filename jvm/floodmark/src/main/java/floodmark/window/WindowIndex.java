package floodmark.window;

import java.util.Objects;

/**
 * Numbers the distinct (key, window name) pairs of up to {@code capacity} rows, in the order they first appear:
 * open addressing over primitive arrays, no object per row (a {@code HashMap} of {@link WindowId} spent a third
 * of a 432k-window flush allocating and collecting its entries). Keys are equal by {@link Objects#equals}, as in a
 * {@code HashMap}.
 */
final class WindowIndex {
  private final int[] slots; // a pair's number + 1; 0: empty
  private final int mask;
  private final int shift; // 32 - log2(slots.length): a hash's top bits pick its first slot
  private final Object[] keys;
  private final long[] names;
  private final int[] hashes;
  private int size;

  WindowIndex(int capacity) {
    int slotCount = Integer.highestOneBit(Math.max(8, capacity) * 2 - 1) << 1; // a power of two >= 2 * capacity
    slots = new int[slotCount];
    mask = slotCount - 1;
    shift = Integer.numberOfLeadingZeros(slotCount) + 1;
    keys = new Object[capacity];
    names = new long[capacity];
    hashes = new int[capacity];
  }

  /** The number of {@code (key, name)}: the one it was given, or the next one (the count so far) if it is new. */
  int numberOf(Object key, long name) {
    int hash = 31 * Objects.hashCode(key) + Long.hashCode(name);
    // Fibonacci hashing: the product's top bits depend on every bit of the hash (its low bits only on the hash's
    // low bits, which cluster for similar keys and window names).
    int at = (hash * 0x9E3779B9) >>> shift;
    while (true) {
      int slot = slots[at];
      if (slot == 0) {
        keys[size] = key;
        names[size] = name;
        hashes[size] = hash;
        slots[at] = ++size;
        return size - 1;
      }
      int known = slot - 1;
      if (hashes[known] == hash && names[known] == name && Objects.equals(keys[known], key)) {
        return known;
      }
      at = (at + 1) & mask;
    }
  }

  /** How many distinct pairs it has numbered. */
  int size() {
    return size;
  }
}
