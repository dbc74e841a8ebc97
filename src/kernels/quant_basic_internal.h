// Internal to src/kernels: how quant_basic.cc reaches the SIMD variants of its kernels, and
// scalar helpers the SIMD files share.
#ifndef FGEMMA_KERNELS_QUANT_BASIC_INTERNAL_H_
#define FGEMMA_KERNELS_QUANT_BASIC_INTERNAL_H_

#include "src/kernels/registry.h"

namespace fg::kernels::internal {

#if defined(__x86_64__) || defined(__i386__)
// Overwrite the members of F32/F16/BF16/Q8_0/Q8_1/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL that the ISA
// vectorizes (quant_basic_avx2.cc, quant_basic_avx512.cc).
void RegisterBasicAvx2(OpsTable& t);
void RegisterBasicAvx512(OpsTable& t);
#endif

}  // namespace fg::kernels::internal

#endif  // FGEMMA_KERNELS_QUANT_BASIC_INTERNAL_H_
