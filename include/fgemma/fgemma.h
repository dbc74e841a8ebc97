/* fgemma's stable C ABI: load a Gemma 3 / FunctionGemma GGUF, turn requests into function calls
 * (JSON), generate text with a token callback, tokenize. libfgemma.so exports these functions
 * and nothing else; every other binding (Python, JVM) sits on them. docs/bindings.md explains
 * the choices.
 *
 *   fg_model* m = NULL;
 *   if (fg_model_load("model.gguf", NULL, 0, &m) != FG_OK) { puts(fg_last_error()); ... }
 *   fg_caller* c = NULL;
 *   fg_caller_create(m, catalog_json, NULL, &c);      // NULL options: fgemma call's defaults
 *   char* json = NULL;
 *   fg_caller_call(c, "turn the light on in the kitchen", &json);
 *   puts(json);                                       // {"arguments":{...},"name":"set_light"}
 *   fg_free(json); fg_caller_free(c); fg_model_free(m);
 *
 * An app's own adapter and its own tool prior (fgemma tune --objective channel):
 *
 *   fg_lora calls = {"app-lora.gguf", 1.0f}, prior = {"app-prior.gguf", 1.0f};
 *   fg_model_options mo;
 *   fg_model_options_init(&mo);
 *   mo.loras = &calls; mo.n_loras = 1;
 *   mo.prior_loras = &prior; mo.n_prior_loras = 1;
 *   fg_model_load_ex("model.gguf", &mo, &m);
 *
 * Conventions
 * - Every function that can fail returns an fg_status; FG_OK is 0. On failure the message is in
 *   fg_last_error() (per thread) and the out-parameters are left as they were. No C++ exception
 *   crosses this ABI: one escaping fgemma is FG_INTERNAL (FG_RESOURCE_EXHAUSTED for bad_alloc).
 * - Strings are NUL-terminated UTF-8. Text that is not valid UTF-8 (requests, prompts, catalogs)
 *   is FG_INVALID_ARGUMENT. Strings fgemma returns are allocated by it: release them with
 *   fg_free.
 * - Handles are opaque. A NULL handle is FG_INVALID_ARGUMENT. fgemma keeps a registry of live
 *   handles, so a handle already freed (or any pointer it did not hand out) is refused with
 *   FG_INVALID_ARGUMENT instead of being dereferenced, unless its address has since been reused
 *   by a new handle of the same kind. The *_free functions accept NULL and ignore unknown
 *   pointers (a double free is harmless).
 * - Threads: fg_model is immutable and may be used from any number of threads at once (also
 *   freed while callers and sessions made from it live: they hold their own reference). An
 *   fg_caller or fg_session is used by one thread at a time (thread-compatible); different ones
 *   may run concurrently. Per-function notes below say the same.
 */
#ifndef FGEMMA_FGEMMA_H_
#define FGEMMA_FGEMMA_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define FG_API __declspec(dllexport)
#else
#define FG_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. The major number changes only when an existing
 * function or struct changes incompatibly; new functions or trailing struct fields raise the
 * minor number (structs carry their size, see fg_caller_options). 1.1 added fg_model_load_ex
 * and fg_model_options; 1.2 added fg_caller_options.fix_typos. */
#define FG_API_VERSION_MAJOR 1
#define FG_API_VERSION_MINOR 2
#define FG_API_VERSION ((FG_API_VERSION_MAJOR << 16) | FG_API_VERSION_MINOR)

/* The ABI version of the loaded library (FG_API_VERSION of the header it was built with). A
 * program checks (fg_api_version() >> 16) == FG_API_VERSION_MAJOR. Any thread. */
FG_API uint32_t fg_api_version(void);
/* The library's version, "MAJOR.MINOR.PATCH" (the project's). Static string; any thread. */
FG_API const char* fg_version(void);

/* Status codes: the values of fg::StatusCode (include/fgemma/status.h). */
typedef enum fg_status {
  FG_OK = 0,
  FG_INVALID_ARGUMENT = 1,  /* bad argument, handle, JSON, option or user text */
  FG_NOT_FOUND = 2,         /* missing file, key, tensor */
  FG_OUT_OF_RANGE = 3,      /* value outside its range (context, ids, buffer too small) */
  FG_DATA_LOSS = 4,         /* corrupt or truncated file */
  FG_UNIMPLEMENTED = 5,     /* well-formed but unsupported (a tokenizer model, a quant type) */
  FG_RESOURCE_EXHAUSTED = 6,/* out of memory */
  FG_FAILED_PRECONDITION = 7,
  FG_IO = 8,                /* the OS refused (open, read, mmap) */
  FG_INTERNAL = 9           /* a bug in fgemma */
} fg_status;

/* The message of the last failed call on this thread ("" when none). Valid until the next
 * fgemma call on this thread. */
FG_API const char* fg_last_error(void);
/* "OK", "INVALID_ARGUMENT", ... ("UNKNOWN" for other values). Static string; any thread. */
FG_API const char* fg_status_name(fg_status status);

/* Releases a string returned by fgemma (NULL is fine). Any thread. */
FG_API void fg_free(void* p);

/* ---- Models ---------------------------------------------------------------------------- */

typedef struct fg_model fg_model;

/* A LoRA adapter in llama.cpp's GGUF format and its scale (docs/adapters.md). */
typedef struct fg_lora {
  const char* path;
  float scale; /* 1 = llama.cpp's --lora */
} fg_lora;

/* Loads a Gemma 3 GGUF (memory-mapped) and its tokenizer, with `n_loras` adapters applied.
 * Errors: FG_NOT_FOUND / FG_IO (file), FG_DATA_LOSS / FG_INVALID_ARGUMENT (not a valid model or
 * adapter). *out is a new handle on success. Any thread. */
FG_API fg_status fg_model_load(const char* path, const fg_lora* loras, size_t n_loras,
                               fg_model** out);

/* Options of fg_model_load_ex (since API 1.1). Fill with fg_model_options_init (which sets
 * struct_size and no adapters), then change fields. A library newer than the header reads only
 * struct_size bytes. The arrays are read during the call only. */
typedef struct fg_model_options {
  uint32_t struct_size; /* sizeof(fg_model_options) */
  const fg_lora* loras; /* the adapters applied to the model (fg_model_load's) */
  size_t n_loras;
  /* Adapters the noisy-channel tool prior (fg_caller_options.tool_channel) runs with instead of
   * `loras`: a second view of the same mapped base file. Each must be trained for the prior
   * (`fgemma tune --objective both|channel`, GGUF key fgemma.lora.channel = "adapted"), else
   * FG_INVALID_ARGUMENT. An app's adapter tuned on its calls alone keeps a trained prior this
   * way (the CLI's --prior-lora; docs/tuning.md). None: the prior runs the base model, or
   * `loras` when they are marked so. Calls decode with `loras` either way. */
  const fg_lora* prior_loras;
  size_t n_prior_loras;
} fg_model_options;

/* Sets struct_size and the defaults (no adapters). Any thread. */
FG_API void fg_model_options_init(fg_model_options* options);

/* fg_model_load with options (since API 1.1); `options` NULL: no adapters (fg_model_load(path,
 * NULL, 0, out)). Errors: those of fg_model_load; FG_INVALID_ARGUMENT for a struct_size below
 * sizeof(fg_model_options) (uninitialized options), a NULL array with a count above 0, a NULL
 * adapter path, or a prior adapter not trained for the tool prior; FG_NOT_FOUND for a missing
 * adapter file. *out is a new handle on success. Any thread. */
FG_API fg_status fg_model_load_ex(const char* path, const fg_model_options* options,
                                  fg_model** out);
/* Drops the handle; the model lives on while callers or sessions made from it exist. */
FG_API void fg_model_free(fg_model* model);
/* gemma3.context_length (0 when the file has none), the vocabulary size. */
FG_API fg_status fg_model_trained_context(const fg_model* model, int64_t* out);
FG_API fg_status fg_model_vocab_size(const fg_model* model, int32_t* out);

/* ---- Tokenizer (the model's; llama.cpp's ids exactly, as `fgemma tokenize`) ------------ */

/* Text -> ids. add_bos: prepend BOS when the vocabulary asks for it; parse_special: control-
 * token texts in `text` ("<start_of_turn>") become those tokens. Writes min(capacity, n) ids to
 * `ids` (may be NULL when capacity is 0) and n to *n_ids; FG_OUT_OF_RANGE when n > capacity
 * (call again with *n_ids). `text` must be valid UTF-8. Any thread. */
FG_API fg_status fg_tokenize(const fg_model* model, const char* text, int add_bos,
                             int parse_special, int32_t* ids, size_t capacity, size_t* n_ids);
/* Ids -> text (control tokens as their text when `special`), a new string for fg_free. Bytes
 * that do not form valid UTF-8 (a sequence cut by the ids given) become U+FFFD. Ids out of range
 * are FG_OUT_OF_RANGE. Any thread. */
FG_API fg_status fg_detokenize(const fg_model* model, const int32_t* ids, size_t n_ids,
                               int special, char** out);

/* ---- Function calling ------------------------------------------------------------------ */

typedef struct fg_caller fg_caller;

/* Options of a caller: the FunctionCallerOptions of include/fgemma/function_caller.h. Fill with
 * fg_caller_options_init (which sets struct_size and `fgemma call`'s defaults), then change
 * fields. A library newer than the header reads only struct_size bytes. */
typedef struct fg_caller_options {
  uint32_t struct_size;      /* sizeof(fg_caller_options) */
  const char* dialect;       /* "official" (default) or "compact" */
  const char* constrain;     /* "call" (default), "off", "auto" ("call" on a base Gemma 3) */
  double temperature;        /* 0 = greedy (default) */
  int64_t top_k;             /* 64 */
  double top_p;              /* 0.95 */
  uint64_t seed;             /* 0 */
  int32_t max_calls;         /* 1 */
  int64_t max_tokens;        /* 256 */
  int64_t context;           /* 0: 2048 or the model's trained context if shorter */
  int32_t threads;           /* 0: the cores this process may use */
  const char* cache_dir;     /* NULL or "": the catalog prefix is kept in memory only */
  const char* tool_map_json; /* compact dialect: {"0": "set_lights", ...}; NULL: none */
  int32_t draft_tokens;      /* 2 (0 = off, at most 16) */
  int32_t reuse_request_prefix; /* 1 */
  double tool_channel;          /* -1: the noisy-channel tool prior at weight 4 for a base Gemma 3
                                 * vocabulary, off for FunctionGemma; 0: off; > 0: that weight */
  int32_t argument_check;       /* 1: with the tool channel on, optional arguments the request is
                                 * likelier without are dropped from the calls and enum values it
                                 * is much likelier with another member of replaced; 0: off */
  double copy_bias;             /* -1: the copy prior at bias 8 for a base Gemma 3 vocabulary,
                                 * off for FunctionGemma; 0: off; > 0: that bias */
  int32_t fill_arguments;       /* 1: with an app's adapter (`fgemma tune --tools`) and a tool
                                 * prior's model of its own (prior adapters), an optional argument
                                 * the app's examples never gave, left out of the call, is taken
                                 * from the prior's model's call of the same function; 0: off */
  double blend;                 /* 0.4: with such an adapter and prior's model, both decode the
                                 * call together, each token the app's adapter gives its first
                                 * choice under 97 % chosen by (1 - blend) log p(app) + blend
                                 * log p(prior's model); 0: off; below 1 */
  int32_t fix_typos;            /* (1.2) -1: a request word the model's vocabulary does not know
                                 * that is one edit from exactly one word of the catalog (names,
                                 * descriptions, keys, enum members, examples) is read as that
                                 * word, for a base Gemma 3 vocabulary; off for FunctionGemma;
                                 * 0: off; 1: on. A struct of 1.1's size keeps -1 */
  /* A field appended here must be 8-byte aligned (int64_t, uint64_t, double or a pointer): on
   * LP64 a 4-byte one would sit in the padding after fix_typos, the struct's size would not
   * change, and a 1.2 program's padding bytes would be read as its value. */
} fg_caller_options;

/* Sets struct_size and the defaults. Any thread. */
FG_API void fg_caller_options_init(fg_caller_options* options);

/* A caller for one tool catalog (JSON text: tool_catalog.h lists the accepted shapes); the
 * catalog part of the prompt is prefilled here. `options` may be NULL (the defaults).
 * Errors: FG_INVALID_ARGUMENT for a bad catalog or options (the message names the problem),
 * FG_NOT_FOUND / FG_IO for an unusable cache_dir. Any thread (the model may be shared). */
FG_API fg_status fg_caller_create(const fg_model* model, const char* catalog_json,
                                  const fg_caller_options* options, fg_caller** out);
FG_API void fg_caller_free(fg_caller* caller);

/* One request in, the JSON `fgemma call` prints out (the same bytes, no newline), a new string
 * for fg_free: with max_calls 1 and a valid call, {"arguments":{...},"name":...}; with
 * max_calls > 1, an array of calls; when the model's output was not a valid call (possible
 * without a grammar, or when max_tokens cut it), {"calls":[...],"content":...,"error":WHY} and
 * *valid (if not NULL) is 0 -- that is not an error status. Errors: FG_INVALID_ARGUMENT for an
 * empty or non-UTF-8 request, FG_OUT_OF_RANGE when the prompt does not fit the context.
 * One thread at a time per caller. */
FG_API fg_status fg_caller_call(fg_caller* caller, const char* request, char** out_json,
                                int* valid);

/* ---- Text generation ------------------------------------------------------------------- */

typedef struct fg_session fg_session;

/* A session: the KV caches and threads of one generation at a time (`fgemma run`).
 * context 0: 2048 or the model's trained context if shorter; threads 0: the usable cores.
 * One thread at a time per session. */
FG_API fg_status fg_session_create(const fg_model* model, int64_t context, int32_t threads,
                                   fg_session** out);
FG_API void fg_session_free(fg_session* session);

typedef struct fg_generate_options {
  uint32_t struct_size; /* sizeof(fg_generate_options) */
  int64_t max_tokens;   /* 64 */
  double temperature;   /* 1.0 (the model card's); 0 = greedy */
  int64_t top_k;        /* 64 */
  double top_p;         /* 0.95 */
  uint64_t seed;        /* 0 */
  int32_t raw;          /* 0: the Gemma chat template around the prompt; 1: the prompt as is */
  int32_t no_special;   /* with raw: control-token text in the prompt stays text */
} fg_generate_options;

FG_API void fg_generate_options_init(fg_generate_options* options);

/* Called for each generated token with the text it completes (may be empty while a UTF-8
 * sequence is incomplete; not NUL-terminated). After the last token, if bytes are still held
 * (an incomplete sequence), once more with token -1. Return 0 to go on, anything else to stop
 * (the generation then ends with FG_OK and stop reason FG_STOP_CALLBACK). */
typedef int (*fg_token_callback)(void* user_data, int32_t token, const char* text, size_t len);

typedef enum fg_stop_reason {
  FG_STOP_TOKEN = 0,    /* <eos> or <end_of_turn> */
  FG_STOP_LENGTH = 1,   /* max_tokens */
  FG_STOP_CONTEXT = 2,  /* the context is full */
  FG_STOP_CALLBACK = 3  /* the callback asked to stop */
} fg_stop_reason;

typedef struct fg_generate_result {
  int64_t prompt_tokens;
  int64_t generated_tokens; /* the stop token excluded */
  int32_t stop_reason;      /* fg_stop_reason */
} fg_generate_result;

/* Generates from `prompt` (the session starts afresh: same prompt and options, same tokens as
 * `fgemma run`). `options` may be NULL (defaults), `callback` NULL (tokens only counted),
 * `result` NULL. Errors: FG_INVALID_ARGUMENT for a non-UTF-8 prompt or bad sampling options,
 * FG_OUT_OF_RANGE when the prompt does not fit the context. One thread at a time per session;
 * the callback runs on the calling thread. */
FG_API fg_status fg_session_generate(fg_session* session, const char* prompt,
                                     const fg_generate_options* options,
                                     fg_token_callback callback, void* user_data,
                                     fg_generate_result* result);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FGEMMA_FGEMMA_H_ */
