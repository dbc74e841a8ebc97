// The call grammar's budget (internal to CallGrammar): per compiled schema, the fewest tokens
// that spell each literal and each value's shortest form, and from them the fewest tokens that
// complete the output from a state (CallGrammar::MinTokensToFinish).
//
// A frame's rest is exact within each literal it still has to write (a key with its separator,
// an enum member, a tool's header: the fewest text tokens whose pieces spell it, atomic tokens
// one each) and takes the shortest value for each value it still needs; Finish adds the rests
// of the stack's frames. A token spanning two frames ("}}") may finish sooner, so the sum is an
// upper bound, but one always reached: from a state with a finite sum, the first token of its
// plan is allowed and lowers the sum by one.
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_COST_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_COST_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "src/text/call_grammar.h"
#include "src/text/call_grammar_machine.h"
#include "src/text/call_grammar_schema.h"
#include "src/text/call_grammar_vocab.h"

namespace fg::text::grammar {

inline constexpr int kInf = CallGrammar::kNoFinish;  // a token count no completion reaches
inline int Sat(int64_t n) { return static_cast<int>(std::min<int64_t>(n, kInf)); }

class Costs {
 public:
  // Computes the tables; the arguments must outlive the object.
  Costs(const CompiledSchema& schema, const VocabIndex& vocab, const Machine& machine);

  // The fewest tokens that complete the output from `s` (CallGrammar::MinTokensToFinish).
  int Finish(const State& s) const;
  // A bound on Finish over every state.
  int max_finish() const { return max_finish_; }

 private:
  // Per literal trie: per node the fewest tokens from it to the end of a member below it plus
  // the member's extra (CostTrie); per member the fewest tokens that spell its symbols k..end.
  struct TrieCosts {
    std::vector<int> rest;
    std::vector<std::vector<int>> suffix;
  };

  std::vector<int> SuffixCosts(const std::vector<int>& syms) const;
  int Cost(const std::vector<int>& syms) const { return SuffixCosts(syms)[0]; }
  void CostTrie(int lit, const std::vector<int>& extra);
  int ObjClose(const VNode& v) const;
  int ObjOpen(const VNode& v) const;
  int Tail(int node, const uint32_t* seen, int also, bool after_value) const;
  int KeyRest(int node, const uint32_t* seen, int tn) const;
  int StrRest(uint32_t sub) const;
  int FrameRest(const std::vector<uint32_t>& st, size_t end) const;
  int VCost(int node);
  int MaxD(int node);
  void Build();

  const CompiledSchema& g_;
  const VocabIndex& vocab_;
  const Machine& machine_;
  // Costs count tokens; kInf where nothing spells it.
  int byte_cost_[256] = {};           // 1 when a text token is exactly that byte, else kInf
  int num_cost_ = kInf;               // one digit
  int empty_arr_ = kInf, empty_obj_ = kInf, empty_str_ = kInf;  // [] {} and an empty string
  int str_rest_[8] = {};              // in a string body with UTF-8 state u: the rest, closed
  int str_backslash_ = kInf;          // compact: after a backslash
  std::vector<TrieCosts> trie_;       // per literal trie
  std::vector<int> vcost_;            // per value node: its shortest complete value, fresh
  // Per kObject node, per key: the tokens of "key:" plus the key's shortest value.
  std::vector<std::vector<int>> keyval_;
  std::vector<int> maxd_;             // per value node: bound on the finish of its frames
  int call_cost_ = kInf;              // a whole call, from kTopExpectCall
  int max_finish_ = kInf;             // bound on Finish over every state
};

}  // namespace fg::text::grammar

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_COST_H_
