// The fuzz targets' invariant check: a failed one prints where and aborts, which libFuzzer
// reports as a crash and keeps the input of.
#ifndef FGEMMA_FUZZ_FUZZ_CHECK_H_
#define FGEMMA_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FG_FUZZ_CHECK(cond)                                                         \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#endif  // FGEMMA_FUZZ_FUZZ_CHECK_H_
