#include "src/call/logit_processors.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

namespace fg::call {
namespace {

// Sets the candidates whose token `drop` rules out to -inf, unless that would leave none.
template <class Drop>
void RuleOut(std::span<const int32_t> allowed, std::span<float> cand, Drop drop) {
  if (std::all_of(allowed.begin(), allowed.end(), drop)) return;
  for (size_t j = 0; j < allowed.size(); ++j) {
    if (drop(allowed[j])) cand[j] = -INFINITY;
  }
}

class StringGuard : public LogitProcessor {
 public:
  StringGuard(int budget, const std::vector<bool>* structural, int32_t escape)
      : budget_(budget), structural_(structural), escape_(escape) {}

  // The string's first token may not be structure or <escape> (unless that leaves none: the
  // budget can leave only <escape>).
  void Restrict(const SampleStep& step, std::span<float> cand) override {
    if (string_tokens_ == 0 && step.grammar.InFreeString(step.state)) {
      RuleOut(step.allowed, cand, [&](int32_t t) { return (*structural_)[t] || t == escape_; });
    }
  }
  // <escape> where the pick closes the string (a structure token after the first, or one past
  // the budget).
  int32_t Replace(const SampleStep& step, int32_t tok, CallStats* stats) override {
    if (tok == escape_ || !step.grammar.InFreeString(step.state)) {
      string_tokens_ = 0;
      return tok;
    }
    if ((string_tokens_ > 0 && (*structural_)[tok]) || ++string_tokens_ > budget_) {
      string_tokens_ = 0;
      ++stats->guarded_strings;
      return escape_;
    }
    return tok;
  }
  // The budget can force a string's <escape>: it ends the string.
  void Forced(int32_t tok) override {
    if (tok == escape_) string_tokens_ = 0;
  }

 private:
  const int budget_;
  const std::vector<bool>* const structural_;
  const int32_t escape_;
  int string_tokens_ = 0;  // tokens of the free string so far
};

class DigitGuard : public LogitProcessor {
 public:
  explicit DigitGuard(const std::vector<bool>* digits) : digits_(digits) {}

  // Past 12 digits in a row outside a string, no digit (unless only digits are allowed).
  void Restrict(const SampleStep& step, std::span<float> cand) override {
    if (digit_run_ >= 12 && !step.grammar.InFreeString(step.state)) {
      RuleOut(step.allowed, cand, [&](int32_t t) { return static_cast<bool>((*digits_)[t]); });
    }
  }
  void Written(int32_t tok) override { digit_run_ = (*digits_)[tok] ? digit_run_ + 1 : 0; }

 private:
  const std::vector<bool>* const digits_;
  int digit_run_ = 0;  // digit tokens written in a row
};

class CopyPrior : public LogitProcessor {
 public:
  CopyPrior(std::string request, double bias, const text::Tokenizer* tk)
      : request_(std::move(request)), bias_(static_cast<float>(bias)), tk_(tk) {}

  void Restrict(const SampleStep& step, std::span<float> cand) override {
    in_string_ = step.grammar.InFreeString(step.state);
    if (!in_string_) {
      text_.clear();
      return;
    }
    // The tokens whose text is request[at, at + len) where request[i, at) is the string so far.
    std::vector<int32_t> copy;
    for (size_t i = 0; i + text_.size() <= request_.size(); ++i) {
      if (text_.empty() && i > 0 && request_[i - 1] != ' ') continue;  // a word's start
      if (request_.compare(i, text_.size(), text_) != 0) continue;
      const size_t at = i + text_.size();
      for (size_t len = 1; len <= kMaxPiece && at + len <= request_.size(); ++len) {
        std::string key;  // the vocabulary spells a space as U+2581
        for (char c : std::string_view(request_).substr(at, len)) {
          key += c == ' ' ? std::string_view("\xe2\x96\x81") : std::string_view(&c, 1);
        }
        if (auto id = tk_->Find(key)) copy.push_back(*id);
      }
    }
    std::sort(copy.begin(), copy.end());
    copy.erase(std::unique(copy.begin(), copy.end()), copy.end());
    for (int32_t id : copy) {  // `allowed` is sorted
      const auto it = std::lower_bound(step.allowed.begin(), step.allowed.end(), id);
      if (it != step.allowed.end() && *it == id)
        cand[static_cast<size_t>(it - step.allowed.begin())] += bias_;
    }
  }
  void Written(int32_t tok) override {
    if (in_string_) text_ += tk_->TokenToPiece(tok, /*special=*/true);
  }

 private:
  static constexpr size_t kMaxPiece = 32;  // bytes of a token's text looked up at most
  const std::string request_;
  const float bias_;
  const text::Tokenizer* tk_;
  bool in_string_ = false;  // the last Restrict was in a free string
  std::string text_;        // the free string's text so far
};

}  // namespace

int32_t LogitProcessorChain::Sample(const SampleStep& step, std::span<float> cand,
                                    runtime::Sampler& sampler, CallStats* stats) {
  for (const auto& p : chain_) p->Restrict(step, cand);
  int32_t tok = step.allowed[sampler.Sample(cand)];
  for (const auto& p : chain_) tok = p->Replace(step, tok, stats);
  return tok;
}

void LogitProcessorChain::Forced(int32_t tok) {
  for (const auto& p : chain_) p->Forced(tok);
}

void LogitProcessorChain::Written(int32_t tok) {
  for (const auto& p : chain_) p->Written(tok);
}

std::unique_ptr<LogitProcessor> MakeStringGuard(int budget, const std::vector<bool>* structural,
                                                int32_t escape) {
  return std::make_unique<StringGuard>(budget, structural, escape);
}

std::unique_ptr<LogitProcessor> MakeDigitGuard(const std::vector<bool>* digits) {
  return std::make_unique<DigitGuard>(digits);
}

std::unique_ptr<LogitProcessor> MakeCopyPrior(std::string request, double bias,
                                              const text::Tokenizer* pieces) {
  return std::make_unique<CopyPrior>(std::move(request), bias, pieces);
}

}  // namespace fg::call
