// Kernels of the backward pass (training): the gradients of rms_norm, gelu_tanh * up, the
// cross-entropy loss and cache attention.
//
// Each has a fast version over an ElementOps table (f32, SIMD through the table's dot, axpy,
// exp and softmax) and a scalar twin in fg::kernels::scalar that computes in double: the
// oracle the fast versions are tested against (tests/unit/grad_kernels_test.cc), and the
// executor's reference mode. Formulas (x a row of n, r = 1 / sqrt(mean(x^2) + eps)):
// - rms_norm: y = x r w, so dx = r (w dy) - x r^3 / n * sum(w dy x).
// - gelu_mul: out = gelu(g) u with gelu(g) = g s, s = 1 / (1 + exp(-2a)), a = c (g + 0.044715
//   g^3), c = sqrt(2/pi); d u = dy gelu(g); d g = dy u (s + 2 g s (1 - s) c (1 + 3 * 0.044715
//   g^2)).
// - cross entropy: loss = logsumexp(x) - x[t]; dx = dloss (softmax(x) - onehot(t)).
// - attention: per query row and head, P = softmax(scale q.K), out = P V; with dP_j = dout.v_j
//   and dS_j = P_j (dP_j - sum_i P_i dP_i): dq = scale sum_j dS_j k_j, dk_j += scale dS_j q,
//   dv_j += P_j dout.
#ifndef FGEMMA_KERNELS_GRAD_H_
#define FGEMMA_KERNELS_GRAD_H_

#include <cstdint>

#include "src/kernels/ops.h"
#include "src/kernels/quant.h"
#include "src/tensor/dtype.h"

namespace fg::kernels {

struct KernelSet;  // kernel_set.h

// One row of n: dx from x, w (null: no weight) and dy.
void RmsNormBackRow(const ElementOps& ops, const float* x, const float* w, const float* dy,
                    float* dx, int64_t n, float eps);
// n elements: out = d gate (operand 0) or d up (operand 1) of gelu_tanh(gate) * up.
void GeluMulBack(const ElementOps& ops, const float* gate, const float* up, const float* dy,
                 float* out, int64_t n, int operand);
// -log softmax(x)[target] over n logits (target in [0, n)).
float CrossEntropyRow(const ElementOps& ops, const float* x, int64_t n, int32_t target);
// dx = dloss (softmax(x) - onehot(target)); dx may not alias x.
void CrossEntropyBackRow(const ElementOps& ops, const float* x, int64_t n, int32_t target,
                         float dloss, float* dx);

// The gradient of the loss through a frozen LM head, over the tokens that carry the softmax's
// mass (the training graph's head_cross_entropy_back). With logits = x head^T and loss =
// logsumexp(logits) - logits[t], the exact dx = dloss (sum_v p_v head[v] - head[t]) reads all
// V rows of the head (262144 x 640 in Gemma 3: as much as the forward product); nearly all of
// p's mass is on a few tokens, so this reads only the rows with p_v >= threshold (at most
// max_tokens of them besides the target, the likeliest; ties: the lower id), the target's, and
// stands `mean` (the head's mean row; null: nothing) in for the rest:
//   dx = dloss (sum_{v in S} p_v head[v] + tail mean + (p_t - 1) head[t]),
//   tail = 1 - p_t - sum_{v in S} p_v (the mass left out, >= 0).
// Returns tail. `logits` is a row of V, `loss` its cross entropy (logsumexp - logits[target],
// what the forward op computed: not computed again); the head is V rows of D in `type`.
struct HeadBackArgs {
  const uint8_t* head = nullptr;
  tensor::DType type = tensor::DType::kF32;
  const TypeOps* rows = nullptr;  // the fast version's dequantizer of `type` (null: the CPU's)
  size_t row_bytes = 0;
  int64_t V = 0, D = 0;
  const float* mean = nullptr;
  float threshold = 0;
  int64_t max_tokens = 0;
};
float HeadCrossEntropyBackRow(const ElementOps& ops, const HeadBackArgs& a, const float* logits,
                              int32_t target, float loss, float dloss, float* dx);

// Cache attention's gradient for queries t_begin .. t_end-1 (the forward op's layout: q
// [S,Hq,D], caches [R,KV,D] read at rows pos % R, query at position p sees p-window+1 .. p,
// window 0: 0 .. p). dq rows of those queries are written; dk, dv [R,KV,D] are added to, for
// the keys at positions >= kv_from only (0: all; a cached prefix's rows are a state nobody
// differentiates, so a caller may skip them).
struct AttentionBackArgs {
  const float* q;
  const float* k;
  const float* v;
  const int32_t* pos;
  const float* dout;  // [S, Hq*D]
  int64_t Hq, D, R, KV, window;
  float scale;
  float* dq;
  float* dk;
  float* dv;
  int64_t kv_from = 0;
};
void AttentionBack(const KernelSet& ks, const AttentionBackArgs& a, int64_t t_begin, int64_t t_end);

namespace scalar {
void RmsNormBackRow(const float* x, const float* w, const float* dy, float* dx, int64_t n,
                    float eps);
void GeluMulBack(const float* gate, const float* up, const float* dy, float* out, int64_t n,
                 int operand);
float CrossEntropyRow(const float* x, int64_t n, int32_t target);
void CrossEntropyBackRow(const float* x, int64_t n, int32_t target, float dloss, float* dx);
void AttentionBack(const AttentionBackArgs& a, int64_t t_begin, int64_t t_end);
float HeadCrossEntropyBackRow(const HeadBackArgs& a, const float* logits, int32_t target,
                              float loss, float dloss, float* dx);
}  // namespace scalar

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_GRAD_H_
