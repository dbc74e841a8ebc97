// The call grammar's memo (internal to CallGrammar): allowed sets computed once per automaton
// state key (Machine::Key) by a walk of the vocabulary, and for budgets the change of the
// completion cost per allowed token and the tokens that fit each slack. Entries are never
// evicted (the state space is finite); lookups are thread-safe.
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_MEMO_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_MEMO_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "src/text/call_grammar_cost.h"
#include "src/text/call_grammar_machine.h"
#include "src/text/call_grammar_vocab.h"

namespace fg::text::grammar {

class Memo {
 public:
  // The arguments must outlive the memo.
  Memo(const Machine& machine, const VocabIndex& vocab, const Costs& costs)
      : m_(machine), vocab_(vocab), costs_(costs) {}

  // CallGrammar::Allowed(s) and Allowed(s, budget).
  std::span<const int32_t> Allowed(const State& s) const;
  std::span<const int32_t> Allowed(const State& s, int64_t budget) const;

  // Keys whose allowed set is computed.
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return memo_.size();
  }

 private:
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::span<const uint32_t> k) const {
      uint64_t h = 1469598103934665603ull;
      for (uint32_t w : k) h = (h ^ w) * 1099511628211ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
    size_t operator()(const std::vector<uint32_t>& k) const {
      return (*this)(std::span<const uint32_t>(k));
    }
  };
  struct KeyEq {
    using is_transparent = void;
    bool operator()(std::span<const uint32_t> a, std::span<const uint32_t> b) const {
      return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
    }
  };
  template <class V>
  using KeyMap = std::unordered_map<std::vector<uint32_t>, V, KeyHash, KeyEq>;

  // Per key whose budget was asked: the change of the completion cost per allowed token and,
  // per slack, the tokens that fit it.
  struct Deltas {
    std::vector<int> delta;  // parallel to the allowed set
    int max_delta = -kInf;
    std::unordered_map<int, std::unique_ptr<const std::vector<int32_t>>> fit;
  };

  std::vector<int32_t> Compute(const State& s) const;
  const std::vector<uint64_t>& CompactStringBase(uint32_t hdr, uint32_t sub) const;
  int FinishAfter(const State& s, int32_t id) const;

  const Machine& m_;
  const VocabIndex& vocab_;
  const Costs& costs_;

  mutable std::mutex base_mu_;
  mutable std::unordered_map<uint32_t, std::unique_ptr<const std::vector<uint64_t>>> string_base_;
  mutable std::mutex mu_;  // memo_ and deltas_
  mutable KeyMap<std::unique_ptr<const std::vector<int32_t>>> memo_;
  mutable KeyMap<std::unique_ptr<Deltas>> deltas_;
};

}  // namespace fg::text::grammar

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_MEMO_H_
