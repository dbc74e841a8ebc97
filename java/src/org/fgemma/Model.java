package org.fgemma;

/**
 * A loaded GGUF model (memory-mapped), its LoRA adapters and tokenizer. Thread-safe: callers
 * and sessions on several threads may share one Model. {@link #close()} drops this handle;
 * callers and sessions made from it keep the model alive.
 */
public final class Model implements AutoCloseable {
  private long handle;

  public Model(String path) {
    this(path, new String[0], new float[0]);
  }

  /** With LoRA adapters (llama.cpp's GGUF format) and their scales (1 = --lora). */
  public Model(String path, String[] loraPaths, float[] loraScales) {
    Fgemma.load();
    byte[][] loras = adapterPaths(loraPaths, loraScales, "adapter");
    handle = Native.modelLoad(Fgemma.cString(path, "model path"), loras, loraScales);
  }

  /**
   * With LoRA adapters and the adapters the noisy-channel tool prior ({@link
   * FunctionCaller.Options#toolChannel}) runs with instead of them, each trained for the prior
   * ({@code fgemma tune --objective both|channel}; an {@code INVALID_ARGUMENT} exception
   * otherwise). Empty prior arrays: the prior runs the base model, or the adapters when they
   * learnt it. Needs C API 1.1 (fg_model_load_ex).
   */
  public Model(
      String path,
      String[] loraPaths,
      float[] loraScales,
      String[] priorPaths,
      float[] priorScales) {
    Fgemma.load();
    byte[][] loras = adapterPaths(loraPaths, loraScales, "adapter");
    byte[][] priors = adapterPaths(priorPaths, priorScales, "prior adapter");
    handle =
        Native.modelLoadEx(
            Fgemma.cString(path, "model path"), loras, loraScales, priors, priorScales);
  }

  private static byte[][] adapterPaths(String[] paths, float[] scales, String what) {
    if (paths == null || scales == null || paths.length != scales.length) {
      throw new FgemmaException(
          FgemmaException.INVALID_ARGUMENT, what + " paths and scales differ in number");
    }
    byte[][] out = new byte[paths.length][];
    for (int i = 0; i < paths.length; ++i) {
      out[i] = Fgemma.cString(paths[i], what + " path");
    }
    return out;
  }

  synchronized long handle() {
    return handle;
  }

  /** gemma3.context_length of the file (0 when absent). */
  public synchronized long trainedContext() {
    return Native.modelTrainedContext(handle);
  }

  public synchronized int vocabSize() {
    return Native.modelVocabSize(handle);
  }

  /** Token ids as llama.cpp's tokenizer (and fgemma tokenize) gives them. */
  public synchronized int[] tokenize(String text, boolean addBos, boolean parseSpecial) {
    return Native.tokenize(handle, Fgemma.cString(text, "text"), addBos, parseSpecial);
  }

  public synchronized String detokenize(int[] ids, boolean special) {
    return Fgemma.utf8(Native.detokenize(handle, ids, special));
  }

  /** A caller for a tool catalog (JSON text) with fgemma call's defaults. */
  public FunctionCaller caller(String catalogJson) {
    return new FunctionCaller(this, catalogJson, new FunctionCaller.Options());
  }

  public FunctionCaller caller(String catalogJson, FunctionCaller.Options options) {
    return new FunctionCaller(this, catalogJson, options);
  }

  /** A generation session; context 0: 2048 or the trained context; threads 0: all cores. */
  public Session session(long context, int threads) {
    return new Session(this, context, threads);
  }

  @Override
  public synchronized void close() {
    long h = handle;
    handle = 0;
    if (h != 0) Native.modelFree(h);
  }
}
