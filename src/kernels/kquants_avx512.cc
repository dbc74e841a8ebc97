// AVX-512 (F/BW/VL) + VNNI K-quant kernels: Q4_K/Q5_K/Q6_K . Q8_K dot products and the Q8_K
// activation quantizer. Same integer sums as the scalar twins in kquants.cc.
//
// The dot products (shared with the AVX2 set: kquants_x86.h) use 256-bit vectors with the VL
// forms of VNNI: vpmaddubsw makes u8 x s8 i16
// pair sums (<= 16002, no saturation) and vpdpwssd multiplies them by the per-lane i16
// sub-block scale and accumulates in i32 (one instruction where AVX2 needs vpmaddwd + vpaddd),
// into two accumulators so its latency does not bound the loop. Measured on the development
// machine (AMD EPYC, Zen 4, which executes 512-bit ops as two halves), 640 rows, min of 300 runs:
//   Q4_K x1024: zmm form (64 elements per vector, vpermw for the scales) 21.0 us, this 17.7 us
//   Q6_K x2048: zmm form 35.2 us, this 31.8 us; ggml's own AVX-512 build 18.6 / 35.6 us.
// vpdpbusd would fuse the u8 x s8 step instead, but the sub-block scale then needs a vpmulld
// per vector, which costs more than it saves (Q4_K: vpdpbusd + vpmulld 20.4 us, this 17.7 us).
// Q6_K's offset 32 is folded in through the bsums. The Q8_K quantizer does use zmm (16 floats =
// one bsum group). The f32 steps are the packed panels' (panel.h; see kquants_x86.h).
// ref: ggml-cpu/arch/x86/quants.c ggml_vec_dot_q4_K_q8_K for the approach; the code is fgemma's.
//
// Nothing here is an inline function shared with scalar files (see kquants_avx2.cc).
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "src/kernels/kernel_set.h"
#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kquants_internal.h"
#include "src/kernels/kquants_x86.h"
#include "src/kernels/x86_util.h"

namespace fg::kernels::internal {
namespace {

// The int16 x int16 -> int32 accumulate of the shared dot products (kquants_x86.h).
struct Vnni {
  static FG_INLINE __m256i Acc(__m256i acc, __m256i p, __m256i s) {
    return _mm256_dpwssd_epi32(acc, p, s);
  }
};

// Q8_K activation quantizer, bit-identical to the scalar one for finite inputs.
void QuantizeRowQ8K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8K*>(dst);
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m512 vmax = _mm512_setzero_ps();
    for (int i = 0; i < kQK_K; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (!(amax > 0)) {
      std::memset(&y[b], 0, sizeof(BlockQ8K));
      continue;
    }
    const __m512 va = _mm512_set1_ps(amax);
    float max = amax;
    for (int i = 0; i < kQK_K; i += 16) {
      const __mmask16 mask = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), va, _CMP_EQ_OQ);
      if (mask != 0) {
        max = x[i + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int g = 0; g < 16; ++g) {
      const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vs));
      const __m128i q = _mm512_cvtsepi32_epi8(v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), q);
      const __m128i s = _mm_sad_epu8(_mm_xor_si128(q, bias), _mm_setzero_si128());
      y[b].bsums[g] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_add_epi64(s, _mm_unpackhi_epi64(s, s))) - 16 * 128);
    }
    y[b].d = 1 / iscale;
  }
}

}  // namespace

void FillKQuantAvx512(KernelSet& ks) {
  auto type = [&ks](DType t) -> TypeKernels& { return ks.types[static_cast<int>(t)]; };
  using namespace kquants_x86;
  type(DType::kQ4_K).ops.vec_dot = VecDotQ45K<Vnni, false, BlockQ4K>;
  type(DType::kQ4_K).tile = TileQ45K<Vnni, false, BlockQ4K>;
  type(DType::kQ5_K).ops.vec_dot = VecDotQ45K<Vnni, true, BlockQ5K>;
  type(DType::kQ5_K).tile = TileQ45K<Vnni, true, BlockQ5K>;
  type(DType::kQ6_K).ops.vec_dot = VecDotQ6K<Vnni>;
  type(DType::kQ6_K).tile = TileQ6K<Vnni>;
  type(DType::kQ8_K).ops.quantize_row = QuantizeRowQ8K;
}

}  // namespace fg::kernels::internal

#endif  // x86
