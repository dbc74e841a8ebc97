// Test helper: inputs for executor tests (deterministic random values, a resolver without
// weights), shared so the executor tests draw the same numbers the same way.
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

// A resolver for graphs without weights: any lookup is NotFound.
inline exec::WeightResolver NoWeights() {
  return [](std::string_view name) -> StatusOr<exec::WeightData> {
    return NotFoundError("no weight " + std::string(name));
  };
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_EXEC_INPUTS_H_
