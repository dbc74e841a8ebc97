// Packed-panel matmul kernels for batched activations (m > 1, prefill). Internal to src/kernels.
//
// The 2 x 2 tiles of vec_dot (KernelSet::types[t].tile, kernel_set.h) spend four instructions per
// (row, token, block) on turning eight partial int32 sums into f32 and scaling them. A panel
// instead packs kPanelRows weight rows, once per matmul, into a scratch buffer where each 32-bit
// lane of a vector belongs to another row: for block j and dword q (elements 4q..4q+3) one vector
// holds that dword of all rows. One vpdpbusd against the token's dword broadcast to every lane then
// advances kPanelRows dot products at once, and the block's whole int32 sum of every row ends
// in its own lane, scaled by one multiply-add for all rows. The packing costs about what a few
// tokens' products do and is reused by every token of the batch.
//
// Arithmetic (what the scalar twin PanelDotScalar computes, bit for bit): per block j
//   isum_j = sum_k w_jk * a_jk             exact in int32 (the integer weight, e.g. q - 16)
//   acc    = fma(float(isum_j), d_w,j * d_a,j, acc)   in block order, acc starting at 0
// with d_w,j * d_a,j one f32 product of the f32 scales. The AVX-512 vec_dot, its 4-row form and
// the 2 x 2 tiles of the same types use exactly this arithmetic too (quant_basic_avx512.cc,
// kquants_avx512.cc), and so do the AVX2 ones (quant_basic_avx2.cc, kquants_avx2.cc;
// x86::BlockTile in x86_util.h), so a token's result depends only on its weight and activation
// rows: never on m (one token, a tile, a panel), the thread split or the lane. Decoding one token
// at a time and appending many in one Append give the same bits (tested: MatMul
// EachTokensRowDoesNotDependOnTheBatch, SessionTest ChunkedPrefillEqualsOneShotBitForBit), which
// is what lets the call path batch forced and drafted tokens without changing an answer.
#ifndef FGEMMA_KERNELS_PANEL_H_
#define FGEMMA_KERNELS_PANEL_H_

#include <cstddef>
#include <cstdint>

#include "src/kernels/cpu.h"
#include "src/tensor/dtype.h"

namespace fg::kernels::internal {

inline constexpr int kPanelRows = 16;

// Per activation row and 32-element block of its Q8_0 form: the f32 scale and the integer
// correction -offset * sum(q) the kernel starts each block's sum from (the AVX-512 panels store
// the weights as unsigned u = w + offset for vpdpbusd; the AVX2 ones store w, offset 0).
struct PanelActSide {
  float d;
  int32_t corr;
};

struct PanelKernels {
  int offset = 0;  // the offset of the unsigned weights
  bool side = true;  // run() reads the PanelActSide of Q8_0 activations (false: Q8_K, none)
  // Fewest tokens for which packing pays (fg_kernels_benchmark MatMul/*/m2,m4,m8, 1 thread,
  // CPU time, tiles vs panels): the 32-element types win from 2 tokens (1.3-1.8x at m = 2);
  // the K-quant panels lose at m = 2 and 4 (Q4_K 0.49x / 0.82x, Q6_K 0.34x / 0.66x of the
  // tiles' speed) and win from 8 (Q4_K 1.45x, Q6_K 1.08x) on AVX-512; on AVX2 (Zen 1) they
  // break even near 8 (panel_avx2.cc).
  int min_tokens = 2;
  // Bytes of one packed panel of n columns (a multiple of 64).
  size_t (*packed_bytes)(int64_t n) = nullptr;
  // Packs `rows` (1..kPanelRows) weight rows starting at w, row_bytes apart; the missing rows
  // of the panel are packed as zeros.
  void (*pack)(int64_t n, const uint8_t* w, size_t row_bytes, int rows, void* packed) = nullptr;
  // y[t * ldy + r] = panel row r . activation row t, for t < tokens and r < rows.
  // act: `tokens` Q8_0 rows act_stride bytes apart; side: n / 32 entries per token.
  void (*run)(int64_t n, const void* packed, const uint8_t* act, size_t act_stride,
              const PanelActSide* side, int64_t tokens, float* y, int64_t ldy, int rows) = nullptr;
};

// A KernelSet's panel kernels of a weight type (TypeKernels::panel, kernel_set.h), or nullptr
// (then the tiles / vec_dot). Types: Q8_0, Q4_0, Q5_0, IQ4_NL (activations in Q8_0) and Q4_K,
// Q6_K (activations in Q8_K) in the AVX-512 + VNNI set (FillPanelAvx512) and in the AVX2 set
// (FillPanelAvx2).
//
// The K-quant panels, per super-block of 256 (G = 32 for Q4_K, 16 for Q6_K: the sub-block
// with its own scale sc_g, unsigned weights u = q (Q4_K) or q = w + 32 (Q6_K)):
//   main = sum_g sc_g * sum_{k in g} u_k a_k - sum_h c_h * bsum_h     (int32, exact)
//   Q6_K: c_h = 32 sc_h,  acc = fma(float(main), d_w * d_a, acc)
//   Q4_K: c_h = 0, mins = sum_h m_{h/2} bsum_h (int32),
//         acc = fma(float(mins), -d_min * d_a, fma(float(main), d_w * d_a, acc))
// over the 16 activation block sums bsum_h of Q8_K, in super-block order.

// Fills side[0 .. n/32) for one Q8_0 activation row.
void PanelSide(int64_t n, const void* act_q8_0, int offset, PanelActSide* side);

// The scalar twin: one weight row (type t) . one activation row (Q8_0, or Q8_K for the
// K-quants) with the panel's arithmetic. Types as the panels', and Q5_K (no panels; the x86
// sets' vec_dot and tiles use this arithmetic for it too: Q4_K's with a fifth bit).
float PanelDotScalar(tensor::DType t, int64_t n, const void* w, const void* act);

}  // namespace fg::kernels::internal

#endif  // FGEMMA_KERNELS_PANEL_H_
