// fgemma's function-calling API: a request in natural language in, a validated call out.
//
//   auto model = fg::CallModel::Load("functiongemma-270m.gguf");          // once
//   auto caller = fg::FunctionCaller::Create(*model, catalog_json, {});   // once per catalog
//   auto result = (*caller)->Call("turn the light on in the kitchen");    // per request
//   // result->calls[0].name == "set_light", result->calls[0].arguments == {"room":"kitchen",...}
//
// The prompt is the FunctionGemma one (official dialect: developer turn declaring every tool,
// then the user turn), or the seed fine-tune's compact one (just the user turn; tools are
// <tool_N> vocabulary tokens named by a toolMap). The catalog part of the prompt (everything
// before the user's text) is prefilled once per FunctionCaller and kept as a snapshot; with a
// cache directory it is also stored on disk (checksummed, keyed by model identity and prefix
// tokens) so a new process skips that prefill. Decoding is greedy by default and, with
// constrain "call", follows a grammar that only admits calls of the catalog's tools with valid
// arguments; steps where the grammar allows one token skip the LM head, steps where it allows
// few compute only those rows.
//
// Threads: a CallModel is immutable and may be shared by any number of FunctionCallers on any
// threads; one FunctionCaller is used by one thread at a time (thread-compatible).
#ifndef FGEMMA_FUNCTION_CALLER_H_
#define FGEMMA_FUNCTION_CALLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/call_modes.h"
#include "fgemma/status.h"

namespace fg {

// A LoRA adapter in llama.cpp's GGUF format and the scale it is applied with (docs/adapters.md).
struct LoraAdapterFile {
  std::string path;
  float scale = 1.0f;
};

// A loaded GGUF model, the LoRA adapters applied to it, and its tokenizer.
class CallModel {
 public:
  // `prior_loras` (optional): adapters the noisy-channel tool prior (FunctionCallerOptions::
  // tool_channel) runs with instead of `loras`, each trained for the prior (`fgemma tune
  // --objective both|channel`, metadata fgemma.lora.channel = "adapted"; InvalidArgument
  // otherwise). An app's adapter tuned on its calls alone keeps the shipped adapter's trained
  // prior this way (docs/tuning.md). The base model's file is mapped once for both.
  static StatusOr<std::shared_ptr<const CallModel>> Load(
      const std::string& gguf_path, const std::vector<LoraAdapterFile>& loras = {},
      const std::vector<LoraAdapterFile>& prior_loras = {});
  ~CallModel();
  const std::string& path() const;
  int64_t trained_context() const;  // gemma3.context_length (0 when absent)

  struct Impl;  // internal (src/call)
  const Impl& impl() const { return *impl_; }

 private:
  explicit CallModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct FunctionCallerOptions {
  Dialect dialect = Dialect::kOfficial;
  // kCall: the output must be calls. kAuto on a base Gemma 3 vocabulary (a base model taught to
  // call by an adapter) runs as kCall: such a model never learned <start_function_call> (an
  // <unused> row of its embedding: log p -24 to -41 on the 24 held-out requests measured,
  // docs/tuning.md), so it cannot choose to open a call, and its free text is not an answer
  // (constrain()).
  ConstrainMode constrain = ConstrainMode::kCall;
  // Sampling: temperature 0 is greedy (the default; ties go to the lowest token id).
  double temperature = 0.0;
  int64_t top_k = 64;
  double top_p = 0.95;
  uint64_t seed = 0;
  int max_calls = 1;         // calls before decoding stops (>= 1)
  int64_t max_tokens = 256;  // generated tokens per request at most
  int64_t context = 0;       // 0: 2048, or the model's trained context if shorter
  int threads = 0;           // 0: the cores this process may use
  std::string cache_dir;     // "": the prefix snapshot lives in memory only
  // Compact dialect: tool_map[N] is the catalog name of <tool_N> ("" for an unused N).
  std::vector<std::string> tool_map;
  // Official dialect: text before the first declaration ("" = FunctionGemma's default).
  std::string developer_message;
  // With a grammar: the calls it admits are of these tools only, while the prompt still declares
  // the whole catalog (OpenAI's tool_choice naming one function). Empty: every tool. Each name
  // must be in the catalog.
  std::vector<std::string> grammar_tools;
  // false: the plain decoder, for measuring the shortcuts: one token per Append and the whole
  // LM head at every step, even when the grammar allows one or a few tokens. The output is the
  // same: the sparse rows are the full head's values, and every kernel gives a token the same
  // bits whether it is appended alone or in a batch (src/kernels/panel.h).
  bool fast_head = true;
  // Official dialect with a grammar: close a free string value (<escape>) when the model writes
  // structure (',', '{', '}', newline) inside it or after this many tokens. For models that never
  // learned <escape> (a base Gemma 3: without it they continue ",key:..." inside the string
  // until max_tokens). -1: on (24 tokens) for a base Gemma 3 vocabulary (ids 46..52 were
  // <unused..>), off for FunctionGemma; 0: off.
  int string_guard = -1;
  // Official dialect with a grammar: the noisy-channel tool prior (src/call/tool_channel.h). The
  // choice of a function name adds this weight times log p_base(request | the tool's
  // description) to the model's own logits of the name tokens, so that a tool is chosen for
  // explaining the request, not only for following the prompt. Costs one short run per tool
  // per request (the whole LM head for each of the request's first 48 tokens). -1: 4 for a
  // base Gemma 3 vocabulary (a base model taught to call by an adapter; docs/tuning.md has the
  // measurements), off for FunctionGemma; 0: off.
  double tool_channel = -1;
  // Requests that ask for a tool, as (tool name, request) pairs: appended to the tool's own
  // examples (the catalog's "examples" array beside its "name"; text::Tool::examples), which
  // the tool prior's text lists after the tool's description, ' For example: "..."; "...".' (the
  // first that fit 160 tokens; not declared to the model). An app's labelled requests make its
  // tool prior read like them (docs/tuning.md has the measurements). Each name must be a tool
  // of the catalog; each request a non-empty string.
  std::vector<std::pair<std::string, std::string>> tool_examples;
  // A request word the model's vocabulary does not know ("Feeed", "sutitles") is read as the one
  // word of the app's own text (the catalog's names, descriptions and enum members, the tools'
  // examples, tool_examples) one edit away ("Feed", "subtitles"), before anything reads the
  // request (src/call/typos.h; CallResult::mended_request, CallStats::mended_words). Known words
  // and names stay as written. CallConversation mends each user turn so.
  // -1: on for a base Gemma 3 vocabulary (a base model taught by an adapter; docs/tuning.md has
  // the measurements), off for FunctionGemma; 0: off; 1: on.
  int fix_typos = -1;
  // With the tool channel on (above), the same base model checks each optional argument of a
  // call: an argument is dropped when the request is more likely without it, log p_base(request
  // | the call without it) > log p_base(request | the call) (src/call/tool_channel.h; the
  // adapter tends to fill optional arguments the request never mentions); and an enum value is
  // replaced by the member the request is likelier with by more than 2 nats
  // (call::kEnumCheckMargin). `calls` then differ from the raw `text`; a call that streams its
  // pieces (CallControl::on_piece) is not checked, so that what was streamed stays the answer
  // (fgemma serve streams such a caller's answer at the end instead: checks_arguments()). Costs
  // a run of each call's text (with and without each optional argument, with each other enum
  // member) over the request, their shared start run once. false: off.
  bool argument_check = true;
  // With an app's adapter (`fgemma tune --tools`, which records the arguments its examples give
  // each tool, call::kGivenArgumentsKey) and a tool prior's model of its own (CallModel::Load's
  // prior_loras: the shipped call adapter, where the app's tune started): when the call leaves
  // out an optional argument that none of the app's examples gives for its tool, the request is
  // decoded again on the prior's model (the same catalog, prompt, tool prior, copy prior and
  // argument check), and when that call names the same function, the arguments it gives there
  // are added, save those the argument check would drop from the merged call without asking (an
  // unsaid word, a repeat of a required value: `source_language: "Polish"` beside
  // `target_language: "Polish"`) and an enum member the request does not say (`formality:
  // "formal"` for a request that names no formality). The app's few examples teach to leave out
  // what they never say
  // ("subtitles in French" without the language when no example names one); on those choices the
  // start knows better (docs/tuning.md, "Arguments the app never gives, from the start"). Costs
  // that second decode (and a second session's caches) only on such calls; not with a streamed call
  // (CallControl::on_piece). false: off.
  bool fill_arguments = true;
  // With an app's adapter and a tool prior's model of its own (as fill_arguments): both models
  // decode the call together, and on each step where the app's adapter is unsure (its first
  // choice among the tokens the grammar allows less than blend_sure likely) the choice is by
  // the weighted product of their probabilities, (1 - blend) log p_app + blend log p_prior,
  // before the tool and copy priors (call::BlendLogProbs). The app's examples make its adapter
  // sure of what they show (a convention: "the phone bill" pays biller "phone"), and the model
  // the tune started from still knows what they never show (docs/tuning.md, "Deciding with the
  // start"). Costs the prior's model's run of the request and of each chosen token. In [0, 1);
  // 0: off.
  double blend = 0.4;
  // The blend's threshold (above); > 1: every step, <= 0: none.
  double blend_sure = 0.97;
  // Official dialect with a grammar: the copy prior (src/call/logit_processors.h). In a free
  // string, the tokens that continue a span of the request's text get this bias added to their
  // logits, so that values the request spells are copied rather than paraphrased; in a number
  // value that has begun as a number the request says ("fifty" or "50"), the tokens that go on
  // spelling it, or end it once complete (the model loses or adds digits). With it, the key
  // prior: an argument the request names (a number followed by the argument's unit, "for 5
  // minutes"; one member of a string enum, "resting") is favoured over closing the call, and
  // its value toward what was said. -1: 8 for a base Gemma 3 vocabulary (docs/tuning.md), off
  // for FunctionGemma; 0: off.
  double copy_bias = -1;
  // Reuse, beyond the catalog prefix, the longest common token prefix of this request's prompt
  // and what the session holds from the previous call (the same request again, or one that
  // starts the same way, prefills only the tokens after the shared part). The answer is the one
  // a fresh caller gives (the chunk split does not change any bit). false: every request is
  // prefilled in full after the catalog (what "warm" means in fgemma bench).
  bool reuse_request_prefix = true;
  // With fast_head, where a step needs the whole LM head: draft up to this many tokens by
  // looking the last tokens up in the prompt and output so far, and check them all in one
  // Append (the drafts the model agrees with cost no step of their own). The answer is the one
  // without drafts (see fast_head). Each drafted token costs a row of logits (vocab floats) in
  // the activation memory; 2 fit in what a 128-token prefill chunk already uses (measurements:
  // docs/benchmarks.md). 0: off; at most 16.
  int draft_tokens = 2;
  // Warnings (a corrupt or stale cache file being rebuilt, ...). Null: written to stderr.
  std::function<void(const std::string&)> on_warning;
};

struct FunctionCall {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
  nlohmann::json ToJson() const;  // {"name": ..., "arguments": {...}}
};

struct CallStats {
  std::string prefix_source;  // "memory", "disk" or "prefill": where the catalog prefix came from
  int64_t reused_tokens = 0;  // request tokens reused from the previous call (after the prefix)
  double prefix_ms = 0;       // restoring or prefilling the catalog prefix
  double prefill_ms = 0;      // the rest of the prompt (the request)
  double decode_ms = 0;
  double total_ms = 0;
  int64_t prefix_tokens = 0;
  int64_t prompt_tokens = 0;     // whole prompt, BOS and prefix included
  int64_t generated_tokens = 0;  // stop token excluded
  // LM-head work during decoding (each step either skipped the head, computed the logits of
  // only the grammar's allowed tokens, or computed every vocabulary row).
  int64_t forced_steps = 0;  // tokens the grammar forced: no head at all
  int64_t sparse_steps = 0;
  int64_t full_steps = 0;
  int64_t drafted_steps = 0;      // steps decided from the logits of a drafted position
  int64_t drafted_tokens = 0;     // tokens drafted (prompt lookup) and checked
  int64_t accepted_tokens = 0;    // drafted tokens the model chose: no step of their own
  int64_t head_rows_skipped = 0;  // vocabulary rows not computed, over all steps
  int64_t head_rows_total = 0;    // steps x vocabulary
  int64_t guarded_strings = 0;    // strings the string guard closed
  double channel_ms = 0;          // the tool prior's scoring of the request (tool_channel)
  double argument_check_ms = 0;   // the argument check (argument_check)
  int64_t dropped_arguments = 0;  // optional arguments the argument check dropped
  int64_t replaced_values = 0;    // values the argument check changed: enum members, copies cut
  // Tools the argument check ruled out, each followed by another decode: their call had a
  // number the request, which says none, cannot have given (a digit in a free string, a
  // required number argument; call::InventsNumbers).
  int64_t excluded_tools = 0;
  // FunctionCallerOptions::fill_arguments: arguments added from the prior's model's call, and
  // the time of its decode (0 when none ran).
  int64_t filled_arguments = 0;
  double fill_ms = 0;
  // FunctionCallerOptions::blend: the steps it decided (the app's adapter unsure), and the prior's
  // model's part of the decode (its run of the request and of the tokens chosen; 0 when off).
  int64_t blended_steps = 0;
  double blend_ms = 0;
  // FunctionCallerOptions::fix_typos: request words read as another (0 when none).
  int64_t mended_words = 0;
};

// Why decoding stopped.
enum class StopReason {
  kMaxTokens,    // max_tokens generated
  kContextFull,  // the context ran out before max_tokens
  kGrammarDone,  // the grammar admits nothing more (the calls are complete)
  kMaxCalls,     // max_calls calls written (no grammar)
  kStopToken,    // a stop token (CallResult::stop_token): <eos>, <end_of_turn>, ...
};

struct CallResult {
  std::vector<FunctionCall> calls;
  std::string content;  // text outside calls (usually empty)
  std::string text;     // the raw output, special tokens as text
  std::vector<int32_t> tokens;
  StopReason stop_reason = StopReason::kMaxTokens;
  int32_t stop_token = -1;  // kStopToken: the token (not in `tokens`)
  // "max tokens", "context full", "grammar done", "max calls" or "stop token N".
  std::string stop_text() const;
  // OK when every call parsed and validated against the catalog; otherwise the reason (the
  // output was not a valid call: possible without a grammar, or when max_tokens cut it short).
  Status validity;
  CallStats stats;
  // FunctionCallerOptions::fix_typos: the request (CallConversation: the last turn, when it is
  // the user's) as read, when a word of it was mended (else empty).
  std::string mended_request;

  // The JSON `fgemma call` prints (see README): with max_calls 1 and one valid call, the call
  // object; with max_calls > 1 and valid calls, an array of call objects; otherwise
  // {"content": TEXT, "calls": [...]} plus "error" when the output was not valid.
  nlohmann::json ToJson(int max_calls) const;
};

// Settings of one call that leave the catalog, its grammar and its cached prefix alone (what a
// server takes per request): sampling and the token budget override the caller's options for this
// call only, and `cancelled` is polled before the prompt is appended and before every decoding
// step (true: the call stops with FailedPrecondition "cancelled"; the caller stays usable).
struct CallControl {
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<uint64_t> seed;
  std::optional<int64_t> max_tokens;
  std::function<bool()> cancelled;
  // Called with each generated token's text (special tokens as text) as soon as the token is
  // chosen, in order: the pieces of a call that returns a result concatenate to its `text`.
  std::function<void(std::string_view piece)> on_piece;
};

// One turn of a conversation after the catalog's developer turn (CallConversation): a user turn,
// or a model turn holding the calls the model made, the application's responses to them, and
// the model's text after them (function_prompt.h's multi-turn rules).
struct ChatTurn {
  enum class Role { kUser, kModel };
  struct Exchange {
    std::string name;
    nlohmann::json arguments = nlohmann::json::object();
    std::optional<nlohmann::json> response;  // absent: not answered (only in a cut-off turn)
  };
  Role role = Role::kUser;
  std::string text;
  std::vector<Exchange> exchanges;  // model turns only
};

class FunctionCaller {
 public:
  // `catalog_json`: the tool catalog's JSON text (tool_catalog.h lists the accepted shapes).
  // Errors: InvalidArgument for a bad catalog or options, NotFound/Io for an unusable cache
  // directory.
  static StatusOr<std::unique_ptr<FunctionCaller>> Create(std::shared_ptr<const CallModel> model,
                                                          std::string_view catalog_json,
                                                          const FunctionCallerOptions& options);
  ~FunctionCaller();

  // One request (a user turn). InvalidArgument for an empty or non-UTF-8 request, OutOfRange
  // when the prompt does not fit the context. A model output that is not a valid call is not an
  // error: see CallResult::validity.
  StatusOr<CallResult> Call(std::string_view request);
  // The same with per-call settings (CallControl); with a default CallControl, Call(request).
  StatusOr<CallResult> Call(std::string_view request, const CallControl& control);

  // A conversation (official dialect): the developer turn, then `turns` (the first a user turn),
  // then the model's turn: "<start_of_turn>model\n" after a last user turn, or, when the last
  // turn is a model turn whose every call has its response and no text, the rest of that turn
  // (the model goes on after the responses). Texts are tokenized with special tokens as plain
  // text; calls and responses are rendered (function_prompt.h) and may not contain control-token
  // text. A single user turn gives Call(text)'s tokens and answer, bit for bit. InvalidArgument
  // for a conversation that cannot be rendered so, Unimplemented for the compact dialect.
  StatusOr<CallResult> CallConversation(const std::vector<ChatTurn>& turns,
                                        const CallControl& control = {});
  // Its prompt tokens (BOS first), its user turns read as CallConversation reads them.
  StatusOr<std::vector<int32_t>> ConversationTokens(const std::vector<ChatTurn>& turns) const;

  // Prompt tokens of a request (BOS first) as Call reads it (fix_typos), and how many of them
  // are the cached prefix.
  StatusOr<std::vector<int32_t>> PromptTokens(std::string_view request) const;
  int64_t prefix_tokens() const;
  // The context actually used.
  int64_t context() const;
  // The output constraint as run: options.constrain, except kAuto on a base Gemma 3 vocabulary,
  // which runs as kCall (FunctionCallerOptions::constrain).
  ConstrainMode constrain() const;
  // Whether calls without CallControl::on_piece get the argument check or the argument fill
  // (FunctionCallerOptions::argument_check or fill_arguments, with the tool channel on): their
  // calls may differ from the decoded text.
  bool checks_arguments() const;
  // Bytes this caller's session holds reserved (KV caches, activation scratch): what keeping it
  // (and its prefilled catalog prefix) costs at most.
  size_t memory_bytes() const;

  struct Impl;  // internal (src/call)
  Impl& impl() { return *impl_; }

 private:
  explicit FunctionCaller(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads a toolMap: a JSON object {"0": "set_lights", "1": ..., "none": null} (keys that are not
// non-negative integers are ignored), or a manifest whose "toolMap" member is one. Returns
// names indexed by N ("" where the map has no N). InvalidArgument naming the problem otherwise.
// The checks FunctionCaller::Create makes on the options alone (dialect, constrain mode,
// max_calls, max_tokens, threads, sampling), with the same InvalidArgument messages: a front end
// can report them as usage errors before loading anything.
Status ValidateOptions(const FunctionCallerOptions& options);

// The checks Call/PromptTokens make on a request before tokenizing it: InvalidArgument "the
// request is empty" (empty or whitespace only) or "the request is not valid UTF-8".
Status CheckRequest(std::string_view request);

StatusOr<std::vector<std::string>> ParseToolMap(std::string_view json_text);
StatusOr<std::vector<std::string>> LoadToolMap(const std::string& path);

}  // namespace fg

#endif  // FGEMMA_FUNCTION_CALLER_H_
