// Test helper: arguments of the contract functions that several tests build the same way.
#ifndef FGEMMA_TESTS_TESTING_CONTRACT_INPUTS_H_
#define FGEMMA_TESTS_TESTING_CONTRACT_INPUTS_H_

#include <cstdint>
#include <vector>

#include "src/export/host_invoke.h"

namespace fg::testing {

// A `select` argument: f32 [1, n], 1 at `at`, 0 elsewhere.
inline exporter::HostTensor OneHot(int64_t n, int64_t at) {
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  v[static_cast<size_t>(at)] = 1.0f;
  return exporter::HostTensor::F32({1, n}, v);
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_CONTRACT_INPUTS_H_
