// AVX2 + FMA K-quant kernels: Q4_K/Q5_K/Q6_K . Q8_K dot products and 2 x 2 tiles, and the Q8_K
// activation quantizer. The dot products and tiles are the AVX-512 set's (kquants_x86.h), with
// vpmaddwd + vpaddd for its vpdpwssd: the same integer sums as the scalar twins in kquants.cc,
// and the f32 steps of the panels (panel.h), so both x86 sets give the same bits.
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

// The int16 x int16 -> int32 accumulate of the shared dot products (kquants_x86.h).
struct Madd {
  static inline __m256i Acc(__m256i acc, __m256i p, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
  }
};

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
  using namespace kquants_x86;
  auto type = [&ks](DType t) -> TypeKernels& { return ks.types[static_cast<int>(t)]; };
  type(DType::kQ4_K).ops.vec_dot = VecDotQ45K<Madd, false, BlockQ4K>;
  type(DType::kQ4_K).tile = TileQ45K<Madd, false, BlockQ4K>;
  type(DType::kQ4_K).rows = RowsQ45K<Madd, false, BlockQ4K>;
  type(DType::kQ5_K).ops.vec_dot = VecDotQ45K<Madd, true, BlockQ5K>;
  type(DType::kQ5_K).tile = TileQ45K<Madd, true, BlockQ5K>;
  type(DType::kQ5_K).rows = RowsQ45K<Madd, true, BlockQ5K>;
  type(DType::kQ6_K).ops.vec_dot = VecDotQ6K<Madd>;
  type(DType::kQ6_K).tile = TileQ6K<Madd>;
  type(DType::kQ8_K).ops.quantize_row = QuantizeRowQ8K;
}

}  // namespace fg::kernels::internal

#endif  // x86
