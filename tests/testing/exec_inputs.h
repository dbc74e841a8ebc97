// Test helper: inputs for executor tests (deterministic random values and prompts, a resolver
// without weights), shared so the tests draw the same numbers the same way.
#ifndef FGEMMA_TESTS_TESTING_EXEC_INPUTS_H_
#define FGEMMA_TESTS_TESTING_EXEC_INPUTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/exec/executor.h"

namespace fg::testing {

// n values in [-1, 1) from a linear congruential generator seeded with `seed`.
inline std::vector<float> Random(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>((seed >> 8) / double(1 << 24) * 2 - 1);
  }
  return v;
}

// A prompt of n token ids: BOS (2), then ids in [7, vocab) from a linear congruential generator.
inline std::vector<int32_t> Prompt(int n, int64_t vocab, uint32_t seed = 7) {
  std::vector<int32_t> t = {2};
  uint32_t x = seed;
  while (static_cast<int>(t.size()) < n) {
    x = x * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>(7 + (x >> 8) % (vocab - 7)));
  }
  return t;
}

// A resolver for graphs without weights: any lookup is NotFound.
inline exec::WeightResolver NoWeights() {
  return [](std::string_view name) -> StatusOr<exec::WeightData> {
    return NotFoundError("no weight " + std::string(name));
  };
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_EXEC_INPUTS_H_
