// Internal to src/kernels: scalar helpers shared by the K-quant files and their tests.
#ifndef FGEMMA_KERNELS_KQUANTS_INTERNAL_H_
#define FGEMMA_KERNELS_KQUANTS_INTERNAL_H_

#include <cstdint>

#include "src/kernels/kquant_blocks.h"

namespace fg::kernels::internal {

// The 8 six-bit scales (out[0..7]) and 8 six-bit mins (out[8..15]) of a Q4_K/Q5_K block.
// ref: ggml/src/ggml-quants.c get_scale_min_k4. Defined in kquants.cc (scalar flags only).
void UnpackScalesMinsK4(const uint8_t packed[kKScaleSize], uint8_t out[16]);

}  // namespace fg::kernels::internal

#endif  // FGEMMA_KERNELS_KQUANTS_INTERNAL_H_
