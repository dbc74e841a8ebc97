// AVX2 + FMA K-quant kernels: Q4_K/Q5_K/Q6_K . Q8_K dot products and the Q8_K activation
// quantizer. Same integer sums as the scalar twins in kquants.cc; only the f32 accumulation
// order across super-blocks differs (8 lanes).
//
// Integer core: vpmaddubsw multiplies the unsigned weight levels (<= 63) by the signed Q8_K
// levels (|a| <= 127) into i16 pairs (<= 16002, no saturation), vpmaddwd applies the i16
// sub-block scale. Q4_K/Q5_K mins use the Q8_K bsums; Q6_K's offset 32 is folded in as
// 32 * sum_g sc_g * bsum_g. ref: ggml-cpu/arch/x86/quants.c ggml_vec_dot_q4_K_q8_K (AVX2 path)
// for the approach; the code here is fgemma's own.
//
// Everything in this file is in an anonymous namespace or is the registration function, and it
// calls no inline function shared with scalar files (F16 goes through F16C), so no AVX
// instruction can leak into code the dispatcher runs on older CPUs.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/kquants_internal.h"
#include "src/kernels/kquants_x86.h"

namespace fg::kernels::internal {
namespace {

using kquants_x86::Q45KStep;
using kquants_x86::Q6KOffset;
using kquants_x86::UnpackK4;
using kquants_x86::UnpackQ6KHalf;

inline float F16(uint16_t h) { return _cvtsh_ss(h); }

inline float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HsumPs128(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Shared Q4_K/Q5_K body; kHigh adds the fifth bit from qh.
template <bool kHigh, typename Block>
inline void VecDotQ45K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = y[b].d * F16(x[b].d);
    const float dmin = y[b].d * F16(x[b].dmin);
    const __m256i scales_mins = _mm256_cvtepu8_epi16(UnpackK4(x[b].scales));
    // Mins: sum_j m_j * (bsum_{2j} + bsum_{2j+1}).
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums));
    const __m128i bs_pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i mins_dot = _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), bs_pairs);
    acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins_dot), acc_m);

    const __m128i sc = _mm256_castsi256_si128(scales_mins);
    const __m256i scales = _mm256_set_m128i(sc, sc);
    __m256i hbits;
    if constexpr (kHigh) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
    __m256i sumi = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      __m256i s[2], q[2], av[2];
      Q45KStep<kHigh>(scales, x[b].qs, y[b].qs, k, &hbits, s, q, av);
      const __m256i p_lo = _mm256_madd_epi16(s[0], _mm256_maddubs_epi16(q[0], av[0]));
      const __m256i p_hi = _mm256_madd_epi16(s[1], _mm256_maddubs_epi16(q[1], av[1]));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  *out = HsumPs(acc) - HsumPs128(acc_m);
}

void VecDotQ6K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ6K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = y[b].d * F16(x[b].d);
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
    const __m256i offset = Q6KOffset(scales16, y[b]);  // subtracted once per block
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q[4], s[4];
      UnpackQ6KHalf(x[b], scales16, h, q, s);
      for (int i = 0; i < 4; ++i) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 128 * h + 32 * i));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(s[i], _mm256_maddubs_epi16(q[i], av)));
      }
    }
    sumi = _mm256_sub_epi32(sumi, offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  *out = HsumPs(acc);
}

// Q8_K activation quantizer; bit-identical to the scalar one (cvtps rounds to nearest even like
// NearestInt, and the first element of largest |x| picks the sign of d as the scalar loop does).
void QuantizeRowQ8K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8K*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m256 vmax = _mm256_setzero_ps();
    for (int i = 0; i < kQK_K; i += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = _mm_cvtss_f32(m);
    if (!(amax > 0)) {  // all zero (NaN inputs also land here rather than in garbage)
      std::memset(&y[b], 0, sizeof(BlockQ8K));
      continue;
    }
    const __m256 va = _mm256_set1_ps(amax);
    float max = amax;
    for (int i = 0; i < kQK_K; i += 8) {
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), va, _CMP_EQ_OQ));
      if (mask != 0) {
        max = x[i + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int i = 0; i < kQK_K; i += 32) {
      const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
      const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vs));
      const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vs));
      const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vs));
      // packs interleave 128-bit lanes; the permute restores element order.
      const __m256i p = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3)), perm);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + i), p);
      // Sums of 8 bytes (each + 128) via vpsadbw; two adjacent ones make a bsum.
      const __m256i s8 = _mm256_sad_epu8(_mm256_xor_si256(p, bias), _mm256_setzero_si256());
      const __m256i s16 = _mm256_add_epi64(s8, _mm256_srli_si256(s8, 8));
      y[b].bsums[i / 16] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(s16)) - 16 * 128);
      y[b].bsums[i / 16 + 1] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(s16, 1)) - 16 * 128);
    }
    y[b].d = 1 / iscale;
  }
}

}  // namespace

void FillKQuantAvx2(KernelSet& ks) {
  auto ops = [&ks](DType t) -> TypeOps& { return ks.types[static_cast<int>(t)].ops; };
  ops(DType::kQ4_K).vec_dot = VecDotQ45K<false, BlockQ4K>;
  ops(DType::kQ5_K).vec_dot = VecDotQ45K<true, BlockQ5K>;
  ops(DType::kQ6_K).vec_dot = VecDotQ6K;
  ops(DType::kQ8_K).quantize_row = QuantizeRowQ8K;
}

}  // namespace fg::kernels::internal

#endif  // x86
