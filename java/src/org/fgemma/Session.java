package org.fgemma;

/**
 * KV caches and threads for one text generation at a time (fgemma run). Used by one thread at a
 * time; close() it, or use try-with-resources.
 */
public final class Session implements AutoCloseable {
  /** Receives each generated token's text; return false to stop the generation. */
  public interface TokenListener {
    boolean onToken(int token, String text);
  }

  /** fg_generate_options. */
  public static final class GenerateOptions {
    public long maxTokens = 64;
    public double temperature = 1.0;
    public long topK = 64;
    public double topP = 0.95;
    public long seed = 0;
    public boolean raw = false;
    public boolean noSpecial = false;
  }

  private long handle;
  private long generatedTokens;

  Session(Model model, long context, int threads) {
    synchronized (model) {
      handle = Native.sessionCreate(model.handle(), context, threads);
    }
  }

  /** Called from native code for every piece of text. */
  static final class Sink {
    final TokenListener listener;
    final StringBuilder text = new StringBuilder();

    Sink(TokenListener listener) {
      this.listener = listener;
    }

    boolean onBytes(int token, byte[] bytes) {
      String s = Fgemma.utf8(bytes);
      text.append(s);
      return listener == null || listener.onToken(token, s);
    }
  }

  /** Generates from a prompt (afresh each time) and returns the whole text. */
  public synchronized String generate(String prompt, GenerateOptions o, TokenListener listener) {
    if (o == null) o = new GenerateOptions();
    Sink sink = new Sink(listener);
    generatedTokens =
        Native.sessionGenerate(
            handle, Fgemma.cString(prompt, "prompt"), o.maxTokens, o.temperature, o.topK, o.topP,
            o.seed, o.raw, o.noSpecial, sink);
    return sink.text.toString();
  }

  /** Tokens the last generate() produced (the stop token excluded). */
  public synchronized long generatedTokens() {
    return generatedTokens;
  }

  @Override
  public synchronized void close() {
    long h = handle;
    handle = 0;
    if (h != 0) Native.sessionFree(h);
  }
}
