// NEON K-quant dot products (Q4_K, Q5_K, Q6_K . Q8_K) for aarch64 and armv7; CMake builds this
// file on ARM targets only. The Q8_K quantizer stays scalar there (once per matmul row).
//
// Numerics: each super-block's integer sum is exact, as in the scalar twins (kquants.cc), with
// SDOT where the target has the dot-product extension, else widening multiplies; the sub-block
// scales are applied on i32 lanes (vmlaq_n_s32), one reduction per block, then the same f32
// expression as the twin: d * isum - dmin * imin.
// ref: ggml/src/ggml-cpu/arch/arm/quants.c ggml_vec_dot_q4_K_q8_K (the algorithm, not code).
#include <cstdint>

#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/kquants_internal.h"
#include "src/kernels/neon_util.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {
namespace {

using neon::HSumS32;
using tensor::Fp16ToFp32;

// acc + sum over 16 lanes of a[i] * b[i], 4 lanes of partial sums.
inline int32x4_t DotS8(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_s8(vget_high_s8(a), vget_high_s8(b));
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
#endif
}

inline int8x16_t S8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// sum_j m_j * (bsum_{2j} + bsum_{2j+1}) for the 8 mins of a Q4_K/Q5_K block.
inline int32_t MinsDot(const uint8_t* mins, const int16_t* bsums) {
  int32_t s = 0;
  for (int j = 0; j < 8; ++j) s += mins[j] * (bsums[2 * j] + bsums[2 * j + 1]);
  return s;
}

template <bool kHigh, typename Block>
void VecDotQ45K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  const uint8x16_t bit4 = vdupq_n_u8(0x10);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sm[16];
    UnpackScalesMinsK4(x[b].scales, sm);
    const int32_t imin = MinsDot(sm + 8, y[b].bsums);
    uint8x16_t qh0, qh1;
    if constexpr (kHigh) {
      qh0 = vld1q_u8(x[b].qh);
      qh1 = vld1q_u8(x[b].qh + 16);
    }
    int32x4_t acc = vdupq_n_s32(0);
    for (int k = 0; k < 4; ++k) {
      const uint8x16_t q0 = vld1q_u8(x[b].qs + 32 * k);
      const uint8x16_t q1 = vld1q_u8(x[b].qs + 32 * k + 16);
      uint8x16_t lo0 = vandq_u8(q0, m4), lo1 = vandq_u8(q1, m4);
      uint8x16_t hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
      if constexpr (kHigh) {
        // Element 64k + l takes bit 2k of qh[l], element 64k + 32 + l bit 2k + 1.
        const uint8x16_t mlo = vdupq_n_u8(static_cast<uint8_t>(1u << (2 * k)));
        const uint8x16_t mhi = vdupq_n_u8(static_cast<uint8_t>(2u << (2 * k)));
        lo0 = vorrq_u8(lo0, vandq_u8(vtstq_u8(qh0, mlo), bit4));
        lo1 = vorrq_u8(lo1, vandq_u8(vtstq_u8(qh1, mlo), bit4));
        hi0 = vorrq_u8(hi0, vandq_u8(vtstq_u8(qh0, mhi), bit4));
        hi1 = vorrq_u8(hi1, vandq_u8(vtstq_u8(qh1, mhi), bit4));
      }
      const int8_t* q8 = y[b].qs + 64 * k;
      const int32x4_t dlo = DotS8(DotS8(vdupq_n_s32(0), S8(lo0), vld1q_s8(q8)), S8(lo1), vld1q_s8(q8 + 16));
      const int32x4_t dhi = DotS8(DotS8(vdupq_n_s32(0), S8(hi0), vld1q_s8(q8 + 32)), S8(hi1), vld1q_s8(q8 + 48));
      acc = vmlaq_n_s32(acc, dlo, sm[2 * k]);
      acc = vmlaq_n_s32(acc, dhi, sm[2 * k + 1]);
    }
    const int32_t isum = HSumS32(acc);
    const float d = Fp16ToFp32(x[b].d) * y[b].d;
    const float dmin = Fp16ToFp32(x[b].dmin) * y[b].d;
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(imin);
  }
  *out = sum;
}

void VecDotQ4K(int64_t n, const void* w, const void* a, float* out) {
  VecDotQ45K<false, BlockQ4K>(n, w, a, out);
}
void VecDotQ5K(int64_t n, const void* w, const void* a, float* out) {
  VecDotQ45K<true, BlockQ5K>(n, w, a, out);
}

// Q6_K: every 16-byte vector of levels is one scale group (16 elements).
void VecDotQ6K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ6K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  const uint8x16_t m3 = vdupq_n_u8(0x03);
  const int8x16_t off = vdupq_n_s8(32);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qhp = x[b].qh + 32 * h;
      const int8_t* q8 = y[b].qs + 128 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int v = 0; v < 2; ++v) {  // l in [16v, 16v + 16)
        const uint8x16_t l0 = vld1q_u8(ql + 16 * v);       // elements l, l + 64
        const uint8x16_t l1 = vld1q_u8(ql + 32 + 16 * v);  // elements l + 32, l + 96
        const uint8x16_t qh = vld1q_u8(qhp + 16 * v);
        const uint8x16_t e0 = vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(qh, m3), 4));
        const uint8x16_t e1 = vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), m3), 4));
        const uint8x16_t e2 = vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), m3), 4));
        const uint8x16_t e3 = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4));
        // Element 128h + 32i + 16v + j is group 8h + 2i + v.
        const uint8x16_t e[4] = {e0, e1, e2, e3};
        for (int i = 0; i < 4; ++i) {
          const int8x16_t q = vsubq_s8(S8(e[i]), off);
          const int32x4_t d = DotS8(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * i + 16 * v));
          acc = vmlaq_n_s32(acc, d, sc[2 * i + v]);
        }
      }
    }
    const int32_t isum = HSumS32(acc);
    sum += Fp16ToFp32(x[b].d) * y[b].d * static_cast<float>(isum);
  }
  *out = sum;
}

}  // namespace

void FillKQuantNeon(KernelSet& ks) {
  auto ops = [&ks](DType t) -> TypeOps& { return ks.types[static_cast<int>(t)].ops; };
  ops(DType::kQ4_K).vec_dot = VecDotQ4K;
  ops(DType::kQ5_K).vec_dot = VecDotQ5K;
  ops(DType::kQ6_K).vec_dot = VecDotQ6K;
}

}  // namespace fg::kernels::internal
