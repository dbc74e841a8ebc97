// NEON element kernels (4 f32 lanes), for aarch64 and armv7. Numerics as documented in ops.h;
// each function matches its scalar twin in src/kernels/ops.cc up to f32 rounding order.
// armv7 NEON flushes subnormals to zero: results (and, in gelu, the reciprocal 1 / (1 + e)) that
// would be subnormal become 0, so gelu(g) for g < about -9.5 is 0 there instead of < 1e-37 |g|.
#include <cmath>
#include <limits>

#include "src/kernels/neon_util.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/ops.h"

namespace fg::kernels {
namespace {

using neon::Div;
using neon::Fma;
using neon::HMax;
using neon::HSum;

// exp(x) to ~1 ulp, the same scheme as ops_avx2.cc Exp8: x = n ln2 + r, Cephes polynomial
// for e^r, 2^n applied as two factors so overflow is inf and underflow 0. NaN in, NaN out.
inline float32x4_t Exp4(float32x4_t x) {
  const float32x4_t xc = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-150.0f)), vdupq_n_f32(90.0f));
  const float32x4_t n = neon::RoundEven(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vmlsq_f32(xc, n, vdupq_n_f32(0.693359375f));
  r = vmlsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = Fma(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = Fma(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = Fma(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = Fma(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = Fma(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = Fma(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t ni = vcvtq_s32_f32(n);  // n is integral: exact
  const int32x4_t n1 = vshrq_n_s32(ni, 1);
  const int32x4_t n2 = vsubq_s32(ni, n1);
  const int32x4_t bias = vdupq_n_s32(127);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
  const float32x4_t y = vmulq_f32(vmulq_f32(p, s1), s2);
  return vbslq_f32(vceqq_f32(x, x), y, x);
}

void ExpNeon(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, Exp4(vld1q_f32(x + i)));
  if (i < n) {
    float t[4] = {};
    for (int64_t j = i; j < n; ++j) t[j - i] = x[j];
    vst1q_f32(t, Exp4(vld1q_f32(t)));
    for (int64_t j = i; j < n; ++j) y[j] = t[j - i];
  }
}

void RmsNormNeon(const float* x, const float* w, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0),
              a3 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
    const float32x4_t v2 = vld1q_f32(x + i + 8), v3 = vld1q_f32(x + i + 12);
    a0 = Fma(a0, v0, v0);
    a1 = Fma(a1, v1, v1);
    a2 = Fma(a2, v2, v2);
    a3 = Fma(a3, v3, v3);
  }
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    a0 = Fma(a0, v, v);
  }
  double ss = HSum(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale =
      static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  i = 0;
  if (w == nullptr) {
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), scale));
    for (; i < n; ++i) y[i] = x[i] * scale;
  } else {
    for (; i + 4 <= n; i += 4) {
      vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    }
    for (; i < n; ++i) y[i] = x[i] * scale * w[i];
  }
}

void ApplyRopeNeon(float* x, int64_t n_heads, int64_t head_dim, const float* c,
                   const float* s) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    int64_t i = 0;
    for (; i + 4 <= half; i += 4) {
      const float32x4_t x0 = vld1q_f32(p + i), x1 = vld1q_f32(p + i + half);
      const float32x4_t vc = vld1q_f32(c + i), vs = vld1q_f32(s + i);
      vst1q_f32(p + i, vsubq_f32(vmulq_f32(x0, vc), vmulq_f32(x1, vs)));
      vst1q_f32(p + i + half, vaddq_f32(vmulq_f32(x1, vc), vmulq_f32(x0, vs)));
    }
    for (; i < half; ++i) {
      const float x0 = p[i], x1 = p[i + half];
      p[i] = x0 * c[i] - x1 * s[i];
      p[i + half] = x1 * c[i] + x0 * s[i];
    }
  }
}

inline float32x4_t GeluTanh4(float32x4_t g) {
  // g / (1 + exp(-2u)), -2u = g (c0 + c1 g^2); see ops.h.
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  const float32x4_t c0 = vdupq_n_f32(static_cast<float>(-2.0 * kSqrt2OverPi));
  const float32x4_t c1 = vdupq_n_f32(static_cast<float>(-2.0 * kSqrt2OverPi * 0.044715));
  const float32x4_t z = vmulq_f32(g, Fma(c0, c1, vmulq_f32(g, g)));
  return Div(g, vaddq_f32(vdupq_n_f32(1.0f), Exp4(z)));
}

void GeluTanhMulNeon(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    vst1q_f32(out + i, vmulq_f32(GeluTanh4(vld1q_f32(gate + i)), vld1q_f32(up + i)));
  }
  if (i < n) {
    float tg[4] = {}, tu[4] = {}, to[4];
    for (int64_t j = i; j < n; ++j) tg[j - i] = gate[j], tu[j - i] = up[j];
    vst1q_f32(to, vmulq_f32(GeluTanh4(vld1q_f32(tg)), vld1q_f32(tu)));
    for (int64_t j = i; j < n; ++j) out[j] = to[j - i];
  }
}

// Max over the non-NaN values (-inf if none). vmaxq propagates NaN, so compare-and-select:
// a NaN compares false and leaves the accumulator as it was.
inline float32x4_t MaxSel(float32x4_t x, float32x4_t m) { return vbslq_f32(vcgtq_f32(x, m), x, m); }

float MaxNoNan(const float* x, int64_t n) {
  const float32x4_t ninf = vdupq_n_f32(-std::numeric_limits<float>::infinity());
  float32x4_t m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = MaxSel(vld1q_f32(x + i), m0);
    m1 = MaxSel(vld1q_f32(x + i + 4), m1);
    m2 = MaxSel(vld1q_f32(x + i + 8), m2);
    m3 = MaxSel(vld1q_f32(x + i + 12), m3);
  }
  for (; i + 4 <= n; i += 4) m0 = MaxSel(vld1q_f32(x + i), m0);
  float m = HMax(MaxSel(MaxSel(m0, m1), MaxSel(m2, m3)));
  for (; i < n; ++i) {
    if (x[i] > m) m = x[i];
  }
  return m;
}

void SoftmaxNeon(float* x, int64_t n) {
  if (n <= 0) return;
  const float m = MaxNoNan(x, n);
  if (m == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  const float32x4_t vm = vdupq_n_f32(m);
  float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t e0 = Exp4(vsubq_f32(vld1q_f32(x + i), vm));
    const float32x4_t e1 = Exp4(vsubq_f32(vld1q_f32(x + i + 4), vm));
    vst1q_f32(x + i, e0);
    vst1q_f32(x + i + 4, e1);
    s0 = vaddq_f32(s0, e0);
    s1 = vaddq_f32(s1, e1);
  }
  for (; i + 4 <= n; i += 4) {
    const float32x4_t e = Exp4(vsubq_f32(vld1q_f32(x + i), vm));
    vst1q_f32(x + i, e);
    s0 = vaddq_f32(s0, e);
  }
  float sum = HSum(vaddq_f32(s0, s1));
  if (i < n) {
    float t[4];
    for (int j = 0; j < 4; ++j) {
      t[j] = i + j < n ? x[i + j] - m : -std::numeric_limits<float>::infinity();
    }
    vst1q_f32(t, Exp4(vld1q_f32(t)));
    for (int64_t j = i; j < n; ++j) {
      x[j] = t[j - i];
      sum += t[j - i];
    }
  }
  const float inv = 1.0f / sum;
  i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
  for (; i < n; ++i) x[i] *= inv;
}

// Max, then the first index equal to it (exact, so identical to the scalar twin).
int64_t ArgmaxNeon(const float* x, int64_t n) {
  if (n <= 0) return 0;
  const float m = MaxNoNan(x, n);
  const float32x4_t vm = vdupq_n_f32(m);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const uint32x4_t e = vorrq_u32(
        vorrq_u32(vceqq_f32(vld1q_f32(x + i), vm), vceqq_f32(vld1q_f32(x + i + 4), vm)),
        vorrq_u32(vceqq_f32(vld1q_f32(x + i + 8), vm), vceqq_f32(vld1q_f32(x + i + 12), vm)));
    if (neon::AnyNonZero(e)) break;  // the first match is in x[i, i + 16)
  }
  for (; i < n; ++i) {
    if (x[i] == m) return i;
  }
  return 0;  // every value is NaN
}

void AddNeon(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
  for (; i < n; ++i) y[i] = a[i] + b[i];
}

void MulNeon(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
  for (; i < n; ++i) y[i] = a[i] * b[i];
}

void ScaleNeon(float* x, float s, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
  for (; i < n; ++i) x[i] *= s;
}

float DotNeon(const float* a, const float* b, int64_t n) {
  float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0),
              s3 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = Fma(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    s1 = Fma(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    s2 = Fma(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
    s3 = Fma(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
  }
  for (; i + 4 <= n; i += 4) s0 = Fma(s0, vld1q_f32(a + i), vld1q_f32(b + i));
  float sum = HSum(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void AxpyNeon(float alpha, const float* x, float* y, int64_t n) {
  const float32x4_t va = vdupq_n_f32(alpha);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, Fma(vld1q_f32(y + i), va, vld1q_f32(x + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// Per 4-lane column block, an accumulator from y takes the r products in order (fused); the
// tail columns the same products unfused.
void LowRankRowNeon(const float* y, const float* t, const float* bt, float scale, int64_t r,
                      int64_t n, float* out) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    float32x4_t acc = y != nullptr ? vld1q_f32(y + j) : vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < r; ++k) acc = Fma(acc, vdupq_n_f32(scale * t[k]), vld1q_f32(bt + k * n + j));
    vst1q_f32(out + j, acc);
  }
  for (; j < n; ++j) {
    float acc = y != nullptr ? y[j] : 0.0f;
    for (int64_t k = 0; k < r; ++k) acc += (scale * t[k]) * bt[k * n + j];
    out[j] = acc;
  }
}

void LowRankNeon(const float* y, const float* t, const float* bt, float scale, int64_t m,
                   int64_t r, int64_t n, float* out) {
  for (int64_t i = 0; i < m; ++i) {
    LowRankRowNeon(y ? y + i * n : nullptr, t + i * r, bt, scale, r, n, out + i * n);
  }
}

}  // namespace

namespace internal {

void FillElementOpsNeon(KernelSet& ks) {
  ElementOps& t = ks.element;
  t.rms_norm = RmsNormNeon;
  t.apply_rope = ApplyRopeNeon;
  t.gelu_tanh_mul = GeluTanhMulNeon;
  t.softmax = SoftmaxNeon;
  t.argmax = ArgmaxNeon;
  t.add = AddNeon;
  t.mul = MulNeon;
  t.scale = ScaleNeon;
  t.dot = DotNeon;
  t.axpy = AxpyNeon;
  t.low_rank = LowRankNeon;
  t.exp = ExpNeon;
}

}  // namespace internal
}  // namespace fg::kernels
