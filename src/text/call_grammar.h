// Grammar-constrained decoding of FunctionGemma calls: an automaton over the call syntax of one
// catalog, applied as a token mask at every decode step.
//
//   official: <start_function_call>call:NAME{key:VALUE,...}<end_function_call>
//   compact:  <tool_N>(key="value", key=3)<end>        (named through the toolMap)
//
// Contract: every output the grammar accepts parses (ParseModelOutput / ParseCompactOutput) and
// validates (ValidateCall) with exact tool names; RenderCall's canonical output is always
// accepted. The language is a subset of what the parser tolerates. The stop tokens (<eos>,
// <end_of_turn>, <start_function_response>) are allowed exactly when the output so far is
// complete. Allowed sets are memoized per automaton state, so a step costs a lookup once warm.
//
// The language in full, how tokens are walked, stopping and the memo: docs/architecture.md
// "The call grammar"; the output formats: docs/model.md.
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fgemma/call_modes.h"
#include "fgemma/status.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::text {

// The public enums (include/fgemma/call_modes.h); kOff is never compiled into a grammar.
using ::fg::ConstrainMode;
using ::fg::Dialect;
using ::fg::ParseConstrainMode;
using ::fg::ParseDialect;

// Items of an array whose schema gives no "maxItems".
inline constexpr int kDefaultMaxArrayItems = 16;

struct GrammarOptions {
  Dialect dialect = Dialect::kOfficial;
  ConstrainMode mode = ConstrainMode::kCall;  // kOff is refused by CallGrammar::Create
  int max_calls = 1;                          // calls before the output must end (>= 1)
  // Compact dialect only: tool_map[N] is the catalog name of <tool_N> (the manifest's toolMap).
  std::vector<std::string> tool_map;
  // Items an array without a schema "maxItems" takes at most (>= 0).
  int max_array_items = kDefaultMaxArrayItems;
};

class CallGrammar {
 public:
  // Opaque decoding state of one request; cheap to copy (a small stack).
  struct State {
    std::vector<uint32_t> stack;  // automaton frames; meaning private to the implementation
    int calls_done = 0;
    bool done = false;
  };

  // Errors: a catalog the grammar cannot express, a tokenizer without the dialect's special
  // tokens (e.g. compact without <tool_N>), bad options.
  static StatusOr<std::unique_ptr<CallGrammar>> Create(const ToolCatalog& catalog,
                                                       const Tokenizer& tokenizer,
                                                       const GrammarOptions& options);
  ~CallGrammar();

  State Start() const;

  // Token ids allowed next, sorted ascending, never empty unless Done(s). The span stays valid
  // as long as the grammar lives (memoized). Thread-safe: sessions on several threads may share
  // one grammar.
  std::span<const int32_t> Allowed(const State& s) const;

  // Allowed(s) cut to the tokens after which the output can still be completed within
  // `budget` tokens in all, this one included (MinTokensToFinish of the next state at most
  // budget - 1): with the budget spent on them, the output ends complete. Allowed(s) itself
  // when the budget is not binding, or when no completion fits it at all
  // (MinTokensToFinish(s) > budget). Never empty unless Done(s); memoized and thread-safe
  // like Allowed(s).
  std::span<const int32_t> Allowed(const State& s, int64_t budget) const;

  // The fewest tokens that complete the output from `s` (0 when CanStop(s)), counting each
  // key, enum member or header by the fewest tokens that spell it and each value still needed
  // by its shortest form; a token spanning two of these ("}}") can only do better. kNoFinish
  // when the vocabulary cannot spell a completion.
  static constexpr int kNoFinish = 1 << 24;
  int MinTokensToFinish(const State& s) const;

  // Consumes one token; InvalidArgument if it is not allowed in `s` (s is then unchanged).
  Status Advance(State* s, int32_t token) const;

  // Nothing may follow: the caller stops without sampling another token.
  bool Done(const State& s) const { return s.done; }

  // True if a stop token (1, 106, 50) is allowed now, i.e. the output so far is complete.
  bool CanStop(const State& s) const;

  // True inside the body of an official-dialect free string, at a character boundary (no UTF-8
  // sequence open), i.e. where <escape> may close it: the string guard's state.
  bool InFreeString(const State& s) const;

  // True inside a number value (integer or number), from its first character on: the next token
  // may continue it (a digit, '.', ...) or, once it is complete, end it (',', '}', ...).
  bool InNumber(const State& s) const;

  // Distinct automaton states whose allowed set has been computed (stats/tests).
  size_t memoized_states() const;

 private:
  struct Impl;
  explicit CallGrammar(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fg::text

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_H_
