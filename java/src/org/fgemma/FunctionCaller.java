package org.fgemma;

/**
 * One tool catalog's function caller: a request in, the call as JSON out (the bytes fgemma call
 * prints). Used by one thread at a time (its methods are synchronized); close() it, or use
 * try-with-resources.
 */
public final class FunctionCaller implements AutoCloseable {
  /** fg_caller_options: null strings keep the library's defaults. */
  public static final class Options {
    public String dialect = "official";
    public String constrain = "call";
    public double temperature = 0.0;
    public long topK = 64;
    public double topP = 0.95;
    public long seed = 0;
    public int maxCalls = 1;
    public long maxTokens = 256;
    public long context = 0;
    public int threads = 0;
    public String cacheDir = null;
    public String toolMapJson = null;
    public int draftTokens = 2;
    public boolean reuseRequestPrefix = true;
    /** The noisy-channel tool prior's weight: -1 the library's default, 0 off. */
    public double toolChannel = -1;
    /**
     * With the tool channel on, drop the optional arguments the request is likelier without and
     * replace an enum value the request is much likelier with another member of.
     */
    public boolean argumentCheck = true;
    /** The copy prior's bias: -1 the library's default, 0 off. */
    public double copyBias = -1;
    /**
     * With an app's adapter and a tool prior's model of its own: take the optional arguments the
     * app's examples never gave, left out of the call, from the prior's model's call.
     */
    public boolean fillArguments = true;
    /**
     * With such an adapter and prior's model: the prior's model's weight when both choose the
     * tokens of the call the app's adapter is unsure of, in [0, 1); -1 the library's default
     * (0.4), 0 off.
     */
    public double blend = -1;
    /**
     * Typo mending: a request word the vocabulary does not know, one edit from exactly one word
     * of the catalog, is read as that word. -1 the library's default (on for a base Gemma 3
     * vocabulary, off for FunctionGemma), 0 off, 1 on. Needs C API 1.2.
     */
    public int fixTypos = -1;
  }

  private long handle;

  FunctionCaller(Model model, String catalogJson, Options o) {
    if (o == null) o = new Options();
    byte[] dialect = o.dialect == null ? null : Fgemma.cString(o.dialect, "dialect");
    byte[] constrain = o.constrain == null ? null : Fgemma.cString(o.constrain, "constrain");
    byte[] cacheDir = o.cacheDir == null ? null : Fgemma.cString(o.cacheDir, "cache dir");
    byte[] toolMap = o.toolMapJson == null ? null : Fgemma.cString(o.toolMapJson, "tool map");
    byte[] catalog = Fgemma.cString(catalogJson, "catalog");
    synchronized (model) {
      handle = Native.callerCreate(model.handle(), catalog, dialect, constrain, o.temperature,
          o.topK, o.topP, o.seed, o.maxCalls, o.maxTokens, o.context, o.threads, cacheDir, toolMap,
          o.draftTokens, o.reuseRequestPrefix, o.toolChannel, o.argumentCheck, o.copyBias,
          o.fillArguments, o.blend, o.fixTypos);
    }
  }

  /** The catalog given as raw bytes (checked as UTF-8 JSON by the library). */
  public static FunctionCaller fromCatalogBytes(Model model, byte[] catalog, Options o) {
    return new FunctionCaller(model, catalog, o == null ? new Options() : o);
  }

  private FunctionCaller(Model model, byte[] catalog, Options o) {
    synchronized (model) {
      handle = Native.callerCreate(model.handle(), Fgemma.cBytes(catalog, "catalog"), null, null,
          o.temperature, o.topK, o.topP, o.seed, o.maxCalls, o.maxTokens, o.context, o.threads,
          null, null, o.draftTokens, o.reuseRequestPrefix, o.toolChannel, o.argumentCheck,
          o.copyBias, o.fillArguments, o.blend, o.fixTypos);
    }
  }

  /** The call for a request as JSON text (what fgemma call prints, without the newline). */
  public synchronized String call(String request) {
    return Fgemma.utf8(Native.callerCall(handle, Fgemma.cString(request, "request")));
  }

  /** The same for a request given as bytes (the library rejects invalid UTF-8). */
  public synchronized String call(byte[] request) {
    return Fgemma.utf8(Native.callerCall(handle, Fgemma.cBytes(request, "request")));
  }

  @Override
  public synchronized void close() {
    long h = handle;
    handle = 0;
    if (h != 0) Native.callerFree(h);
  }
}
