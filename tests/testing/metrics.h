// Error measures shared by the numerical tests.
#ifndef FGEMMA_TESTS_TESTING_METRICS_H_
#define FGEMMA_TESTS_TESTING_METRICS_H_

#include <cstddef>
#include <span>

namespace fg::testing {

// Normalized mean squared error: sum (got - want)^2 / sum want^2, in double.
inline double Nmse(std::span<const float> got, std::span<const float> want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? num / den : num;
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_METRICS_H_
