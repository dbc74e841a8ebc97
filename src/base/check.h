// FG_CHECK: invariants the program itself owns (never for file, flag or user input: those
// return a Status). A failed check prints where and aborts.
#ifndef FGEMMA_BASE_CHECK_H_
#define FGEMMA_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FG_CHECK(cond)                                                             \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "fgemma: internal check failed at %s:%d: %s\n", __FILE__, \
                   __LINE__, #cond);                                               \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

#endif  // FGEMMA_BASE_CHECK_H_
