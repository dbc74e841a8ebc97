#include "src/call/logit_processors.h"

#include <algorithm>
#include <cmath>
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

}  // namespace fg::call
