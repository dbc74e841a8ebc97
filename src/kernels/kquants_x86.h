// AVX2-level K-quant helpers shared by kquants_avx2.cc and kquants_avx512.cc, the only files that
// include it (CMake builds both with at least the AVX2 flags, on x86 only). The helpers have
// internal linkage (static), as in x86_util.h: an inline function with external linkage
// compiled with AVX-512 flags could be picked by the linker for the AVX2 file's call.
#ifndef FGEMMA_KERNELS_KQUANTS_X86_H_
#define FGEMMA_KERNELS_KQUANTS_X86_H_

#include <immintrin.h>

#include <cstdint>

#include "src/kernels/kquant_blocks.h"

namespace fg::kernels::kquants_x86 {

// Q4_K/Q5_K packed scales -> bytes 0-7 the 6-bit scales, bytes 8-15 the mins, on 32-bit lanes
// u0..u2 of the 12 bytes (the same mapping as UnpackScalesMinsK4):
//   lane 0: u0 & 0x3f..                       (scales 0-3)
//   lane 1: (u2 & 0x0f..) | ((u0 >> 2) & 0x30..)  (scales 4-7)
//   lane 2: u1 & 0x3f..                       (mins 0-3)
//   lane 3: ((u2 >> 4) & 0x0f..) | ((u1 >> 2) & 0x30..)  (mins 4-7)
// Reads 16 bytes; the 4 past the scales are the block's first quants, so it stays in the block.
static inline __m128i UnpackK4(const uint8_t* q) {
  const __m128i u = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i low = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));   // u0 u2 u1 u2
  const __m128i high = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  const __m128i lo = _mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)),
                                   _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i hi = _mm_and_si128(_mm_srli_epi32(high, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(lo, hi);
}

// vpshufb index that broadcasts i16 element i of each 128-bit lane.
static inline __m256i BroadcastI16Index(int i) {
  return _mm256_set1_epi16(static_cast<int16_t>(((2 * i + 1) << 8) | (2 * i)));
}

// Sub-blocks 2k and 2k + 1 of a Q4_K (kHigh false) or Q5_K block as unsigned levels, 32 bytes
// each: qs32 = the block's qs + 32 k holds them in its low and high nibbles. For Q5_K, *hbits
// (the block's qh when k = 0) gives the fifth bits in its two lowest bits of every byte and is
// shifted right by 2 for the next k.
template <bool kHigh>
static inline void UnpackQ45KPair(const uint8_t* qs32, __m256i* hbits, __m256i* q_lo,
                                  __m256i* q_hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs32));
  *q_lo = _mm256_and_si256(q4, m4);
  *q_hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
  if constexpr (kHigh) {
    const __m256i m1 = _mm256_set1_epi8(1);
    *q_lo = _mm256_or_si256(*q_lo, _mm256_slli_epi16(_mm256_and_si256(*hbits, m1), 4));
    *q_hi = _mm256_or_si256(*q_hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(*hbits, 1), m1), 4));
    *hbits = _mm256_srli_epi16(*hbits, 2);
  }
}

// Step k (0..3) of a Q4_K / Q5_K block . Q8_K block: sub-blocks 2k and 2k + 1 as i16 scales
// (s[0], s[1]), unsigned levels (q[0], q[1]) and the activations they meet (a[0], a[1]).
// scales: the block's 8 sub-block scales as i16 in both 128-bit lanes; qs, a_qs: the blocks'
// quants; hbits as in UnpackQ45KPair.
template <bool kHigh>
static inline void Q45KStep(__m256i scales, const uint8_t* qs, const int8_t* a_qs, int k,
                            __m256i* hbits, __m256i s[2], __m256i q[2], __m256i a[2]) {
  s[0] = _mm256_shuffle_epi8(scales, BroadcastI16Index(2 * k));
  s[1] = _mm256_shuffle_epi8(scales, BroadcastI16Index(2 * k + 1));
  UnpackQ45KPair<kHigh>(qs + 32 * k, hbits, &q[0], &q[1]);
  a[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a_qs + 64 * k));
  a[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a_qs + 64 * k + 32));
}

// Half h (0 or 1) of a Q6_K block as unsigned 6-bit levels (w + 32), 32 bytes per vector, and
// their i16 scales: q[i] holds elements 128h + 32i .. 128h + 32i + 31; s[i] the scale of each
// (8h + 2i for the first 16, 8h + 2i + 1 for the others). scales16: the block's 16 scales as i16.
static inline void UnpackQ6KHalf(const BlockQ6K& b, __m256i scales16, int h, __m256i q[4],
                                 __m256i s[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const uint8_t* ql = b.ql + 64 * h;
  const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
  const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
  // Scales 8h..8h+7 in both 128-bit lanes, then each one broadcast over its 16 elements.
  const __m256i sc = h == 0 ? _mm256_permute2x128_si256(scales16, scales16, 0x00)
                            : _mm256_permute2x128_si256(scales16, scales16, 0x11);
  for (int i = 0; i < 4; ++i) {
    const __m256i idx = _mm256_set_m128i(_mm256_castsi256_si128(BroadcastI16Index(2 * i + 1)),
                                         _mm256_castsi256_si128(BroadcastI16Index(2 * i)));
    s[i] = _mm256_shuffle_epi8(sc, idx);
  }
}

// The Q6_K offset 32 folded into one i32 vector to subtract per block: 32 * sc_g * bsum_g.
static inline __m256i Q6KOffset(__m256i scales16, const BlockQ8K& a) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  return _mm256_slli_epi32(_mm256_madd_epi16(scales16, bs), 5);
}

}  // namespace fg::kernels::kquants_x86

#endif  // FGEMMA_KERNELS_KQUANTS_X86_H_
