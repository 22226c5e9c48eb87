package floodmark.window;

import java.io.DataInput;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/** Reads what {@link SnapshotOut} (or {@link java.io.DataOutputStream}) wrote, from one array, without a stream. */
final class SnapshotIn implements DataInput {
  private static final VarHandle SHORT = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

  private final byte[] bytes;
  private int at;

  SnapshotIn(byte[] bytes) {
    this.bytes = bytes;
  }

  private int take(int n) throws EOFException {
    if (n < 0 || at + n > bytes.length) {
      throw new EOFException("a window operator snapshot ends before its data");
    }
    int from = at;
    at += n;
    return from;
  }

  @Override
  public void readFully(byte[] b) throws IOException {
    readFully(b, 0, b.length);
  }

  @Override
  public void readFully(byte[] b, int off, int len) throws IOException {
    System.arraycopy(bytes, take(len), b, off, len);
  }

  @Override
  public int skipBytes(int n) {
    int skipped = Math.max(0, Math.min(n, bytes.length - at));
    at += skipped;
    return skipped;
  }

  @Override
  public boolean readBoolean() throws IOException {
    return readByte() != 0;
  }

  @Override
  public byte readByte() throws IOException {
    return bytes[take(1)];
  }

  @Override
  public int readUnsignedByte() throws IOException {
    return readByte() & 0xFF;
  }

  @Override
  public short readShort() throws IOException {
    return (short) SHORT.get(bytes, take(2));
  }

  @Override
  public int readUnsignedShort() throws IOException {
    return readShort() & 0xFFFF;
  }

  @Override
  public char readChar() throws IOException {
    return (char) readShort();
  }

  @Override
  public int readInt() throws IOException {
    return (int) INT.get(bytes, take(4));
  }

  @Override
  public long readLong() throws IOException {
    return (long) LONG.get(bytes, take(8));
  }

  @Override
  public float readFloat() throws IOException {
    return Float.intBitsToFloat(readInt());
  }

  @Override
  public double readDouble() throws IOException {
    return Double.longBitsToDouble(readLong());
  }

  @Override
  public String readLine() {
    throw new UnsupportedOperationException("a snapshot has no lines");
  }

  /** A string of ASCII bytes (U+0001..U+007F, the common key) is copied as it is; others decode as Java does. */
  @Override
  public String readUTF() throws IOException {
    int length = readUnsignedShort();
    int from = take(length);
    for (int i = from; i < from + length; i++) {
      if (bytes[i] <= 0) { // U+0000 or beyond U+007F
        at = from - 2;
        return DataInputStream.readUTF(this);
      }
    }
    return new String(bytes, from, length, StandardCharsets.ISO_8859_1);
  }
}
