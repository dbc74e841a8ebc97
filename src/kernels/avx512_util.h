// Small AVX2/AVX-512 helpers shared by the *_avx512.cc kernel files (quant_basic, kquants,
// panel). Only included from those files, which CMake builds with the AVX-512 flags on x86 only.
// The helpers have internal linkage (static): an inline function with external linkage compiled
// with AVX-512 flags could be picked by the linker for a scalar file's call of the same name.
#ifndef FGEMMA_KERNELS_AVX512_UTIL_H_
#define FGEMMA_KERNELS_AVX512_UTIL_H_

#include <immintrin.h>

#include <cstdint>

#define FG_INLINE __attribute__((always_inline)) inline

namespace fg::kernels::avx512 {

// Hardware f16 -> f32 (F16C); exact, like tensor::Fp16ToFp32, without its branches.
static FG_INLINE float F16(uint16_t h) { return _cvtsh_ss(h); }

static FG_INLINE __m256i Load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 16 packed bytes -> 32 bytes in element order (low nibbles = elements 0..15 first): the 16
// bytes in both lanes (one broadcast load), the high lane shifted right by 4.
static FG_INLINE __m256i Nibbles(const uint8_t* qs) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
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

// fma(a, b, c) in f32, one rounding (the scalar step of the panels' arithmetic, panel.h).
static FG_INLINE float Fma(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

}  // namespace fg::kernels::avx512

#endif  // FGEMMA_KERNELS_AVX512_UTIL_H_
