package org.fgemma;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * The JVM binding on a model (plain test: no JUnit needed). Usage: FgemmaTest MODEL CATALOG
 * [PRIOR_MODEL PRIOR_LORA UNMARKED_LORA]: the last three are the tool prior's fixture
 * (tests/bindings/CMakeLists.txt: a tiny model, an adapter trained for its tool prior on
 * tests/bindings/prior_data.jsonl, one that was not). Prints "N passed, N failed"; exit status 1
 * when any check failed.
 */
public final class FgemmaTest {
  private static int passed;
  private static int failed;

  private static void check(boolean ok, String what) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      System.err.println("FAILED: " + what);
    }
  }

  interface Body {
    void run() throws Exception;
  }

  /** body must throw an FgemmaException with this status. */
  private static void expectError(int status, String what, Body body) {
    try {
      body.run();
      ++failed;
      System.err.println("FAILED (no exception): " + what);
    } catch (FgemmaException e) {
      check(e.status() == status, what + ": status " + e.statusName() + " (" + e.getMessage() + ")");
      check(e.getMessage() != null && e.getMessage().length() > 20, what + ": a message");
      System.out.println("ok   " + what + ": " + e.getMessage());
    } catch (Throwable t) {
      ++failed;
      System.err.println("FAILED (wrong exception " + t + "): " + what);
    }
  }

  /** The calls' function names for trained requests of prior_data.jsonl, at this prior weight. */
  private static String priorNames(Model model, String catalog, double toolChannel) {
    FunctionCaller.Options o = new FunctionCaller.Options();
    o.threads = 1;
    o.toolChannel = toolChannel;
    StringBuilder names = new StringBuilder();
    try (FunctionCaller caller = model.caller(catalog, o)) {
      for (String request :
          new String[] {"lights off in the hall", "heat the house in eco mode", "stop the music"}) {
        String json = caller.call(request);
        int at = json.indexOf("\"name\":\"");
        names.append(at < 0 ? json : json.substring(at + 8, json.indexOf('"', at + 8))).append(' ');
      }
    }
    return names.toString().trim();
  }

  /** Model(path, loras, scales, priorPaths, priorScales): the tool prior's adapters. */
  private static void testPriorAdapters(
      String catalog, String modelPath, String priorPath, String unmarkedPath) {
    String[] none = new String[0];
    float[] noScales = new float[0];
    float[] one = {1.0f};
    String trained = "set_light set_mode stop_music";
    try (Model plain = new Model(modelPath);
        Model withPrior = new Model(modelPath, none, noScales, new String[] {priorPath}, one);
        Model both =
            new Model(
                modelPath, new String[] {unmarkedPath}, one, new String[] {priorPath}, one);
        Model noPrior = new Model(modelPath, none, noScales, none, noScales)) {
      // The prior weighted to drown the model's own choice names the trained tools; the base
      // model's prior does not.
      check(priorNames(withPrior, catalog, 50).equals(trained), "the prior names trained tools");
      check(priorNames(both, catalog, 50).equals(trained), "beside a call adapter too");
      String base = priorNames(plain, catalog, 50);
      check(!base.equals(trained), "the base model's prior differs: " + base);
      check(priorNames(noPrior, catalog, 50).equals(base), "no prior adapters: a plain load");
      // The prior off: the prior's adapter does not decode the calls.
      check(
          priorNames(withPrior, catalog, 0).equals(priorNames(plain, catalog, 0)),
          "the prior off: the model's own calls");
    }
    try {
      new Model(modelPath, none, noScales, new String[] {unmarkedPath}, one).close();
      check(false, "unmarked prior adapter refused");
    } catch (FgemmaException e) {
      check(
          e.status() == FgemmaException.INVALID_ARGUMENT
              && e.getMessage().contains("not trained for the tool prior"),
          "unmarked prior adapter: " + e.statusName() + " " + e.getMessage());
      System.out.println("ok   unmarked prior adapter: " + e.getMessage());
    }
    // The same file is a fine call adapter.
    new Model(modelPath, new String[] {unmarkedPath}, one, none, noScales).close();
    expectError(
        FgemmaException.NOT_FOUND,
        "missing prior adapter",
        () -> new Model(modelPath, none, noScales, new String[] {"/nonexistent.gguf"}, one));
    expectError(
        FgemmaException.INVALID_ARGUMENT,
        "prior paths and scales differ",
        () -> new Model(modelPath, none, noScales, new String[] {priorPath}, noScales));
    expectError(
        FgemmaException.INVALID_ARGUMENT,
        "null prior scales",
        () -> new Model(modelPath, none, noScales, new String[] {priorPath}, null));
    expectError(
        FgemmaException.INVALID_ARGUMENT,
        "null prior path",
        () -> new Model(modelPath, none, noScales, new String[] {null}, one));
  }

  public static void main(String[] args) throws Exception {
    String modelPath = args[0];
    String catalog = new String(Files.readAllBytes(Paths.get(args[1])), StandardCharsets.UTF_8);
    check(Fgemma.apiVersion() >> 16 == 1, "api version 1.x");
    check(Fgemma.version().split("\\.").length == 3, "version string");

    expectError(FgemmaException.NOT_FOUND, "missing model", () -> new Model("/nonexistent.gguf"));
    expectError(FgemmaException.INVALID_ARGUMENT, "null model path", () -> new Model(null));
    expectError(
        FgemmaException.INVALID_ARGUMENT,
        "non-UTF-16 path",
        () -> new Model("bad\ud800path"));

    FunctionCaller kept;
    String first;
    try (Model model = new Model(modelPath)) {
      check(model.trainedContext() > 0, "trained context");
      check(model.vocabSize() > 0, "vocab size");
      int[] ids = model.tokenize("turn the light on", false, false);
      check(ids.length >= 1, "tokenize");
      check(model.detokenize(ids, false).equals("turn the light on"), "detokenize round trip");

      FunctionCaller.Options o = new FunctionCaller.Options();
      o.threads = 1;
      try (FunctionCaller caller = model.caller(catalog, o)) {
        first = caller.call("turn the light on in the kitchen");
        check(first.startsWith("{\"arguments\":"), "call JSON: " + first);
        check(first.equals(caller.call("turn the light on in the kitchen")), "deterministic");
        expectError(FgemmaException.INVALID_ARGUMENT, "empty request", () -> caller.call(""));
        expectError(
            FgemmaException.INVALID_ARGUMENT,
            "unpaired surrogate",
            () -> caller.call("turn \udc00 on"));
        expectError(
            FgemmaException.INVALID_ARGUMENT,
            "non-UTF-8 bytes",
            () -> caller.call(new byte[] {'c', 'a', 'f', (byte) 0xc3}));
        expectError(FgemmaException.INVALID_ARGUMENT, "NUL in request", () -> caller.call("a\0b"));
        expectError(
            FgemmaException.INVALID_ARGUMENT, "null request", () -> caller.call((String) null));
      }
      expectError(FgemmaException.INVALID_ARGUMENT, "invalid catalog", () -> model.caller("{x"));
      FunctionCaller.Options badPrior = new FunctionCaller.Options();
      badPrior.toolChannel = -3;
      expectError(
          FgemmaException.INVALID_ARGUMENT,
          "tool channel weight",
          () -> model.caller(catalog, badPrior));
      FunctionCaller.Options badCopy = new FunctionCaller.Options();
      badCopy.copyBias = -3;
      expectError(
          FgemmaException.INVALID_ARGUMENT, "copy bias", () -> model.caller(catalog, badCopy));
      FunctionCaller.Options badBlend = new FunctionCaller.Options();
      badBlend.blend = 1.5;
      expectError(FgemmaException.INVALID_ARGUMENT, "blend", () -> model.caller(catalog, badBlend));
      FunctionCaller.Options badTypos = new FunctionCaller.Options();
      badTypos.fixTypos = 2;
      expectError(
          FgemmaException.INVALID_ARGUMENT, "fix_typos", () -> model.caller(catalog, badTypos));
      // Typo mending: the vocabulary knows "light" and "kitchen" whole, not "ligth" and
      // "kitchn". Free text: this random model's constrained call is the same for both texts.
      FunctionCaller.Options mend = new FunctionCaller.Options();
      mend.threads = 1;
      mend.constrain = "off";
      mend.maxTokens = 12;
      mend.fixTypos = 1;
      FunctionCaller.Options asWritten = new FunctionCaller.Options();
      asWritten.threads = 1;
      asWritten.constrain = "off";
      asWritten.maxTokens = 12;
      asWritten.fixTypos = 0;
      try (FunctionCaller on = model.caller(catalog, mend);
           FunctionCaller off = model.caller(catalog, asWritten)) {
        String typo = "the ligth in the kitchn, off";
        String mended = "the light in the kitchen, off";
        check(on.call(typo).equals(off.call(mended)), "fixTypos 1 reads the mended text");
        check(!off.call(typo).equals(off.call(mended)), "fixTypos 0 reads the typos");
      }
      FunctionCaller.Options noFill = new FunctionCaller.Options();
      noFill.threads = 1;
      noFill.fillArguments = false;
      try (FunctionCaller c = model.caller(catalog, noFill)) {
        // No app's adapter: the fill has nothing to do, the call is the same.
        check(c.call("turn the light on in the kitchen").equals(first), "fillArguments false");
      }
      expectError(
          FgemmaException.INVALID_ARGUMENT, "empty catalog", () -> model.caller("{\"tools\": []}"));
      expectError(
          FgemmaException.INVALID_ARGUMENT,
          "non-UTF-8 catalog",
          () ->
              FunctionCaller.fromCatalogBytes(
                  model, new byte[] {'[', '{', '"', (byte) 0xff, '"', '}', ']'}, null));
      FunctionCaller.Options bad = new FunctionCaller.Options();
      bad.dialect = "klingon";
      expectError(
          FgemmaException.INVALID_ARGUMENT, "bad dialect", () -> model.caller(catalog, bad));

      try (Session s = model.session(256, 1)) {
        Session.GenerateOptions g = new Session.GenerateOptions();
        g.temperature = 0;
        g.maxTokens = 8;
        StringBuilder streamed = new StringBuilder();
        String a = s.generate("Hello", g, (tok, text) -> streamed.append(text) != null);
        check(a.equals(streamed.toString()), "streamed text is the returned text");
        check(s.generatedTokens() <= 8, "at most 8 tokens");
        check(a.equals(s.generate("Hello", g, null)), "generation is deterministic");
        int[] count = {0};
        s.generate("Hello", g, (tok, text) -> ++count[0] < 1);
        check(count[0] <= 1, "a listener returning false stops it");
        try {
          s.generate("Hello", g, (tok, text) -> {
            throw new IllegalStateException("listener failed");
          });
          // Only when no token came (the first one was a stop token) is the listener not run.
          check(s.generatedTokens() == 0, "the listener's exception propagates");
        } catch (IllegalStateException e) {
          check(true, "the listener's exception propagates");
        }
        g.temperature = -1;
        expectError(
            FgemmaException.INVALID_ARGUMENT, "bad temperature", () -> s.generate("x", g, null));
      }
      kept = model.caller(catalog, o);
    }
    // The model handle is closed; the caller made from it still works.
    check(kept.call("turn the light on in the kitchen").equals(first), "caller outlives model");
    kept.close();
    kept.close();
    expectError(
        FgemmaException.INVALID_ARGUMENT, "closed caller", () -> kept.call("turn the light on"));
    Model closed = new Model(modelPath);
    closed.close();
    expectError(FgemmaException.INVALID_ARGUMENT, "closed model", () -> closed.caller(catalog));
    expectError(FgemmaException.INVALID_ARGUMENT, "closed model tokenize", () -> closed.vocabSize());

    if (args.length >= 5) {
      testPriorAdapters(catalog, args[2], args[3], args[4]);
    } else {
      System.out.println("SKIPPED: the tool prior's adapters (no PRIOR_MODEL PRIOR_LORA ...)");
    }

    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
