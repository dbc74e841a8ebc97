// AVX-512 (F/BW/VL) + VNNI K-quant kernels: Q4_K/Q5_K/Q6_K . Q8_K dot products and the Q8_K
// activation quantizer. Same integer sums as the scalar twins in kquants.cc.
//
// The dot products use 256-bit vectors with the VL forms of VNNI: vpmaddubsw makes u8 x s8 i16
// pair sums (<= 16002, no saturation) and vpdpwssd multiplies them by the per-lane i16
// sub-block scale and accumulates in i32 (one instruction where AVX2 needs vpmaddwd + vpaddd),
// into two accumulators so its latency does not bound the loop. Measured on the development
// machine (AMD EPYC, Zen 4, which executes 512-bit ops as two halves), 640 rows, min of 300 runs:
//   Q4_K x1024: zmm form (64 elements per vector, vpermw for the scales) 21.0 us, this 17.7 us
//   Q6_K x2048: zmm form 35.2 us, this 31.8 us; ggml's own AVX-512 build 18.6 / 35.6 us.
// vpdpbusd would fuse the u8 x s8 step instead, but the sub-block scale then needs a vpmulld
// per vector, which costs more than it saves (Q4_K: vpdpbusd + vpmulld 20.4 us, this 17.7 us). Q6_K's offset 32 is folded in through the bsums.
// The Q8_K quantizer does use zmm (16 floats = one bsum group).
// The f32 steps are the packed panels' (panel.h): per super-block the exact s32 sum(s), then
// f32 fmas in block order, so vec_dot, the 2 x 2 tiles and the panels give the same bits for
// the same rows and a matmul's result for a token does not depend on how many tokens it has.
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

using kquants_x86::BroadcastI16Index;
using kquants_x86::Q45KStep;
using kquants_x86::Q6KOffset;
using kquants_x86::UnpackK4;
using kquants_x86::UnpackQ45KPair;
using kquants_x86::UnpackQ6KHalf;
using x86::F16;
using x86::Fma;
using x86::Hsum4Epi32;
using x86::HsumEpi32;
using x86::HsumsEpi32;

template <bool kHigh, typename Block>
inline void VecDotQ45K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  const int64_t nb = n / kQK_K;
  float acc = 0;
  // The panels' arithmetic (panel.h): exact block sums, then two f32 fmas per block in block
  // order. Four blocks' sums are reduced together.
  __m256i mains[4];
  __m128i mins[4];
  auto flush = [&](int64_t b0, int count) {
    int32_t mv[4], nv[4];
    HsumsEpi32(mains, count, mv);
    HsumsEpi32(mins, count, nv);
    for (int k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      acc = Fma(static_cast<float>(mv[k]), F16(x[b].d) * y[b].d, acc);
      acc = Fma(static_cast<float>(nv[k]), -F16(x[b].dmin) * y[b].d, acc);
    }
  };
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i scales_mins = _mm256_cvtepu8_epi16(UnpackK4(x[b].scales));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums));
    const __m128i bs_pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i mins_dot = _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), bs_pairs);

    const __m128i sc = _mm256_castsi256_si128(scales_mins);
    const __m256i scales = _mm256_set_m128i(sc, sc);
    __m256i hbits;
    if constexpr (kHigh) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
    // Two accumulators: vpdpwssd has a multi-cycle latency, one chain of 8 would bound the loop.
    __m256i sumi_lo = _mm256_setzero_si256(), sumi_hi = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      __m256i s[2], q[2], av[2];
      Q45KStep<kHigh>(scales, x[b].qs, y[b].qs, k, &hbits, s, q, av);
      sumi_lo = _mm256_dpwssd_epi32(sumi_lo, _mm256_maddubs_epi16(q[0], av[0]), s[0]);
      sumi_hi = _mm256_dpwssd_epi32(sumi_hi, _mm256_maddubs_epi16(q[1], av[1]), s[1]);
    }
    mains[b % 4] = _mm256_add_epi32(sumi_lo, sumi_hi);
    mins[b % 4] = mins_dot;
    if (b % 4 == 3) flush(b - 3, 4);
  }
  if (nb % 4 != 0) flush(nb - nb % 4, static_cast<int>(nb % 4));
  *out = acc;
}

void VecDotQ6K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ6K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  const int64_t nb = n / kQK_K;
  float acc = 0;
  __m256i sums[4];  // four blocks' sums, reduced together (see VecDotQ45K)
  auto flush = [&](int64_t b0, int count) {
    int32_t v[4];
    HsumsEpi32(sums, count, v);
    for (int k = 0; k < count; ++k) {
      acc = Fma(static_cast<float>(v[k]), F16(x[b0 + k].d) * y[b0 + k].d, acc);
    }
  };
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
    const __m256i offset = Q6KOffset(scales16, y[b]);
    __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q[4], sc[4];
      UnpackQ6KHalf(x[b], scales16, h, q, sc);
      for (int i = 0; i < 4; ++i) {
        const __m256i s = sc[i];
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 128 * h + 32 * i));
        if (i % 2 == 0) {
          sumi0 = _mm256_dpwssd_epi32(sumi0, _mm256_maddubs_epi16(q[i], av), s);
        } else {
          sumi1 = _mm256_dpwssd_epi32(sumi1, _mm256_maddubs_epi16(q[i], av), s);
        }
      }
    }
    sums[b % 4] = _mm256_sub_epi32(_mm256_add_epi32(sumi0, sumi1), offset);
    if (b % 4 == 3) flush(b - 3, 4);
  }
  if (nb % 4 != 0) flush(nb - nb % 4, static_cast<int>(nb % 4));
  *out = acc;
}

// 2 weight rows x 2 activation rows (batched matmul): each (row, token) pair runs exactly the
// operation sequence of VecDotQ45K / VecDotQ6K above (integer block sums are exact and the f32
// steps happen in the same order), so out[r + 2 t] is bit for bit vec_dot(w_r, a_t); the
// weight unpacking (nibbles, high bits, scales) is done once for both tokens.
template <bool kHigh, typename Block>
void TileQ45K(int64_t n, const void* w0, const void* w1, const void* a0, const void* a1,
              float* out) {
  const Block* x[2] = {static_cast<const Block*>(w0), static_cast<const Block*>(w1)};
  const BlockQ8K* y[2] = {static_cast<const BlockQ8K*>(a0), static_cast<const BlockQ8K*>(a1)};
  float acc[2][2] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t mins[2][2];
    __m256i scales[2], hbits[2];
    __m128i bs_pairs[2];
    for (int t = 0; t < 2; ++t) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].bsums));
      bs_pairs[t] = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    }
    for (int r = 0; r < 2; ++r) {
      const __m256i scales_mins = _mm256_cvtepu8_epi16(UnpackK4(x[r][b].scales));
      for (int t = 0; t < 2; ++t) {
        mins[r][t] = HsumEpi32(
            _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), bs_pairs[t]));
      }
      const __m128i sc = _mm256_castsi256_si128(scales_mins);
      scales[r] = _mm256_set_m128i(sc, sc);
      if constexpr (kHigh) hbits[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r][b].qh));
    }
    __m256i sumi_lo[2][2], sumi_hi[2][2];
    for (int r = 0; r < 2; ++r) {
      for (int t = 0; t < 2; ++t) sumi_lo[r][t] = sumi_hi[r][t] = _mm256_setzero_si256();
    }
    for (int k = 0; k < 4; ++k) {
      __m256i a_lo[2], a_hi[2];
      for (int t = 0; t < 2; ++t) {
        a_lo[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 64 * k));
        a_hi[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 64 * k + 32));
      }
      for (int r = 0; r < 2; ++r) {
        const __m256i s_lo = _mm256_shuffle_epi8(scales[r], BroadcastI16Index(2 * k));
        const __m256i s_hi = _mm256_shuffle_epi8(scales[r], BroadcastI16Index(2 * k + 1));
        __m256i q_lo, q_hi;
        UnpackQ45KPair<kHigh>(x[r][b].qs + 32 * k, &hbits[r], &q_lo, &q_hi);
        for (int t = 0; t < 2; ++t) {
          sumi_lo[r][t] = _mm256_dpwssd_epi32(sumi_lo[r][t], _mm256_maddubs_epi16(q_lo, a_lo[t]), s_lo);
          sumi_hi[r][t] = _mm256_dpwssd_epi32(sumi_hi[r][t], _mm256_maddubs_epi16(q_hi, a_hi[t]), s_hi);
        }
      }
    }
    int32_t mains[4];  // (r, t) in lane r + 2 t
    _mm_storeu_si128(reinterpret_cast<__m128i*>(mains),
                     Hsum4Epi32(_mm256_add_epi32(sumi_lo[0][0], sumi_hi[0][0]),
                                _mm256_add_epi32(sumi_lo[1][0], sumi_hi[1][0]),
                                _mm256_add_epi32(sumi_lo[0][1], sumi_hi[0][1]),
                                _mm256_add_epi32(sumi_lo[1][1], sumi_hi[1][1])));
    for (int r = 0; r < 2; ++r) {
      for (int t = 0; t < 2; ++t) {
        acc[r][t] = Fma(static_cast<float>(mains[r + 2 * t]), F16(x[r][b].d) * y[t][b].d, acc[r][t]);
        acc[r][t] = Fma(static_cast<float>(mins[r][t]), -F16(x[r][b].dmin) * y[t][b].d, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    for (int t = 0; t < 2; ++t) out[r + 2 * t] = acc[r][t];
  }
}

void TileQ6K(int64_t n, const void* w0, const void* w1, const void* a0, const void* a1,
             float* out) {
  const BlockQ6K* x[2] = {static_cast<const BlockQ6K*>(w0), static_cast<const BlockQ6K*>(w1)};
  const BlockQ8K* y[2] = {static_cast<const BlockQ8K*>(a0), static_cast<const BlockQ8K*>(a1)};
  float acc[2][2] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    __m256i scales16[2], offset[2][2], sumi0[2][2], sumi1[2][2];
    for (int r = 0; r < 2; ++r) {
      scales16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r][b].scales)));
      for (int t = 0; t < 2; ++t) {
        offset[r][t] = Q6KOffset(scales16[r], y[t][b]);
        sumi0[r][t] = sumi1[r][t] = _mm256_setzero_si256();
      }
    }
    for (int h = 0; h < 2; ++h) {
      for (int r = 0; r < 2; ++r) {
        __m256i q[4], sc[4];
        UnpackQ6KHalf(x[r][b], scales16[r], h, q, sc);
        for (int i = 0; i < 4; ++i) {
          const __m256i s = sc[i];
          for (int t = 0; t < 2; ++t) {
            const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 128 * h + 32 * i));
            if (i % 2 == 0) {
              sumi0[r][t] = _mm256_dpwssd_epi32(sumi0[r][t], _mm256_maddubs_epi16(q[i], av), s);
            } else {
              sumi1[r][t] = _mm256_dpwssd_epi32(sumi1[r][t], _mm256_maddubs_epi16(q[i], av), s);
            }
          }
        }
      }
    }
    int32_t sums[4];  // (r, t) in lane r + 2 t
    auto sum = [&](int r, int t) {
      return _mm256_sub_epi32(_mm256_add_epi32(sumi0[r][t], sumi1[r][t]), offset[r][t]);
    };
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sums),
                     Hsum4Epi32(sum(0, 0), sum(1, 0), sum(0, 1), sum(1, 1)));
    for (int r = 0; r < 2; ++r) {
      for (int t = 0; t < 2; ++t) {
        acc[r][t] = Fma(static_cast<float>(sums[r + 2 * t]), F16(x[r][b].d) * y[t][b].d, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    for (int t = 0; t < 2; ++t) out[r + 2 * t] = acc[r][t];
  }
}

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
  type(DType::kQ4_K).ops.vec_dot = VecDotQ45K<false, BlockQ4K>;
  type(DType::kQ4_K).tile = TileQ45K<false, BlockQ4K>;
  type(DType::kQ5_K).ops.vec_dot = VecDotQ45K<true, BlockQ5K>;
  type(DType::kQ5_K).tile = TileQ45K<true, BlockQ5K>;
  type(DType::kQ6_K).ops.vec_dot = VecDotQ6K;
  type(DType::kQ6_K).tile = TileQ6K;
  type(DType::kQ8_K).ops.quantize_row = QuantizeRowQ8K;
}

}  // namespace fg::kernels::internal

#endif  // x86
