// Block layouts of ggml's K-quants (super-blocks of 256 elements), byte for byte as GGUF stores
// them. ref: ggml/src/ggml-common.h (block_q4_K, block_q5_K, block_q6_K, block_q8_K).
//
// Only plain data here: helper functions live in each .cc (anonymous namespace) so that code
// compiled with AVX-512 flags can never be picked by the linker for a scalar caller.
#ifndef FGEMMA_KERNELS_KQUANT_BLOCKS_H_
#define FGEMMA_KERNELS_KQUANT_BLOCKS_H_

#include <cstdint>

namespace fg::kernels {

inline constexpr int kQK_K = 256;        // elements per super-block
inline constexpr int kKScaleSize = 12;   // bytes of packed 6-bit scales + mins (Q4_K, Q5_K)

// Q4_K: 8 sub-blocks of 32. x = d * sc[j] * q - dmin * m[j], q in [0, 15]; sc/m are 6-bit,
// packed into `scales` (see UnpackScaleMinK4 in kquants.cc). Element 64k + l (l < 32) is the low
// nibble of qs[32k + l] (sub-block 2k), element 64k + 32 + l its high nibble (sub-block 2k + 1).
struct BlockQ4K {
  uint16_t d;                       // f16 super-block scale of the scales
  uint16_t dmin;                    // f16 super-block scale of the mins
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4K) == 144, "block_q4_K is 144 bytes");

// Q5_K: as Q4_K with a fifth bit per element: bit 2k of qh[l] for element 64k + l, bit 2k + 1
// for element 64k + 32 + l. q in [0, 31].
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5K) == 176, "block_q5_K is 176 bytes");

// Q6_K: 16 sub-blocks of 16 with signed 8-bit scales. x = d * scales[e / 16] * (q - 32),
// q in [0, 63]. In each half h (128 elements; ql += 64h, qh += 32h) for l < 32:
//   element l      : ql[l]      low nibble,  qh[l] bits 0-1
//   element l + 32 : ql[l + 32] low nibble,  qh[l] bits 2-3
//   element l + 64 : ql[l]      high nibble, qh[l] bits 4-5
//   element l + 96 : ql[l + 32] high nibble, qh[l] bits 6-7
struct BlockQ6K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6K) == 210, "block_q6_K is 210 bytes");

// Q8_K: the activation format the K-quant dot products take. x = d * qs[i]; bsums[g] is the sum
// of qs[16g .. 16g + 15] (lets the dot products apply mins / offsets per sub-block cheaply).
struct BlockQ8K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8K) == 292, "block_q8_K is 292 bytes");

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_KQUANT_BLOCKS_H_
