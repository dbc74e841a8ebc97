// Training examples for `fgemma tune`: JSONL in the Hugging Face / TRL tool-calling format
// FunctionGemma's docs use, or the short form with a catalog given separately, each rendered
// by the code `fgemma call` uses, so the prompt a model is trained on is byte for byte the one
// it is asked with.
// A channel example (TrainingExample::channel) renders as the tool prior asks: the tool's
// channel prompt, then the request, whose tokens are the target (call::ToolChannel).
//
//   TRL:   {"tools": [OpenAI function schemas], "messages": [{"role": "developer"|"system",
//           "content": ...}, {"role": "user", "content": ...}, {"role": "assistant",
//           "tool_calls": [{"type": "function", "function": {"name": ..., "arguments": {...}}}]}]}
//           (arguments may also be a JSON string, as OpenAI sends them)
//   short: {"request": ..., "calls": [{"name": ..., "arguments": {...}}]} with a catalog
//
// Every call must validate against its tools (text::ValidateCall): an invalid call is an error
// naming the line, never a training example.
#ifndef FGEMMA_CALL_TRAINING_DATA_H_
#define FGEMMA_CALL_TRAINING_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fgemma/status.h"
#include "src/text/function_prompt.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::call {

struct TrainingExample {
  int line = 0;  // 1-based line in its file
  // The catalog and developer message the prompt declares; examples that share them share the
  // prompt's prefix (catalog_key is equal for them).
  std::shared_ptr<const text::ToolCatalog> catalog;
  std::string catalog_key;
  text::PromptOptions prompt;
  std::string request;
  std::vector<std::pair<std::string, nlohmann::json>> calls;  // name, arguments (an object)
  // A tool prior example (ChannelExamples): the target is the request after the channel prompt
  // of its one call's tool (call::ChannelPromptTokens), not the call after the catalog prompt.
  bool channel = false;
  // A tool prior example's contrast (ChannelExamples with negatives): other tools of its
  // catalog, by name. The trainer scores the request after each of their channel prompts too
  // and learns -log softmax over the scores (the true tool against these), not the request's
  // likelihood alone.
  std::vector<std::string> channel_negatives;
};

// Parses every non-empty line of `jsonl` (`source` names it in errors: "FILE line N: ...").
// `catalog` is the catalog of short-form lines (nullptr: they are an error).
StatusOr<std::vector<TrainingExample>> ParseTrainingData(
    std::string_view jsonl, std::string_view source,
    std::shared_ptr<const text::ToolCatalog> catalog = nullptr);

// Value-swap augmentation, for an app's few labelled requests: up to `variants` new examples per
// example, each with one or more argument values that appear verbatim in the request (once, on
// word boundaries, case-insensitively; strings as they are, integers as digits) replaced, in the
// request and in the call together, by another value the examples give the same argument of the
// same tool of the same catalog. "Send 25 dollars to Anna" -> "Send 12 dollars to Tom" when other
// lines pay Tom 12. Every new call validates against its tool; a request that already exists is
// not added twice. Deterministic for a seed; the originals come first, unchanged.
std::vector<TrainingExample> AugmentSwappingValues(const std::vector<TrainingExample>& examples,
                                                   int variants, uint64_t seed);

// The adapter metadata key under which an app's tune records the arguments its examples give
// (GivenArguments); FunctionCaller fills the others from the starting adapter
// (FunctionCallerOptions::fill_arguments).
inline constexpr const char* kGivenArgumentsKey = "fgemma.lora.given_arguments";

// For call examples that all declare one catalog (an app's labelled requests, `fgemma tune
// --tools`; the tool prior's examples, TrainingExample::channel, are not looked at): a JSON
// object naming every tool of it, each with the sorted argument keys its examples' calls give
// (empty for a tool no example calls), as compact text. "" when the call examples declare more
// than one catalog (the corpus), there are none, or the catalog has no tools. Trainer::
// AdapterWriter records it in the adapter under kGivenArgumentsKey.
std::string GivenArguments(const std::vector<TrainingExample>& examples);

// The tool prior's examples (`fgemma tune --objective both|channel`): for each example with one
// call, the request after the called tool's channel prompt (TrainingExample::channel; its
// catalog_key is the tool's text and examples, so examples of one tool share their prefix). A
// tool's examples (text::Tool::examples) never include the request itself: it is left out of
// them, there and in a negative's tool (a request is not trained after itself). A request said
// twice to one tool gives one example. In the examples' order. With `negatives` > 0, each
// example also names up to that many other tools of its catalog (channel_negatives), drawn
// without replacement from the seed.
std::vector<TrainingExample> ChannelExamples(const std::vector<TrainingExample>& examples,
                                             int negatives = 0, uint64_t seed = 0);

// One of a tool prior example's contrast: the same request after `tool`'s channel prompt
// (`tool` one of e.channel_negatives, a tool of e's catalog; its key the tool's text and
// examples but e's request, as ChannelExamples keys).
TrainingExample ChannelNegative(const TrainingExample& e, const std::string& tool);

// The tokens of one example: <bos> + prefix + request (call::PrefixTokens, call::RequestTokens:
// what FunctionCaller prefills) then the target, the calls as the model writes them
// (RenderCall each) through the last <end_function_call>. The loss covers
// tokens[target_start..]: each target token is predicted from the tokens before it.
struct TrainingTokens {
  std::vector<int32_t> tokens;
  int64_t prefix_len = 0;    // <bos> + the catalog prefix (the same for one catalog_key)
  int64_t target_start = 0;  // index of the first target token
  // The target tokens that leave optional arguments out (LeaveOuts' characters), ascending;
  // where one token holds two such characters, their keys together.
  struct LeaveOutToken {
    int64_t index = 0;  // into tokens
    std::string tool;
    std::vector<std::string> keys;
  };
  std::vector<LeaveOutToken> leave_out;
};
StatusOr<TrainingTokens> RenderTrainingExample(const text::Tokenizer& tk,
                                               const TrainingExample& example);

// Where rendered calls (RenderCall's text, one call after another) leave optional arguments
// out. The call syntax writes the keys sorted, so the first character of a key leaves out the
// optional keys of its tool that sort between the key before it (or the start) and itself, and
// the '}' that closes a call's arguments leaves out those that sort after its last key. Top-level
// arguments only; a call of a tool not in `catalog` has none.
struct LeaveOut {
  size_t offset = 0;  // of the character that makes the choice
  std::string tool;
  std::vector<std::string> keys;  // the optional keys it leaves out, sorted
};
std::vector<LeaveOut> LeaveOuts(std::string_view calls, const text::ToolCatalog& catalog);

}  // namespace fg::call

#endif  // FGEMMA_CALL_TRAINING_DATA_H_
