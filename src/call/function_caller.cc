// FunctionCaller: prompt -> cached catalog prefix -> (grammar-guided) decoding -> parsed call.
#include "fgemma/function_caller.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "src/base/mapped_file.h"
#include "src/base/thread_pool.h"
#include "src/call/decode_head.h"
#include "src/call/logit_processors.h"
#include "src/call/prefix_cache.h"
#include "src/call/prompt.h"
#include "src/call/runtime_model.h"
#include "src/call/tool_channel.h"
#include "src/call/training_data.h"
#include "src/call/typos.h"
#include "src/kernels/cpu.h"
#include "src/model/gemma3/forward.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "src/text/call_grammar.h"
#include "src/text/call_parser.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg {

struct CallModel::Impl {
  std::string path;
  std::unique_ptr<runtime::Model> model;
  // The tool prior's model (CallModel::Load's prior_loras); null: `model`.
  std::unique_ptr<runtime::Model> prior_model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  // Computed by the first caller that needs them (std::call_once; the model is shared):
  // ModelIdentity for a cache dir, the string guard's tables for a caller with the guard on.
  mutable std::once_flag identity_once;
  mutable uint64_t identity = 0;
  mutable std::once_flag guard_once;
  mutable std::vector<bool> structural;  // the token's text starts with , { } or newline
  mutable std::vector<bool> digits;      // the token's text is digits only

  uint64_t Identity() const {
    std::call_once(identity_once, [&] {
      // The adapters and their scales are part of what the cached K/V were computed with
      // (unless they apply after the prefix: then the prefix is the base model's).
      identity = call::ModelIdentity(model->file());
      for (size_t i = 0; i < model->adapters().size() && !model->adapters_after_prefix(); ++i) {
        const uint64_t a[2] = {call::ModelIdentity(model->adapters()[i]->file()),
                               std::bit_cast<uint32_t>(model->weights().loras[i].scale)};
        identity = call::Hash64(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(a), sizeof(a)), identity);
      }
    });
    return identity;
  }
  void BuildGuardTables() const {
    std::call_once(guard_once, [&] {
      structural.assign(static_cast<size_t>(tokenizer->size()), false);
      digits.assign(static_cast<size_t>(tokenizer->size()), false);
      for (int32_t id = 0; id < tokenizer->size(); ++id) {
        const std::string piece = tokenizer->TokenToPiece(id, true);
        structural[id] =
            !piece.empty() && std::string_view(",{}\n").find(piece[0]) != std::string_view::npos;
        digits[id] = !piece.empty() && piece.find_first_not_of("0123456789") == std::string::npos;
      }
    });
  }
  // The vocabulary had <unused40..46> where FunctionGemma has its tokens: a base Gemma 3 model
  // that never learned them.
  bool base_model = false;
  // The arguments an app's adapter learned from its examples, per tool (call::kGivenArgumentsKey,
  // the union over the adapters that carry it); empty: no adapter carries it.
  std::map<std::string, std::set<std::string>, std::less<>> given_arguments;
};

CallModel::CallModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CallModel::~CallModel() = default;
const std::string& CallModel::path() const { return impl_->path; }
int64_t CallModel::trained_context() const { return impl_->model->config().context_length; }

StatusOr<std::shared_ptr<const CallModel>> CallModel::Load(
    const std::string& gguf_path, const std::vector<LoraAdapterFile>& loras,
    const std::vector<LoraAdapterFile>& prior_loras) {
  auto impl = std::make_unique<Impl>();
  impl->path = gguf_path;
  std::vector<runtime::LoraSpec> specs;
  for (const LoraAdapterFile& l : loras) specs.push_back({l.path, l.scale});
  FG_ASSIGN_OR_RETURN(impl->model, runtime::Model::Load(gguf_path, specs));
  if (!prior_loras.empty()) {
    std::vector<runtime::LoraSpec> prior;
    for (const LoraAdapterFile& l : prior_loras) prior.push_back({l.path, l.scale});
    FG_ASSIGN_OR_RETURN(impl->prior_model, runtime::Model::Share(*impl->model, prior));
    if (!impl->prior_model->adapters_in_channel()) {
      return InvalidArgumentError(
          "prior adapter '" + prior_loras[0].path +
          "' was not trained for the tool prior (no fgemma.lora.channel = \"adapted\"; "
          "`fgemma tune --objective both|channel` trains one)");
    }
  }
  for (const auto& adapter : impl->model->adapters()) {
    const gguf::File& f = adapter->file();
    if (f.Find(call::kGivenArgumentsKey) == nullptr) continue;
    auto fail = [&](const std::string& why) {
      return InvalidArgumentError("LoRA adapter '" + adapter->path() +
                                  "': " + call::kGivenArgumentsKey + " " + why);
    };
    auto text = f.GetString(call::kGivenArgumentsKey);
    if (!text.ok()) return fail("is not a string");
    const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) return fail("is not a JSON object");
    for (const auto& [tool, keys] : doc.items()) {
      if (!keys.is_array()) return fail("names '" + tool + "' without an array of keys");
      std::set<std::string>& given = impl->given_arguments[tool];
      for (const nlohmann::json& k : keys) {
        if (!k.is_string()) return fail("names '" + tool + "' with a key that is not a string");
        given.insert(k.get<std::string>());
      }
    }
  }
  auto vocab = text::LoadVocab(impl->model->file());
  if (!vocab.ok()) return vocab.status().WithContext("'" + gguf_path + "'");
  // FunctionGemma keeps its function-calling tokens at ids 46..52, which a base Gemma 3
  // vocabulary has as <unused40>..<unused46> (docs/model.md). Name them so that base model (the one
  // `make model` installs) can be prompted and constrained the same way.
  static constexpr const char* kFunctionTokens[] = {"<start_function_declaration>",
                                                    "<end_function_declaration>",
                                                    "<start_function_call>",
                                                    "<end_function_call>",
                                                    "<start_function_response>",
                                                    "<end_function_response>",
                                                    "<escape>"};
  // Only a vocabulary with <unused...> at 46..52 is searched for <start_function_call>
  // elsewhere (a FunctionGemma vocabulary has it at 48: no scan of the whole vocabulary).
  if (vocab->tokens.size() > 52 && vocab->types.size() > 52) {
    bool unused = true;
    for (int i = 0; i < 7; ++i) unused &= vocab->tokens[46 + i].rfind("<unused", 0) == 0;
    if (unused && std::find(vocab->tokens.begin(), vocab->tokens.end(), kFunctionTokens[2]) ==
                      vocab->tokens.end()) {
      impl->base_model = true;
      for (int i = 0; i < 7; ++i) {
        vocab->tokens[46 + i] = kFunctionTokens[i];
        vocab->types[46 + i] = static_cast<int32_t>(text::TokenType::kControl);
      }
    }
  }
  auto tk = text::Tokenizer::Create(std::move(*vocab));
  if (!tk.ok()) return tk.status().WithContext("'" + gguf_path + "'");
  impl->tokenizer = std::move(*tk);
  return std::shared_ptr<const CallModel>(new CallModel(std::move(impl)));
}

std::string CallResult::stop_text() const {
  switch (stop_reason) {
    case StopReason::kMaxTokens: return "max tokens";
    case StopReason::kContextFull: return "context full";
    case StopReason::kGrammarDone: return "grammar done";
    case StopReason::kMaxCalls: return "max calls";
    case StopReason::kStopToken: return "stop token " + std::to_string(stop_token);
  }
  return "unknown";
}

nlohmann::json FunctionCall::ToJson() const {
  return nlohmann::json{{"name", name}, {"arguments", arguments}};
}

nlohmann::json CallResult::ToJson(int max_calls) const {
  if (validity.ok() && !calls.empty()) {
    if (max_calls <= 1 && calls.size() == 1) return calls[0].ToJson();
    nlohmann::json a = nlohmann::json::array();
    for (const FunctionCall& c : calls) a.push_back(c.ToJson());
    return a;
  }
  // The raw text can hold any bytes (a -n cut inside a character, sampled byte tokens), and
  // dumping invalid UTF-8 throws: replace such bytes with U+FFFD.
  nlohmann::json o;
  o["content"] = text::ToValidUtf8(validity.ok() ? content : text);
  o["calls"] = nlohmann::json::array();
  for (const FunctionCall& c : calls) o["calls"].push_back(c.ToJson());
  if (!validity.ok()) o["error"] = text::ToValidUtf8(validity.message());
  return o;
}

struct FunctionCaller::Impl {
  std::shared_ptr<const CallModel> cm;
  const runtime::Model* model = nullptr;
  const text::Tokenizer* tk = nullptr;
  FunctionCallerOptions opt;
  text::ToolCatalog catalog;
  text::Dialect dialect = text::Dialect::kOfficial;
  text::ConstrainMode mode = text::ConstrainMode::kCall;
  std::unique_ptr<text::CallGrammar> grammar;
  std::shared_ptr<ThreadPool> pool;  // shared with `partner`
  std::unique_ptr<runtime::Session> session;
  runtime::SamplingParams sampling;

  std::vector<int32_t> prefix;   // <bos> + catalog prefix tokens
  std::vector<int32_t> suffix;   // call::kRequestSuffix's tokens (after every request)
  // The tokens whose K/V rows the session holds (positions 0..held.size()-1), for reusing the
  // longest common prefix with the next prompt; valid only while held.size() == position().
  std::vector<int32_t> held;
  // The session pins the position right after `prefix` (Session::Pin): every call rewinds to
  // it (Truncate) instead of restoring a copy of the caches.
  call::PrefixGeometry geometry;
  std::string cache_path;  // "" without a cache dir
  uint64_t cache_key = 0;

  int32_t escape = -1;           // <escape>
  int string_guard_tokens = 0;   // 0: off; else close free strings after this many tokens
  // String guard tables (CallModel::Impl's, built once per model); null with the guard off.
  const std::vector<bool>* structural = nullptr;
  const std::vector<bool>* digits = nullptr;
  std::vector<int32_t> stops;    // end the output: <eos>, <end_of_turn>, <start_function_response>
  int32_t end_call = -1;         // <end_function_call> (official) or <end> (compact)
  // The noisy-channel tool prior (options.tool_channel); null when off. Shared with `partner`.
  std::shared_ptr<call::ToolChannel> channel;
  double channel_weight = 0;
  bool tool_prior = false;              // the channel chooses between the grammar's tools (> 1)
  bool argument_check = false;          // the channel checks optional arguments
  double copy_bias = 0;                 // the copy prior's (options.copy_bias); 0: off
  int32_t start_call = -1;              // <start_function_call>
  // FunctionCallerOptions::fill_arguments and blend: a caller on the tool prior's model (the
  // same catalog and options, this caller's channel and threads); null when both are off.
  std::unique_ptr<Impl> partner;
  // Mends the request's misspelt words (options.fix_typos); null when off, and in a partner,
  // which reads the request its parent mended.
  std::unique_ptr<call::TypoMender> mender;
  // `request` as the caller reads it: mended when `mender` is on; `*words` (may be null) the
  // words mended.
  std::string Read(std::string_view request, int* words = nullptr) const {
    if (words != nullptr) *words = 0;
    return mender != nullptr ? mender->Mend(request, words) : std::string(request);
  }
  // The turns as the caller reads them, each user turn's text Read: `turns` itself when no word
  // is mended, else `*mended` (a copy); `*words` (may be null) the words mended.
  const std::vector<ChatTurn>& ReadTurns(const std::vector<ChatTurn>& turns,
                                         std::vector<ChatTurn>* mended,
                                         int* words = nullptr) const {
    int total = 0;
    for (size_t i = 0; mender != nullptr && i < turns.size(); ++i) {
      if (turns[i].role != ChatTurn::Role::kUser) continue;
      int n = 0;
      std::string text = mender->Mend(turns[i].text, &n);
      if (n == 0) continue;
      if (mended->empty()) *mended = turns;
      (*mended)[i].text = std::move(text);
      total += n;
    }
    if (words != nullptr) *words = total;
    return total > 0 ? *mended : turns;
  }
  double blend = 0;  // FunctionCallerOptions::blend with `partner`; 0: off
  // Both models' adapters apply after the prefix: the prefix K/V are the base model's in both,
  // and the partner takes them from this caller's session instead of prefilling its own.
  bool share_prefix = false;

  // Create's caller; with `parent`, its partner: on the tool prior's model, with the parent's
  // tool prior and threads. No partner of its own.
  static StatusOr<std::unique_ptr<Impl>> Make(std::shared_ptr<const CallModel> model,
                                              std::string_view catalog_json,
                                              const FunctionCallerOptions& options,
                                              const Impl* parent);

  void Warn(const std::string& m) const {
    if (opt.on_warning) {
      opt.on_warning(m);
    } else {
      std::fprintf(stderr, "fgemma: warning: %s\n", m.c_str());
    }
  }
  bool IsStop(int32_t t) const { return std::find(stops.begin(), stops.end(), t) != stops.end(); }

  Status EnsurePrefix(CallStats* stats);
  int64_t ReuseRequest(std::span<const int32_t> rest);
  Status Parse(CallResult* r) const;
  Status CheckArguments(CallResult* r, std::string_view request) const;
  // The tokens after `prefix` of a conversation (CallConversation's rules).
  StatusOr<std::vector<int32_t>> ConversationRest(const std::vector<ChatTurn>& turns) const;
  // The session at the prefix and the start of `rest` the last call left there, else at the
  // prefix alone; sets stats->reused_tokens.
  Status PreparePrefix(std::span<const int32_t> rest, CallStats* stats);
  call::DecodeHeadOptions HeadOptions() const;
  // `prior`: the tool prior's weighted scores (catalog order), or null; `request`: the copy
  // prior's text ("": none).
  call::LogitProcessorChain Processors(const std::vector<double>* prior,
                                       std::string_view request) const;
  // The result of a decode that stopped with r->tokens: stop reason, text, calls, validity.
  void Finish(CallResult* r, int64_t max_tokens, int64_t max_new,
              std::chrono::steady_clock::time_point t_decode,
              std::chrono::steady_clock::time_point t0) const;
  // One call on the prompt prefix + `rest`; `request`: the user's last words, for the tool prior
  // ("": none). `scored`: the tool prior's weighted scores already computed for it (the partner's
  // run: empty, none), else null.
  StatusOr<CallResult> Run(std::vector<int32_t> rest, const CallControl& control,
                           std::string_view request, const std::vector<double>* scored = nullptr);
  // FunctionCallerOptions::fill_arguments on r's one call, whose tool prior scores were `prior`.
  Status Fill(std::span<const int32_t> rest, const CallControl& control, std::string_view request,
              const std::vector<double>& prior, std::chrono::steady_clock::time_point t0,
              CallResult* r);
  // Run's decode into `r` (its stats so far kept), with the tool prior `prior` (weighted, catalog
  // order; empty: none); the argument check after it when `check`.
  Status Decode(std::span<const int32_t> rest, const CallControl& control, std::string_view request,
                const std::vector<double>& prior, int64_t max_tokens, bool check,
                std::chrono::steady_clock::time_point t0, CallResult* r);
  // The index (catalog order) of the tool of r's one call when that call invents a number
  // (call::InventsNumbers), else -1.
  int InventedCallTool(const CallResult& r, std::string_view request) const;
};

FunctionCaller::FunctionCaller(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FunctionCaller::~FunctionCaller() = default;
int64_t FunctionCaller::prefix_tokens() const { return static_cast<int64_t>(impl_->prefix.size()); }
int64_t FunctionCaller::context() const { return impl_->session->context(); }
ConstrainMode FunctionCaller::constrain() const { return impl_->mode; }
bool FunctionCaller::checks_arguments() const {
  return impl_->channel != nullptr &&
         (impl_->argument_check || (impl_->partner != nullptr && impl_->opt.fill_arguments));
}
size_t FunctionCaller::memory_bytes() const {
  const Impl& m = *impl_;
  return m.session->cache_bytes() + m.session->scratch_bytes() +
         (m.partner ? m.partner->session->cache_bytes() + m.partner->session->scratch_bytes() : 0) +
         (m.channel ? m.channel->memory_bytes() : 0);
}

namespace {

runtime::SamplingParams SamplingOf(const FunctionCallerOptions& options) {
  runtime::SamplingParams sp;
  sp.temperature = options.temperature;
  sp.top_k = options.top_k;
  sp.top_p = options.top_p;
  sp.seed = options.seed;
  return sp;
}

}  // namespace

Status ValidateOptions(const FunctionCallerOptions& options) {
  if (options.max_calls < 1) return InvalidArgumentError("max_calls must be >= 1");
  if (options.draft_tokens < 0 || options.draft_tokens > call::kMaxDraftTokens) {
    return InvalidArgumentError("draft_tokens must be in [0, " +
                                std::to_string(call::kMaxDraftTokens) + "]");
  }
  if (options.max_tokens < 1) return InvalidArgumentError("max_tokens must be >= 1");
  if (options.threads < 0) return InvalidArgumentError("threads must be >= 0");
  if (!std::isfinite(options.copy_bias) || (options.copy_bias < 0 && options.copy_bias != -1)) {
    return InvalidArgumentError("copy_bias must be -1 (default), 0 (off) or a bias > 0");
  }
  if (!std::isfinite(options.tool_channel) ||
      (options.tool_channel < 0 && options.tool_channel != -1)) {
    return InvalidArgumentError("tool_channel must be -1 (default), 0 (off) or a weight > 0");
  }
  if (options.fix_typos < -1 || options.fix_typos > 1) {
    return InvalidArgumentError("fix_typos must be -1 (default), 0 (off) or 1 (on)");
  }
  if (!(options.blend >= 0 && options.blend < 1)) {
    return InvalidArgumentError("blend must be in [0, 1) (0: off)");
  }
  if (std::isnan(options.blend_sure)) return InvalidArgumentError("blend_sure must be a number");
  return runtime::ValidateSampling(SamplingOf(options));
}

namespace {

// The catalog the grammar admits calls of: `catalog`, or its options.grammar_tools only.
text::ToolCatalog GrammarCatalog(const text::ToolCatalog& catalog,
                                 const FunctionCallerOptions& options) {
  if (options.grammar_tools.empty()) return catalog;
  text::ToolCatalog only;
  only.id = catalog.id;
  for (const text::Tool& t : catalog.tools) {
    if (std::find(options.grammar_tools.begin(), options.grammar_tools.end(), t.name) !=
        options.grammar_tools.end()) {
      only.tools.push_back(t);
    }
  }
  return only;
}

}  // namespace

Status CheckRequest(std::string_view request) { return call::CheckRequest(request); }

StatusOr<std::unique_ptr<FunctionCaller>> FunctionCaller::Create(
    std::shared_ptr<const CallModel> model, std::string_view catalog_json,
    const FunctionCallerOptions& options) {
  FG_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                      Impl::Make(model, catalog_json, options, nullptr));
  Impl& m = *impl;
  const CallModel::Impl& cm = model->impl();
  const bool fill = options.fill_arguments && m.channel != nullptr;
  if ((fill || options.blend > 0) && !cm.given_arguments.empty() && cm.prior_model != nullptr &&
      m.grammar != nullptr && m.mode == text::ConstrainMode::kCall) {
    FunctionCallerOptions fo = options;
    // Both models' adapters after the prefix: their prefix K/V are the base model's, which the
    // cache file under this caller's key (CallModel's identity: the base model's) holds, and
    // this caller's session once it has them.
    m.share_prefix = m.model->adapters_after_prefix() && cm.prior_model->adapters_after_prefix();
    if (!m.share_prefix) fo.cache_dir.clear();
    fo.fill_arguments = false;
    fo.blend = 0;
    FG_ASSIGN_OR_RETURN(m.partner, Impl::Make(model, catalog_json, fo, &m));
    m.opt.fill_arguments = fill;
    m.blend = options.blend;
  }
  return std::unique_ptr<FunctionCaller>(new FunctionCaller(std::move(impl)));
}

StatusOr<std::unique_ptr<FunctionCaller::Impl>> FunctionCaller::Impl::Make(
    std::shared_ptr<const CallModel> model, std::string_view catalog_json,
    const FunctionCallerOptions& options, const Impl* parent) {
  if (model == nullptr) return InvalidArgumentError("function caller: no model");
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.cm = model;
  m.model = parent != nullptr ? m.cm->impl().prior_model.get() : m.cm->impl().model.get();
  m.tk = m.cm->impl().tokenizer.get();
  m.opt = options;
  FG_RETURN_IF_ERROR(ValidateOptions(options));
  m.dialect = options.dialect;
  m.mode = options.constrain;
  // kAuto runs as kCall on a base vocabulary: it never opens a call (FunctionCallerOptions::
  // constrain).
  if (m.mode == text::ConstrainMode::kAuto && m.cm->impl().base_model &&
      m.dialect == text::Dialect::kOfficial) {
    m.mode = text::ConstrainMode::kCall;
  }
  m.sampling = SamplingOf(options);
  {
    auto cat = text::ParseToolCatalog(catalog_json);
    if (!cat.ok()) {  // "tool catalog: " once (the parser's own messages may begin with it)
      const Status& st = cat.status();
      return st.message().rfind("tool catalog", 0) == 0 ? st : st.WithContext("tool catalog");
    }
    m.catalog = std::move(*cat);
  }
  if (m.catalog.tools.empty()) return InvalidArgumentError("tool catalog: no tools");
  for (const auto& [name, request] : options.tool_examples) {
    // (The binding is captured through a reference: clang before 16 cannot capture one.)
    auto tool = std::find_if(m.catalog.tools.begin(), m.catalog.tools.end(),
                             [&wanted = name](const text::Tool& t) { return t.name == wanted; });
    if (tool == m.catalog.tools.end()) {
      return InvalidArgumentError("tool examples: '" + name + "' is not a tool of the catalog");
    }
    if (request.empty()) {
      return InvalidArgumentError("tool examples: an empty request for '" + name + "'");
    }
    tool->examples.push_back(request);
  }
  for (const std::string& name : options.grammar_tools) {
    if (m.catalog.Find(name) == nullptr) {
      return InvalidArgumentError("grammar tools: '" + name +
                                  "' is not a tool of the catalog");
    }
  }
  if (m.dialect == text::Dialect::kCompact) {
    bool any = false;
    for (size_t i = 0; i < options.tool_map.size(); ++i) {
      const std::string& name = options.tool_map[i];
      if (name.empty()) continue;
      any = true;
      if (m.catalog.Find(name) == nullptr) {
        return InvalidArgumentError("tool map: \"" + std::to_string(i) + "\" names '" + name +
                                    "', which the catalog does not declare");
      }
      if (!m.tk->Find("<tool_" + std::to_string(i) + ">")) {
        return InvalidArgumentError("compact dialect: the model's vocabulary has no <tool_" +
                                    std::to_string(i) + "> token (not the fine-tuned model?)");
      }
    }
    if (!any) return InvalidArgumentError("compact dialect needs a tool map (--tool-map)");
  }

  // Stop tokens (docs/model.md): <eos>, <end_of_turn>, <start_function_response>.
  m.stops.push_back(m.tk->vocab().eos);
  for (const char* t : {"<end_of_turn>", "<start_function_response>"}) {
    if (auto id = m.tk->Find(t)) m.stops.push_back(*id);
  }
  if (auto id = m.tk->Find("<escape>")) m.escape = *id;
  m.string_guard_tokens =
      options.string_guard < 0 ? (m.cm->impl().base_model ? 24 : 0) : options.string_guard;
  if (m.string_guard_tokens > 0) {
    m.cm->impl().BuildGuardTables();
    m.structural = &m.cm->impl().structural;
    m.digits = &m.cm->impl().digits;
  }
  if (auto id =
          m.tk->Find(m.dialect == text::Dialect::kOfficial ? "<end_function_call>" : "<end>")) {
    m.end_call = *id;
  }
  if (auto id = m.tk->Find("<start_function_call>")) m.start_call = *id;
  m.copy_bias = options.copy_bias < 0 ? (m.cm->impl().base_model ? call::kDefaultCopyBias : 0)
                                      : options.copy_bias;
  m.channel_weight = options.tool_channel < 0
                         ? (m.cm->impl().base_model ? call::kDefaultToolChannel : 0)
                         : options.tool_channel;
  if (parent == nullptr &&
      (options.fix_typos < 0 ? m.cm->impl().base_model : options.fix_typos == 1)) {
    m.mender = std::make_unique<call::TypoMender>(*m.tk, call::CatalogTexts(m.catalog));
  }

  int64_t context = options.context;
  const int64_t trained = m.model->config().context_length;
  if (context == 0) context = trained > 0 ? std::min<int64_t>(2048, trained) : 2048;
  if (context < 0) return InvalidArgumentError("context must be > 0");
  m.pool = parent != nullptr
               ? parent->pool
               : std::make_shared<ThreadPool>(options.threads > 0 ? options.threads
                                                                  : ThreadPool::DefaultThreads());
  text::PromptOptions po;
  if (!options.developer_message.empty()) po.developer_message = options.developer_message;
  m.prefix = call::PrefixTokens(*m.tk, m.dialect, m.catalog, po);
  runtime::SessionOptions so;
  so.context = context;
  so.pool = m.pool.get();
  if (m.model->adapters_after_prefix()) so.lora_from = static_cast<int64_t>(m.prefix.size());
  FG_ASSIGN_OR_RETURN(m.session, runtime::Session::Create(*m.model, so));
  // The prior over the tools the grammar admits; none to choose between (one tool, or
  // tool_choice naming one): no prior, the argument check only.
  const text::ToolCatalog choices = GrammarCatalog(m.catalog, options);
  m.tool_prior = choices.tools.size() > 1;
  m.argument_check = options.argument_check;
  if (parent != nullptr) {
    m.channel = parent->channel;
  } else if (m.channel_weight > 0 && m.dialect == text::Dialect::kOfficial &&
             m.mode != text::ConstrainMode::kOff && m.start_call >= 0 &&
             (m.tool_prior || m.argument_check)) {
    FG_ASSIGN_OR_RETURN(
        m.channel,
        call::ToolChannel::Create(m.cm->impl().prior_model ? *m.cm->impl().prior_model : *m.model,
                                  *m.tk, choices, m.pool.get()));
  }

  if (m.mode != text::ConstrainMode::kOff) {
    text::GrammarOptions go;
    go.dialect = m.dialect;
    go.mode = m.mode;
    go.max_calls = options.max_calls;
    go.tool_map = options.tool_map;
    FG_ASSIGN_OR_RETURN(m.grammar, text::CallGrammar::Create(choices, *m.tk, go));
#if defined(__GLIBC__)
    // Building the grammar frees tens of MB of temporaries in small blocks that glibc keeps
    // for reuse; hand them back so they do not count in the resident set for the whole run.
    malloc_trim(0);
#endif
  }

  m.suffix = call::RequestSuffixTokens(*m.tk);
  if (static_cast<int64_t>(m.prefix.size()) >= context) {
    return OutOfRangeError("the catalog prompt has " + std::to_string(m.prefix.size()) +
                           " tokens, more than the context of " + std::to_string(context));
  }
  const model::Config& c = m.model->config();
  m.geometry.layers = c.n_layers;
  m.geometry.kv_dim = c.kv_dim();
  m.geometry.local_rows = model::LocalCacheRows(c, so.max_chunk, context);
  if (!options.cache_dir.empty()) {
    FG_RETURN_IF_ERROR(call::PrepareCacheDir(options.cache_dir));
    const std::string kernels = std::string(kernels::IsaName(kernels::ActiveIsa()));
    m.cache_key = call::PrefixCacheKey(m.cm->impl().Identity(), m.geometry, kernels, m.prefix);
    m.cache_path = call::PrefixCachePath(options.cache_dir, m.cache_key);
  }
  return impl;
}

StatusOr<std::vector<int32_t>> FunctionCaller::PromptTokens(std::string_view request) const {
  FG_ASSIGN_OR_RETURN(std::vector<int32_t> rest,
                      call::RequestTokens(*impl_->tk, impl_->Read(request), impl_->suffix));
  std::vector<int32_t> all = impl_->prefix;
  all.insert(all.end(), rest.begin(), rest.end());
  return all;
}

// Brings the session to exactly `prefix`: rewinding the live session to its pinned prefix
// (always possible once pinned, whatever the last call appended or where it failed), else the
// disk cache, else a prefill (then saved to the disk cache). No copy of the caches is kept.
Status FunctionCaller::Impl::EnsurePrefix(CallStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(prefix.size());
  bool ready = false;
  if (session->pinned() == n && session->Truncate(n).ok()) {
    ready = true;
    stats->prefix_source = "memory";
  }
  if (!ready && !cache_path.empty()) {
    Status loaded = call::LoadPrefix(cache_path, cache_key, geometry, prefix, session.get());
    if (loaded.ok()) {
      ready = true;
      stats->prefix_source = "disk";
    } else if (loaded.code() != StatusCode::kNotFound) {
      Warn(loaded.message() + "; prefilling the catalog prompt again");
    }
  }
  if (!ready) {
    session->Reset();
    FG_RETURN_IF_ERROR(session->Append(prefix, runtime::LogitsRequest::None()));
    stats->prefix_source = "prefill";
    if (!cache_path.empty()) {
      if (Status st = call::SavePrefix(cache_path, cache_key, geometry, prefix, *session);
          !st.ok()) {
        Warn(st.message());
      }
    }
  }
  session->Pin();
  held = prefix;
  if (share_prefix && partner->session->pinned() != n) {
    std::vector<std::span<const float>> k, v;
    for (int64_t l = 0; l < model->config().n_layers; ++l) {
      k.push_back(session->cached_k(l));
      v.push_back(session->cached_v(l));
    }
    FG_RETURN_IF_ERROR(partner->session->Restore(n, k, v));
    partner->session->Pin();
    partner->held = prefix;
  }
  stats->prefix_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return OkStatus();
}

// Reuses what the previous call left in the session: the longest common prefix of `rest` and
// the tokens that followed the catalog prefix last time, at most all of `rest` but its last
// token (appended for logits). Rewinds the session straight to the end of that shared part,
// which keeps the pin on the prefix; 0 (and nothing changed) when nothing is shared or the
// sliding-window rings have moved on too far to rewind there.
int64_t FunctionCaller::Impl::ReuseRequest(std::span<const int32_t> rest) {
  const size_t n = prefix.size();
  if (!opt.reuse_request_prefix || session->pinned() != static_cast<int64_t>(n) ||
      session->position() != static_cast<int64_t>(held.size())) {
    return 0;
  }
  size_t k = 0;
  while (k + 1 < rest.size() && n + k < held.size() && held[n + k] == rest[k]) ++k;
  if (k == 0 || !session->Truncate(static_cast<int64_t>(n + k)).ok()) return 0;
  held.resize(n + k);
  return static_cast<int64_t>(k);
}

Status FunctionCaller::Impl::Parse(CallResult* r) const {
  if (dialect == text::Dialect::kCompact) {
    FG_ASSIGN_OR_RETURN(text::ParsedOutput out,
                        text::ParseCompactOutput(r->text, &catalog, opt.tool_map));
    r->content = out.content;
    for (text::Call& c : out.calls) r->calls.push_back({c.name, std::move(c.arguments)});
  } else {
    FG_ASSIGN_OR_RETURN(text::ParsedOutput out, text::ParseModelOutput(r->text, &catalog));
    r->content = out.content;
    for (text::Call& c : out.calls) r->calls.push_back({c.name, std::move(c.arguments)});
  }
  for (const FunctionCall& c : r->calls) {
    const text::Tool* tool = catalog.Find(c.name);
    if (tool == nullptr) return InvalidArgumentError("unknown function '" + c.name + "'");
    FG_RETURN_IF_ERROR(text::ValidateCall(*tool, c.arguments).WithContext(c.name));
  }
  if (mode == text::ConstrainMode::kCall && r->calls.empty()) {
    return InvalidArgumentError("no function call in the output");
  }
  return OkStatus();
}

StatusOr<CallResult> FunctionCaller::Call(std::string_view request) {
  return Call(request, CallControl{});
}

StatusOr<CallResult> FunctionCaller::Call(std::string_view request, const CallControl& control) {
  int words = 0;
  std::string read = impl_->Read(request, &words);
  FG_ASSIGN_OR_RETURN(std::vector<int32_t> rest,
                      call::RequestTokens(*impl_->tk, read, impl_->suffix));
  FG_ASSIGN_OR_RETURN(CallResult r, impl_->Run(std::move(rest), control, read));
  if (words > 0) {
    r.stats.mended_words = words;
    r.mended_request = std::move(read);
  }
  return r;
}

namespace {

// Control-token text a rendered call or response may not carry inside its values: it would be
// read as structure (an <escape> ending a string early, a turn ending inside a response).
bool HasControlText(const nlohmann::json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    for (std::string_view t : {"<escape>", "<start_of_turn>", "<end_of_turn>", "<start_function",
                               "<end_function", "<bos>", "<eos>"}) {
      if (s.find(t) != std::string::npos) return true;
    }
    return false;
  }
  if (v.is_object()) {
    for (const auto& [k, x] : v.items()) {
      if (HasControlText(nlohmann::json(k)) || HasControlText(x)) return true;
    }
  }
  if (v.is_array()) {
    for (const auto& x : v) {
      if (HasControlText(x)) return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<std::vector<int32_t>> FunctionCaller::Impl::ConversationRest(
    const std::vector<ChatTurn>& turns) const {
  if (dialect != text::Dialect::kOfficial) {
    return UnimplementedError("conversations need the official dialect");
  }
  if (turns.empty()) return InvalidArgumentError("the conversation is empty");
  if (turns[0].role != ChatTurn::Role::kUser) {
    return InvalidArgumentError("the conversation must start with a user turn");
  }
  std::vector<int32_t> out;
  auto special = [&](std::string_view t) {
    std::vector<int32_t> ids = tk->Encode(t, /*add_special=*/false, /*parse_special=*/true);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  auto plain = [&](std::string_view t) {
    std::vector<int32_t> ids = tk->Encode(t, /*add_special=*/false, /*parse_special=*/false);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatTurn& t = turns[i];
    const bool last = i + 1 == turns.size();
    if (!t.text.empty() && !text::IsValidUtf8(t.text)) {
      return InvalidArgumentError("turn " + std::to_string(i) + ": the text is not valid UTF-8");
    }
    if (t.role == ChatTurn::Role::kUser) {
      if (!t.exchanges.empty()) {
        return InvalidArgumentError("turn " + std::to_string(i) + ": a user turn has no calls");
      }
      // The first user turn's "<start_of_turn>user\n" is the end of the cached prefix.
      if (i == 0) {
        FG_RETURN_IF_ERROR(call::CheckRequest(t.text));
      } else {
        special("<start_of_turn>user\n");
      }
      plain(t.text);
      special(last ? call::kRequestSuffix : std::string_view("<end_of_turn>\n"));
      continue;
    }
    special("<start_of_turn>model\n");
    bool answered = !t.exchanges.empty();
    for (const ChatTurn::Exchange& x : t.exchanges) {
      if (!text::IsValidToolName(x.name)) {
        return InvalidArgumentError("turn " + std::to_string(i) + ": bad function name");
      }
      if (!x.arguments.is_object() || HasControlText(x.arguments)) {
        return InvalidArgumentError("turn " + std::to_string(i) + ": the arguments of '" + x.name +
                                    "' must be an object without control-token text");
      }
      special(text::RenderCall(x.name, x.arguments));
      answered &= x.response.has_value();
    }
    for (const ChatTurn::Exchange& x : t.exchanges) {
      if (!x.response) continue;
      if (HasControlText(*x.response)) {
        return InvalidArgumentError("turn " + std::to_string(i) + ": the response of '" + x.name +
                                    "' has control-token text");
      }
      special(text::RenderResponse(x.name, *x.response));
    }
    if (!t.exchanges.empty() && !answered) {
      return InvalidArgumentError("turn " + std::to_string(i) +
                                  ": every call needs its response (a tool message)");
    }
    if (last) {
      if (!t.text.empty() || t.exchanges.empty()) {
        return InvalidArgumentError(
            "the conversation ends with a finished model turn: nothing to answer");
      }
      break;  // the model goes on after the responses
    }
    plain(t.text);
    special("<end_of_turn>\n");
  }
  return out;
}

StatusOr<std::vector<int32_t>> FunctionCaller::ConversationTokens(
    const std::vector<ChatTurn>& turns) const {
  std::vector<ChatTurn> mended;
  FG_ASSIGN_OR_RETURN(std::vector<int32_t> rest,
                      impl_->ConversationRest(impl_->ReadTurns(turns, &mended)));
  std::vector<int32_t> all = impl_->prefix;
  all.insert(all.end(), rest.begin(), rest.end());
  return all;
}

StatusOr<CallResult> FunctionCaller::CallConversation(const std::vector<ChatTurn>& turns,
                                                      const CallControl& control) {
  // Each user turn is read as Call reads a request, its misspelt words mended.
  std::vector<ChatTurn> mended;
  int words = 0;
  const std::vector<ChatTurn>& read = impl_->ReadTurns(turns, &mended, &words);
  FG_ASSIGN_OR_RETURN(std::vector<int32_t> rest, impl_->ConversationRest(read));
  // The tool prior scores the last turn when it is the user's.
  const bool user_last = !read.empty() && read.back().role == ChatTurn::Role::kUser;
  FG_ASSIGN_OR_RETURN(CallResult r, impl_->Run(std::move(rest), control,
                                               user_last ? read.back().text : std::string_view()));
  if (words > 0) {
    r.stats.mended_words = words;
    if (user_last && read.back().text != turns.back().text) r.mended_request = read.back().text;
  }
  return r;
}

namespace {

double MsSince(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

// The caller's sampling with a call's overrides, validated.
StatusOr<runtime::SamplingParams> SamplingFor(const runtime::SamplingParams& base,
                                              const CallControl& control) {
  runtime::SamplingParams sampling = base;
  if (control.temperature) sampling.temperature = *control.temperature;
  if (control.top_k) sampling.top_k = *control.top_k;
  if (control.top_p) sampling.top_p = *control.top_p;
  if (control.seed) sampling.seed = *control.seed;
  FG_RETURN_IF_ERROR(runtime::ValidateSampling(sampling));
  return sampling;
}

}  // namespace

Status FunctionCaller::Impl::PreparePrefix(std::span<const int32_t> rest, CallStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  stats->reused_tokens = ReuseRequest(rest);
  if (stats->reused_tokens == 0) return EnsurePrefix(stats);
  stats->prefix_source = "memory";
  stats->prefix_ms = MsSince(t0);
  return OkStatus();
}

call::DecodeHeadOptions FunctionCaller::Impl::HeadOptions() const {
  call::DecodeHeadOptions o;
  o.vocab = model->config().vocab;
  o.fast_head = opt.fast_head;
  o.draft_tokens = opt.draft_tokens;
  o.grammar = grammar.get();
  o.stops = stops;
  return o;
}

// The tool prior, the copy prior, and the base-model guards when the string guard is on
// (src/call/logit_processors.h).
call::LogitProcessorChain FunctionCaller::Impl::Processors(const std::vector<double>* prior,
                                                           std::string_view request) const {
  call::LogitProcessorChain chain;
  if (prior != nullptr) chain.Add(call::MakeToolPrior(&channel->names(), prior, tk, start_call));
  if (copy_bias > 0 && !request.empty() && dialect == text::Dialect::kOfficial) {
    chain.Add(call::MakeCopyPrior(std::string(request), copy_bias, tk, &catalog));
  }
  if (string_guard_tokens > 0) {
    chain.Add(call::MakeStringGuard(string_guard_tokens, structural, escape));
    chain.Add(call::MakeDigitGuard(digits));
  }
  return chain;
}

void FunctionCaller::Impl::Finish(CallResult* r, int64_t max_tokens, int64_t max_new,
                                  std::chrono::steady_clock::time_point t_decode,
                                  std::chrono::steady_clock::time_point t0) const {
  CallStats& st = r->stats;
  st.decode_ms = MsSince(t_decode);
  st.generated_tokens = static_cast<int64_t>(r->tokens.size());
  for (int32_t t : r->tokens) r->text += tk->TokenToPiece(t, /*special=*/true);
  r->validity = Parse(r);
  if (r->stop_reason == StopReason::kMaxTokens && max_new < max_tokens) {
    r->stop_reason = StopReason::kContextFull;  // the context ran out before -n did
  }
  if (!r->validity.ok() && r->stop_reason == StopReason::kMaxTokens) {
    r->validity = r->validity.WithContext("output cut at " + std::to_string(max_new) + " tokens");
  } else if (!r->validity.ok() && r->stop_reason == StopReason::kContextFull) {
    r->validity = r->validity.WithContext("the context of " + std::to_string(session->context()) +
                                          " tokens is full after " + std::to_string(max_new) +
                                          " generated tokens (-c)");
  }
  if (!r->validity.ok()) {
    r->calls.clear();
    r->content.clear();
  }
  st.total_ms = MsSince(t0);
}

// Each step: the grammar's allowed set, the head's logits for it (call::DecodeHead: forced,
// sparse, full or drafted), the logit processors around the sampler, then the token is written.
// A checked call that invents a number (call::InventsNumbers) is decoded again with its tool
// ruled out by the tool prior, while another tool is left, and the last such decode's call is
// kept only when it invents none (CallStats::excluded_tools).
StatusOr<CallResult> FunctionCaller::Impl::Run(std::vector<int32_t> rest,
                                               const CallControl& control, std::string_view request,
                                               const std::vector<double>* scored) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t max_tokens = control.max_tokens.value_or(opt.max_tokens);
  if (max_tokens < 1) return InvalidArgumentError("max_tokens must be >= 1");
  if (control.cancelled && control.cancelled()) return FailedPreconditionError("cancelled");
  const int64_t context = session->context();
  const int64_t prompt_len = static_cast<int64_t>(prefix.size() + rest.size());
  if (prompt_len >= context) {
    return OutOfRangeError("the prompt has " + std::to_string(prompt_len) + " tokens (catalog " +
                           std::to_string(prefix.size()) + "), more than fits the context of " +
                           std::to_string(context) + " with room for an answer");
  }
  CallResult r;
  r.stats.prefix_tokens = static_cast<int64_t>(prefix.size());
  r.stats.prompt_tokens = prompt_len;
  std::vector<double> prior;
  const bool said = request.find_first_not_of(" \t\r\n") != std::string_view::npos;
  if (scored != nullptr) {
    prior = *scored;
  } else if (channel != nullptr && tool_prior && said) {
    const auto t_channel = std::chrono::steady_clock::now();
    FG_ASSIGN_OR_RETURN(prior, channel->Score(request));
    for (double& p : prior) p *= channel_weight;
    r.stats.channel_ms = MsSince(t_channel);
  }
  const bool check = channel != nullptr && argument_check && said && !control.on_piece;
  FG_RETURN_IF_ERROR(Decode(rest, control, request, prior, max_tokens, check, t0, &r));
  const bool fill = partner != nullptr && opt.fill_arguments && said && !control.on_piece;
  if (check && !prior.empty()) {
    std::vector<double> ruled_out = prior;  // the fill decides from `prior` as it was
    int64_t excluded = 0;
    for (int tool = InventedCallTool(r, request);
         tool >= 0 && excluded + 1 < static_cast<int64_t>(ruled_out.size());) {
      ruled_out[static_cast<size_t>(tool)] = -std::numeric_limits<double>::infinity();
      ++excluded;
      CallResult again;
      again.stats = r.stats;
      FG_RETURN_IF_ERROR(Decode(rest, control, request, ruled_out, max_tokens, check, t0, &again));
      if (!again.validity.ok()) break;
      tool = InventedCallTool(again, request);
      if (tool < 0) r = std::move(again);
    }
    r.stats.excluded_tools = excluded;
    if (excluded > 0) r.stats.total_ms = MsSince(t0);
  }
  if (fill) FG_RETURN_IF_ERROR(Fill(rest, control, request, prior, t0, &r));
  return r;
}

// The optional arguments of r's one call that none of the app's examples gives for its tool
// and the call leaves out: the partner's call of the same request, when it names the same
// function, gives them (what it gives of them is added; the merged call must validate).
Status FunctionCaller::Impl::Fill(std::span<const int32_t> rest, const CallControl& control,
                                  std::string_view request, const std::vector<double>& prior,
                                  std::chrono::steady_clock::time_point t0, CallResult* r) {
  if (!r->validity.ok() || r->calls.size() != 1) return OkStatus();
  FunctionCall& c = r->calls[0];
  const text::Tool* tool = catalog.Find(c.name);
  const auto& given = cm->impl().given_arguments;
  const auto g = given.find(c.name);
  if (tool == nullptr || g == given.end()) return OkStatus();
  const std::vector<std::string>& required = tool->parameters.required;
  std::vector<std::string> open;
  for (const auto& [key, schema] : tool->parameters.properties) {
    if (std::find(required.begin(), required.end(), key) == required.end() &&
        !g->second.contains(key) && !c.arguments.contains(key)) {
      open.push_back(key);
    }
  }
  if (open.empty()) return OkStatus();
  const auto t_fill = std::chrono::steady_clock::now();
  FG_ASSIGN_OR_RETURN(CallResult other, partner->Run(std::vector<int32_t>(rest.begin(), rest.end()),
                                                     control, request, &prior));
  r->stats.fill_ms = MsSince(t_fill);
  if (other.validity.ok() && other.calls.size() == 1 && other.calls[0].name == c.name) {
    nlohmann::json merged = c.arguments;
    // Nothing the argument check would drop without asking.
    std::optional<call::SaidFacts> said;
    if (argument_check) said = call::SaidFactsOf(request, *tool);
    const std::vector<std::string> added = call::FillArguments(
        *tool, open, other.calls[0].arguments, said ? &*said : nullptr, &merged);
    if (!added.empty() && text::ValidateCall(*tool, merged).ok()) {
      c.arguments = std::move(merged);
      r->stats.filled_arguments = static_cast<int64_t>(added.size());
    }
  }
  r->stats.total_ms = MsSince(t0);
  return OkStatus();
}

Status FunctionCaller::Impl::Decode(std::span<const int32_t> rest, const CallControl& control,
                                    std::string_view request, const std::vector<double>& prior,
                                    int64_t max_tokens, bool check,
                                    std::chrono::steady_clock::time_point t0, CallResult* out) {
  FG_ASSIGN_OR_RETURN(const runtime::SamplingParams sampling, SamplingFor(this->sampling, control));
  auto cancelled = [&] { return control.cancelled && control.cancelled(); };
  CallResult& r = *out;
  CallStats& st = r.stats;
  FG_RETURN_IF_ERROR(PreparePrefix(rest, &st));

  const int64_t max_new = std::min<int64_t>(max_tokens, session->context() - st.prompt_tokens);
  runtime::Sampler sampler(sampling);
  text::CallGrammar::State state;
  if (grammar) state = grammar->Start();
  call::DecodeHead head(session.get(), &held,
                        std::vector<int32_t>(rest.begin() + st.reused_tokens, rest.end()),
                        HeadOptions(), &st);
  call::LogitProcessorChain processors = Processors(prior.empty() ? nullptr : &prior, request);
  // FunctionCallerOptions::blend: the partner's head steps along on the same tokens.
  std::optional<call::DecodeHead> partner_head;
  CallStats partner_stats;
  if (blend > 0) {
    const auto t_blend = std::chrono::steady_clock::now();
    FG_RETURN_IF_ERROR(partner->PreparePrefix(rest, &partner_stats));
    st.blend_ms += MsSince(t_blend);
    partner_head.emplace(
        partner->session.get(), &partner->held,
        std::vector<int32_t>(rest.begin() + partner_stats.reused_tokens, rest.end()),
        partner->HeadOptions(), &partner_stats);
  }
  int calls_done = 0;
  r.stop_reason = StopReason::kMaxTokens;
  while (static_cast<int64_t>(r.tokens.size()) < max_new) {
    if (cancelled()) return FailedPreconditionError("cancelled");
    const int64_t left = max_new - static_cast<int64_t>(r.tokens.size());
    int32_t tok = -1;
    if (grammar) {
      if (grammar->Done(state)) {
        r.stop_reason = StopReason::kGrammarDone;
        break;
      }
      // The budget (-n, the context): only tokens after which the call can still be finished
      // in the tokens left (CallGrammar::Allowed), so the output ends complete.
      std::span<const int32_t> allowed = grammar->Allowed(state, left);
      if (allowed.empty()) return InternalError("call grammar: no token allowed");
      FG_ASSIGN_OR_RETURN(const call::DecodeHead::Kind kind, head.Step(allowed, state, left));
      if (partner_head) {
        // The partner's logits only where the app's adapter is unsure: on the other steps its
        // head skips, and the tokens written meanwhile go into its session with the next step
        // it takes (one Append), or never when none follows.
        const bool free = kind != call::DecodeHead::Kind::kForced;
        const double own_log_z = free ? call::LogSumExp(head.candidates()) : 0;
        if (free && call::TopProbability(head.candidates(), own_log_z) < opt.blend_sure) {
          // The same grammar and head options: a step the caller did not force is not forced.
          const auto t_blend = std::chrono::steady_clock::now();
          FG_ASSIGN_OR_RETURN(const call::DecodeHead::Kind other,
                              partner_head->Step(allowed, state, left));
          st.blend_ms += MsSince(t_blend);
          if (other == call::DecodeHead::Kind::kForced) {
            return InternalError("blend: the partner's step differs");
          }
          call::BlendLogProbs(head.candidates(), own_log_z, partner_head->candidates(), blend);
          ++st.blended_steps;
        } else {
          partner_head->Skip();
        }
      }
      if (kind == call::DecodeHead::Kind::kForced) {
        tok = allowed[0];
        processors.Forced(tok);
      } else {
        tok = processors.Sample({*grammar, state, allowed}, head.candidates(), sampler, &st);
      }
    } else {
      FG_ASSIGN_OR_RETURN(std::span<const float> logits, head.Full());
      tok = sampler.Sample(logits);
    }
    if (IsStop(tok)) {
      r.stop_reason = StopReason::kStopToken;
      r.stop_token = tok;
      break;
    }
    processors.Written(tok);
    if (grammar) FG_RETURN_IF_ERROR(grammar->Advance(&state, tok));
    r.tokens.push_back(tok);
    if (control.on_piece) control.on_piece(tk->TokenToPiece(tok, /*special=*/true));
    FG_RETURN_IF_ERROR(head.Written(tok));
    if (partner_head) FG_RETURN_IF_ERROR(partner_head->Written(tok));
    if (!grammar && tok == end_call && ++calls_done >= opt.max_calls) {
      r.stop_reason = StopReason::kMaxCalls;
      break;
    }
  }
  if (r.stop_reason == StopReason::kMaxTokens && grammar && grammar->Done(state)) {
    r.stop_reason = StopReason::kGrammarDone;  // the last token allowed was also the last one finishing it
  }
  Finish(&r, max_tokens, max_new, head.decode_start(), t0);
  if (check && r.validity.ok()) {
    const auto t_check = std::chrono::steady_clock::now();
    FG_RETURN_IF_ERROR(CheckArguments(&r, request));
    st.argument_check_ms += MsSince(t_check);
    st.total_ms = MsSince(t0);
  }
  return OkStatus();
}

int FunctionCaller::Impl::InventedCallTool(const CallResult& r, std::string_view request) const {
  if (!r.validity.ok() || r.calls.size() != 1) return -1;
  const text::Tool* tool = catalog.Find(r.calls[0].name);
  if (tool == nullptr || !call::InventsNumbers(*tool, r.calls[0].arguments, request)) {
    return -1;
  }
  const std::vector<std::string>& names = channel->names();
  const auto it = std::find(names.begin(), names.end(), tool->name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Each call's arguments checked by the channel (call::CheckArguments: optional arguments the
// request is likelier without are dropped, enum values it is much likelier with another member
// of are replaced; not those whose value the request says, call::SaidArguments; optional numbers
// the request does not say are dropped). Required arguments stay and members are the schema's,
// so the call stays valid.
Status FunctionCaller::Impl::CheckArguments(CallResult* r, std::string_view request) const {
  for (FunctionCall& c : r->calls) {
    const text::Tool* tool = catalog.Find(c.name);
    if (tool == nullptr) continue;
    const call::CallScorer score = [&](std::span<const nlohmann::json> cands) {
      std::vector<std::pair<const text::Tool*, nlohmann::json>> calls;
      for (const nlohmann::json& a : cands) calls.emplace_back(tool, a);
      return channel->ScoreCalls(calls, request);
    };
    const call::SaidFacts said = call::SaidFactsOf(request, *tool);
    FG_ASSIGN_OR_RETURN(call::CheckedArguments checked,
                        call::CheckArguments(*tool, c.arguments, score, &said));
    c.arguments = std::move(checked.arguments);
    r->stats.dropped_arguments += checked.dropped;
    r->stats.replaced_values += checked.replaced;
  }
  return OkStatus();
}

StatusOr<std::vector<std::string>> ParseToolMap(std::string_view json_text) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgumentError("tool map: invalid JSON");
  if (doc.is_object() && doc.contains("toolMap")) doc = doc["toolMap"];
  if (!doc.is_object()) return InvalidArgumentError("tool map: expected a JSON object");
  std::vector<std::string> map;
  for (const auto& [key, value] : doc.items()) {
    if (key.empty() || key.size() > 6 || key.find_first_not_of("0123456789") != std::string::npos) {
      continue;  // "none" and other non-index keys
    }
    const size_t n = std::stoul(key);
    if (value.is_null()) continue;
    if (!value.is_string() || !text::IsValidToolName(value.get<std::string>())) {
      return InvalidArgumentError("tool map: \"" + key + "\" must name a tool");
    }
    if (n >= 4096) return InvalidArgumentError("tool map: index " + key + " is too large");
    if (map.size() <= n) map.resize(n + 1);
    map[n] = value.get<std::string>();
  }
  if (map.empty()) return InvalidArgumentError("tool map: no \"N\": \"name\" entries");
  return map;
}

StatusOr<std::vector<std::string>> LoadToolMap(const std::string& path) {
  FG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto m = ParseToolMap(text);
  if (!m.ok()) return m.status().WithContext("'" + path + "'");
  return m;
}

}  // namespace fg

namespace fg::call {
const runtime::Model& RuntimeModel(const CallModel& model) { return *model.impl().model; }
const runtime::Model* PriorModel(const CallModel& model) { return model.impl().prior_model.get(); }
const text::Tokenizer& CallTokenizer(const CallModel& model) { return *model.impl().tokenizer; }
const runtime::Session* PartnerSession(FunctionCaller& caller) {
  return caller.impl().partner ? caller.impl().partner->session.get() : nullptr;
}
Status UseBatcher(FunctionCaller& caller, runtime::StepBatcher* batcher) {
  return caller.impl().session->SetBatcher(batcher);
}
Status PrepackPanels(const CallModel& model, ThreadPool* pool) {
  return model.impl().model->PrepackPanels(pool);
}
}  // namespace fg::call
