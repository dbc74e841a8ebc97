// The call grammar's vocabulary index (internal to CallGrammar): what each token id is to the
// automaton (an atomic symbol, text walked by its bytes, a stop, never allowed) and the text
// tokens' pieces sorted bytewise. The sorted pieces are the vocabulary's byte trie, implicitly:
// Walk visits it under the automaton's step function, which the caller passes in (a template
// argument, so the step is a direct call).
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_VOCAB_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_VOCAB_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/text/call_grammar.h"
#include "src/text/call_grammar_symbols.h"
#include "src/text/tokenizer.h"

namespace fg::text::grammar {

// Token classes (per id) besides special symbols (>= 256).
inline constexpr int32_t kTokText = -1;   // walked by its bytes
inline constexpr int32_t kTokNever = -2;  // never allowed (controls, unused, empty pieces)
inline constexpr int32_t kTokStop = -3;   // 1 / 106 / 50: allowed when the output is complete

class VocabIndex {
 public:
  // Classifies every token of `tok` for a grammar of the compact dialect (with `tools` entries
  // in its tool map: <tool_0>..) or the official one, and sorts the text tokens by piece.
  // Errors: a dialect's special token missing, no stop token.
  Status Build(const Tokenizer& tok, bool compact, size_t tools);

  int32_t size() const { return vocab_size_; }
  // kTok* or a symbol >= 256.
  int32_t Class(int32_t id) const { return tok_class_[id]; }
  const std::vector<std::pair<int32_t, int>>& special() const { return special_; }  // (id, sym)
  const std::vector<int32_t>& stops() const { return stops_; }
  // Compact only: the text tokens whose piece contains '"'.
  const std::vector<int32_t>& quote_tokens() const { return quote_tokens_; }
  size_t max_piece() const { return max_piece_; }

  // The text tokens in piece order: the i-th (i < count()) has id Token(i) and piece
  // SortedPiece(i).
  uint32_t count() const { return static_cast<uint32_t>(sorted_tok_.size()); }
  int32_t Token(uint32_t i) const { return sorted_tok_[i]; }
  uint32_t PieceLen(uint32_t i) const { return sorted_off_[i + 1] - sorted_off_[i]; }
  uint8_t PieceByte(uint32_t i, uint32_t depth) const {
    return static_cast<uint8_t>(sorted_buf_[sorted_off_[i] + depth]);
  }
  std::string_view SortedPiece(uint32_t i) const {
    return std::string_view(sorted_buf_).substr(sorted_off_[i], PieceLen(i));
  }

  // The end of the run of pieces in [i, hi) whose byte at `depth` equals i's (all are longer
  // than `depth`, and sorted, so the run is a prefix of [i, hi)). Galloping, not bisecting
  // [i, hi): most runs are one or two pieces long, and a walk meets about one run per trie node.
  uint32_t RunEnd(uint32_t i, uint32_t hi, uint32_t depth) const {
    const uint8_t b = PieceByte(i, depth);
    uint32_t same = i;    // the last index known to be in the run
    uint32_t other = hi;  // the first index known to be past it
    for (uint32_t step = 1; same + step < hi; step *= 2) {
      if (PieceByte(same + step, depth) != b) {
        other = same + step;
        break;
      }
      same += step;
    }
    while (other - same > 1) {
      const uint32_t mid = same + (other - same) / 2;
      if (PieceByte(mid, depth) == b) {
        same = mid;
      } else {
        other = mid;
      }
    }
    return other;
  }

  // Whether some text token's piece is exactly `w`.
  bool IsPiece(std::string_view w) const;

  // Sets bits[id] for every text token whose bytes `step` (bool(State&, int sym)) accepts one
  // after the other from `s`. bits has a bit per token id.
  template <class StepFn>
  void Walk(const State& s, const StepFn& step, std::vector<uint64_t>& bits) const {
    std::vector<State> buf(max_piece_ + 2);
    buf[0] = s;
    WalkNode(0, count(), 0, buf, bits, step);
  }

  // Steps text token `id`'s bytes on `t`; false (t garbage) at the first one refused.
  template <class StepFn>
  bool WalkPiece(State& t, int32_t id, const StepFn& step) const {
    const uint32_t i = static_cast<uint32_t>(rank_[id]);
    for (uint32_t d = 0; d < PieceLen(i); ++d) {
      if (!step(t, PieceByte(i, d))) return false;
    }
    return true;
  }

 private:
  // Marks every text token whose bytes the automaton accepts from buf[depth]. The pieces
  // [lo, hi) share their first `depth` bytes (buf[depth] is the state after them): they are a
  // node of the vocabulary's trie. Those of exactly that length sort first and end here; the
  // rest form one child per run of equal byte at `depth`, visited only if the automaton takes
  // that byte, so a state that refuses a byte never looks at the pieces that start with it.
  template <class StepFn>
  void WalkNode(uint32_t lo, uint32_t hi, uint32_t depth, std::vector<State>& buf,
                std::vector<uint64_t>& bits, const StepFn& step) const {
    uint32_t i = lo;
    for (; i < hi && PieceLen(i) == depth; ++i) {
      const int32_t id = sorted_tok_[i];
      bits[id >> 6] |= 1ull << (id & 63);
    }
    while (i < hi) {
      const uint32_t end = RunEnd(i, hi, depth);
      State& ns = buf[depth + 1];
      ns.stack.assign(buf[depth].stack.begin(), buf[depth].stack.end());
      ns.calls_done = buf[depth].calls_done;
      ns.done = false;
      if (end - i == 1) {
        // One piece below: nothing branches any more, so its remaining bytes are stepped in
        // one state instead of a copy per byte.
        uint32_t d = depth;
        while (d < PieceLen(i) && step(ns, PieceByte(i, d))) ++d;
        if (d == PieceLen(i)) bits[sorted_tok_[i] >> 6] |= 1ull << (sorted_tok_[i] & 63);
      } else if (step(ns, PieceByte(i, depth))) {
        WalkNode(i, end, depth + 1, buf, bits, step);
      }
      i = end;
    }
  }

  int32_t vocab_size_ = 0;
  std::vector<int32_t> tok_class_;
  std::vector<std::pair<int32_t, int>> special_;
  std::vector<int32_t> stops_;
  // Text tokens sorted by piece (bytes compared unsigned): the i-th has id sorted_tok_[i] and
  // piece sorted_buf_[sorted_off_[i], sorted_off_[i + 1]); rank_[id] is its i (text tokens
  // only). This order is the vocabulary's trie, implicitly (see WalkNode): 5 MB with the pieces
  // on the 262k vocabulary, where an explicit node trie took 1.1M nodes, 22 MB more.
  std::string sorted_buf_;
  std::vector<uint32_t> sorted_off_;
  std::vector<int32_t> sorted_tok_;
  std::vector<int32_t> rank_;
  size_t max_piece_ = 0;
  std::vector<int32_t> quote_tokens_;
};

}  // namespace fg::text::grammar

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_VOCAB_H_
