/* The C ABI from C (libfgemma.so): every function once on a model, and every kind of bad input
 * (null handles and pointers, freed handles, invalid catalogs and options, non-UTF-8 text) an
 * error status with a message, never a crash. Run under ASan by `make test-asan`.
 *
 * Then fg_model_load_ex with prior adapters (the noisy-channel tool prior's) on PRIOR_MODEL, a
 * tiny model whose attention reaches the tools' texts: PRIOR_LORA trained for its tool prior on
 * tests/bindings/prior_data.jsonl (`fgemma tune --objective channel`), UNMARKED_LORA an adapter
 * that was not (`fgemma mklora`); tests/bindings/CMakeLists.txt makes the three.
 *
 * Usage: c_api_test MODEL.gguf CATALOG.json PRIOR_MODEL.gguf PRIOR_LORA.gguf UNMARKED_LORA.gguf
 * Prints one line per check and "N passed, N failed" at the end; exit 0 when none failed. */
#include <fgemma/fgemma.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_passed, g_failed;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (cond) {                                                                  \
      ++g_passed;                                                                \
    } else {                                                                     \
      ++g_failed;                                                                \
      fprintf(stderr, "%s:%d: FAILED: %s (last error: %s)\n", __FILE__, __LINE__, \
              #cond, fg_last_error());                                           \
    }                                                                            \
  } while (0)

/* An error with a non-empty message. */
#define CHECK_ERR(expr, code)                                                       \
  do {                                                                              \
    fg_status s_ = (expr);                                                          \
    CHECK(s_ == (code));                                                            \
    CHECK(fg_last_error()[0] != '\0');                                              \
    if (s_ == (code)) printf("ok   %-22s %s\n", fg_status_name(s_), fg_last_error()); \
  } while (0)

static char* ReadFile(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* s = (char*)malloc((size_t)n + 1);
  if (s == NULL || fread(s, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(s);
    return NULL;
  }
  s[n] = '\0';
  fclose(f);
  return s;
}

struct Collect {
  char text[4096];
  size_t len;
  int tokens;
  int stop_after; /* stop after this many tokens (0: never) */
};

static int OnToken(void* user, int32_t token, const char* text, size_t len) {
  struct Collect* c = (struct Collect*)user;
  if (c->len + len < sizeof(c->text)) {
    memcpy(c->text + c->len, text, len);
    c->len += len;
    c->text[c->len] = '\0';
  }
  if (token >= 0) ++c->tokens;
  return c->stop_after > 0 && c->tokens >= c->stop_after;
}

/* The trained requests of tests/bindings/prior_data.jsonl and their tools. */
static const char* const kPriorRequests[][2] = {{"turn the light on in the kitchen", "set_light"},
                                                {"lights off in the hall", "set_light"},
                                                {"heat the house in eco mode", "set_mode"},
                                                {"switch the thermostat to cool", "set_mode"},
                                                {"stop the music", "stop_music"},
                                                {"silence please", "stop_music"}};
#define N_PRIOR_REQUESTS (sizeof(kPriorRequests) / sizeof(kPriorRequests[0]))

/* The call's JSON for each trained request (out[i], fg_free them), on a new caller of `model`
 * with the tool prior at `tool_channel`; 0 when a step failed. */
static int CallAll(const fg_model* model, const char* catalog, double tool_channel,
                   char* out[N_PRIOR_REQUESTS]) {
  fg_caller_options o;
  fg_caller_options_init(&o);
  o.threads = 1;
  o.tool_channel = tool_channel;
  fg_caller* caller = NULL;
  int ok = fg_caller_create(model, catalog, &o, &caller) == FG_OK;
  for (size_t i = 0; i < N_PRIOR_REQUESTS; ++i) {
    out[i] = NULL;
    int valid = 0;
    if (ok) ok = fg_caller_call(caller, kPriorRequests[i][0], &out[i], &valid) == FG_OK && valid;
  }
  fg_caller_free(caller);
  return ok;
}

/* How many calls name their request's trained tool. */
static int Trained(char* const calls[N_PRIOR_REQUESTS]) {
  int n = 0;
  for (size_t i = 0; i < N_PRIOR_REQUESTS; ++i) {
    char want[64];
    snprintf(want, sizeof(want), "\"name\":\"%s\"", kPriorRequests[i][1]);
    n += calls[i] != NULL && strstr(calls[i], want) != NULL;
  }
  return n;
}

static int SameCalls(char* const a[N_PRIOR_REQUESTS], char* const b[N_PRIOR_REQUESTS]) {
  for (size_t i = 0; i < N_PRIOR_REQUESTS; ++i) {
    if (a[i] == NULL || b[i] == NULL || strcmp(a[i], b[i]) != 0) return 0;
  }
  return 1;
}

static void PrintCalls(const char* what, char* const calls[N_PRIOR_REQUESTS]) {
  for (size_t i = 0; i < N_PRIOR_REQUESTS; ++i) {
    printf("%s %-34s %s\n", what, kPriorRequests[i][0], calls[i] ? calls[i] : "(none)");
  }
}

static void FreeCalls(char* calls[N_PRIOR_REQUESTS]) {
  for (size_t i = 0; i < N_PRIOR_REQUESTS; ++i) {
    fg_free(calls[i]);
    calls[i] = NULL;
  }
}

/* fg_model_load_ex: its options, the prior adapters' errors, and the prior's effect. */
static void TestPriorAdapters(const char* catalog, const char* model_path, const char* prior_path,
                              const char* unmarked_path) {
  fg_model* m = NULL;
  fg_model_options mo;
  fg_model_options_init(&mo);
  CHECK(mo.struct_size == sizeof(fg_model_options));
  CHECK(mo.loras == NULL && mo.n_loras == 0 && mo.prior_loras == NULL && mo.n_prior_loras == 0);
  fg_model_options_init(NULL); /* ignored */

  /* Bad arguments. */
  CHECK_ERR(fg_model_load_ex(NULL, &mo, &m), FG_INVALID_ARGUMENT);
  CHECK_ERR(fg_model_load_ex(model_path, &mo, NULL), FG_INVALID_ARGUMENT);
  CHECK_ERR(fg_model_load_ex("/nonexistent/model.gguf", &mo, &m), FG_NOT_FOUND);
  mo.struct_size = 0; /* not initialized */
  CHECK_ERR(fg_model_load_ex(model_path, &mo, &m), FG_INVALID_ARGUMENT);
  CHECK(strstr(fg_last_error(), "struct_size") != NULL);
  mo.struct_size = (uint32_t)sizeof(fg_model_options) - 1;
  CHECK_ERR(fg_model_load_ex(model_path, &mo, &m), FG_INVALID_ARGUMENT);
  fg_model_options_init(&mo);
  mo.n_loras = 1; /* a count without an array */
  CHECK_ERR(fg_model_load_ex(model_path, &mo, &m), FG_INVALID_ARGUMENT);
  fg_model_options_init(&mo);
  mo.n_prior_loras = 2;
  CHECK_ERR(fg_model_load_ex(model_path, &mo, &m), FG_INVALID_ARGUMENT);
  CHECK(strstr(fg_last_error(), "prior adapter") != NULL);
  fg_lora null_path = {NULL, 1.0f};
  mo.prior_loras = &null_path;
  mo.n_prior_loras = 1;
  CHECK_ERR(fg_model_load_ex(model_path, &mo, &m), FG_INVALID_ARGUMENT);
  CHECK(strstr(fg_last_error(), "null path") != NULL);

  /* A prior adapter must be one trained for the prior; the same file is a fine call adapter. */
  fg_lora unmarked = {unmarked_path, 1.0f}, prior = {prior_path, 1.0f},
          missing = {"/nonexistent/prior.gguf", 1.0f};
  fg_model_options_init(&mo);
  mo.prior_loras = &unmarked;
  mo.n_prior_loras = 1;
  CHECK_ERR(fg_model_load_ex(model_path, &mo, &m), FG_INVALID_ARGUMENT);
  CHECK(strstr(fg_last_error(), "not trained for the tool prior") != NULL);
  mo.prior_loras = &missing;
  mo.n_prior_loras = 1;
  CHECK_ERR(fg_model_load_ex(model_path, &mo, &m), FG_NOT_FOUND);
  CHECK(m == NULL);
  fg_model_options_init(&mo);
  mo.loras = &unmarked;
  mo.n_loras = 1;
  CHECK(fg_model_load_ex(model_path, &mo, &m) == FG_OK);
  fg_model_free(m);
  m = NULL;

  /* NULL options: fg_model_load with no adapters. */
  fg_model *plain = NULL, *legacy = NULL, *with_prior = NULL, *both = NULL;
  CHECK(fg_model_load_ex(model_path, NULL, &plain) == FG_OK);
  CHECK(fg_model_load(model_path, NULL, 0, &legacy) == FG_OK);
  fg_model_options_init(&mo);
  mo.prior_loras = &prior;
  mo.n_prior_loras = 1;
  CHECK(fg_model_load_ex(model_path, &mo, &with_prior) == FG_OK);
  /* An app's own call adapter beside its own prior. */
  mo.loras = &unmarked;
  mo.n_loras = 1;
  CHECK(fg_model_load_ex(model_path, &mo, &both) == FG_OK);
  if (plain == NULL || legacy == NULL || with_prior == NULL || both == NULL) {
    fg_model_free(plain);
    fg_model_free(legacy);
    fg_model_free(with_prior);
    fg_model_free(both);
    return;
  }

  /* With the prior weighted to drown the model's own choice (50), the trained prior names each
   * trained request's tool; the base model's prior does not (on this model: none of the six). */
  char* a[N_PRIOR_REQUESTS];
  char* b[N_PRIOR_REQUESTS];
  CHECK(CallAll(with_prior, catalog, 50, a));
  CHECK(Trained(a) == (int)N_PRIOR_REQUESTS);
  PrintCalls("prior", a);
  FreeCalls(a);
  CHECK(CallAll(both, catalog, 50, a));
  CHECK(Trained(a) == (int)N_PRIOR_REQUESTS);
  FreeCalls(a);
  CHECK(CallAll(plain, catalog, 50, a));
  CHECK(Trained(a) < (int)N_PRIOR_REQUESTS);
  PrintCalls("base ", a);
  CHECK(CallAll(legacy, catalog, 50, b));
  CHECK(SameCalls(a, b)); /* NULL options == fg_model_load */
  FreeCalls(a);
  FreeCalls(b);
  /* The prior off: the calls are the model's own, the prior's adapter does not decode them. */
  CHECK(CallAll(with_prior, catalog, 0, a));
  CHECK(CallAll(plain, catalog, 0, b));
  CHECK(SameCalls(a, b));
  FreeCalls(a);
  FreeCalls(b);
  fg_model_free(plain);
  fg_model_free(legacy);
  fg_model_free(with_prior);
  fg_model_free(both);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr,
            "usage: c_api_test MODEL.gguf CATALOG.json PRIOR_MODEL.gguf PRIOR_LORA.gguf "
            "UNMARKED_LORA.gguf\n");
    return 2;
  }
  char* catalog = ReadFile(argv[2]);
  if (catalog == NULL) {
    fprintf(stderr, "cannot read %s\n", argv[2]);
    return 2;
  }

  /* Versions. */
  CHECK((fg_api_version() >> 16) == FG_API_VERSION_MAJOR);
  CHECK(fg_api_version() == FG_API_VERSION);
  CHECK(strlen(fg_version()) >= 5);
  CHECK(strcmp(fg_status_name(FG_OK), "OK") == 0);
  CHECK(strcmp(fg_status_name(FG_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
  CHECK(strcmp(fg_status_name((fg_status)99), "UNKNOWN") == 0);

  /* Loading: bad paths and arguments. */
  fg_model* model = NULL;
  CHECK_ERR(fg_model_load(NULL, NULL, 0, &model), FG_INVALID_ARGUMENT);
  CHECK_ERR(fg_model_load(argv[1], NULL, 0, NULL), FG_INVALID_ARGUMENT);
  CHECK_ERR(fg_model_load(argv[1], NULL, 1, &model), FG_INVALID_ARGUMENT);
  CHECK_ERR(fg_model_load("/nonexistent/model.gguf", NULL, 0, &model), FG_NOT_FOUND);
  CHECK(fg_model_load(argv[2], NULL, 0, &model) != FG_OK); /* a JSON file */
  {
    fg_lora bad = {"/nonexistent/adapter.gguf", 1.0f};
    fg_status s = fg_model_load(argv[1], &bad, 1, &model);
    CHECK(s != FG_OK);
  }
  CHECK(model == NULL);
  CHECK(fg_model_load(argv[1], NULL, 0, &model) == FG_OK);
  CHECK(model != NULL);
  if (model == NULL) goto done;

  int64_t trained = -1;
  int32_t vocab = -1;
  CHECK(fg_model_trained_context(model, &trained) == FG_OK && trained > 0);
  CHECK(fg_model_vocab_size(model, &vocab) == FG_OK && vocab > 0);
  CHECK_ERR(fg_model_trained_context(NULL, &trained), FG_INVALID_ARGUMENT);
  CHECK_ERR(fg_model_vocab_size(model, NULL), FG_INVALID_ARGUMENT);
  /* A pointer fgemma never returned is refused, not dereferenced. */
  CHECK_ERR(fg_model_vocab_size((const fg_model*)catalog, &vocab), FG_INVALID_ARGUMENT);

  /* Tokenizer. */
  {
    int32_t ids[64];
    size_t n = 0;
    CHECK(fg_tokenize(model, "turn the light on", 1, 0, ids, 64, &n) == FG_OK);
    CHECK(n >= 2);
    size_t need = 0;
    CHECK_ERR(fg_tokenize(model, "turn the light on", 1, 0, ids, 1, &need), FG_OUT_OF_RANGE);
    CHECK(need == n);
    CHECK(fg_tokenize(model, "turn the light on", 1, 0, NULL, 0, &need) == FG_OUT_OF_RANGE);
    CHECK_ERR(fg_tokenize(model, "bad \xff\xfe utf-8", 1, 0, ids, 64, &n), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_tokenize(model, NULL, 1, 0, ids, 64, &n), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_tokenize(model, "x", 1, 0, NULL, 64, &n), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_tokenize(NULL, "x", 1, 0, ids, 64, &n), FG_INVALID_ARGUMENT);
    char* text = NULL;
    CHECK(fg_tokenize(model, "turn the light on", 0, 0, ids, 64, &n) == FG_OK);
    CHECK(fg_detokenize(model, ids, n, 0, &text) == FG_OK);
    CHECK(text != NULL && strcmp(text, "turn the light on") == 0);
    fg_free(text);
    int32_t bad_ids[2] = {1, -5};
    CHECK_ERR(fg_detokenize(model, bad_ids, 2, 0, &text), FG_OUT_OF_RANGE);
    bad_ids[1] = vocab;
    CHECK_ERR(fg_detokenize(model, bad_ids, 2, 0, &text), FG_OUT_OF_RANGE);
    CHECK_ERR(fg_detokenize(model, NULL, 2, 0, &text), FG_INVALID_ARGUMENT);
  }

  /* Function calling: bad catalogs and options. */
  {
    fg_caller* caller = NULL;
    CHECK_ERR(fg_caller_create(NULL, catalog, NULL, &caller), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_create(model, NULL, NULL, &caller), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_create(model, catalog, NULL, NULL), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_create(model, "{not json", NULL, &caller), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_create(model, "{\"tools\": []}", NULL, &caller), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_create(model, "[{\"name\": \"a\xff\"}]", NULL, &caller),
              FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_create(model, "", NULL, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options o;
    fg_caller_options_init(&o);
    o.dialect = "klingon";
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    o.max_calls = 0;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    o.top_p = 2.0;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    o.context = trained + 1;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    CHECK(o.argument_check == 1 && o.copy_bias == -1 && o.fill_arguments == 1);
    CHECK(o.blend > 0 && o.blend < 1);
    o.copy_bias = -3;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    o.blend = 1.0;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    o.struct_size = 8; /* an uninitialized or foreign struct */
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    o.dialect = "compact";
    o.tool_map_json = "{\"0\": 5}";
    CHECK_ERR(fg_caller_create(model, catalog, &o, &caller), FG_INVALID_ARGUMENT);
    CHECK(caller == NULL);

    fg_caller_options_init(&o);
    o.threads = 1;
    CHECK(fg_caller_create(model, catalog, &o, &caller) == FG_OK);
    CHECK(caller != NULL);
    char* json = NULL;
    int valid = -1;
    CHECK(fg_caller_call(caller, "turn the light on in the kitchen", &json, &valid) == FG_OK);
    CHECK(json != NULL && json[0] == '{');
    CHECK(valid == 1);
    if (json != NULL) printf("call: %s\n", json);
    char* again = NULL;
    CHECK(fg_caller_call(caller, "turn the light on in the kitchen", &again, NULL) == FG_OK);
    CHECK(json != NULL && again != NULL && strcmp(json, again) == 0); /* deterministic */
    fg_free(again);
    fg_free(json);
    json = NULL;
    CHECK_ERR(fg_caller_call(caller, "", &json, NULL), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_call(caller, "  \n", &json, NULL), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_call(caller, "caf\xc3", &json, NULL), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_call(caller, NULL, &json, NULL), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_call(caller, "hi", NULL, NULL), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_caller_call(NULL, "hi", &json, NULL), FG_INVALID_ARGUMENT);
    CHECK(json == NULL);
    /* The model handle may go before its callers: they keep the model alive. */
    fg_caller_free(caller);
    CHECK_ERR(fg_caller_call(caller, "hi", &json, NULL), FG_INVALID_ARGUMENT); /* freed */
    fg_caller_free(caller); /* a double free is ignored */
  }

  /* Typo mending (1.2's fix_typos): 1 reads "ligth" and "kitchn" as the catalog's words (the
   * model's 1,024-token vocabulary knows "light" and "kitchen" whole and neither typo), so the
   * output equals that of the mended request read with mending off; 0 reads the typos as
   * written, and so does -1 (the default) on this FunctionGemma vocabulary. A struct of 1.1's
   * size (it ends before fix_typos) keeps the default. Unconstrained: this random model's
   * constrained call is the same for both texts, its free text is not. */
  {
    const char* typo = "the ligth in the kitchn, off";
    const char* mended = "the light in the kitchen, off";
    fg_caller_options o;
    fg_caller_options_init(&o);
    CHECK(o.fix_typos == -1);
    o.threads = 1;
    o.constrain = "off";
    o.max_tokens = 12;
    fg_caller *on = NULL, *off = NULL, *by_default = NULL, *old_layout = NULL;
    o.fix_typos = 1;
    CHECK(fg_caller_create(model, catalog, &o, &on) == FG_OK);
    o.fix_typos = 0;
    CHECK(fg_caller_create(model, catalog, &o, &off) == FG_OK);
    o.fix_typos = -1;
    CHECK(fg_caller_create(model, catalog, &o, &by_default) == FG_OK);
    o.fix_typos = 7; /* beyond a 1.1 struct: not read */
    o.struct_size = (uint32_t)offsetof(fg_caller_options, fix_typos);
    CHECK(fg_caller_create(model, catalog, &o, &old_layout) == FG_OK);
    fg_caller_options_init(&o);
    o.struct_size = (uint32_t)offsetof(fg_caller_options, fix_typos) - 1;
    fg_caller* refused = NULL;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &refused), FG_INVALID_ARGUMENT);
    fg_caller_options_init(&o);
    o.fix_typos = 2;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &refused), FG_INVALID_ARGUMENT);
    CHECK(strstr(fg_last_error(), "fix_typos") != NULL);
    o.fix_typos = -2;
    CHECK_ERR(fg_caller_create(model, catalog, &o, &refused), FG_INVALID_ARGUMENT);
    CHECK(refused == NULL);
    char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    CHECK(fg_caller_call(on, typo, &a, NULL) == FG_OK);
    CHECK(fg_caller_call(off, mended, &b, NULL) == FG_OK);
    CHECK(fg_caller_call(off, typo, &c, NULL) == FG_OK);
    CHECK(fg_caller_call(by_default, typo, &d, NULL) == FG_OK);
    CHECK(fg_caller_call(old_layout, typo, &e, NULL) == FG_OK);
    CHECK(a && b && c && d && e);
    if (a && b && c && d && e) {
      printf("typo mended: %s\nas written: %s\n", a, c);
      CHECK(strcmp(a, b) == 0);
      CHECK(strcmp(a, c) != 0); /* the mending changed this call */
      CHECK(strcmp(c, d) == 0);
      CHECK(strcmp(c, e) == 0);
    }
    fg_free(a);
    fg_free(b);
    fg_free(c);
    fg_free(d);
    fg_free(e);
    fg_caller_free(on);
    fg_caller_free(off);
    fg_caller_free(by_default);
    fg_caller_free(old_layout);
  }

  /* Generation. */
  {
    fg_session* session = NULL;
    CHECK_ERR(fg_session_create(NULL, 0, 1, &session), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_session_create(model, -1, 1, &session), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_session_create(model, trained + 1, 1, &session), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_session_create(model, 0, -3, &session), FG_INVALID_ARGUMENT);
    CHECK(fg_session_create(model, 256, 1, &session) == FG_OK);
    fg_generate_options g;
    fg_generate_options_init(&g);
    g.temperature = 0;
    g.max_tokens = 8;
    struct Collect a = {{0}, 0, 0, 0}, b = {{0}, 0, 0, 0};
    fg_generate_result r;
    CHECK(fg_session_generate(session, "Hello", &g, OnToken, &a, &r) == FG_OK);
    CHECK(r.prompt_tokens > 2);
    CHECK(r.generated_tokens == a.tokens);
    CHECK(r.generated_tokens <= 8);
    CHECK(fg_session_generate(session, "Hello", &g, OnToken, &b, NULL) == FG_OK);
    CHECK(a.len == b.len && memcmp(a.text, b.text, a.len) == 0); /* starts afresh */
    struct Collect c = {{0}, 0, 0, 1};
    g.max_tokens = 8;
    CHECK(fg_session_generate(session, "Hello", &g, OnToken, &c, &r) == FG_OK);
    CHECK(c.tokens <= 1);
    CHECK(r.generated_tokens == 0 || r.stop_reason == FG_STOP_CALLBACK);
    CHECK(fg_session_generate(session, "Hello", NULL, NULL, NULL, NULL) == FG_OK);
    CHECK_ERR(fg_session_generate(session, "\xc0\xaf", &g, OnToken, &a, NULL),
              FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_session_generate(session, NULL, &g, OnToken, &a, NULL), FG_INVALID_ARGUMENT);
    CHECK_ERR(fg_session_generate(NULL, "Hello", &g, OnToken, &a, NULL), FG_INVALID_ARGUMENT);
    g.temperature = -1;
    CHECK_ERR(fg_session_generate(session, "Hello", &g, OnToken, &a, NULL), FG_INVALID_ARGUMENT);
    fg_generate_options_init(&g);
    g.no_special = 1;
    CHECK_ERR(fg_session_generate(session, "Hello", &g, OnToken, &a, NULL), FG_INVALID_ARGUMENT);
    fg_generate_options_init(&g);
    {
      /* A prompt longer than the context (256). */
      size_t n = 4000;
      char* long_prompt = (char*)malloc(n + 1);
      for (size_t i = 0; i < n; ++i) long_prompt[i] = (i % 2) ? ' ' : 'a' + (char)(i % 26);
      long_prompt[n] = '\0';
      CHECK_ERR(fg_session_generate(session, long_prompt, &g, NULL, NULL, NULL), FG_OUT_OF_RANGE);
      free(long_prompt);
    }
    fg_model_free(model); /* the session keeps the model alive */
    CHECK_ERR(fg_model_vocab_size(model, &vocab), FG_INVALID_ARGUMENT); /* freed */
    model = NULL;
    g.temperature = 0;
    struct Collect d = {{0}, 0, 0, 0};
    g.max_tokens = 8;
    CHECK(fg_session_generate(session, "Hello", &g, OnToken, &d, NULL) == FG_OK);
    CHECK(d.len == a.len && memcmp(d.text, a.text, a.len) == 0);
    fg_session_free(session);
    CHECK_ERR(fg_session_generate(session, "Hello", &g, NULL, NULL, NULL), FG_INVALID_ARGUMENT);
    fg_session_free(session);
  }
  TestPriorAdapters(catalog, argv[3], argv[4], argv[5]);
  fg_model_free(NULL);
  fg_caller_free(NULL);
  fg_session_free(NULL);
  fg_free(NULL);

done:
  fg_model_free(model);
  free(catalog);
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
