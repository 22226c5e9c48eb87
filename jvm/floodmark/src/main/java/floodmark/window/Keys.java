package floodmark.window;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Keys in a snapshot: a tag byte, then the value (strings, longs, doubles, booleans, null, and lists of them: a key of
 * several columns). A string is modified UTF-8 ({@code writeUTF}, tag 1) while that surely fits its 64 KiB limit,
 * else its length and UTF-16 chars (tag 6): any Java string round-trips, lone surrogates included. In a snapshot's
 * sequence of keys ({@link Writer}, {@link Reader}; format 3) a key equal to one written before is tag 7 and the
 * number of that key's first writing: a key has a row per window (ten for 10-minute windows sliding by one), and
 * writing its text once per row, then reading it into a new string per row, was a tenth of a sliding-window batch.
 */
final class Keys {
  /** The longest string {@code writeUTF} surely takes: at most three bytes per char, 65,535 bytes. */
  private static final int SHORT_STRING = 65_535 / 3;

  private Keys() {}

  static void write(DataOutput out, Object key) throws IOException {
    if (key == null) {
      out.writeByte(0);
    } else if (key instanceof String s && s.length() <= SHORT_STRING) {
      out.writeByte(1);
      out.writeUTF(s);
    } else if (key instanceof String s) {
      out.writeByte(6);
      out.writeInt(s.length());
      out.writeChars(s);
    } else if (key instanceof Long || key instanceof Integer) {
      out.writeByte(2);
      out.writeLong(((Number) key).longValue());
    } else if (key instanceof Double d) {
      out.writeByte(3);
      out.writeDouble(d);
    } else if (key instanceof Boolean b) {
      out.writeByte(4);
      out.writeBoolean(b);
    } else if (key instanceof List<?> parts) {
      out.writeByte(5);
      out.writeInt(parts.size());
      for (Object part : parts) {
        write(out, part);
      }
    } else {
      throw new IllegalArgumentException("a snapshot cannot hold a key of " + key.getClass().getName());
    }
  }

  static Object read(DataInput in) throws IOException {
    return read(in.readByte(), in);
  }

  private static final byte EARLIER = 7;

  /**
   * Writes a sequence of at most {@code capacity} keys, each key after its first as a back-reference
   * ({@code EARLIER}). The keys are numbered by a {@link WindowIndex} (a {@code HashMap} spent about half of a
   * segment's writing on an entry and a boxed number per key).
   */
  static final class Writer {
    private final WindowIndex written;

    Writer(int capacity) {
      written = new WindowIndex(capacity);
    }

    void write(DataOutput out, Object key) throws IOException {
      if (key == null) { // one byte: no reference is shorter
        Keys.write(out, null);
        return;
      }
      int known = written.size();
      int number = written.numberOf(key, 0);
      if (number == known) {
        Keys.write(out, key);
      } else {
        out.writeByte(EARLIER);
        out.writeInt(number);
      }
    }
  }

  /** Reads what a {@link Writer} wrote (and a sequence without back-references: snapshot formats 1 and 2). A key
   * read again is the same object as its first reading. */
  static final class Reader {
    private final List<Object> read = new ArrayList<>();

    Object read(DataInput in) throws IOException {
      byte tag = in.readByte();
      if (tag == EARLIER) {
        return read.get(in.readInt());
      }
      Object key = Keys.read(tag, in);
      if (key != null) {
        read.add(key);
      }
      return key;
    }
  }

  private static Object read(byte tag, DataInput in) throws IOException {
    return switch (tag) {
      case 0 -> null;
      case 1 -> in.readUTF();
      case 2 -> in.readLong();
      case 3 -> in.readDouble();
      case 4 -> in.readBoolean();
      case 5 -> {
        int size = in.readInt();
        List<Object> parts = new ArrayList<>(size);
        for (int i = 0; i < size; i++) {
          parts.add(read(in));
        }
        yield parts; // null parts allowed: a list equals any list of the same values
      }
      case 6 -> {
        char[] chars = new char[in.readInt()];
        for (int i = 0; i < chars.length; i++) {
          chars[i] = in.readChar();
        }
        yield new String(chars);
      }
      default -> throw new IOException("unknown key tag in a window operator snapshot");
    };
  }
}
