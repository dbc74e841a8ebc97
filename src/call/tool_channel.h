// The noisy-channel tool prior (Min et al., 2022, "Noisy Channel Language Model Prompting for
// Few-Shot Text Classification"): besides the adapted model's own choice of a function, how
// likely the *base* model finds the request after each tool's description,
//
//   channel(t) = log p_base(request | TOOL TEXT + "\nA user asks for it: \"")
//
// where TOOL TEXT is "Function NAME(params): DESCRIPTION Parameters: key: its description; ..."
// with each enum's members after its key (ChannelToolText). An adapter trained for it (`fgemma
// tune --objective both`, metadata fgemma.lora.channel) runs the request's rows instead of the
// base model: p_adapted(request | TOOL TEXT ...), the text's K/V still the base model's.
//
// summed over the request's tokens. It asks "which tool explains this request" instead of
// "which name follows this prompt", so it does not share the direct model's attractor tools
// (docs/tuning.md: on the held-out catalogs the two choose differently, and each is right where
// the other is wrong). FunctionCaller adds weight * channel(t) to the direct model's logits of
// the name tokens (MakeToolPrior): a token that can still lead to several tools gets the
// log-sum-exp of their priors.
//
// Each tool's text is prefilled once per caller (its K/V rows kept, ~36 KiB a token for the 270M);
// a request then costs one run per tool over its tokens (final-norm hidden states only), and one
// LM head over all tools' rows together (the log-softmax needs whole rows; in vocabulary slices,
// so the head's weights are packed once per request and no row of full logits is kept).
#ifndef FGEMMA_CALL_TOOL_CHANNEL_H_
#define FGEMMA_CALL_TOOL_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/call/logit_processors.h"
#include "src/kernels/matmul.h"
#include "src/runtime/model.h"
#include "src/runtime/session.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::call {

// Request tokens scored at most (the first ones), and tool-text tokens kept at most (the end
// is cut: the parameters' descriptions, then the tool's; the closing line is always there).
inline constexpr int64_t kChannelRequestTokens = 48;
inline constexpr int64_t kChannelToolTokens = 160;
// Tokens of a tool's example requests (text::Tool::examples) kept at most, after its text: the
// first examples that fit whole.
inline constexpr int64_t kChannelExampleTokens = 160;
// Enum members listed in a tool's text at most (ChannelToolText).
inline constexpr size_t kChannelEnumMembers = 10;
// FunctionCallerOptions::tool_channel's default weight for a base Gemma 3 vocabulary.
inline constexpr double kDefaultToolChannel = 4.0;

// Tokens of a call's text kept at most (ChannelCallText; its description is left out first).
inline constexpr int64_t kChannelCallTokens = 96;

// A tool's text: "Function NAME(p1, p2: m1|m2): DESCRIPTION Parameters: p1: D1; p2: D2."
// (parameters in key order; an enum's first kChannelEnumMembers members after its key, "|..."
// when there are more; the parameters' descriptions, when they have any, after the tool's,
// where kChannelToolTokens cuts first). The closing line "\nA user asks for it: \"" is added
// by ToolChannel. Measured on the held-out catalogs (docs/tuning.md): the members and the
// parameters' descriptions took the right function from 597 to 613 of 774 requests and the
// exact call from 460 to 480 over the names alone.
std::string ChannelToolText(const text::Tool& tool);
// A tool's channel prompt: <bos>, ChannelToolText cut to kChannelToolTokens, its examples
// (' For example: "REQUEST"; "REQUEST".', the first that fit kChannelExampleTokens), the ask line
// "\nA user asks for it: \"". The request's tokens (ChannelRequestTokens) follow it; ToolChannel
// and `fgemma tune --objective` (call::RenderTrainingExample) both render it here.
std::vector<int32_t> ChannelPromptTokens(const text::Tokenizer& tk, const text::Tool& tool);
// The request's first kChannelRequestTokens tokens, the ones the prior sums over;
// InvalidArgument for an empty request.
StatusOr<std::vector<int32_t>> ChannelRequestTokens(const text::Tokenizer& tk,
                                                    std::string_view request);
// The argument check's text of one call: "Function NAME(): DESCRIPTION Called as
// NAME(k1=V1, k2=V2)." (keys in order, values as JSON); `with_description` false leaves the
// description out.
std::string ChannelCallText(const text::Tool& tool, const nlohmann::json& arguments,
                            bool with_description = true);

// The argument check's decision for one call of `tool` (FunctionCallerOptions::argument_check).
// `score` gives channel(c) (ToolChannel::ScoreCalls) for each of a list of argument objects; it
// is asked once, for the decoded `arguments` and, beside them,
//   - each optional argument left out: dropped when the request is likelier without it;
//   - each other member of an argument's enum: taken when the request is likelier with it by
//     more than kEnumCheckMargin (nats), the best such member; only for an argument that
//     stays. docs/tuning.md has what each part fixes and breaks.
// Required arguments stay, and so does an argument whose value the request says
// (`said->arguments`, SaidArguments: "for eighty days" keeps `days` 80, which the base model
// found the request likelier without); every member is one the schema allows, so a valid call
// stays valid. With `said`, an optional number argument (not an enum) whose value (sign aside)
// is none of the numbers the request says (`said->numbers`, SaidNumberValues) is dropped without
// asking: `minutes: 60` for "water the greenhouse at 6:10 am" (the data's labels have such a value
// in 11 of 450 optional number arguments in training, 0 of the held-out ones), also when the
// request says it only inside another of the call's string values (`minutes: 7` beside `time`
// "7:20 am"; `portions: 10` beside "8:10 pm"); so is an optional array of free strings with an
// item that holds another of the call's string values, case aside (`rooms: ["at 11 pm"]`
// beside `time: "11 pm"`); so is an optional
// free string (not an enum) with a word that starts no word of the request, case aside
// (`zone: "rainin drogue"` for "it's raining, turn the water off"; 4 of the data's 1,103 optional
// free-string labels have such a word: "all" for "everyone"); so is an optional free string
// equal, case aside, to the value of a required or enum argument (`category: "this_month"`
// beside `period: "this_month"`; none of the data's 6,853 labelled calls has one); and a free string
// copied from the request that ends with " N", where the request goes on with a word that makes
// N the value of another argument the call has with that value, loses the N ("Max 12 kilos":
// `pet` "Max 12" -> "Max" beside `kg` 12; not "Inside Out 2" in "Inside Out 2 at 3:15" beside
// `tickets` 2); and one that ends with " " and another argument's string value loses it and a
// word that joined them ("Turkish Japanese" -> "Turkish" beside `language_b` "Japanese"; "I
// would like a coffee in Hindi" -> "I would like a coffee" beside `language` "Hindi"), unless
// only a determiner would be left ("the credit card" beside "credit card").
// Arguments that are not an object, or a tool with no properties, ask nothing.
inline constexpr double kEnumCheckMargin = 2.0;
struct CheckedArguments {
  nlohmann::json arguments;
  int64_t dropped = 0;   // optional arguments left out
  int64_t replaced = 0;  // values changed: enum members taken, numbers cut off a string
};
using CallScorer =
    std::function<StatusOr<std::vector<double>>(std::span<const nlohmann::json> arguments)>;
StatusOr<CheckedArguments> CheckArguments(const text::Tool& tool, const nlohmann::json& arguments,
                                          const CallScorer& score, const SaidFacts* said = nullptr);
// The optional arguments CheckArguments (with `said`) drops without asking, by the rules above:
// an unsaid number, a number said only inside another string, a free string with an unsaid word
// or repeating a required or enum argument's value, an array of free strings with an item
// holding another string value.
std::vector<std::string> UnsaidArguments(const text::Tool& tool, const nlohmann::json& arguments,
                                         const SaidFacts& said);
// FunctionCallerOptions::fill_arguments' merge: adds to `arguments` each key of `open` that
// `other` (the partner's call of the same function) gives, except, with `said` (null: none is
// left out), one that UnsaidArguments finds in the merged call, so the fill adds nothing the
// argument check would drop (the partner's `source_language: "Polish"` beside the app's
// `target_language: "Polish"`), and an enum member other than the one the request says
// (SaidEnumMember: `formality: "formal"` for a request that names no formality). Returns the keys
// added, in `open`'s order.
std::vector<std::string> FillArguments(const text::Tool& tool, std::span<const std::string> open,
                                       const nlohmann::json& other, const SaidFacts* said,
                                       nlohmann::json* arguments);
// True when a call of `tool` with `arguments` holds a number that a request saying none
// (no SaidNumberValues and no digit in `request`) cannot have given: a free string (not
// an enum member; also an array's or an object's) with a digit, or a required number argument.
// Such a call is the adapter's invention, and its tool most likely the wrong one: "Charlie is
// begging again" -> schedule_feeding with `time: "9 am"`, "Coco has been throwing up" ->
// log_pet_weight with `kg: 100`. FunctionCaller decodes such a call again without its tool
// (FunctionCallerOptions::argument_check). In the data's labels: 1 of the 774 held-out calls
// ("log a glass of water": `ml` 250), 3 strings and some 90 required numbers of the 6,079
// training calls ("turn it off in a bit": `minutes` 20), each a convention of one catalog.
bool InventsNumbers(const text::Tool& tool, const nlohmann::json& arguments,
                    std::string_view request);

class ToolChannel {
 public:
  // Runs the model with no adapter (SessionOptions::lora_from past the context), but where the
  // model's adapters were trained for the prior (Model::adapters_in_channel): Score then runs
  // each tool's request rows, from its text's last token on, with them (the tool texts' K/V
  // stay the base model's). `pool` is the caller's (not owned, may be null).
  static StatusOr<std::unique_ptr<ToolChannel>> Create(const runtime::Model& model,
                                                       const text::Tokenizer& tk,
                                                       const text::ToolCatalog& catalog,
                                                       ThreadPool* pool);
  // The scored tools' names, catalog order (Score's order).
  const std::vector<std::string>& names() const { return names_; }
  // channel(t) per tool, catalog order. The request must not be empty.
  StatusOr<std::vector<double>> Score(std::string_view request);
  // The argument check (FunctionCallerOptions::argument_check): channel(c) = log p_base(request |
  // ChannelCallText(c)) for each call c of `calls` (tool, arguments), the same sum over the
  // request's first tokens as Score. The texts' common first tokens are run once and restored
  // for each; nothing is kept between requests.
  StatusOr<std::vector<double>> ScoreCalls(
      std::span<const std::pair<const text::Tool*, nlohmann::json>> calls,
      std::string_view request);
  // Bytes held: the session's caches and scratch, the tools' K/V rows.
  size_t memory_bytes() const;

 private:
  ToolChannel() = default;
  Status ApplyHead(std::span<const int32_t> targets, std::span<double> logp);
  // The request's tokens Score and ScoreCalls sum over (cut to kChannelRequestTokens).
  StatusOr<std::vector<int32_t>> RequestTokens(std::string_view request) const;
  // Per run of `runs`, the sum of log p(req[i]) over hidden_'s rows of that run (runs x
  // req.size() rows, in order).
  StatusOr<std::vector<double>> SumRuns(std::span<const int32_t> req, int64_t runs);
  const text::Tokenizer* tk_ = nullptr;
  std::vector<std::string> names_;
  ThreadPool* pool_ = nullptr;
  int64_t hidden_size_ = 0;
  kernels::WeightMatrix head_;          // the LM head (token_embd when tied)
  std::vector<float> hidden_, logits_;  // scratch of Score
  std::unique_ptr<runtime::Session> session_;
  // Per tool: its text's K/V up to its last token, and that last token (appended with the
  // request, so that its row gives the first request token's log-probability).
  std::vector<runtime::Session::Snapshot> tools_;
  std::vector<int32_t> last_;
  std::vector<int32_t> ask_;  // the ask's tokens
};

// The prior as a logit processor: where the written text since <start_function_call> is
// "call:" and part of a name, each allowed token gets
//   log sum_{t: t.name fits the text with the token} exp(prior[t])
//     - log sum_{t: t.name fits the text before it} exp(prior[t])
// added to its logit (0 for tokens that do not reach into the name); a prior of -infinity rules
// its tool out (a token that leads only to such tools is ruled out). `names` and `prior` are in
// catalog order and must outlive the processor; `pieces` gives a token's text.
std::unique_ptr<LogitProcessor> MakeToolPrior(const std::vector<std::string>* names,
                                              const std::vector<double>* prior,
                                              const text::Tokenizer* pieces, int32_t start_call);

}  // namespace fg::call

#endif  // FGEMMA_CALL_TOOL_CHANNEL_H_
