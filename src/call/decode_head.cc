#include "src/call/decode_head.h"

#include <algorithm>
#include <utility>

namespace fg::call {

DecodeHead::DecodeHead(runtime::Session* session, std::vector<int32_t>* held,
                       std::vector<int32_t> pending, const DecodeHeadOptions& options,
                       CallStats* stats)
    : session_(session),
      held_(held),
      opt_(options),
      stats_(stats),
      pending_(std::move(pending)),
      t_decode_(std::chrono::steady_clock::now()) {}

Status DecodeHead::Append(const runtime::LogitsRequest& request) {
  if (Status s = session_->Append(pending_, request); !s.ok()) {
    held_->clear();  // the session stopped somewhere inside `pending`: nothing to reuse
    return s;
  }
  held_->insert(held_->end(), pending_.begin(), pending_.end());
  pending_.clear();
  if (first_) {
    // The first Append holds the request and the tokens the grammar forced before the first
    // choice: that is the prefill.
    first_ = false;
    const auto now = std::chrono::steady_clock::now();
    stats_->prefill_ms = std::chrono::duration<double, std::milli>(now - t_decode_).count();
    t_decode_ = std::chrono::steady_clock::now();
  }
  return OkStatus();
}

StatusOr<DecodeHead::Kind> DecodeHead::Step(std::span<const int32_t> allowed,
                                            const text::CallGrammar::State& state, int64_t left) {
  // One token allowed: it is forced, without running the LM head (its K/V rows are computed
  // with the next Append).
  forced_ = allowed.size() == 1 && opt_.fast_head;
  if (forced_) return Kind::kForced;
  const size_t vocab = static_cast<size_t>(opt_.vocab);
  cand_.resize(allowed.size());
  std::span<const float> lg;  // full logits, when this step has them
  Kind kind;
  if (in_draft_) {
    lg = draft_logits_.subspan(draft_row_ * vocab, vocab);
    ++stats_->drafted_steps;
    kind = Kind::kDrafted;
  } else if (opt_.fast_head && allowed.size() <= kSparseHeadMaxRows) {
    FG_RETURN_IF_ERROR(Append(runtime::LogitsRequest::Rows(allowed)));
    std::span<const float> rl = session_->row_logits();
    std::copy(rl.begin(), rl.end(), cand_.begin());
    ++stats_->sparse_steps;
    stats_->head_rows_skipped += opt_.vocab - static_cast<int64_t>(allowed.size());
    kind = Kind::kSparse;
  } else {
    FG_RETURN_IF_ERROR(AppendFull(state, left));
    lg = session_->logits().first(vocab);
    ++stats_->full_steps;
    kind = Kind::kFull;
  }
  if (!lg.empty()) {
    for (size_t j = 0; j < allowed.size(); ++j) cand_[j] = lg[allowed[j]];
  }
  stats_->head_rows_total += opt_.vocab;
  return kind;
}

// Speculative run: drafted tokens (Draft) go into the session with the pending ones in one
// Append that returns the logits of every drafted position; the following steps read those
// rows while they keep choosing the drafted tokens (kDrafted).
Status DecodeHead::AppendFull(const text::CallGrammar::State& state, int64_t left) {
  if (opt_.fast_head && !first_) {
    const int64_t room =
        std::min<int64_t>(left - 1, session_->context() - session_->position() -
                                        static_cast<int64_t>(pending_.size()));
    draft_ = Draft(state, room);
  } else {
    draft_.clear();
  }
  if (draft_.empty()) return Append(runtime::LogitsRequest::Full());
  pending_.insert(pending_.end(), draft_.begin(), draft_.end());
  FG_RETURN_IF_ERROR(
      Append(runtime::LogitsRequest::Full(static_cast<int64_t>(draft_.size()) + 1)));
  draft_logits_ = session_->logits();
  draft_row_ = 0;
  in_draft_ = true;
  stats_->drafted_tokens += static_cast<int64_t>(draft_.size());
  return OkStatus();
}

void DecodeHead::Skip() { forced_ = false; }

StatusOr<std::span<const float>> DecodeHead::Full() {
  forced_ = false;
  FG_RETURN_IF_ERROR(Append(runtime::LogitsRequest::Full()));
  ++stats_->full_steps;
  stats_->head_rows_total += opt_.vocab;
  return session_->logits();
}

Status DecodeHead::Written(int32_t tok) {
  if (forced_) {
    ++stats_->forced_steps;
    stats_->head_rows_skipped += opt_.vocab;
    stats_->head_rows_total += opt_.vocab;
  }
  if (in_draft_ && draft_row_ < draft_.size() && tok == draft_[draft_row_]) {
    ++draft_row_;  // the drafted token was right: it is in the session already
    ++stats_->accepted_tokens;
    return OkStatus();
  }
  if (in_draft_) {
    // Drop the drafted tokens after the last one chosen (none when all were).
    const int64_t extra = static_cast<int64_t>(draft_.size() - draft_row_);
    if (extra > 0) {
      FG_RETURN_IF_ERROR(session_->Truncate(session_->position() - extra));
      held_->resize(static_cast<size_t>(session_->position()));
    }
    in_draft_ = false;
  }
  pending_.push_back(tok);
  return OkStatus();
}

// Prompt-lookup drafting: the tokens that followed the latest earlier occurrence of the last
// three (else two) tokens of everything so far (the session's tokens, then the pending ones),
// cut to what the grammar accepts from `state` and to `room` tokens, stopping before a stop
// token. A call copies its string values from the request ("buy milk"), and a base model
// repeats itself; either way the next tokens were often already seen.
std::vector<int32_t> DecodeHead::Draft(const text::CallGrammar::State& state,
                                       int64_t room) const {
  std::vector<int32_t> out;
  const int64_t want = std::min<int64_t>(opt_.draft_tokens, room);
  if (want <= 0) return out;
  const std::vector<int32_t>& held = *held_;
  const int64_t n_held = static_cast<int64_t>(held.size());
  const int64_t n = n_held + static_cast<int64_t>(pending_.size());
  auto at = [&](int64_t i) { return i < n_held ? held[i] : pending_[i - n_held]; };
  int64_t from = -1;
  for (int64_t len : {3, 2}) {
    if (n < len + 1) continue;
    for (int64_t i = n - len - 1; i >= 0 && from < 0; --i) {
      bool same = true;
      for (int64_t k = 0; k < len && same; ++k) same = at(i + k) == at(n - len + k);
      if (same) from = i + len;
    }
    if (from >= 0) break;
  }
  if (from < 0) return out;
  const text::CallGrammar* grammar = opt_.grammar;
  auto is_stop = [&](int32_t t) {
    return std::find(opt_.stops.begin(), opt_.stops.end(), t) != opt_.stops.end();
  };
  text::CallGrammar::State s = state;
  for (int64_t i = from; i < n && static_cast<int64_t>(out.size()) < want; ++i) {
    const int32_t t = at(i);
    if (is_stop(t) || (grammar != nullptr && (grammar->Done(s) || !grammar->Advance(&s, t).ok()))) {
      break;
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace fg::call
