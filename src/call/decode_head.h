// The LM head of FunctionCaller's decode loop: per step, the cheapest way to the logits the
// sampler needs, and the tokens on their way into the session.
//
//   forced   one token allowed (fast head): no logits at all; the token is appended with the
//            next step's Append
//   sparse   at most kSparseHeadMaxRows allowed: only those rows (LogitsRequest::Rows)
//   full     the whole head (LogitsRequest::Full), with a draft when one is found: up to
//            draft_tokens tokens by prompt lookup go in with the pending ones, and the session
//            returns the logits of every drafted position
//   drafted  a step after a drafted run: its logits are the next drafted row, no Append; the
//            first choice other than the drafted token drops the rest (Session::Truncate)
//
// The kernels give a token the same bits alone or in a batch (src/kernels/panel.h), so every
// strategy decides what the plain full head decides: they change the cost, never the output.
#ifndef FGEMMA_CALL_DECODE_HEAD_H_
#define FGEMMA_CALL_DECODE_HEAD_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fgemma/function_caller.h"
#include "fgemma/status.h"
#include "src/runtime/session.h"
#include "src/text/call_grammar.h"

namespace fg::call {

// Steps whose allowed set has at most this many tokens compute only those LM-head rows (a
// scattered row costs about what a consecutive one does; past a few thousand rows the full,
// consecutive head is as fast).
inline constexpr size_t kSparseHeadMaxRows = 1024;
// Drafted tokens per check at most: each costs a row of full logits (vocab floats) in the
// session's activation memory, and the check must fit one prefill chunk.
inline constexpr int kMaxDraftTokens = 16;

struct DecodeHeadOptions {
  int64_t vocab = 0;
  bool fast_head = true;  // false: the full head every step (no forced, sparse or drafted steps)
  int draft_tokens = 0;
  const text::CallGrammar* grammar = nullptr;  // drafts are cut to what it accepts
  std::span<const int32_t> stops;              // drafts end before a stop token
};

class DecodeHead {
 public:
  enum class Kind { kForced, kSparse, kFull, kDrafted };

  // `held`: the tokens whose K/V rows the session holds, kept in step with it (extended by each
  // Append, cut with a dropped draft, cleared when an Append fails). `pending`: the tokens to
  // append before the first logits (the request after what the session holds). Counts its
  // work in *stats (forced/sparse/full/drafted steps, drafted and accepted tokens, head rows,
  // prefill_ms).
  DecodeHead(runtime::Session* session, std::vector<int32_t>* held,
             std::vector<int32_t> pending, const DecodeHeadOptions& options, CallStats* stats);

  // A grammar step over `allowed` (non-empty) from `state`, with `left` tokens still to
  // generate: kForced (allowed[0] is the token) or the logits of `allowed` in candidates().
  StatusOr<Kind> Step(std::span<const int32_t> allowed, const text::CallGrammar::State& state,
                      int64_t left);
  // candidates()[j]: the logit of allowed[j] after a Step that was not kForced.
  std::span<float> candidates() { return cand_; }

  // A step whose logits are not needed (FunctionCallerOptions::blend: the app's adapter is sure
  // and decides alone), in place of Step: like a forced step, the token written after it goes
  // into the session with the next step that computes logits.
  void Skip();

  // A step without a grammar: the full logits of the next token.
  StatusOr<std::span<const float>> Full();

  // The token written after the last step (never a stop token): the drafted one is in the
  // session already, any other is appended with the next step (a mismatch drops the rest of
  // the draft).
  Status Written(int32_t tok);

  // When decoding began: the end of the first Append (the prefill of the request and of the
  // tokens forced before the first choice).
  std::chrono::steady_clock::time_point decode_start() const { return t_decode_; }

 private:
  Status Append(const runtime::LogitsRequest& request);
  // A full-head step: the pending tokens, with a draft after them when one is found.
  Status AppendFull(const text::CallGrammar::State& state, int64_t left);
  std::vector<int32_t> Draft(const text::CallGrammar::State& state, int64_t room) const;

  runtime::Session* const session_;
  std::vector<int32_t>* const held_;
  const DecodeHeadOptions opt_;
  CallStats* const stats_;
  std::vector<int32_t> pending_;
  std::vector<float> cand_;
  bool first_ = true;      // no Append yet
  bool forced_ = false;    // the last step was kForced
  std::chrono::steady_clock::time_point t_decode_;
  // The drafted run: draft_logits_ holds [draft_.size() + 1, vocab] logits; draft_row_ is the
  // row of the next step while in_draft_.
  std::vector<int32_t> draft_;
  std::span<const float> draft_logits_;
  size_t draft_row_ = 0;
  bool in_draft_ = false;
};

}  // namespace fg::call

#endif  // FGEMMA_CALL_DECODE_HEAD_H_
