// AVX-512F element kernels (16 f32 lanes, masked tails). Numerics as documented in ops.h; each
// function matches its scalar twin in src/kernels/ops.cc up to f32 rounding order.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "src/kernels/kernel_set.h"
#include "src/kernels/ops.h"

namespace fg::kernels {
namespace {

inline __mmask16 TailMask(int64_t left) {
  return static_cast<__mmask16>((1u << static_cast<unsigned>(left)) - 1u);
}

// exp(x) to ~1 ulp: x = n ln2 + r, e^r by the Cephes expf polynomial, then scalef applies 2^n
// with IEEE overflow (inf) and underflow (0 / subnormal). NaN in, NaN out.
inline __m512 Exp16(__m512 x) {
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-150.0f)),
                                  _mm512_set1_ps(90.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512 y = _mm512_scalef_ps(p, n);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

void ExpAvx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, Exp16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 k = TailMask(n - i);
    _mm512_mask_storeu_ps(y + i, k, Exp16(_mm512_maskz_loadu_ps(k, x + i)));
  }
}

void RmsNormAvx512(const float* x, const float* w, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  const double ss = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
  const float scale =
      static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  const __m512 vs = _mm512_set1_ps(scale);
  for (i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);
    if (w != nullptr) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i));
    _mm512_mask_storeu_ps(y + i, k, v);
  }
}

void ApplyRopeAvx512(float* x, int64_t n_heads, int64_t head_dim, const float* c,
                     const float* s) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    for (int64_t i = 0; i < half; i += 16) {
      const __mmask16 k = half - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(half - i);
      const __m512 x0 = _mm512_maskz_loadu_ps(k, p + i);
      const __m512 x1 = _mm512_maskz_loadu_ps(k, p + i + half);
      const __m512 vc = _mm512_maskz_loadu_ps(k, c + i), vs = _mm512_maskz_loadu_ps(k, s + i);
      _mm512_mask_storeu_ps(p + i, k, _mm512_fmsub_ps(x0, vc, _mm512_mul_ps(x1, vs)));
      _mm512_mask_storeu_ps(p + i + half, k, _mm512_fmadd_ps(x1, vc, _mm512_mul_ps(x0, vs)));
    }
  }
}

inline __m512 GeluTanh16(__m512 g) {
  // g / (1 + exp(-2u)), -2u = g (c0 + c1 g^2); see ops.h.
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  const __m512 c0 = _mm512_set1_ps(static_cast<float>(-2.0 * kSqrt2OverPi));
  const __m512 c1 = _mm512_set1_ps(static_cast<float>(-2.0 * kSqrt2OverPi * 0.044715));
  const __m512 z = _mm512_mul_ps(g, _mm512_fmadd_ps(c1, _mm512_mul_ps(g, g), c0));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), Exp16(z)));
}

void GeluTanhMulAvx512(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(k, gate + i);
    _mm512_mask_storeu_ps(out + i, k,
                          _mm512_mul_ps(GeluTanh16(g), _mm512_maskz_loadu_ps(k, up + i)));
  }
}

// Max over the non-NaN values (-inf if none); see ops_avx2.cc.
float MaxNoNan(const float* x, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
    m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
    m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
    m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    m0 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, x + i), m0);
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

void SoftmaxAvx512(float* x, int64_t n) {
  if (n <= 0) return;
  const float m = MaxNoNan(x, n);
  if (m == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  const __m512 vm = _mm512_set1_ps(m);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    const __m512 e1 = Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm));
    _mm512_storeu_ps(x + i, e0);
    _mm512_storeu_ps(x + i + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, k, x + i), vm));
    _mm512_mask_storeu_ps(x + i, k, e);
    s0 = _mm512_add_ps(s0, e);  // masked-off lanes are exp(-inf) = 0
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
  for (i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
  }
}

// Max, then the first index equal to it: exact, so identical to the scalar twin (ops_avx2.cc).
int64_t ArgmaxAvx512(const float* x, int64_t n) {
  if (n <= 0) return 0;
  const __m512 vm = _mm512_set1_ps(MaxNoNan(x, n));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    const unsigned eq = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, x + i), vm, _CMP_EQ_OQ);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
  return 0;  // every value is NaN
}

void AddAvx512(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    _mm512_mask_storeu_ps(
        y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i)));
  }
}

void MulAvx512(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    _mm512_mask_storeu_ps(
        y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i)));
  }
}

void ScaleAvx512(float* x, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs));
  }
}

float DotAvx512(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

void AxpyAvx512(float alpha, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    _mm512_mask_storeu_ps(
        y + i, k,
        _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i)));
  }
}

// Blocks of up to 8 rows x 16 * kChunks columns: each w vector loaded once meets 8 rows.
// Every element starts from y (or 0) and takes its k products in order, fused, whatever the
// block, so a row's result does not depend on m.
template <int kRows, int kChunks>
void LowRankBlock(const float* y, const float* x, const float* w, float scale, int64_t kd,
                  int64_t n, float* out) {
  // The rows' scaled coefficients, once (each broadcast is then a plain load); the same
  // products as scaling inside the loop.
  constexpr int64_t kMaxKd = 256;
  float xs[kRows * kMaxKd];
  const bool pre = kd <= kMaxKd;
  if (pre) {
    for (int i = 0; i < kRows; ++i) {
      for (int64_t k = 0; k < kd; ++k) xs[i * kd + k] = scale * x[i * kd + k];
    }
  }
  for (int64_t j = 0; j < n; j += 16 * kChunks) {
    __mmask16 mask[kChunks];
    __m512 acc[kRows][kChunks];
    for (int c = 0; c < kChunks; ++c) {
      const int64_t left = n - j - 16 * c;
      mask[c] = left >= 16 ? static_cast<__mmask16>(0xffff)
                : left > 0  ? TailMask(left)
                            : static_cast<__mmask16>(0);
      for (int i = 0; i < kRows; ++i) {
        acc[i][c] = y != nullptr ? _mm512_maskz_loadu_ps(mask[c], y + i * n + j + 16 * c)
                                 : _mm512_setzero_ps();
      }
    }
    for (int64_t k = 0; k < kd; ++k) {
      __m512 b[kChunks];
      for (int c = 0; c < kChunks; ++c) b[c] = _mm512_maskz_loadu_ps(mask[c], w + k * n + j + 16 * c);
      for (int i = 0; i < kRows; ++i) {
        const __m512 a = _mm512_set1_ps(pre ? xs[i * kd + k] : scale * x[i * kd + k]);
        for (int c = 0; c < kChunks; ++c) acc[i][c] = _mm512_fmadd_ps(a, b[c], acc[i][c]);
      }
    }
    for (int i = 0; i < kRows; ++i) {
      for (int c = 0; c < kChunks; ++c) _mm512_mask_storeu_ps(out + i * n + j + 16 * c, mask[c], acc[i][c]);
    }
  }
}

template <int kChunks>
void LowRankRows(const float* y, const float* x, const float* w, float scale, int64_t m,
                 int64_t kd, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    LowRankBlock<8, kChunks>(y ? y + i * n : nullptr, x + i * kd, w, scale, kd, n, out + i * n);
  }
  for (; i + 4 <= m; i += 4) {
    LowRankBlock<4, kChunks>(y ? y + i * n : nullptr, x + i * kd, w, scale, kd, n, out + i * n);
  }
  for (; i < m; ++i) {
    LowRankBlock<1, kChunks>(y ? y + i * n : nullptr, x + i * kd, w, scale, kd, n, out + i * n);
  }
}

void LowRankAvx512(const float* y, const float* x, const float* w, float scale, int64_t m,
                   int64_t kd, int64_t n, float* out) {
  if (n <= 16) {
    LowRankRows<1>(y, x, w, scale, m, kd, n, out);
  } else {
    LowRankRows<2>(y, x, w, scale, m, kd, n, out);
  }
}

}  // namespace

namespace internal {

void FillElementOpsAvx512(KernelSet& ks) {
  ElementOps& t = ks.element;
  t.rms_norm = RmsNormAvx512;
  t.apply_rope = ApplyRopeAvx512;
  t.gelu_tanh_mul = GeluTanhMulAvx512;
  t.softmax = SoftmaxAvx512;
  t.argmax = ArgmaxAvx512;
  t.add = AddAvx512;
  t.mul = MulAvx512;
  t.scale = ScaleAvx512;
  t.dot = DotAvx512;
  t.axpy = AxpyAvx512;
  t.low_rank = LowRankAvx512;
  t.exp = ExpAvx512;
}

}  // namespace internal
}  // namespace fg::kernels
