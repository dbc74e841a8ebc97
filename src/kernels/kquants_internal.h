// Internal to src/kernels: how kquants.cc reaches the SIMD K-quant kernels, and the scalar
// helpers shared by the K-quant files and their tests.
#ifndef FGEMMA_KERNELS_KQUANTS_INTERNAL_H_
#define FGEMMA_KERNELS_KQUANTS_INTERNAL_H_

#include <cstdint>

#include "src/kernels/kquant_blocks.h"
#include "src/kernels/registry.h"

namespace fg::kernels::internal {

#if defined(__x86_64__) || defined(__i386__)
// Overwrite the vec_dot of Q4_K/Q5_K/Q6_K and the quantize_row of Q8_K with the ISA's versions
// (kquants_avx2.cc, kquants_avx512.cc). Call only when the CPU has the ISA.
void RegisterKQuantAvx2(OpsTable& t);
void RegisterKQuantAvx512(OpsTable& t);
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
// Overwrite the vec_dot of Q4_K/Q5_K/Q6_K with the NEON versions (kquants_neon.cc).
void RegisterKQuantNeon(OpsTable& t);
#endif

// The 8 six-bit scales (out[0..7]) and 8 six-bit mins (out[8..15]) of a Q4_K/Q5_K block.
// ref: ggml/src/ggml-quants.c get_scale_min_k4. Defined in kquants.cc (scalar flags only).
void UnpackScalesMinsK4(const uint8_t packed[kKScaleSize], uint8_t out[16]);

}  // namespace fg::kernels::internal

#endif  // FGEMMA_KERNELS_KQUANTS_INTERNAL_H_
