// Small AVX2-level helpers shared by the x86 kernel files (quant_basic, kquants and panel of
// *_avx2.cc and *_avx512.cc), and the f32 side of their block-type tiles. Only included from
// those files, which CMake builds with at least the AVX2 flags on x86 only. The helpers have
// internal linkage (static): an inline function with external linkage compiled with AVX-512
// flags could be picked by the linker for an AVX2 or scalar file's call of the same name.
#ifndef FGEMMA_KERNELS_X86_UTIL_H_
#define FGEMMA_KERNELS_X86_UTIL_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "src/kernels/blocks.h"

#define FG_INLINE __attribute__((always_inline)) inline

namespace fg::kernels::x86 {

// Hardware f16 -> f32 (F16C); exact, like tensor::Fp16ToFp32, without its branches.
static FG_INLINE float F16(uint16_t h) { return _cvtsh_ss(h); }

static FG_INLINE __m256i Load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 16 packed bytes -> 32 bytes in element order (low nibbles = elements 0..15 first): the 16
// bytes in both lanes (one broadcast load), the high lane shifted right by 4.
static FG_INLINE __m256i Nibbles(const uint8_t* qs) {
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// The s32 sum of the four (eight) lanes: integer adds, exact in any order.
static FG_INLINE int32_t HsumEpi32(__m128i v) {
  v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 1, 1)));
  return _mm_cvtsi128_si32(v);
}
static FG_INLINE int32_t HsumEpi32(__m256i v) {
  return HsumEpi32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// Lane i: the s32 sum of the lanes of v[i] (four vectors reduced together; exact).
static FG_INLINE __m128i Hsum4Epi32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}
static FG_INLINE __m128i Hsum4Epi32(__m128i v0, __m128i v1, __m128i v2, __m128i v3) {
  return _mm_hadd_epi32(_mm_hadd_epi32(v0, v1), _mm_hadd_epi32(v2, v3));
}

// out[k] = the s32 sum of v[k]'s lanes for k < count (1..4); all four reduced together when
// there are four (v is __m256i or __m128i).
template <class V>
static FG_INLINE void HsumsEpi32(const V v[4], int count, int32_t out[4]) {
  if (count == 4) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), Hsum4Epi32(v[0], v[1], v[2], v[3]));
  } else {
    for (int k = 0; k < count; ++k) out[k] = HsumEpi32(v[k]);
  }
}

// 32 bits -> 32 bytes, 0xff where the bit of that element is set.
static FG_INLINE __m256i BitsToBytes(const uint8_t qh[4]) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// The sum of the eight f32 lanes, in a fixed order (the same bits for the same inputs).
static FG_INLINE float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A block's 32 signed integer weights w as int8, in element order (the AVX2 tiles and panels,
// which multiply them by the sign trick): Q4_0 q - 8; Q5_0 q - 16, the nibble with 0xf0 or-ed
// in where the fifth bit is clear (= nibble - 16) and the plain nibble where it is set;
// IQ4_NL the codebook value.
static FG_INLINE __m256i SignedQ4_0(const block_q4_0& b) {
  return _mm256_sub_epi8(Nibbles(b.qs), _mm256_set1_epi8(8));
}
static FG_INLINE __m256i SignedQ5_0(const block_q5_0& b) {
  const __m256i hi =
      _mm256_andnot_si256(BitsToBytes(b.qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
  return _mm256_or_si256(Nibbles(b.qs), hi);
}
static FG_INLINE __m256i SignedIq4nl(const block_iq4_nl& b) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), Nibbles(b.qs));  // codebook lookup
}

// A panel's N weight rows as blocks (panel_avx2.cc, panel_avx512.cc): row r < `rows` of w,
// row_bytes apart; the others point at row 0 (their weights are packed as zeros).
template <class B, int N>
static FG_INLINE void PanelRows(const uint8_t* w, size_t row_bytes, int rows, const B* (&x)[N]) {
  for (int r = 0; r < N; ++r) {
    x[r] = reinterpret_cast<const B*>(w + static_cast<size_t>(r < rows ? r : 0) * row_bytes);
  }
}

// fma(a, b, c) in f32, one rounding (the scalar step of the panels' arithmetic, panel.h).
static FG_INLINE float Fma(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// An R x T tile of dot products of a 32-element block type, out[r + R t] = x_r . y_t over nb
// blocks, with the arithmetic of the packed panels (panel.h): per block the exact s32 sum isum
// of the 32 products, then acc = fma(float(isum), d_x * d_y, acc) in block order from 0 (plus
// sum m * s for the types with a min, Tr::kMin). block_sums(j, sumi) writes, for each output
// r + R t, a vector whose s32 lanes sum to block j's isum (each ISA's integer dot). So vec_dot,
// the tile and a panel give the same bits for the same rows, on AVX2 and AVX-512 alike, and a
// token's result does not depend on how many tokens a matmul has. R * T is 1 or 4: the four
// sums of a block are reduced together and their f32 steps run in the lanes of one 128-bit
// vector (per lane the same IEEE fma as a scalar one).
template <class Tr, int R, int T, class BlockSums>
static FG_INLINE void BlockTile(int64_t nb, const typename Tr::BX* const* x,
                                const typename Tr::BY* const* y, float* out, BlockSums block_sums) {
  static_assert(R * T == 1 || R * T == 4, "tiles of 1 or 4 dot products");
  constexpr int N = R * T;
  float summs[N] = {};
  if constexpr (Tr::kMin) {
    for (int64_t j = 0; j < nb; ++j) {
      for (int t = 0; t < T; ++t) {
        for (int r = 0; r < R; ++r) summs[r + R * t] += F16(x[r][j].m) * F16(y[t][j].s);
      }
    }
  }
  if constexpr (N == 4) {
    // Four outputs per block: their sums reduced together, their f32 steps in four lanes.
    __m128 acc = _mm_setzero_ps();
    for (int64_t j = 0; j < nb; ++j) {
      __m256i sumi[4];
      block_sums(j, sumi);
      // d_x of lane i's row and d_y of its token, widened from f16 four at a time (exact).
      const __m128 dx = _mm_cvtph_ps(_mm_setr_epi16(
          static_cast<int16_t>(x[0][j].d), static_cast<int16_t>(x[1 % R][j].d),
          static_cast<int16_t>(x[2 % R][j].d), static_cast<int16_t>(x[3 % R][j].d), 0, 0, 0, 0));
      const __m128 dy = _mm_cvtph_ps(_mm_setr_epi16(
          static_cast<int16_t>(y[0][j].d), static_cast<int16_t>(y[1 / R][j].d),
          static_cast<int16_t>(y[2 / R][j].d), static_cast<int16_t>(y[3 / R][j].d), 0, 0, 0, 0));
      const __m128 isum = _mm_cvtepi32_ps(Hsum4Epi32(sumi[0], sumi[1], sumi[2], sumi[3]));
      acc = _mm_fmadd_ps(isum, _mm_mul_ps(dx, dy), acc);
    }
    float lanes[4];
    _mm_storeu_ps(lanes, acc);
    for (int i = 0; i < 4; ++i) out[i] = lanes[i] + summs[i];
  } else {
    // One output: four blocks' sums are reduced together, then their fmas run in block order.
    __m128 acc = _mm_setzero_ps();  // lane 0
    int64_t j = 0;
    for (; j + 4 <= nb; j += 4) {
      __m256i sumi[4];
      for (int k = 0; k < 4; ++k) block_sums(j + k, &sumi[k]);
      const __m128 isum = _mm_cvtepi32_ps(Hsum4Epi32(sumi[0], sumi[1], sumi[2], sumi[3]));
      const __m128 dx = _mm_cvtph_ps(_mm_setr_epi16(
          static_cast<int16_t>(x[0][j].d), static_cast<int16_t>(x[0][j + 1].d),
          static_cast<int16_t>(x[0][j + 2].d), static_cast<int16_t>(x[0][j + 3].d), 0, 0, 0, 0));
      const __m128 dy = _mm_cvtph_ps(_mm_setr_epi16(
          static_cast<int16_t>(y[0][j].d), static_cast<int16_t>(y[0][j + 1].d),
          static_cast<int16_t>(y[0][j + 2].d), static_cast<int16_t>(y[0][j + 3].d), 0, 0, 0, 0));
      const __m128 scale = _mm_mul_ps(dx, dy);
      acc = _mm_fmadd_ss(isum, scale, acc);
      acc = _mm_fmadd_ss(_mm_shuffle_ps(isum, isum, 1), _mm_shuffle_ps(scale, scale, 1), acc);
      acc = _mm_fmadd_ss(_mm_shuffle_ps(isum, isum, 2), _mm_shuffle_ps(scale, scale, 2), acc);
      acc = _mm_fmadd_ss(_mm_shuffle_ps(isum, isum, 3), _mm_shuffle_ps(scale, scale, 3), acc);
    }
    for (; j < nb; ++j) {
      __m256i sumi;
      block_sums(j, &sumi);
      acc = _mm_fmadd_ss(_mm_set_ss(static_cast<float>(HsumEpi32(sumi))),
                         _mm_set_ss(F16(x[0][j].d) * F16(y[0][j].d)), acc);
    }
    out[0] = _mm_cvtss_f32(acc) + summs[0];
  }
}

}  // namespace fg::kernels::x86

#endif  // FGEMMA_KERNELS_X86_UTIL_H_
