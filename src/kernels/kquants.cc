// Scalar K-quant kernels (Q4_K, Q5_K, Q6_K and the activation type Q8_K): dequantize, the
// reference quantizers, and the integer dot products with Q8_K. These are the twins every SIMD
// version is tested against.
//
// Quantizer numerics follow ggml's quantize_row_*_ref (what llama-quantize uses without an
// importance matrix), operation for operation in f32, so fgemma quantizes as llama.cpp does:
//   Q4_K: per 32 a weighted min/scale fit (make_qkx2_quants: nmax 15, weights av_x + |x|,
//         21 candidate scales from nmax - 1.0 in steps of 0.1), 6-bit scales and mins relative
//         to the block maxima, then requantization against the stored f16/6-bit values.
//   Q5_K: the same with nmax 31 and 16 candidates from nmax - 0.5.
//   Q6_K: per 16 a symmetric fit (make_qx_quants, nmax 32, weights x^2, 19 candidate scales),
//         8-bit signed scales relative to the largest, then requantization.
//   Q8_K: round(-127 x / max) with max the element of largest |x|, plus the 16-element sums.
// Checked byte for byte against ggml's quantize_row_*_ref (kquants_test.cc). That needs f32
// operations exactly as written: CMakeLists.txt builds with -ffp-contract=off (no FMA fusion).
//
// SIMD versions: kquants_avx2.cc, kquants_avx512.cc (x86), kquants_neon.cc (ARM).
// ref: ggml/src/ggml-quants.c (quantize_row_q4_K_ref, q5_K_ref, q6_K_ref, q8_K_ref,
// make_qkx2_quants, make_qx_quants, dequantize_row_q4_K ..., ggml-cpu/quants.c
// ggml_vec_dot_q4_K_q8_K_generic ...).
#include <cmath>
#include <cstring>

#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/kquants_internal.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {

void UnpackScalesMinsK4(const uint8_t q[kKScaleSize], uint8_t out[16]) {
  // Sub-blocks 0-3 keep their 6 bits in the low bits of bytes 0-3 (scales) and 4-7 (mins);
  // sub-blocks 4-7 take 4 low bits from a nibble of bytes 8-11 and the 2 high bits from the
  // top bits of bytes 0-3 (scales) / 4-7 (mins).
  for (int j = 0; j < 4; ++j) {
    out[j] = q[j] & 63;
    out[8 + j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    out[j] = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    out[8 + j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

namespace {

using tensor::Fp16ToFp32;
using tensor::Fp32ToFp16;

constexpr float kGroupMaxEps = 1e-15f;  // ref: ggml-quants.c GROUP_MAX_EPS

// Round to nearest, ties to even, for |f| < 2^22: adding 1.5 * 2^23 leaves the integer in the
// low mantissa bits. Same results as ggml's nearest_int; no UB for any input.
inline int NearestInt(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

inline int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Inverse of UnpackScalesMinsK4 for 6-bit sc[8], m[8].
void PackScalesMinsK4(const uint8_t sc[8], const uint8_t m[8], uint8_t q[kKScaleSize]) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

// Fits x[i] ~ scale * L[i] - the_min with L in [0, nmax] and the_min >= 0, minimizing the
// weighted squared error over nstep + 1 candidate scales (nmax + rmin + rdelta * is) / range,
// each refined by weighted least squares. Returns the scale; L gets the levels.
// ref: ggml-quants.c make_qkx2_quants (use_mad = false).
float FitScaleMin(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                  uint8_t* laux, float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    const float diff = scale * L[i] + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      laux[i] = static_cast<uint8_t>(l);
      const float wl = w[i] * l;
      sum_l += wl;
      sum_l2 += wl * l;
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {  // the offset can only lower values (stored as a non-negative min)
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * laux[i] + this_min - x[i];
        cur_error += w[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Symmetric fit x[i] ~ scale * (L[i] - nmax), L - nmax in [-nmax, nmax - 1], weights x^2, over 19
// candidate scales around -nmax / max (max = the element of largest |x|, so the scale is signed).
// ref: ggml-quants.c make_qx_quants (rmse_type 1, no importance weights).
float FitScaleSymmetric(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    // Maximizing sumlx^2 / suml2 minimizes the weighted error at the optimal scale.
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Shared by Q4_K and Q5_K: per-sub-block fits, 6-bit scales/mins, then levels in [0, nmax]
// against the stored (rounded) scales. Writes d, dmin, scales; returns levels in L[256].
void QuantizeScalesMinsK(const float* x, int nmax, float rmin, int nstep, uint16_t* d,
                         uint16_t* dmin, uint8_t packed[kKScaleSize], uint8_t L[kQK_K]) {
  float scales[8], mins[8], weights[32];
  uint8_t laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = FitScaleMin(32, nmax, xs, weights, L + 32 * j, &mins[j], laux, rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // uint8_t first, then clamp: the byte conversion is part of the reference numerics.
    const uint8_t s = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    const uint8_t m = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    ls[j] = s < 63 ? s : 63;
    lm[j] = m < 63 ? m : 63;
  }
  PackScalesMinsK4(ls, lm, packed);
  *d = Fp32ToFp16(max_scale / 63.f);
  *dmin = Fp32ToFp16(max_min / 63.f);
  const float df = Fp16ToFp32(*d), dminf = Fp16ToFp32(*dmin);
  for (int j = 0; j < 8; ++j) {
    const float dj = df * ls[j];
    if (dj == 0) continue;
    const float mj = dminf * lm[j];
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] = static_cast<uint8_t>(Clamp(NearestInt((x[32 * j + l] + mj) / dj), 0, nmax));
    }
  }
}

void QuantizeRowQ4K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    QuantizeScalesMinsK(x, 15, -1.f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
    uint8_t* q = y[b].qs;
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        q[32 * k + l] = static_cast<uint8_t>(L[64 * k + l] | (L[64 * k + 32 + l] << 4));
      }
    }
  }
}

void QuantizeRowQ5K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    QuantizeScalesMinsK(x, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * k + l], hi = L[64 * k + 32 + l];
        y[b].qs[32 * k + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        y[b].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * k)) | ((hi >> 4) << (2 * k + 1)));
      }
    }
  }
}

void QuantizeRowQ6K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ6K*>(dst);
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; ++g) {
      scales[g] = FitScaleSymmetric(16, 32, x + 16 * g, L + 16 * g);
      const float a = std::fabs(scales[g]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[g];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[b], 0, sizeof(BlockQ6K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[b].d = Fp32ToFp16(1 / iscale);
    for (int g = 0; g < 16; ++g) {
      const int s = NearestInt(iscale * scales[g]);
      y[b].scales[g] = static_cast<int8_t>(s < 127 ? s : 127);
    }
    const float df = Fp16ToFp32(y[b].d);
    for (int g = 0; g < 16; ++g) {
      const float dg = df * y[b].scales[g];
      if (dg == 0) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * g + l] = static_cast<int8_t>(Clamp(NearestInt(x[16 * g + l] / dg), -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = y[b].ql + 64 * h;
      uint8_t* qh = y[b].qh + 32 * h;
      const int8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                     ((q4 >> 4) << 6));
      }
    }
  }
}

void QuantizeRowQ8K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0) {  // also the bsums (ggml leaves them unset)
      std::memset(&y[b], 0, sizeof(BlockQ8K));
      continue;
    }
    // -127 (not -128) keeps every level in [-127, 127], as ggml does.
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = NearestInt(iscale * x[j]);
      y[b].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[b].qs[16 * g + l];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1 / iscale;
  }
}

void DequantizeRowQ4K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = Fp16ToFp32(x[b].d), dmin = Fp16ToFp32(x[b].dmin);
    uint8_t sm[16];
    UnpackScalesMinsK4(x[b].scales, sm);
    for (int k = 0; k < 4; ++k) {
      const float d1 = d * sm[2 * k], m1 = dmin * sm[8 + 2 * k];
      const float d2 = d * sm[2 * k + 1], m2 = dmin * sm[8 + 2 * k + 1];
      const uint8_t* q = x[b].qs + 32 * k;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void DequantizeRowQ5K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = Fp16ToFp32(x[b].d), dmin = Fp16ToFp32(x[b].dmin);
    uint8_t sm[16];
    UnpackScalesMinsK4(x[b].scales, sm);
    for (int k = 0; k < 4; ++k) {
      const float d1 = d * sm[2 * k], m1 = dmin * sm[8 + 2 * k];
      const float d2 = d * sm[2 * k + 1], m2 = dmin * sm[8 + 2 * k + 1];
      const uint8_t* q = x[b].qs + 32 * k;
      const uint8_t* qh = x[b].qh;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) | (((qh[l] >> (2 * k)) & 1) << 4)) - m1;
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * ((q[l] >> 4) | (((qh[l] >> (2 * k + 1)) & 1) << 4)) - m2;
      }
    }
  }
}

// The 256 levels of a Q6_K block in element order, minus the offset 32.
void UnpackQ6K(const BlockQ6K& b, int8_t q[kQK_K]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* o = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      o[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      o[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      o[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

void DequantizeRowQ6K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ6K*>(src);
  int8_t q[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = Fp16ToFp32(x[b].d);
    UnpackQ6K(x[b], q);
    for (int e = 0; e < kQK_K; ++e) y[e] = d * x[b].scales[e / 16] * q[e];
  }
}

void DequantizeRowQ8K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int j = 0; j < kQK_K; ++j) *y++ = x[b].d * x[b].qs[j];
  }
}

// The dot products: per super-block an exact int32 sum (bounded well below 2^31: at most
// 8 * 63 * 32 * 31 * 127 for Q5_K), then one f32 multiply-add by the block scales.
// Q4_K/Q5_K: sum_e (d sc q - dmin m) a = d * sum_j sc_j dot_j - dmin * sum_j m_j bsum_j.
template <bool kHasHighBit, typename Block>
void VecDotQ45K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sm[16];
    UnpackScalesMinsK4(x[b].scales, sm);
    int32_t isum = 0;
    for (int k = 0; k < 4; ++k) {
      const uint8_t* q = x[b].qs + 32 * k;
      const int8_t* a8 = y[b].qs + 64 * k;
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        int ql = q[l] & 0xF, qhv = q[l] >> 4;
        if constexpr (kHasHighBit) {
          const uint8_t* qh = reinterpret_cast<const BlockQ5K*>(&x[b])->qh;
          ql |= ((qh[l] >> (2 * k)) & 1) << 4;
          qhv |= ((qh[l] >> (2 * k + 1)) & 1) << 4;
        }
        lo += ql * a8[l];
        hi += qhv * a8[32 + l];
      }
      isum += sm[2 * k] * lo + sm[2 * k + 1] * hi;
    }
    int32_t imin = 0;
    for (int j = 0; j < 8; ++j) imin += sm[8 + j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    const float d = Fp16ToFp32(x[b].d) * y[b].d;
    const float dmin = Fp16ToFp32(x[b].dmin) * y[b].d;
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(imin);
  }
  *out = sum;
}

void VecDotQ4KQ8K(int64_t n, const void* w, const void* a, float* out) {
  VecDotQ45K<false, BlockQ4K>(n, w, a, out);
}
void VecDotQ5KQ8K(int64_t n, const void* w, const void* a, float* out) {
  VecDotQ45K<true, BlockQ5K>(n, w, a, out);
}

// Q6_K: sum_e d sc_{e/16} (q_e - 32) a_e = d * sum_g sc_g * sum_{e in g} (q_e - 32) a_e.
void VecDotQ6KQ8K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ6K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  int8_t q[kQK_K];
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    UnpackQ6K(x[b], q);
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * g + l] * y[b].qs[16 * g + l];
      isum += x[b].scales[g] * dot;
    }
    sum += Fp16ToFp32(x[b].d) * y[b].d * static_cast<float>(isum);
  }
  *out = sum;
}

}  // namespace

void FillKQuantScalar(KernelSet& ks) {
  SetTypeOps(ks, DType::kQ4_K, DType::kQ8_K, DequantizeRowQ4K, QuantizeRowQ4K, VecDotQ4KQ8K);
  SetTypeOps(ks, DType::kQ5_K, DType::kQ8_K, DequantizeRowQ5K, QuantizeRowQ5K, VecDotQ5KQ8K);
  SetTypeOps(ks, DType::kQ6_K, DType::kQ8_K, DequantizeRowQ6K, QuantizeRowQ6K, VecDotQ6KQ8K);
  // Q8_K is only an activation format: no weight . activation product of its own.
  SetTypeOps(ks, DType::kQ8_K, DType::kQ8_K, DequantizeRowQ8K, QuantizeRowQ8K, nullptr);
}

}  // namespace fg::kernels::internal
