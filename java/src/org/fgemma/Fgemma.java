package org.fgemma;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The native library and the version queries. libfgemma_jni.so is loaded from the system
 * property {@code fgemma.jni.library} (a path) if set, else by name from java.library.path; it
 * finds libfgemma.so beside itself.
 */
public final class Fgemma {
  private Fgemma() {}

  static {
    String path = System.getProperty("fgemma.jni.library");
    if (path != null && !path.isEmpty()) {
      System.load(path);
    } else {
      System.loadLibrary("fgemma_jni");
    }
  }

  /** Forces the native library to load (a no-op after the first call). */
  static void load() {}

  /** The C API version of the loaded library: major &lt;&lt; 16 | minor. */
  public static int apiVersion() {
    return nativeApiVersion();
  }

  /** The library's version, "MAJOR.MINOR.PATCH". */
  public static String version() {
    return nativeVersion();
  }

  /**
   * Strict UTF-8 bytes, NUL-terminated, for the C library: a string with an unpaired surrogate
   * (not valid UTF-16, so no UTF-8 exists for it) or a NUL character is an error.
   */
  static byte[] cString(String s, String what) {
    if (s == null) {
      throw new FgemmaException(FgemmaException.INVALID_ARGUMENT, "null " + what);
    }
    if (s.indexOf('\0') >= 0) {
      throw new FgemmaException(
          FgemmaException.INVALID_ARGUMENT, "the " + what + " contains a NUL character");
    }
    try {
      ByteBuffer b =
          StandardCharsets.UTF_8
              .newEncoder()
              .onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT)
              .encode(CharBuffer.wrap(s));
      byte[] out = new byte[b.remaining() + 1];
      b.get(out, 0, out.length - 1);
      return out;
    } catch (CharacterCodingException e) {
      throw new FgemmaException(
          FgemmaException.INVALID_ARGUMENT, "the " + what + " is not valid UTF-8 (" + e + ")");
    }
  }

  /** NUL-terminated copy of bytes given as they are (the library checks them). */
  static byte[] cBytes(byte[] b, String what) {
    if (b == null) {
      throw new FgemmaException(FgemmaException.INVALID_ARGUMENT, "null " + what);
    }
    for (byte x : b) {
      if (x == 0) {
        throw new FgemmaException(
            FgemmaException.INVALID_ARGUMENT, "the " + what + " contains a NUL byte");
      }
    }
    byte[] out = new byte[b.length + 1];
    System.arraycopy(b, 0, out, 0, b.length);
    return out;
  }

  static String utf8(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }

  private static native int nativeApiVersion();

  private static native String nativeVersion();
}
