#include "src/runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "src/kernels/ops.h"

namespace fg::runtime {

namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Status ValidateSampling(const SamplingParams& p) {
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) {
    return InvalidArgumentError("temperature must be a finite number >= 0");
  }
  if (p.top_k < 0) return InvalidArgumentError("top-k must be >= 0");
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) return InvalidArgumentError("top-p must be in (0, 1]");
  return OkStatus();
}

Sampler::Sampler(const SamplingParams& p) : p_(p) {
  uint64_t s = p.seed;
  for (auto& w : state_) w = SplitMix64(s);
}

double Sampler::Uniform() {  // xoshiro256**
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return static_cast<double>(result >> 11) * 0x1.0p-53;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (logits.empty()) return 0;
  if (p_.temperature == 0.0) {
    // The element-op kernel (lowest index of the largest value, NaNs skipped): the scalar loop
    // it replaces carried a dependency through logits[best] and took ~2 ms per step over a
    // 262k vocabulary.
    return static_cast<int32_t>(
        kernels::Argmax(logits.data(), static_cast<int64_t>(logits.size())));
  }
  // top-k first (partial sort), then softmax at the temperature, then the top-p nucleus.
  const size_t k = p_.top_k > 0 ? std::min<size_t>(p_.top_k, logits.size()) : logits.size();
  cand_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {logits[i], static_cast<int32_t>(i)};
  auto greater = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), greater);
  cand_.resize(k);
  const double mx = cand_[0].first;
  std::vector<double> prob(k);
  double sum = 0.0;
  for (size_t i = 0; i < k; ++i) {
    prob[i] = std::exp((cand_[i].first - mx) / p_.temperature);
    sum += prob[i];
  }
  size_t keep = k;
  double cum = 0.0;
  for (size_t i = 0; i < k; ++i) {
    cum += prob[i] / sum;
    if (cum >= p_.top_p) {
      keep = i + 1;
      break;
    }
  }
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  double r = Uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= prob[i];
    if (r < 0.0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace fg::runtime
