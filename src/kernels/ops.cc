// Scalar twins of the element kernels, their fill function and the RoPE tables.
#include "src/kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/kernels/kernel_set.h"

namespace fg::kernels {

namespace scalar {

void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  double ss = 0.0;  // double: the twin is the accuracy oracle (docs/model.md: f32 or wider)
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale =
      static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  if (w == nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  }
}

void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_half,
               const float* sin_half) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = p[i], x1 = p[i + half];
      // ref: HF rotate_half: x * cos + cat(-x2, x1) * sin
      p[i] = x0 * cos_half[i] - x1 * sin_half[i];
      p[i + half] = x1 * cos_half[i] + x0 * sin_half[i];
    }
  }
}

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  // 0.5 g (1 + tanh(u)) == g / (1 + exp(-2u)); -2u = g (c0 + c1 g^2).
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  constexpr float c0 = static_cast<float>(-2.0 * kSqrt2OverPi);
  constexpr float c1 = static_cast<float>(-2.0 * kSqrt2OverPi * 0.044715);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float z = g * (c0 + c1 * (g * g));
    out[i] = g / (1.0f + std::exp(z)) * up[i];
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > m) m = x[i];
  }
  if (m == -std::numeric_limits<float>::infinity()) {  // fully masked (or all NaN)
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int64_t Argmax(const float* x, int64_t n) {
  int64_t idx = -1;
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    // Strict > keeps the first of equal values; NaN never compares greater.
    if (idx < 0 ? !std::isnan(x[i]) : x[i] > best) {
      best = x[i];
      idx = i;
    }
  }
  return idx < 0 ? 0 : idx;
}

void Add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void Mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void Scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

float Dot(const float* a, const float* b, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(acc);
}

void Axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void LowRank(const float* y, const float* t, const float* bt, float scale, int64_t m, int64_t r,
             int64_t n, float* out) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = y != nullptr ? y[i * n + j] : 0.0f;
      for (int64_t k = 0; k < r; ++k) acc += (scale * t[i * r + k]) * bt[k * n + j];
      out[i * n + j] = acc;
    }
  }
}

void Exp(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace scalar

void RopeTable(int64_t pos, int64_t head_dim, double base, float* cos_half, float* sin_half) {
  RopeTables(pos, 1, head_dim, base, cos_half, sin_half);
}

void RopeTables(int64_t pos0, int64_t n_pos, int64_t head_dim, double base, float* cos_half,
                float* sin_half) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    // f_i = base^(-2i/D) and the angle in double: an f32 angle pos * f_i has an ulp of ~4e-3
    // rad once it passes 2^15, so only the final cos/sin are rounded to f32.
    const double f = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    for (int64_t p = 0; p < n_pos; ++p) {
      const double a = static_cast<double>(pos0 + p) * f;
      cos_half[p * half + i] = static_cast<float>(std::cos(a));
      sin_half[p * half + i] = static_cast<float>(std::sin(a));
    }
  }
}

namespace internal {

void FillElementOpsScalar(KernelSet& ks) {
  ElementOps& t = ks.element;
  t.rms_norm = scalar::RmsNorm;
  t.apply_rope = scalar::ApplyRope;
  t.gelu_tanh_mul = scalar::GeluTanhMul;
  t.softmax = scalar::Softmax;
  t.argmax = scalar::Argmax;
  t.add = scalar::Add;
  t.mul = scalar::Mul;
  t.scale = scalar::Scale;
  t.dot = scalar::Dot;
  t.axpy = scalar::Axpy;
  t.low_rank = scalar::LowRank;
  t.exp = scalar::Exp;
}

}  // namespace internal

const ElementOps& GetElementOps(Isa isa) { return GetKernelSet(isa).element; }

void RmsNormRowsIsa(Isa isa, const float* x, const float* w, float* y, int64_t rows, int64_t n,
                    float eps) {
  const ElementOps& ops = GetElementOps(isa);
  for (int64_t r = 0; r < rows; ++r) ops.rms_norm(x + r * n, w, y + r * n, n, eps);
}

void RmsNormRows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) {
  RmsNormRowsIsa(ActiveIsa(), x, w, y, rows, n, eps);
}

void ApplyRopeMultiIsa(Isa isa, float* x, int64_t n_pos, int64_t n_heads, int64_t head_dim,
                       const float* cos_half, const float* sin_half) {
  const ElementOps& ops = GetElementOps(isa);
  const int64_t half = head_dim / 2;
  for (int64_t p = 0; p < n_pos; ++p) {
    ops.apply_rope(x + p * n_heads * head_dim, n_heads, head_dim, cos_half + p * half,
                   sin_half + p * half);
  }
}

void ApplyRopeMulti(float* x, int64_t n_pos, int64_t n_heads, int64_t head_dim,
                    const float* cos_half, const float* sin_half) {
  ApplyRopeMultiIsa(ActiveIsa(), x, n_pos, n_heads, head_dim, cos_half, sin_half);
}

}  // namespace fg::kernels
