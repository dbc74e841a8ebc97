// How the kernel families plug their TypeOps into the per-ISA tables behind GetTypeOps().
// Internal to src/kernels.
//
// For each ISA the table is built by first registering every family's scalar kernels
// (Register*(Isa::kScalar, t)) and then the same functions with the ISA, which overwrite only
// the members that ISA specializes. So an ISA without a kernel for some type uses the scalar one.
#ifndef FGEMMA_KERNELS_REGISTRY_H_
#define FGEMMA_KERNELS_REGISTRY_H_

#include "src/kernels/cpu.h"
#include "src/kernels/quant.h"

namespace fg::kernels::internal {

inline constexpr int kMaxTypeId = 64;

struct OpsTable {
  TypeOps ops[kMaxTypeId];  // indexed by the DType id; ops[i].dequantize_row == nullptr: none
};

// F32, F16, BF16, Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (quant_basic*.cc).
void RegisterBasicOps(Isa isa, OpsTable& t);
// Q4_K, Q5_K, Q6_K and their activation type Q8_K (kquants*.cc).
void RegisterKQuantOps(Isa isa, OpsTable& t);
#if defined(__ARM_NEON) || defined(__aarch64__)
// NEON members for whichever types quant_neon.cc covers (only built on ARM).
void RegisterNeonOps(OpsTable& t);
#endif

}  // namespace fg::kernels::internal

#endif  // FGEMMA_KERNELS_REGISTRY_H_
