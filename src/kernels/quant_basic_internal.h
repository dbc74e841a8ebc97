// Internal to src/kernels: how quant_basic.cc reaches the SIMD variants of its kernels, and
// scalar helpers the SIMD files share.
#ifndef FGEMMA_KERNELS_QUANT_BASIC_INTERNAL_H_
#define FGEMMA_KERNELS_QUANT_BASIC_INTERNAL_H_

#include "src/kernels/registry.h"

namespace fg::kernels::internal {

// A 2 x 2 register tile of vec_dot for batched matmuls: out[r + 2 t] = w_r . a_t for weight
// rows w0, w1 (in the weight type) and activation rows a0, a1 (in its dot_type), bit for bit
// what that ISA's vec_dot returns, so results never depend on how rows fall into tiles.
using DotTileFn = void (*)(int64_t n, const void* w0, const void* w1, const void* a0,
                           const void* a1, float* out);
// The tile kernel of `t` on `isa`, or nullptr (then use vec_dot).
DotTileFn GetDotTile(DType t, Isa isa);

// Four weight rows against one activation row (decode): out[r] = w[r] . a, bit for bit what
// vec_dot returns; the activation block, its scale and offset are loaded once for all four.
inline constexpr int kDotRows = 4;
using DotRowsFn = void (*)(int64_t n, const void* const* w, const void* a, float* out);
DotRowsFn GetDotRows(DType t, Isa isa);

#if defined(__x86_64__) || defined(__i386__)
// Overwrite the members of F32/F16/BF16/Q8_0/Q8_1/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL that the ISA
// vectorizes (quant_basic_avx2.cc, quant_basic_avx512.cc).
void RegisterBasicAvx2(OpsTable& t);
void RegisterBasicAvx512(OpsTable& t);
DotTileFn DotTileAvx2(DType t);
DotRowsFn DotRowsAvx2(DType t);
DotTileFn DotTileAvx512(DType t);
// The K-quant (Q4_K/Q5_K/Q6_K) tiles, kquants_avx512.cc; nullptr for other types.
DotTileFn KQuantTileAvx512(DType t);
DotRowsFn DotRowsAvx512(DType t);
#endif

}  // namespace fg::kernels::internal

#endif  // FGEMMA_KERNELS_QUANT_BASIC_INTERNAL_H_
