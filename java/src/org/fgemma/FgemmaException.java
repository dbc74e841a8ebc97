package org.fgemma;

/** An error status of the C library, with its message (include/fgemma/fgemma.h). */
public class FgemmaException extends RuntimeException {
  private static final String[] NAMES = {
    "OK", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE", "DATA_LOSS", "UNIMPLEMENTED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "IO", "INTERNAL"
  };
  public static final int INVALID_ARGUMENT = 1;
  public static final int NOT_FOUND = 2;
  public static final int OUT_OF_RANGE = 3;

  private final int status;

  public FgemmaException(int status, String message) {
    super(name(status) + ": " + message);
    this.status = status;
  }

  /** The fg_status code (FG_INVALID_ARGUMENT = 1, ...). */
  public int status() {
    return status;
  }

  public String statusName() {
    return name(status);
  }

  static String name(int status) {
    return status >= 0 && status < NAMES.length ? NAMES[status] : "UNKNOWN";
  }
}
