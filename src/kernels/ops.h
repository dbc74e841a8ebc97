// Element-wise and per-row kernels of the Gemma 3 forward pass: RMS norm, RoPE, gelu_tanh(gate) *
// up, softmax, argmax, and the small vector ops attention uses over the KV cache.
//
// Every kernel has a scalar twin in fg::kernels::scalar (the oracle the SIMD versions are
// tested against) and per-ISA versions in the KernelSet of that ISA (GetElementOps(isa)). The free functions
// below dispatch on ActiveIsa().
//
// Numerics (what callers may rely on):
// - RmsNorm: y = x / sqrt(mean(x^2) + eps) * w. The scalar twin sums squares in double, SIMD
//   versions in several f32 lane accumulators. y may alias x. w == nullptr means no weight.
// - GeluTanhMul: out = gelu_tanh(g) * up with gelu_tanh(g) = 0.5 g (1 + tanh(u)),
//   u = sqrt(2/pi) (g + 0.044715 g^3). All versions use the exact identity
//   0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), which keeps full relative precision in the negative
//   tail where 1 + tanh(u) cancels in f32, and is finite for any finite g (exp overflow gives
//   a signed zero). ref: HF transformers GELUTanh / llama.cpp ggml_gelu.
// - Softmax: max-subtracted; entries of -inf (or -1e30 masks) get exactly 0. A row that is
//   entirely -inf becomes all zeros (there is no distribution to return). NaN propagates.
// - Argmax: the lowest index of the largest non-NaN value (NaNs are skipped); 0 if every value
//   is NaN or n <= 0. All ISAs return the same index, ties included.
// - Dot: f32 products; the scalar twin accumulates in double, SIMD versions in 4 vectors of f32
//   lanes (a pairwise-like split that keeps the error near sqrt(n/lanes) ulps).
#ifndef FGEMMA_KERNELS_OPS_H_
#define FGEMMA_KERNELS_OPS_H_

#include <cstdint>

#include "src/kernels/cpu.h"

namespace fg::kernels {

// The element kernels of one KernelSet (kernel_set.h). Every member is set in every set
// (scalar where an ISA has no specialization).
struct ElementOps {
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps);
  // x: n_heads rows of head_dim; cos_half/sin_half: head_dim/2 values (see RopeTable).
  void (*apply_rope)(float* x, int64_t n_heads, int64_t head_dim, const float* cos_half,
                     const float* sin_half);
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*softmax)(float* x, int64_t n);
  int64_t (*argmax)(const float* x, int64_t n);
  void (*add)(const float* a, const float* b, float* y, int64_t n);  // y = a + b
  void (*mul)(const float* a, const float* b, float* y, int64_t n);  // y = a * b
  void (*scale)(float* x, float s, int64_t n);                       // x *= s
  float (*dot)(const float* a, const float* b, int64_t n);
  void (*axpy)(float alpha, const float* x, float* y, int64_t n);  // y += alpha * x
  // For m rows: out[i] = y[i] + sum_k (scale * x[i][k]) * w[k], k = 0..kd-1 in order (y, out
  // [m, n], x [m, kd], w [kd, n]; y null: 0): a LoRA's projections with A or B transposed;
  // out may be y. A row's result does not depend on m or on the other rows.
  void (*low_rank)(const float* y, const float* x, const float* w, float scale, int64_t m,
                   int64_t kd, int64_t n, float* out);
  // y = exp(x) elementwise (the vectorized exp behind softmax and gelu, exposed for tests).
  void (*exp)(const float* x, float* y, int64_t n);
};

// GetKernelSet(isa).element (isa must be one of AvailableIsas()).
const ElementOps& GetElementOps(Isa isa);
inline const ElementOps& GetElementOps() { return GetElementOps(ActiveIsa()); }

// RoPE tables, split-half ("NeoX") layout over all head_dim dims:
// f_i = base^(-2i/head_dim), a = pos * f_i computed in double, cos_half[i] = cos(a),
// sin_half[i] = sin(a) rounded to f32, for i < head_dim/2. head_dim must be even.
// ref: HF transformers rotate_half; llama.cpp ggml_rope_ext (GGML_ROPE_TYPE_NEOX).
void RopeTable(int64_t pos, int64_t head_dim, double base, float* cos_half, float* sin_half);
// Tables for positions pos0 .. pos0+n_pos-1: row p (head_dim/2 floats) of cos/sin is position
// pos0 + p.
void RopeTables(int64_t pos0, int64_t n_pos, int64_t head_dim, double base, float* cos_half,
                float* sin_half);

// Dispatching entry points (ActiveIsa()).
inline void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  GetElementOps().rms_norm(x, w, y, n, eps);
}
// `rows` rows of n elements each (contiguous, stride n), one shared weight w[n]
// (q_norm/k_norm over head_dim per head). y may alias x.
void RmsNormRows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps);
void RmsNormRowsIsa(Isa isa, const float* x, const float* w, float* y, int64_t rows, int64_t n,
                    float eps);
// For each head: x_i' = x_i c_i - x_{i+D/2} s_i, x_{i+D/2}' = x_{i+D/2} c_i + x_i s_i.
inline void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_half,
                      const float* sin_half) {
  GetElementOps().apply_rope(x, n_heads, head_dim, cos_half, sin_half);
}
// Prefill: x is [n_pos, n_heads, head_dim]; tables as made by RopeTables for those positions.
void ApplyRopeMulti(float* x, int64_t n_pos, int64_t n_heads, int64_t head_dim,
                    const float* cos_half, const float* sin_half);
void ApplyRopeMultiIsa(Isa isa, float* x, int64_t n_pos, int64_t n_heads, int64_t head_dim,
                       const float* cos_half, const float* sin_half);
inline void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  GetElementOps().gelu_tanh_mul(gate, up, out, n);
}
inline void Softmax(float* x, int64_t n) { GetElementOps().softmax(x, n); }
inline int64_t Argmax(const float* x, int64_t n) { return GetElementOps().argmax(x, n); }
inline void Add(const float* a, const float* b, float* y, int64_t n) {
  GetElementOps().add(a, b, y, n);
}
inline void Mul(const float* a, const float* b, float* y, int64_t n) {
  GetElementOps().mul(a, b, y, n);
}
inline void Scale(float* x, float s, int64_t n) { GetElementOps().scale(x, s, n); }
inline float Dot(const float* a, const float* b, int64_t n) { return GetElementOps().dot(a, b, n); }
inline void Axpy(float alpha, const float* x, float* y, int64_t n) {
  GetElementOps().axpy(alpha, x, y, n);
}

namespace scalar {
void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);
void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_half,
               const float* sin_half);
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n);
void Softmax(float* x, int64_t n);
int64_t Argmax(const float* x, int64_t n);
void Add(const float* a, const float* b, float* y, int64_t n);
void Mul(const float* a, const float* b, float* y, int64_t n);
void Scale(float* x, float s, int64_t n);
float Dot(const float* a, const float* b, int64_t n);
void Axpy(float alpha, const float* x, float* y, int64_t n);
void LowRank(const float* y, const float* x, const float* w, float scale, int64_t m, int64_t kd,
             int64_t n, float* out);
void Exp(const float* x, float* y, int64_t n);
}  // namespace scalar

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_OPS_H_
