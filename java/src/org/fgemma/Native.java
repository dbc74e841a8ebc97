package org.fgemma;

/** The JNI functions (java/jni/fgemma_jni.c); strings travel as NUL-terminated UTF-8 bytes. */
final class Native {
  private Native() {}

  static {
    Fgemma.load();
  }

  static native long modelLoad(byte[] path, byte[][] loraPaths, float[] loraScales);

  static native long modelLoadEx(
      byte[] path, byte[][] loraPaths, float[] loraScales, byte[][] priorPaths,
      float[] priorScales);

  static native void modelFree(long model);

  static native long modelTrainedContext(long model);

  static native int modelVocabSize(long model);

  static native int[] tokenize(long model, byte[] text, boolean addBos, boolean parseSpecial);

  static native byte[] detokenize(long model, int[] ids, boolean special);

  static native long callerCreate(long model, byte[] catalog, byte[] dialect, byte[] constrain,
      double temperature, long topK, double topP, long seed, int maxCalls, long maxTokens,
      long context, int threads, byte[] cacheDir, byte[] toolMapJson, int draftTokens,
      boolean reuseRequestPrefix, double toolChannel, boolean argumentCheck, double copyBias,
      boolean fillArguments, double blend, int fixTypos);

  static native void callerFree(long caller);

  static native byte[] callerCall(long caller, byte[] request);

  static native long sessionCreate(long model, long context, int threads);

  static native void sessionFree(long session);

  static native long sessionGenerate(
      long session, byte[] prompt, long maxTokens, double temperature, long topK, double topP,
      long seed, boolean raw, boolean noSpecial, Session.Sink sink);
}
