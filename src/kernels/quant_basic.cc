// Scalar kernels of the plain types (F32, F16, BF16) and the 32-element block types (Q8_0,
// Q8_1, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): the twins every SIMD kernel is tested against.
// ref: ggml/src/ggml-quants.c (dequantize_row_*, quantize_row_*_ref),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_*_generic).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {
namespace {

using tensor::Bf16ToFp32;
using tensor::Fp16ToFp32;
using tensor::Fp32ToBf16;
using tensor::Fp32ToFp16;

// ---------------------------------------------------------------- plain types

void DequantF32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void QuantF32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void DotF32(int64_t n, const void* w, const void* a, float* out) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  *out = s;
}

void DequantF16(const void* src, float* dst, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(x[i]);
}
void QuantF16(const float* src, void* dst, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = Fp32ToFp16(src[i]);
}
void DotF16(int64_t n, const void* w, const void* a, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const float* y = static_cast<const float*>(a);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += Fp16ToFp32(x[i]) * y[i];
  *out = s;
}

void DequantBf16(const void* src, float* dst, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(x[i]);
}
void QuantBf16(const float* src, void* dst, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = Fp32ToBf16(src[i]);
}
void DotBf16(int64_t n, const void* w, const void* a, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const float* y = static_cast<const float*>(a);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += Bf16ToFp32(x[i]) * y[i];
  *out = s;
}

// ---------------------------------------------------------------- block helpers

// Absolute maximum and the signed value that attains it (first one on ties).
inline void AbsMax(const float* x, float* amax, float* max) {
  float a = 0, m = 0;
  for (int j = 0; j < kQK; ++j) {
    const float v = std::fabs(x[j]);
    if (v > a) {
      a = v;
      m = x[j];
    }
  }
  *amax = a;
  *max = m;
}

inline void MinMax(const float* x, float* mn, float* mx) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kQK; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  *mn = lo;
  *mx = hi;
}

// ---------------------------------------------------------------- Q8_0 / Q8_1

void DequantQ8_0(const void* src, float* dst, int64_t n) {
  const block_q8_0* b = static_cast<const block_q8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * b[i].qs[j];
  }
}

// ref: quantize_row_q8_0_ref: d = amax / 127, q = round(x * (1/d)). Ties round to even
// (nearbyint), as ggml's x86 quantize_row_q8_0 (_mm256_round_ps) does, so the SIMD activation
// quantizers can match this one bit for bit.
void QuantQ8_0(const float* src, void* dst, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax, max;
    AbsMax(x, &amax, &max);
    const float d = amax / 127.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::nearbyintf(x[j] * id));
  }
}

void DotQ8_0(int64_t n, const void* w, const void* a, float* out) {
  const block_q8_0* x = static_cast<const block_q8_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    s += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

void DequantQ8_1(const void* src, float* dst, int64_t n) {
  const block_q8_1* b = static_cast<const block_q8_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * b[i].qs[j];
  }
}

// ref: quantize_row_q8_1_ref: as Q8_0, plus s = d * sum(q).
void QuantQ8_1(const float* src, void* dst, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax, max;
    AbsMax(x, &amax, &max);
    const float d = amax / 127.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::nearbyintf(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].d = Fp32ToFp16(d);
    y[i].s = Fp32ToFp16(static_cast<float>(sum) * d);
  }
}

void DotQ8_1(int64_t n, const void* w, const void* a, float* out) {
  const block_q8_1* x = static_cast<const block_q8_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    s += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

// ---------------------------------------------------------------- Q4_0 / Q4_1

void DequantQ4_0(const void* src, float* dst, int64_t n) {
  const block_q4_0* b = static_cast<const block_q4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      dst[i * kQK + j] = d * ((b[i].qs[j] & 0xf) - 8);
      dst[i * kQK + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
    }
  }
}

// ref: quantize_row_q4_0_ref: d = max / -8 (max = the signed value of largest magnitude, so
// it maps to q = 0 exactly), q = min(15, trunc(x / d + 8.5)).
void QuantQ4_0(const float* src, void* dst, int64_t n) {
  block_q4_0* y = static_cast<block_q4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax, max;
    AbsMax(x, &amax, &max);
    const float d = max / -8.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

void DotQ4_0(int64_t n, const void* w, const void* a, float* out) {
  const block_q4_0* x = static_cast<const block_q4_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += ((x[i].qs[j] & 0xf) - 8) * y[i].qs[j];
      sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
    }
    s += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

void DequantQ4_1(const void* src, float* dst, int64_t n) {
  const block_q4_1* b = static_cast<const block_q4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(b[i].d), m = Fp16ToFp32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      dst[i * kQK + j] = d * (b[i].qs[j] & 0xf) + m;
      dst[i * kQK + j + 16] = d * (b[i].qs[j] >> 4) + m;
    }
  }
}

// ref: quantize_row_q4_1_ref: d = (max - min) / 15, m = min, q = min(15, trunc((x-m)/d + 0.5)).
void QuantQ4_1(const float* src, void* dst, int64_t n) {
  block_q4_1* y = static_cast<block_q4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float mn, mx;
    MinMax(x, &mn, &mx);
    const float d = (mx - mn) / 15.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(mn);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - mn) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + 16] - mn) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

// The block-sum trick: sum_j (d q_j + m) y_j dy = d dy sum_j q_j y_j + m (dy sum_j y_j), and
// the activation block carries s = dy sum_j y_j. ref: ggml_vec_dot_q4_1_q8_1_generic.
void DotQ4_1(int64_t n, const void* w, const void* a, float* out) {
  const block_q4_1* x = static_cast<const block_q4_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += (x[i].qs[j] & 0xf) * y[i].qs[j];
      sumi += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
    }
    s += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d)) +
         Fp16ToFp32(x[i].m) * Fp16ToFp32(y[i].s);
  }
  *out = s;
}

// ---------------------------------------------------------------- Q5_0 / Q5_1

// The 5-bit value of element j (0..31) of a Q5 block.
inline int Q5Value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
  return lo | static_cast<int>((qh >> j) & 1u) << 4;
}

void DequantQ5_0(const void* src, float* dst, int64_t n) {
  const block_q5_0* b = static_cast<const block_q5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    const uint32_t qh = LoadQh(b[i].qh);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * (Q5Value(b[i].qs, qh, j) - 16);
  }
}

// Packs 32 five-bit values into the low nibbles / qh bits of a Q5 block.
inline void PackQ5(const int* q, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xf) | (q[j + 16] & 0xf) << 4);
  for (int j = 0; j < kQK; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh_bytes[k] = static_cast<uint8_t>(qh >> (8 * k));
}

// ref: quantize_row_q5_0_ref: d = max / -16, q = min(31, trunc(x / d + 16.5)).
void QuantQ5_0(const float* src, void* dst, int64_t n) {
  block_q5_0* y = static_cast<block_q5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax, max;
    AbsMax(x, &amax, &max);
    const float d = max / -16.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[i].d = Fp32ToFp16(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(x[j] * id + 16.5f));
    PackQ5(q, y[i].qs, y[i].qh);
  }
}

void DotQ5_0(int64_t n, const void* w, const void* a, float* out) {
  const block_q5_0* x = static_cast<const block_q5_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = LoadQh(x[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += (Q5Value(x[i].qs, qh, j) - 16) * y[i].qs[j];
    s += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

void DequantQ5_1(const void* src, float* dst, int64_t n) {
  const block_q5_1* b = static_cast<const block_q5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(b[i].d), m = Fp16ToFp32(b[i].m);
    const uint32_t qh = LoadQh(b[i].qh);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * Q5Value(b[i].qs, qh, j) + m;
  }
}

// ref: quantize_row_q5_1_ref: d = (max - min) / 31, q = min(31, trunc((x - min) / d + 0.5)).
void QuantQ5_1(const float* src, void* dst, int64_t n) {
  block_q5_1* y = static_cast<block_q5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float mn, mx;
    MinMax(x, &mn, &mx);
    const float d = (mx - mn) / 31.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(mn);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>((x[j] - mn) * id + 0.5f));
    PackQ5(q, y[i].qs, y[i].qh);
  }
}

void DotQ5_1(int64_t n, const void* w, const void* a, float* out) {
  const block_q5_1* x = static_cast<const block_q5_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = LoadQh(x[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += Q5Value(x[i].qs, qh, j) * y[i].qs[j];
    s += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d)) +
         Fp16ToFp32(x[i].m) * Fp16ToFp32(y[i].s);
  }
  *out = s;
}

// ---------------------------------------------------------------- IQ4_NL

void DequantIq4nl(const void* src, float* dst, int64_t n) {
  const block_iq4_nl* b = static_cast<const block_iq4_nl*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      dst[i * kQK + j] = d * kIq4nlValues[b[i].qs[j] & 0xf];
      dst[i * kQK + j + 16] = d * kIq4nlValues[b[i].qs[j] >> 4];
    }
  }
}

// Index of the codebook value nearest to v (the codebook is sorted).
inline int NearestIq4nl(float v) {
  if (v <= kIq4nlValues[0]) return 0;
  if (v >= kIq4nlValues[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kIq4nlValues[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - kIq4nlValues[lo] < kIq4nlValues[hi] - v ? lo : hi;
}

// Weighted least-squares scale search over 15 candidate scales, as ggml's
// quantize_row_iq4_nl_ref does without an importance matrix (weights x^2): for each candidate
// inverse scale assign the nearest codebook entries, then take the scale d = sum(w q x) /
// sum(w q^2) that is optimal for that assignment; keep the assignment maximizing
// sum(w q x)^2 / sum(w q^2) (i.e. minimizing the weighted squared error). Finally the indices
// are re-chosen against the f16-rounded scale that is actually stored.
// ref: ggml/src/ggml-quants.c quantize_row_iq4_nl_impl (ntry = 7).
void QuantIq4nl(const float* src, void* dst, int64_t n) {
  block_iq4_nl* y = static_cast<block_iq4_nl*>(dst);
  constexpr int kTries = 7;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax, max;
    AbsMax(x, &amax, &max);
    if (amax < 1e-15f) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      continue;
    }
    float w[kQK];
    for (int j = 0; j < kQK; ++j) w[j] = x[j] * x[j];
    float best_d = -max / kIq4nlValues[0];  // max maps onto the end of the codebook
    {
      float sumqx = 0, sumq2 = 0;
      const float id = 1.f / best_d;
      for (int j = 0; j < kQK; ++j) {
        const float q = kIq4nlValues[NearestIq4nl(id * x[j])];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
      }
      if (sumq2 > 0) best_d = sumqx / sumq2;
    }
    float best = 0;
    {
      float sumqx = 0, sumq2 = 0;
      const float id = 1.f / best_d;
      for (int j = 0; j < kQK; ++j) {
        const float q = kIq4nlValues[NearestIq4nl(id * x[j])];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
      }
      best = sumq2 > 0 ? sumqx * sumqx / sumq2 : 0;
    }
    for (int itry = -kTries; itry <= kTries; ++itry) {
      const float id = (itry + kIq4nlValues[0]) / max;
      float sumqx = 0, sumq2 = 0;
      for (int j = 0; j < kQK; ++j) {
        const float q = kIq4nlValues[NearestIq4nl(id * x[j])];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        best_d = sumqx / sumq2;
        best = best_d * sumqx;
      }
    }
    y[i].d = Fp32ToFp16(best_d);
    const float d = Fp16ToFp32(y[i].d);
    const float id = d != 0 ? 1.f / d : 0.f;
    for (int j = 0; j < 16; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(NearestIq4nl(id * x[j]) | NearestIq4nl(id * x[j + 16]) << 4);
    }
  }
}

void DotIq4nl(int64_t n, const void* w, const void* a, float* out) {
  const block_iq4_nl* x = static_cast<const block_iq4_nl*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += kIq4nlValues[x[i].qs[j] & 0xf] * y[i].qs[j];
      sumi += kIq4nlValues[x[i].qs[j] >> 4] * y[i].qs[j + 16];
    }
    s += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  *out = s;
}

}  // namespace

void FillBasicScalar(KernelSet& ks) {
  SetTypeOps(ks, DType::kF32, DType::kF32, DequantF32, QuantF32, DotF32);
  SetTypeOps(ks, DType::kF16, DType::kF32, DequantF16, QuantF16, DotF16);
  SetTypeOps(ks, DType::kBF16, DType::kF32, DequantBf16, QuantBf16, DotBf16);
  SetTypeOps(ks, DType::kQ8_0, DType::kQ8_0, DequantQ8_0, QuantQ8_0, DotQ8_0);
  SetTypeOps(ks, DType::kQ8_1, DType::kQ8_1, DequantQ8_1, QuantQ8_1, DotQ8_1);
  SetTypeOps(ks, DType::kQ4_0, DType::kQ8_0, DequantQ4_0, QuantQ4_0, DotQ4_0);
  SetTypeOps(ks, DType::kQ4_1, DType::kQ8_1, DequantQ4_1, QuantQ4_1, DotQ4_1);
  SetTypeOps(ks, DType::kQ5_0, DType::kQ8_0, DequantQ5_0, QuantQ5_0, DotQ5_0);
  SetTypeOps(ks, DType::kQ5_1, DType::kQ8_1, DequantQ5_1, QuantQ5_1, DotQ5_1);
  SetTypeOps(ks, DType::kIQ4_NL, DType::kQ8_0, DequantIq4nl, QuantIq4nl, DotIq4nl);
}

}  // namespace fg::kernels::internal
