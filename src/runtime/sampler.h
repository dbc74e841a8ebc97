// Next-token choice from logits: greedy, or temperature / top-k / top-p sampling with a seeded
// generator (same seed, same logits -> same tokens on every machine: the generator and the
// uniform draw are fgemma's own, not the standard library's implementation-defined ones).
#ifndef FGEMMA_RUNTIME_SAMPLER_H_
#define FGEMMA_RUNTIME_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "fgemma/status.h"

namespace fg::runtime {

struct SamplingParams {
  double temperature = 0.0;  // 0: greedy (argmax, ties to the lowest id)
  int64_t top_k = 64;        // 0: no limit
  double top_p = 0.95;       // 1: no limit
  uint64_t seed = 0;
};

// Checks ranges: temperature >= 0, top_k >= 0, 0 < top_p <= 1.
Status ValidateSampling(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  int32_t Sample(std::span<const float> logits);

 private:
  double Uniform();  // [0, 1)
  SamplingParams p_;
  uint64_t state_[4];
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace fg::runtime

#endif  // FGEMMA_RUNTIME_SAMPLER_H_
