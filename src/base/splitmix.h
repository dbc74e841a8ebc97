// SplitMix64: a tiny generator whose output is fixed by its definition, so a seed gives the same
// adapter and the same example order on every machine and standard library.
#ifndef FGEMMA_BASE_SPLITMIX_H_
#define FGEMMA_BASE_SPLITMIX_H_

#include <cstdint>

namespace fg {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace fg

#endif  // FGEMMA_BASE_SPLITMIX_H_
