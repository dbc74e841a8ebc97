// The C ABI (include/fgemma/fgemma.h) over the C++ library: fg::CallModel / FunctionCaller for
// calls, runtime::Session + Sampler + the tokenizer for generation (what `fgemma run` does).
//
// Every entry point catches everything (no exception crosses the ABI), checks its handles
// against the registry of live handles before touching them, and reports errors as an
// fg_status plus a per-thread message.
#include "fgemma/fgemma.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fgemma/function_caller.h"
#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/call/runtime_model.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "src/text/tokenizer.h"

#ifndef FG_VERSION_STRING
#define FG_VERSION_STRING "0.0.0"
#endif

namespace {

using fg::Status;
using fg::StatusOr;

thread_local std::string g_last_error;

// ---- Handles ----------------------------------------------------------------------------

enum class Kind { kModel, kCaller, kSession };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kModel:
      return "model";
    case Kind::kCaller:
      return "caller";
    case Kind::kSession:
      return "session";
  }
  return "handle";
}

// Live handles by address: a freed handle (or a pointer fgemma never returned) is refused
// without being dereferenced.
std::mutex g_registry_mu;
std::unordered_map<const void*, Kind>& Registry() {
  static auto* r = new std::unordered_map<const void*, Kind>();  // never destroyed: atexit-safe
  return *r;
}
void Register(const void* p, Kind k) {
  std::lock_guard<std::mutex> l(g_registry_mu);
  Registry()[p] = k;
}
bool Unregister(const void* p, Kind k) {
  std::lock_guard<std::mutex> l(g_registry_mu);
  auto it = Registry().find(p);
  if (it == Registry().end() || it->second != k) return false;
  Registry().erase(it);
  return true;
}
Status CheckHandle(const void* p, Kind k) {
  if (p == nullptr) return fg::InvalidArgumentError(std::string("null ") + KindName(k));
  std::lock_guard<std::mutex> l(g_registry_mu);
  auto it = Registry().find(p);
  if (it == Registry().end() || it->second != k) {
    return fg::InvalidArgumentError(std::string("not a live ") + KindName(k) +
                                    " handle (already freed, or not one fgemma returned)");
  }
  return fg::OkStatus();
}

// What an fg_model holds; callers and sessions share it.
struct ModelState {
  std::shared_ptr<const fg::CallModel> call_model;
  const fg::runtime::Model* model = nullptr;  // inside call_model
  // The plain vocabulary of the file (the CallModel's names FunctionGemma's tokens in a base
  // vocabulary for prompting; tokenize and generate use the file's own, as `fgemma tokenize`
  // and `fgemma run` do). Built on first use.
  std::once_flag tokenizer_once;
  std::unique_ptr<fg::text::Tokenizer> tokenizer;
  Status tokenizer_status;

  StatusOr<const fg::text::Tokenizer*> Tokenizer() {
    std::call_once(tokenizer_once, [&] {
      auto t = fg::text::Tokenizer::FromGguf(model->file());
      if (t.ok()) {
        tokenizer = std::move(*t);
      } else {
        tokenizer_status = t.status();
      }
    });
    if (!tokenizer_status.ok()) return tokenizer_status;
    return tokenizer.get();
  }
};

}  // namespace

struct fg_model {
  std::shared_ptr<ModelState> state;
};

struct fg_caller {
  std::shared_ptr<ModelState> state;
  std::unique_ptr<fg::FunctionCaller> caller;
  int max_calls = 1;
};

struct fg_session {
  std::shared_ptr<ModelState> state;
  std::unique_ptr<fg::ThreadPool> pool;
  std::unique_ptr<fg::runtime::Session> session;
};

namespace {

fg_status Fail(const Status& s) {
  g_last_error = s.message();
  return static_cast<fg_status>(static_cast<int>(s.code()));
}
fg_status Report(const Status& s) {
  if (s.ok()) return FG_OK;
  return Fail(s);
}

// Runs `fn` (returning fg::Status) with every exception turned into a status.
template <typename Fn>
fg_status Guard(Fn&& fn) {
  try {
    return Report(fn());
  } catch (const std::bad_alloc&) {
    return Fail(fg::ResourceExhaustedError("out of memory"));
  } catch (const std::exception& e) {
    return Fail(fg::InternalError(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return Fail(fg::InternalError("unexpected exception"));
  }
}

Status NeedOut(const void* out, const char* what) {
  if (out == nullptr) return fg::InvalidArgumentError(std::string("null ") + what);
  return fg::OkStatus();
}

Status NeedText(const char* s, const char* what) {
  if (s == nullptr) return fg::InvalidArgumentError(std::string("null ") + what);
  if (!fg::text::IsValidUtf8(s)) {
    return fg::InvalidArgumentError(std::string("the ") + what + " is not valid UTF-8");
  }
  return fg::OkStatus();
}

char* CopyString(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

// Copies a struct that starts with `uint32_t struct_size` from the caller over `out` (which
// holds the defaults), accepting older layouts down to `oldest` bytes (the struct's size in the
// first API version that had it: the fields appended since keep their defaults) and newer ones
// (longer: the extra fields are ignored).
template <typename T>
Status CopyOptions(const T* in, T* out, const char* what, size_t oldest = sizeof(T)) {
  if (in == nullptr) return fg::OkStatus();  // defaults
  if (in->struct_size < oldest) {
    return fg::InvalidArgumentError(std::string(what) + ".struct_size is " +
                                    std::to_string(in->struct_size) + ", expected at least " +
                                    std::to_string(oldest) + " (initialize it with " + what +
                                    "_init)");
  }
  std::memcpy(out, in, std::min<size_t>(in->struct_size, sizeof(T)));
  out->struct_size = sizeof(T);
  return fg::OkStatus();
}

int64_t DefaultContext(int64_t trained) { return trained > 0 ? std::min<int64_t>(2048, trained) : 2048; }

// Adapters from the caller's array (`what`: "adapter", "prior adapter" for the messages).
StatusOr<std::vector<fg::LoraAdapterFile>> Adapters(const fg_lora* loras, size_t n,
                                                    const char* what) {
  if (n > 0 && loras == nullptr) {
    return fg::InvalidArgumentError(std::string("null ") + what + " array");
  }
  std::vector<fg::LoraAdapterFile> out;
  for (size_t i = 0; i < n; ++i) {
    if (loras[i].path == nullptr) {
      return fg::InvalidArgumentError(std::string(what) + " " + std::to_string(i) + ": null path");
    }
    out.push_back({loras[i].path, loras[i].scale});
  }
  return out;
}

Status LoadModel(const char* path, const std::vector<fg::LoraAdapterFile>& loras,
                 const std::vector<fg::LoraAdapterFile>& prior_loras, fg_model** out) {
  auto cm = fg::CallModel::Load(path, loras, prior_loras);
  if (!cm.ok()) return cm.status();
  auto state = std::make_shared<ModelState>();
  state->call_model = std::move(*cm);
  state->model = &fg::call::RuntimeModel(*state->call_model);
  auto* m = new fg_model{std::move(state)};
  Register(m, Kind::kModel);
  *out = m;
  return fg::OkStatus();
}

}  // namespace

extern "C" {

uint32_t fg_api_version(void) { return FG_API_VERSION; }
const char* fg_version(void) { return FG_VERSION_STRING; }

const char* fg_last_error(void) { return g_last_error.c_str(); }

const char* fg_status_name(fg_status status) {
  const int c = static_cast<int>(status);
  if (c < 0 || c > static_cast<int>(fg::StatusCode::kInternal)) return "UNKNOWN";
  // StatusCodeName returns a view of a static string literal: NUL-terminated.
  return fg::StatusCodeName(static_cast<fg::StatusCode>(c)).data();
}

void fg_free(void* p) { std::free(p); }

// ---- Models ------------------------------------------------------------------------------

fg_status fg_model_load(const char* path, const fg_lora* loras, size_t n_loras, fg_model** out) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(NeedOut(out, "output pointer"));
    if (path == nullptr) return fg::InvalidArgumentError("null model path");
    FG_ASSIGN_OR_RETURN(const std::vector<fg::LoraAdapterFile> adapters,
                        Adapters(loras, n_loras, "adapter"));
    return LoadModel(path, adapters, {}, out);
  });
}

void fg_model_options_init(fg_model_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
}

fg_status fg_model_load_ex(const char* path, const fg_model_options* options, fg_model** out) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(NeedOut(out, "output pointer"));
    if (path == nullptr) return fg::InvalidArgumentError("null model path");
    fg_model_options o;
    fg_model_options_init(&o);
    FG_RETURN_IF_ERROR(CopyOptions(options, &o, "fg_model_options"));
    FG_ASSIGN_OR_RETURN(const std::vector<fg::LoraAdapterFile> adapters,
                        Adapters(o.loras, o.n_loras, "adapter"));
    FG_ASSIGN_OR_RETURN(const std::vector<fg::LoraAdapterFile> prior,
                        Adapters(o.prior_loras, o.n_prior_loras, "prior adapter"));
    return LoadModel(path, adapters, prior, out);
  });
}

void fg_model_free(fg_model* model) {
  if (model != nullptr && Unregister(model, Kind::kModel)) delete model;
}

fg_status fg_model_trained_context(const fg_model* model, int64_t* out) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(model, Kind::kModel));
    FG_RETURN_IF_ERROR(NeedOut(out, "output pointer"));
    *out = model->state->call_model->trained_context();
    return fg::OkStatus();
  });
}

fg_status fg_model_vocab_size(const fg_model* model, int32_t* out) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(model, Kind::kModel));
    FG_RETURN_IF_ERROR(NeedOut(out, "output pointer"));
    FG_ASSIGN_OR_RETURN(const fg::text::Tokenizer* tk, model->state->Tokenizer());
    *out = tk->size();
    return fg::OkStatus();
  });
}

// ---- Tokenizer ---------------------------------------------------------------------------

fg_status fg_tokenize(const fg_model* model, const char* text, int add_bos, int parse_special,
                      int32_t* ids, size_t capacity, size_t* n_ids) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(model, Kind::kModel));
    FG_RETURN_IF_ERROR(NeedText(text, "text"));
    FG_RETURN_IF_ERROR(NeedOut(n_ids, "count pointer"));
    if (capacity > 0 && ids == nullptr) return fg::InvalidArgumentError("null id buffer");
    FG_ASSIGN_OR_RETURN(const fg::text::Tokenizer* tk, model->state->Tokenizer());
    const std::vector<int32_t> v = tk->Encode(text, add_bos != 0, parse_special != 0);
    *n_ids = v.size();
    std::copy_n(v.begin(), std::min(capacity, v.size()), ids);
    if (v.size() > capacity) {
      return fg::OutOfRangeError("the text has " + std::to_string(v.size()) +
                                 " tokens, the buffer holds " + std::to_string(capacity));
    }
    return fg::OkStatus();
  });
}

fg_status fg_detokenize(const fg_model* model, const int32_t* ids, size_t n_ids, int special,
                        char** out) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(model, Kind::kModel));
    FG_RETURN_IF_ERROR(NeedOut(out, "output pointer"));
    if (n_ids > 0 && ids == nullptr) return fg::InvalidArgumentError("null id array");
    FG_ASSIGN_OR_RETURN(const fg::text::Tokenizer* tk, model->state->Tokenizer());
    for (size_t i = 0; i < n_ids; ++i) {
      if (ids[i] < 0 || ids[i] >= tk->size()) {
        return fg::OutOfRangeError("token id " + std::to_string(ids[i]) + " at " +
                                   std::to_string(i) + " is outside [0, " +
                                   std::to_string(tk->size()) + ")");
      }
    }
    const std::string text = tk->Decode(std::span<const int32_t>(ids, n_ids), special != 0);
    *out = CopyString(fg::text::ToValidUtf8(text));
    return fg::OkStatus();
  });
}

// ---- Function calling --------------------------------------------------------------------

void fg_caller_options_init(fg_caller_options* o) {
  if (o == nullptr) return;
  const fg::FunctionCallerOptions d;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->dialect = "official";
  o->constrain = "call";
  o->temperature = d.temperature;
  o->top_k = d.top_k;
  o->top_p = d.top_p;
  o->seed = d.seed;
  o->max_calls = d.max_calls;
  o->max_tokens = d.max_tokens;
  o->context = d.context;
  o->threads = d.threads;
  o->cache_dir = nullptr;
  o->tool_map_json = nullptr;
  o->draft_tokens = d.draft_tokens;
  o->reuse_request_prefix = d.reuse_request_prefix ? 1 : 0;
  o->tool_channel = d.tool_channel;
  o->argument_check = d.argument_check ? 1 : 0;
  o->copy_bias = d.copy_bias;
  o->fill_arguments = d.fill_arguments ? 1 : 0;
  o->blend = d.blend;
  o->fix_typos = d.fix_typos;
}

fg_status fg_caller_create(const fg_model* model, const char* catalog_json,
                           const fg_caller_options* options, fg_caller** out) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(model, Kind::kModel));
    FG_RETURN_IF_ERROR(NeedOut(out, "output pointer"));
    if (catalog_json == nullptr) return fg::InvalidArgumentError("null catalog");
    fg_caller_options o;
    fg_caller_options_init(&o);
    // API 1.1's layout ends before fix_typos.
    FG_RETURN_IF_ERROR(
        CopyOptions(options, &o, "fg_caller_options", offsetof(fg_caller_options, fix_typos)));
    fg::FunctionCallerOptions co;
    auto str = [](const char* s, const char* what, std::string* dst) -> Status {
      if (s == nullptr) return fg::OkStatus();  // keep the default
      if (!fg::text::IsValidUtf8(s)) {
        return fg::InvalidArgumentError(std::string(what) + " is not valid UTF-8");
      }
      *dst = s;
      return fg::OkStatus();
    };
    std::string dialect = "official", constrain = "call";
    FG_RETURN_IF_ERROR(str(o.dialect, "dialect", &dialect));
    FG_RETURN_IF_ERROR(str(o.constrain, "constrain", &constrain));
    FG_ASSIGN_OR_RETURN(co.dialect, fg::ParseDialect(dialect));
    FG_ASSIGN_OR_RETURN(co.constrain, fg::ParseConstrainMode(constrain));
    if (o.cache_dir != nullptr) co.cache_dir = o.cache_dir;  // a file name: any bytes
    co.temperature = o.temperature;
    co.top_k = o.top_k;
    co.top_p = o.top_p;
    co.seed = o.seed;
    co.max_calls = o.max_calls;
    co.max_tokens = o.max_tokens;
    co.context = o.context;
    co.threads = o.threads;
    co.draft_tokens = o.draft_tokens;
    co.reuse_request_prefix = o.reuse_request_prefix != 0;
    co.tool_channel = o.tool_channel;
    co.argument_check = o.argument_check != 0;
    co.copy_bias = o.copy_bias;
    co.fill_arguments = o.fill_arguments != 0;
    co.blend = o.blend;
    co.fix_typos = o.fix_typos;
    if (o.context < 0) return fg::InvalidArgumentError("context must be >= 0");
    const int64_t trained = model->state->call_model->trained_context();
    if (o.context > 0 && trained > 0 && o.context > trained) {
      return fg::InvalidArgumentError("context " + std::to_string(o.context) +
                                      " exceeds the model's trained context of " +
                                      std::to_string(trained) + " tokens");
    }
    if (o.threads > 256) return fg::InvalidArgumentError("threads must be in [0, 256]");
    if (o.tool_map_json != nullptr) {
      std::string text;
      FG_RETURN_IF_ERROR(str(o.tool_map_json, "tool_map_json", &text));
      FG_ASSIGN_OR_RETURN(co.tool_map, fg::ParseToolMap(text));
    }
    if (!fg::text::IsValidUtf8(catalog_json)) {
      return fg::InvalidArgumentError("tool catalog: not valid UTF-8");
    }
    auto caller = fg::FunctionCaller::Create(model->state->call_model, catalog_json, co);
    if (!caller.ok()) return caller.status();
    auto* c = new fg_caller{model->state, std::move(*caller), co.max_calls};
    Register(c, Kind::kCaller);
    *out = c;
    return fg::OkStatus();
  });
}

void fg_caller_free(fg_caller* caller) {
  if (caller != nullptr && Unregister(caller, Kind::kCaller)) delete caller;
}

fg_status fg_caller_call(fg_caller* caller, const char* request, char** out_json, int* valid) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(caller, Kind::kCaller));
    FG_RETURN_IF_ERROR(NeedOut(out_json, "output pointer"));
    if (request == nullptr) return fg::InvalidArgumentError("null request");
    auto r = caller->caller->Call(request);
    if (!r.ok()) return r.status();
    // The bytes `fgemma call` prints (tools/fgemma/cmd_call.cc).
    const std::string json = r->ToJson(caller->max_calls)
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    *out_json = CopyString(json);
    if (valid != nullptr) *valid = r->validity.ok() ? 1 : 0;
    return fg::OkStatus();
  });
}

// ---- Text generation ---------------------------------------------------------------------

fg_status fg_session_create(const fg_model* model, int64_t context, int32_t threads,
                            fg_session** out) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(model, Kind::kModel));
    FG_RETURN_IF_ERROR(NeedOut(out, "output pointer"));
    if (context < 0) return fg::InvalidArgumentError("context must be >= 0");
    if (threads < 0 || threads > 256) return fg::InvalidArgumentError("threads must be in [0, 256]");
    const int64_t trained = model->state->model->config().context_length;
    if (context > 0 && trained > 0 && context > trained) {
      return fg::InvalidArgumentError("context " + std::to_string(context) +
                                      " exceeds the model's trained context of " +
                                      std::to_string(trained) + " tokens");
    }
    FG_RETURN_IF_ERROR(model->state->Tokenizer().status());
    auto s = std::make_unique<fg_session>();
    s->state = model->state;
    s->pool = std::make_unique<fg::ThreadPool>(threads > 0 ? threads
                                                           : fg::ThreadPool::DefaultThreads());
    fg::runtime::SessionOptions so;
    so.context = context > 0 ? context : DefaultContext(trained);
    so.pool = s->pool.get();
    auto session = fg::runtime::Session::Create(*s->state->model, so);
    if (!session.ok()) return session.status();
    s->session = std::move(*session);
    fg_session* p = s.release();
    Register(p, Kind::kSession);
    *out = p;
    return fg::OkStatus();
  });
}

void fg_session_free(fg_session* session) {
  if (session != nullptr && Unregister(session, Kind::kSession)) delete session;
}

void fg_generate_options_init(fg_generate_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->max_tokens = 64;
  o->temperature = 1.0;
  o->top_k = 64;
  o->top_p = 0.95;
  o->seed = 0;
  o->raw = 0;
  o->no_special = 0;
}

fg_status fg_session_generate(fg_session* session, const char* prompt,
                              const fg_generate_options* options, fg_token_callback callback,
                              void* user_data, fg_generate_result* result) {
  return Guard([&]() -> Status {
    FG_RETURN_IF_ERROR(CheckHandle(session, Kind::kSession));
    FG_RETURN_IF_ERROR(NeedText(prompt, "prompt"));
    fg_generate_options o;
    fg_generate_options_init(&o);
    FG_RETURN_IF_ERROR(CopyOptions(options, &o, "fg_generate_options"));
    if (o.max_tokens < 0) return fg::InvalidArgumentError("max_tokens must be >= 0");
    if (o.no_special && !o.raw) {
      return fg::InvalidArgumentError(
          "no_special needs raw (the chat template never parses the prompt's specials)");
    }
    fg::runtime::SamplingParams sp;
    sp.temperature = o.temperature;
    sp.top_k = o.top_k;
    sp.top_p = o.top_p;
    sp.seed = o.seed;
    FG_RETURN_IF_ERROR(fg::runtime::ValidateSampling(sp));
    FG_ASSIGN_OR_RETURN(const fg::text::Tokenizer* tkp, session->state->Tokenizer());
    const fg::text::Tokenizer& tk = *tkp;

    // The prompt exactly as `fgemma run` builds it (tools/fgemma/cmd_run.cc): template tokens
    // special, the user's text never.
    std::vector<int32_t> ids;
    if (tk.vocab().add_bos) ids.push_back(tk.vocab().bos);
    auto append = [&](std::string_view text, bool special) {
      std::vector<int32_t> v = tk.Encode(text, /*add_special=*/false, special);
      ids.insert(ids.end(), v.begin(), v.end());
    };
    if (o.raw) {
      append(prompt, o.no_special == 0);
    } else {
      append("<start_of_turn>user\n", true);
      append(prompt, false);
      append("<end_of_turn>\n<start_of_turn>model\n", true);
    }
    std::vector<int32_t> stops = {tk.vocab().eos};
    if (auto eot = tk.Find("<end_of_turn>")) stops.push_back(*eot);

    fg::runtime::Session& s = *session->session;
    const int64_t context = s.context();
    if (static_cast<int64_t>(ids.size()) > context) {
      return fg::OutOfRangeError("the prompt has " + std::to_string(ids.size()) +
                                 " tokens, more than the context of " + std::to_string(context));
    }
    fg_generate_result res{static_cast<int64_t>(ids.size()), 0, FG_STOP_LENGTH};
    if (result != nullptr) *result = res;
    s.Reset();
    if (o.max_tokens == 0) return fg::OkStatus();
    FG_RETURN_IF_ERROR(s.Append(ids));

    fg::runtime::Sampler sampler(sp);
    fg::text::StreamDecoder dec(tk);
    bool stopped_by_callback = false;
    for (int64_t i = 0; i < o.max_tokens; ++i) {
      const int32_t next = sampler.Sample(s.logits());
      if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
        res.stop_reason = FG_STOP_TOKEN;
        break;
      }
      ++res.generated_tokens;
      if (callback != nullptr) {
        const std::string piece = dec.Push(next);
        if (callback(user_data, next, piece.data(), piece.size()) != 0) {
          res.stop_reason = FG_STOP_CALLBACK;
          stopped_by_callback = true;
          break;
        }
      }
      if (i + 1 == o.max_tokens) break;
      if (s.position() >= context) {
        res.stop_reason = FG_STOP_CONTEXT;
        break;
      }
      FG_RETURN_IF_ERROR(s.Append(std::span<const int32_t>(&next, 1)));
    }
    if (callback != nullptr && !stopped_by_callback) {
      const std::string rest = dec.Flush();
      if (!rest.empty()) callback(user_data, -1, rest.data(), rest.size());
    }
    if (result != nullptr) *result = res;
    return fg::OkStatus();
  });
}

}  // extern "C"
