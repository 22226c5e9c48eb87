package floodmark.window;

import java.io.DataOutput;
import java.io.UTFDataFormatException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * The bytes of a snapshot as {@link java.io.DataOutputStream} writes them (big-endian; strings in modified UTF-8,
 * their byte length first; doubles by {@link Double#doubleToLongBits}, so NaN is canonical), into one growing array.
 *
 * <p>Why not {@code DataOutputStream} over a {@code ByteArrayOutputStream}: that writes every long through a
 * synchronized stream call, which was half of a 432k-window segment's write. The bytes are the same, so snapshots
 * written before read as they did ({@link SnapshotIn}).
 */
final class SnapshotOut implements DataOutput {
  private static final VarHandle SHORT = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

  private byte[] bytes;
  private int size;

  SnapshotOut(int expected) {
    bytes = new byte[Math.max(16, expected)];
  }

  byte[] toByteArray() {
    return Arrays.copyOf(bytes, size);
  }

  private void room(int more) {
    if (size + more > bytes.length) {
      bytes = Arrays.copyOf(bytes, Math.max(size + more, bytes.length * 2));
    }
  }

  @Override
  public void write(int b) {
    room(1);
    bytes[size++] = (byte) b;
  }

  @Override
  public void write(byte[] b) {
    write(b, 0, b.length);
  }

  @Override
  public void write(byte[] b, int off, int len) {
    room(len);
    System.arraycopy(b, off, bytes, size, len);
    size += len;
  }

  @Override
  public void writeBoolean(boolean v) {
    write(v ? 1 : 0);
  }

  @Override
  public void writeByte(int v) {
    write(v);
  }

  @Override
  public void writeShort(int v) {
    room(2);
    SHORT.set(bytes, size, (short) v);
    size += 2;
  }

  @Override
  public void writeChar(int v) {
    writeShort(v);
  }

  @Override
  public void writeInt(int v) {
    room(4);
    INT.set(bytes, size, v);
    size += 4;
  }

  @Override
  public void writeLong(long v) {
    room(8);
    LONG.set(bytes, size, v);
    size += 8;
  }

  @Override
  public void writeFloat(float v) {
    writeInt(Float.floatToIntBits(v));
  }

  @Override
  public void writeDouble(double v) {
    writeLong(Double.doubleToLongBits(v));
  }

  @Override
  public void writeBytes(String s) {
    for (int i = 0; i < s.length(); i++) {
      write(s.charAt(i));
    }
  }

  @Override
  public void writeChars(String s) {
    for (int i = 0; i < s.length(); i++) {
      writeChar(s.charAt(i));
    }
  }

  /** Modified UTF-8: U+0001..U+007F in one byte, U+0000 and up to U+07FF in two, the rest in three. */
  @Override
  public void writeUTF(String s) throws UTFDataFormatException {
    int chars = s.length();
    int length = chars;
    for (int i = 0; i < chars; i++) {
      char c = s.charAt(i);
      if (c >= 0x80 || c == 0) {
        length += c >= 0x800 ? 2 : 1;
      }
    }
    if (length > 65_535) {
      throw new UTFDataFormatException("a string of " + length + " bytes in modified UTF-8 (at most 65,535)");
    }
    room(2 + length);
    writeShort(length);
    for (int i = 0; i < chars; i++) {
      char c = s.charAt(i);
      if (c != 0 && c < 0x80) {
        bytes[size++] = (byte) c;
      } else if (c >= 0x800) {
        bytes[size++] = (byte) (0xE0 | ((c >> 12) & 0x0F));
        bytes[size++] = (byte) (0x80 | ((c >> 6) & 0x3F));
        bytes[size++] = (byte) (0x80 | (c & 0x3F));
      } else {
        bytes[size++] = (byte) (0xC0 | ((c >> 6) & 0x1F));
        bytes[size++] = (byte) (0x80 | (c & 0x3F));
      }
    }
  }
}
