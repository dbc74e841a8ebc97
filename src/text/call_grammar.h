// Grammar-constrained decoding of FunctionGemma calls: an incremental automaton over the call
// syntax of *one* catalog, applied as a token mask at every decode step.
//
// The language is exactly what ParseModelOutput + ValidateCall accept with exact tool names
// (no snapping needed): only declared tool names, only declared keys of that tool, each key at
// most once, required keys present before the object closes, enum members, numbers, booleans,
// <escape>-wrapped strings, arrays and nested objects typed by the schema.
//
//   official: <start_function_call>call:NAME{key:VALUE,...}<end_function_call>   (docs/model.md)
//   compact:  <tool_N>(key="value", key=3)<end>           (the seed's fine-tune; toolMap names)
//
// Modes: kCall (the output must be one or more calls), kAuto (free text, and any call that is
// started is constrained). kOff means no grammar (never compiled).
//
// Tokens are walked through the automaton by their text (pieces with U+2581 read as a space,
// byte tokens <0xNN> as their byte); special tokens (46-52, 106, 1, <tool_N>, <end>) are atomic
// symbols. Allowed-token sets are computed once per distinct automaton state (a trie walk over
// the vocabulary) and memoized, so a decode step costs a hash lookup after the first request.
//
// Stop tokens: 1 (<eos>), 106 (<end_of_turn>), 50 (<start_function_response>) are in the allowed
// set exactly when the output so far is complete; with max_calls == 1 the grammar is done after
// the first <end_function_call> (49) and the caller stops without sampling. In general Done()
// turns true after the max_calls-th call's end token, or after a stop token.
//
// Special tokens are found by text (<start_function_call>, <end_function_call>, <escape>;
// compact: <tool_N> for N < tool_map.size() and <end>; stops: <eos> / vocab eos, <end_of_turn>,
// <start_function_response> where present). Every other control, unknown or unused token, and
// any token with an empty piece, is never allowed. User-defined tokens are walked as text.
//
// Deliberate differences from what the parser tolerates (the grammar accepts a subset: every
// text it accepts parses and validates; RenderCall's canonical output is always accepted):
//   * no whitespace around punctuation (compact: exactly "," or ", " between arguments and
//     array items, nothing around '='); keys only bare, never <escape>d; keys in any order;
//   * strings only <escape>d (compact: "..." with \" and \\ as the only escapes); numbers and
//     booleans only bare; no null; an INTEGER has no fraction or exponent;
//   * numbers: at most 18 integer digits, 18 fraction digits, 2 exponent digits (so the value
//     stays finite and an INTEGER fits int64, as the parser needs);
//   * the text of <escape> inside a string and of the call marker (<start_function_call>;
//     compact "<tool_") in free text are refused: the parser would read them as syntax;
//   * strings are valid UTF-8 (byte tokens included), as the parser requires;
//   * an OBJECT without declared properties (and objects inside untyped arrays) takes at most
//     one key, of [A-Za-z0-9_] characters: a finite automaton cannot refuse duplicate free keys;
//   * values never nest deeper than the parser's kMaxValueDepth (untyped values at the last
//     level are scalars); a schema deeper than that is refused by Create;
//   * kAuto: after a call, only another call (while calls remain) or a stop token; free text
//     only before the first call.
//
// Memoization: the key is the whole automaton stack (which holds no text, only positions,
// seen-key masks and small counters) plus whether calls remain; inside an official string
// only the string's own state is keyed (only the atomic <escape> leaves a string, so every
// string position shares a few entries: the 262k-token walk runs about once per grammar).
// Compact strings end on a '"' byte, so their sets depend on the context; the part without '"'
// tokens is computed once per string state and a new context only walks the '"' tokens.
// Entries are never evicted: the state space is finite (no text is kept in the stack).
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fgemma/status.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::text {

enum class Dialect { kOfficial, kCompact };
enum class ConstrainMode { kOff, kCall, kAuto };

// "official" / "compact", "call" / "auto" / "off": for flags and messages.
StatusOr<Dialect> ParseDialect(std::string_view name);
StatusOr<ConstrainMode> ParseConstrainMode(std::string_view name);

struct GrammarOptions {
  Dialect dialect = Dialect::kOfficial;
  ConstrainMode mode = ConstrainMode::kCall;  // kOff is refused by CallGrammar::Create
  int max_calls = 1;                          // calls before the output must end (>= 1)
  // Compact dialect only: tool_map[N] is the catalog name of <tool_N> (the manifest's toolMap).
  std::vector<std::string> tool_map;
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

  // Consumes one token; InvalidArgument if it is not allowed in `s` (s is then unchanged).
  Status Advance(State* s, int32_t token) const;

  // Nothing may follow: the caller stops without sampling another token.
  bool Done(const State& s) const { return s.done; }

  // True if a stop token (1, 106, 50) is allowed now, i.e. the output so far is complete.
  bool CanStop(const State& s) const;

  // True inside the body of an official-dialect free string, at a character boundary (no UTF-8
  // sequence open), i.e. where <escape> may close it: the string guard's state.
  bool InFreeString(const State& s) const;

  // Distinct automaton states whose allowed set has been computed (stats/tests).
  size_t memoized_states() const;

 private:
  struct Impl;
  explicit CallGrammar(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fg::text

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_H_
