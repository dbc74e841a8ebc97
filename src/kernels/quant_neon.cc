// NEON vec_dot for F32, F16, Q8_0, Q4_0, Q5_0 (activations in dot_type: F32 for the float
// types, Q8_0 for the block types) and the Q8_0 activation quantizer, for aarch64 and armv7.
// Set over the scalar kernels by FillBasicNeon (kernel_set.cc calls it for the NEON set).
//
// Numerics: the integer block dots compute each block's sum exactly (SDOT where the target
// has the dot-product extension, else widening multiplies) and then accumulate
// float(sumi) * (d_w * d_a) in the scalar twin's order, so they equal the twin bit for bit.
// The quantizer rounds ties to even like the twin (quant_basic.cc QuantQ8_0) and matches it bit
// for bit. F32/F16 use four f32 lane accumulators (NMSE vs the twin far below 1e-7). F16
// weights are widened to f32 (vcvt_f32_f16 where the FPU has half conversion, else the exact
// scalar conversion); fp16 arithmetic is not used because the activations are f32 and
// rounding them to f16 would cost ~1e-3 relative per product.
// ref: ggml/src/ggml-cpu/arch/arm/quants.c ggml_vec_dot_q8_0_q8_0 (the algorithm, not code).
#include <cmath>

#include "src/kernels/blocks.h"
#include "src/kernels/neon_util.h"
#include "src/kernels/kernel_set.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {
namespace {

using neon::Fma;
using neon::HSum;
using neon::HSumS32;
using tensor::Fp16ToFp32;
using tensor::Fp32ToFp16;

// Sum over 16 lanes of a[i] * b[i] into an int32x4 accumulator.
inline int32x4_t DotS8(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_s8(vget_high_s8(a), vget_high_s8(b));
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
#endif
}

void DotF32Neon(int64_t n, const void* w, const void* a, float* out) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0),
              s3 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = Fma(s0, vld1q_f32(x + i), vld1q_f32(y + i));
    s1 = Fma(s1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
    s2 = Fma(s2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
    s3 = Fma(s3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
  }
  for (; i + 4 <= n; i += 4) s0 = Fma(s0, vld1q_f32(x + i), vld1q_f32(y + i));
  float s = HSum(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
  for (; i < n; ++i) s += x[i] * y[i];
  *out = s;
}

#if defined(__aarch64__) || (defined(__ARM_FP) && (__ARM_FP & 2))
#define FG_NEON_HALF_CVT 1
// 4 halves to f32 with the FPU's conversion (exact, subnormals included on aarch64).
inline float32x4_t LoadHalf4(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
#endif

void DotF16Neon(int64_t n, const void* w, const void* a, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const float* y = static_cast<const float*>(a);
  float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0),
              s3 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
#if defined(FG_NEON_HALF_CVT)
    const float32x4_t w0 = LoadHalf4(x + i), w1 = LoadHalf4(x + i + 4);
    const float32x4_t w2 = LoadHalf4(x + i + 8), w3 = LoadHalf4(x + i + 12);
#else
    float t[16];
    for (int j = 0; j < 16; ++j) t[j] = Fp16ToFp32(x[i + j]);
    const float32x4_t w0 = vld1q_f32(t), w1 = vld1q_f32(t + 4);
    const float32x4_t w2 = vld1q_f32(t + 8), w3 = vld1q_f32(t + 12);
#endif
    s0 = Fma(s0, w0, vld1q_f32(y + i));
    s1 = Fma(s1, w1, vld1q_f32(y + i + 4));
    s2 = Fma(s2, w2, vld1q_f32(y + i + 8));
    s3 = Fma(s3, w3, vld1q_f32(y + i + 12));
  }
  float s = HSum(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
  for (; i < n; ++i) s += Fp16ToFp32(x[i]) * y[i];
  *out = s;
}

// The activation's 32 quants as two 16-lane vectors.
inline void LoadQ8(const block_q8_0& b, int8x16_t* lo, int8x16_t* hi) {
  *lo = vld1q_s8(b.qs);
  *hi = vld1q_s8(b.qs + 16);
}

void DotQ8_0Neon(int64_t n, const void* w, const void* a, float* out) {
  const block_q8_0* x = static_cast<const block_q8_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int8x16_t y0, y1;
    LoadQ8(y[i], &y0, &y1);
    int32x4_t acc = vdupq_n_s32(0);
    acc = DotS8(acc, vld1q_s8(x[i].qs), y0);
    acc = DotS8(acc, vld1q_s8(x[i].qs + 16), y1);
    s += static_cast<float>(HSumS32(acc)) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

void DotQ4_0Neon(int64_t n, const void* w, const void* a, float* out) {
  const block_q4_0* x = static_cast<const block_q4_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  const int8x16_t eight = vdupq_n_s8(8);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint8x16_t q = vld1q_u8(x[i].qs);
    // Byte j: element j in the low nibble, element j + 16 in the high one; values are q - 8.
    const int8x16_t w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, low4)), eight);
    const int8x16_t w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
    int8x16_t y0, y1;
    LoadQ8(y[i], &y0, &y1);
    int32x4_t acc = vdupq_n_s32(0);
    acc = DotS8(acc, w0, y0);
    acc = DotS8(acc, w1, y1);
    s += static_cast<float>(HSumS32(acc)) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

// 16 bits of qh (elements k .. k+15) as 16 bytes holding 0x10 where the bit is set.
inline uint8x16_t HighBits(uint32_t bits16) {
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t rep = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits16 & 0xff)),
                                     vdup_n_u8(static_cast<uint8_t>((bits16 >> 8) & 0xff)));
  return vandq_u8(vtstq_u8(rep, vld1q_u8(kBit)), vdupq_n_u8(0x10));
}

void DotQ5_0Neon(int64_t n, const void* w, const void* a, float* out) {
  const block_q5_0* x = static_cast<const block_q5_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  const int8x16_t sixteen = vdupq_n_s8(16);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = LoadQh(x[i].qh);
    const uint8x16_t q = vld1q_u8(x[i].qs);
    const uint8x16_t v0 = vorrq_u8(vandq_u8(q, low4), HighBits(qh));
    const uint8x16_t v1 = vorrq_u8(vshrq_n_u8(q, 4), HighBits(qh >> 16));
    const int8x16_t w0 = vsubq_s8(vreinterpretq_s8_u8(v0), sixteen);
    const int8x16_t w1 = vsubq_s8(vreinterpretq_s8_u8(v1), sixteen);
    int8x16_t y0, y1;
    LoadQ8(y[i], &y0, &y1);
    int32x4_t acc = vdupq_n_s32(0);
    acc = DotS8(acc, w0, y0);
    acc = DotS8(acc, w1, y1);
    s += static_cast<float>(HSumS32(acc)) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

// ref: quantize_row_q8_0_ref; d = amax / 127, q = round-to-even(x * (1 / d)) (see
// quant_basic.cc QuantQ8_0, which this matches bit for bit).
void QuantQ8_0Neon(const float* src, void* dst, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0);
    for (int j = 0; j < 8; ++j) {
      v[j] = vld1q_f32(x + 4 * j);
      m = vmaxq_f32(m, vabsq_f32(v[j]));
    }
    const float amax = neon::HMax(m);
    const float d = amax / 127.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < 8; j += 2) {
      const int32x4_t q0 = neon::RoundEvenToS32(vmulq_n_f32(v[j], id));
      const int32x4_t q1 = neon::RoundEvenToS32(vmulq_n_f32(v[j + 1], id));
      const int16x8_t q16 = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1));
      vst1_s8(y[i].qs + 4 * j, vmovn_s16(q16));
    }
  }
}

}  // namespace

void FillBasicNeon(KernelSet& ks) {
  auto ops = [&ks](DType t) -> TypeOps& { return ks.types[static_cast<int>(t)].ops; };
  ops(DType::kF32).vec_dot = DotF32Neon;
  ops(DType::kF16).vec_dot = DotF16Neon;
  ops(DType::kQ8_0).vec_dot = DotQ8_0Neon;
  ops(DType::kQ8_0).quantize_row = QuantQ8_0Neon;
  ops(DType::kQ4_0).vec_dot = DotQ4_0Neon;
  ops(DType::kQ5_0).vec_dot = DotQ5_0Neon;
}

}  // namespace fg::kernels::internal
