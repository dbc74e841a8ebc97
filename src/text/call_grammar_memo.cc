#include "src/text/call_grammar_memo.h"

#include <bit>

namespace fg::text::grammar {

std::span<const int32_t> Memo::Allowed(const State& s) const {
  if (s.done) return {};
  thread_local std::vector<uint32_t> key;
  m_.Key(s, &key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memo_.find(std::span<const uint32_t>(key));
    if (it != memo_.end()) return *it->second;
  }
  auto set = std::make_unique<const std::vector<int32_t>>(Compute(s));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = memo_.try_emplace(key, std::move(set));
  return *it->second;
}

std::span<const int32_t> Memo::Allowed(const State& s, int64_t budget) const {
  const std::span<const int32_t> all = Allowed(s);
  if (all.empty() || budget < 1 || budget - 1 >= costs_.max_finish()) return all;
  const int need = costs_.Finish(s);
  if (need > budget) return all;  // no completion fits: nothing to keep within reach
  const int slack = static_cast<int>(budget - 1 - need);
  // The deltas depend on the same part of the state as the allowed set (inside an official
  // string, only <escape> leaves it, and it leaves the enclosing frames as they were).
  thread_local std::vector<uint32_t> key;
  m_.Key(s, &key);
  Deltas* d = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = deltas_.find(std::span<const uint32_t>(key));
    if (it != deltas_.end()) d = it->second.get();
  }
  if (d == nullptr) {
    auto nd = std::make_unique<Deltas>();
    nd->delta.reserve(all.size());
    for (int32_t id : all) {
      const int64_t delta = int64_t{FinishAfter(s, id)} - need;
      nd->delta.push_back(static_cast<int>(std::min<int64_t>(delta, kInf)));
      nd->max_delta = std::max(nd->max_delta, nd->delta.back());
    }
    std::lock_guard<std::mutex> lock(mu_);
    d = deltas_.try_emplace(key, std::move(nd)).first->second.get();
  }
  if (slack >= d->max_delta) return all;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = d->fit.find(slack);
  if (it == d->fit.end()) {
    auto fit = std::make_unique<std::vector<int32_t>>();
    for (size_t j = 0; j < all.size(); ++j) {
      if (d->delta[j] <= slack) fit->push_back(all[j]);
    }
    it = d->fit.try_emplace(slack, std::move(fit)).first;
  }
  return *it->second;
}

// Compact strings end on a '"' byte, so their allowed set depends on what encloses them and
// is memoized per context. Most of it does not: the tokens without '"' that stay inside the
// string depend only on the string's own state. That part is computed once per string state
// (a walk of the whole trie); a context then only walks the few tokens that contain '"'.
const std::vector<uint64_t>& Memo::CompactStringBase(uint32_t hdr, uint32_t sub) const {
  {
    std::lock_guard<std::mutex> lock(base_mu_);
    auto it = string_base_.find(sub);
    if (it != string_base_.end()) return *it->second;
  }
  auto bits = std::make_unique<std::vector<uint64_t>>((vocab_.size() + 63) / 64, 0);
  State alone;
  alone.stack = {sub, hdr};  // the string alone: a '"' empties the stack
  vocab_.Walk(alone, m_.stepper(), *bits);
  for (int32_t id : vocab_.quote_tokens()) (*bits)[id >> 6] &= ~(1ull << (id & 63));
  std::lock_guard<std::mutex> lock(base_mu_);
  return *string_base_.try_emplace(sub, std::move(bits)).first->second;
}

std::vector<int32_t> Memo::Compute(const State& s) const {
  std::vector<uint64_t> bits;
  if (m_.schema().compact && Machine::InStringBody(s)) {
    bits = CompactStringBase(s.stack.back(), Machine::TopSub(s));
    for (int32_t id : vocab_.quote_tokens()) {
      State t = s;
      if (vocab_.WalkPiece(t, id, m_.stepper())) bits[id >> 6] |= 1ull << (id & 63);
    }
  } else {
    bits.assign((vocab_.size() + 63) / 64, 0);
    vocab_.Walk(s, m_.stepper(), bits);
  }
  for (const auto& [id, sym] : vocab_.special()) {
    State t = s;
    if (m_.Step(t, sym)) bits[id >> 6] |= 1ull << (id & 63);
  }
  if (m_.CanStop(s)) {
    for (int32_t id : vocab_.stops()) bits[id >> 6] |= 1ull << (id & 63);
  }
  std::vector<int32_t> out;
  for (size_t w = 0; w < bits.size(); ++w) {
    uint64_t b = bits[w];
    while (b) {
      out.push_back(static_cast<int32_t>(w * 64 + std::countr_zero(b)));
      b &= b - 1;
    }
  }
  return out;
}

// The completion cost after token `id` (kInf when it is not allowed).
int Memo::FinishAfter(const State& s, int32_t id) const {
  if (vocab_.Class(id) == kTokStop) return m_.CanStop(s) ? 0 : kInf;
  State t = s;
  return m_.StepToken(vocab_, t, id) ? costs_.Finish(t) : kInf;
}

}  // namespace fg::text::grammar
