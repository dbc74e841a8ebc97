// AVX2 + FMA element kernels (8 f32 lanes). Numerics as documented in ops.h; each function
// matches its scalar twin in src/kernels/ops.cc up to f32 rounding order.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "src/kernels/kernel_set.h"
#include "src/kernels/ops.h"

namespace fg::kernels {
namespace {

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) to ~1 ulp: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial (Cephes expf
// coefficients), then 2^n applied as two factors 2^(n/2) 2^(n - n/2) so that overflow gives
// inf and underflow gives 0 / subnormals without exponent-field tricks going wrong.
// NaN in, NaN out.
inline __m256 Exp8(__m256 x) {
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-150.0f)),
                                  _mm256_set1_ps(90.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

void ExpAvx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float tx[8] = {}, ty[8];
    for (int64_t j = i; j < n; ++j) tx[j - i] = x[j];
    _mm256_storeu_ps(ty, Exp8(_mm256_loadu_ps(tx)));
    for (int64_t j = i; j < n; ++j) y[j] = ty[j - i];
  }
}

void RmsNormAvx2(const float* x, const float* w, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  double ss = HSum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale =
      static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  const __m256 vs = _mm256_set1_ps(scale);
  i = 0;
  if (w == nullptr) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; ++i) y[i] = x[i] * scale;
  } else {
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs),
                                            _mm256_loadu_ps(w + i)));
    }
    for (; i < n; ++i) y[i] = x[i] * scale * w[i];
  }
}

void ApplyRopeAvx2(float* x, int64_t n_heads, int64_t head_dim, const float* c,
                   const float* s) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m256 x0 = _mm256_loadu_ps(p + i), x1 = _mm256_loadu_ps(p + i + half);
      const __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
      _mm256_storeu_ps(p + i, _mm256_fmsub_ps(x0, vc, _mm256_mul_ps(x1, vs)));
      _mm256_storeu_ps(p + i + half, _mm256_fmadd_ps(x1, vc, _mm256_mul_ps(x0, vs)));
    }
    for (; i < half; ++i) {
      const float x0 = p[i], x1 = p[i + half];
      p[i] = x0 * c[i] - x1 * s[i];
      p[i + half] = x1 * c[i] + x0 * s[i];
    }
  }
}

inline __m256 GeluTanh8(__m256 g) {
  // g / (1 + exp(-2u)), -2u = g (c0 + c1 g^2); see ops.h.
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  const __m256 c0 = _mm256_set1_ps(static_cast<float>(-2.0 * kSqrt2OverPi));
  const __m256 c1 = _mm256_set1_ps(static_cast<float>(-2.0 * kSqrt2OverPi * 0.044715));
  const __m256 z = _mm256_mul_ps(g, _mm256_fmadd_ps(c1, _mm256_mul_ps(g, g), c0));
  return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), Exp8(z)));
}

void GeluTanhMulAvx2(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(GeluTanh8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    float tg[8] = {}, tu[8] = {}, to[8];
    for (int64_t j = i; j < n; ++j) tg[j - i] = gate[j], tu[j - i] = up[j];
    _mm256_storeu_ps(to, _mm256_mul_ps(GeluTanh8(_mm256_loadu_ps(tg)), _mm256_loadu_ps(tu)));
    for (int64_t j = i; j < n; ++j) out[j] = to[j - i];
  }
}

// Max over the non-NaN values (-inf if none): max_ps returns its second operand when the first
// is NaN, and the accumulator never holds NaN.
float MaxNoNan(const float* x, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
    m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
  float m = HMax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  for (; i < n; ++i) {
    if (x[i] > m) m = x[i];
  }
  return m;
}

void SoftmaxAvx2(float* x, int64_t n) {
  if (n <= 0) return;
  const float m = MaxNoNan(x, n);
  if (m == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  const __m256 vm = _mm256_set1_ps(m);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    const __m256 e1 = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
    _mm256_storeu_ps(x + i, e0);
    _mm256_storeu_ps(x + i + 8, e1);
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    s0 = _mm256_add_ps(s0, e);
  }
  float sum = HSum(_mm256_add_ps(s0, s1));
  if (i < n) {
    float t[8];
    for (int j = 0; j < 8; ++j) t[j] = i + j < n ? x[i + j] - m : -INFINITY;
    _mm256_storeu_ps(t, Exp8(_mm256_loadu_ps(t)));
    for (int64_t j = i; j < n; ++j) {
      x[j] = t[j - i];
      sum += t[j - i];
    }
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= 1.0f / sum;
}

// Two passes: the max (NaN skipped), then the first index equal to it. Both are exact, so the
// result is the scalar twin's for any input; the second pass usually stops early.
int64_t ArgmaxAvx2(const float* x, int64_t n) {
  if (n <= 0) return 0;
  const float m = MaxNoNan(x, n);
  const __m256 vm = _mm256_set1_ps(m);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vm, _CMP_EQ_OQ));
    if (mask != 0) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < n; ++i) {
    if (x[i] == m) return i;
  }
  return 0;  // every value is NaN
}

void AddAvx2(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) y[i] = a[i] + b[i];
}

void MulAvx2(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) y[i] = a[i] * b[i];
}

void ScaleAvx2(float* x, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; ++i) x[i] *= s;
}

float DotAvx2(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  }
  float sum = HSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void AxpyAvx2(float alpha, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// Per 8-lane column block, an accumulator from y takes the r products in order (fused); the
// tail columns the same products unfused, so an element's result depends only on its column.
void LowRankRowAvx2(const float* y, const float* t, const float* bt, float scale, int64_t r,
                      int64_t n, float* out) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 acc = y != nullptr ? _mm256_loadu_ps(y + j) : _mm256_setzero_ps();
    for (int64_t k = 0; k < r; ++k) {
      acc = _mm256_fmadd_ps(_mm256_set1_ps(scale * t[k]), _mm256_loadu_ps(bt + k * n + j), acc);
    }
    _mm256_storeu_ps(out + j, acc);
  }
  for (; j < n; ++j) {
    float acc = y != nullptr ? y[j] : 0.0f;
    for (int64_t k = 0; k < r; ++k) acc += (scale * t[k]) * bt[k * n + j];
    out[j] = acc;
  }
}

void LowRankAvx2(const float* y, const float* t, const float* bt, float scale, int64_t m,
                   int64_t r, int64_t n, float* out) {
  for (int64_t i = 0; i < m; ++i) {
    LowRankRowAvx2(y ? y + i * n : nullptr, t + i * r, bt, scale, r, n, out + i * n);
  }
}

}  // namespace

namespace internal {

void FillElementOpsAvx2(KernelSet& ks) {
  ElementOps& t = ks.element;
  t.rms_norm = RmsNormAvx2;
  t.apply_rope = ApplyRopeAvx2;
  t.gelu_tanh_mul = GeluTanhMulAvx2;
  t.softmax = SoftmaxAvx2;
  t.argmax = ArgmaxAvx2;
  t.add = AddAvx2;
  t.mul = MulAvx2;
  t.scale = ScaleAvx2;
  t.dot = DotAvx2;
  t.axpy = AxpyAvx2;
  t.low_rank = LowRankAvx2;
  t.exp = ExpAvx2;
}

}  // namespace internal
}  // namespace fg::kernels
