// Small NEON helpers shared by ops_neon.cc and quant_neon.cc, written once for aarch64 and for
// 32-bit armv7 NEON (no vaddvq/vmaxvq/vfmaq/vdivq/vrndnq/vcvtnq there: pairwise fallbacks).
// Only included from *_neon.cc files, which CMake builds on ARM targets only.
#ifndef FGEMMA_KERNELS_NEON_UTIL_H_
#define FGEMMA_KERNELS_NEON_UTIL_H_

#include <arm_neon.h>

#include <cstdint>

namespace fg::kernels::neon {

inline float HSum(float32x4_t v) {
#if defined(__aarch64__)
  return vaddvq_f32(v);
#else
  float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  s = vpadd_f32(s, s);
  return vget_lane_f32(s, 0);
#endif
}

// Max of 4 lanes; callers only pass NaN-free vectors.
inline float HMax(float32x4_t v) {
#if defined(__aarch64__)
  return vmaxvq_f32(v);
#else
  float32x2_t s = vpmax_f32(vget_low_f32(v), vget_high_f32(v));
  s = vpmax_f32(s, s);
  return vget_lane_f32(s, 0);
#endif
}

inline int32_t HSumS32(int32x4_t v) {
#if defined(__aarch64__)
  return vaddvq_s32(v);
#else
  int32x2_t s = vadd_s32(vget_low_s32(v), vget_high_s32(v));
  s = vpadd_s32(s, s);
  return vget_lane_s32(s, 0);
#endif
}

inline bool AnyNonZero(uint32x4_t v) {
#if defined(__aarch64__)
  return vmaxvq_u32(v) != 0;
#else
  uint32x2_t s = vorr_u32(vget_low_u32(v), vget_high_u32(v));
  return (vget_lane_u32(s, 0) | vget_lane_u32(s, 1)) != 0;
#endif
}

// c + a * b: fused where the FPU has it (aarch64, VFPv4), else multiply then add.
inline float32x4_t Fma(float32x4_t c, float32x4_t a, float32x4_t b) {
#if defined(__ARM_FEATURE_FMA)
  return vfmaq_f32(c, a, b);
#else
  return vmlaq_f32(c, a, b);
#endif
}

// a / b. armv7 has no vector divide: reciprocal estimate refined by two Newton steps (about
// 1 ulp; 1 / inf gives 0, so a / inf is a signed zero as with a true division).
inline float32x4_t Div(float32x4_t a, float32x4_t b) {
#if defined(__aarch64__)
  return vdivq_f32(a, b);
#else
  float32x4_t r = vrecpeq_f32(b);
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  return vmulq_f32(a, r);
#endif
}

// Round to nearest, ties to even (the default FP rounding, as nearbyintf), for |x| < 2^22.
inline float32x4_t RoundEven(float32x4_t x) {
#if defined(__aarch64__)
  return vrndnq_f32(x);
#else
  // Adding 1.5 * 2^23 leaves no fraction bits; the add rounds to nearest even.
  const float32x4_t magic = vdupq_n_f32(12582912.0f);
  return vsubq_f32(vaddq_f32(x, magic), magic);
#endif
}

inline int32x4_t RoundEvenToS32(float32x4_t x) {
#if defined(__aarch64__)
  return vcvtnq_s32_f32(x);
#else
  return vcvtq_s32_f32(RoundEven(x));
#endif
}

}  // namespace fg::kernels::neon

#endif  // FGEMMA_KERNELS_NEON_UTIL_H_
