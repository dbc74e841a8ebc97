// The two inner loops of attention over an f32 KV cache, for a group of query heads that share
// one KV head (Gemma 3 270M: 4 query heads per KV head):
//   scores:       s[g][j] = scale * (q_g . k_j)
//   weighted sum: o_g += sum_j p[g][j] * v_j
// Doing the group at once reads each key / value row once per group instead of once per query
// head, and keeps the outputs in registers across keys (the per-key dot + axpy loop loaded and
// stored the whole output row for every key).
//
// Numerics: f32 products. The scalar twin accumulates in double; the SIMD versions accumulate
// the scores in f32 lanes and the weighted sum in key order with one fused multiply-add per key
// (the same rounding as axpy per key). Sets without a specialization (KernelSet::attention)
// run the set's element dot / axpy.
#ifndef FGEMMA_KERNELS_ATTENTION_H_
#define FGEMMA_KERNELS_ATTENTION_H_

#include <cstdint>

#include "src/kernels/cpu.h"

namespace fg::kernels {

struct KernelSet;  // kernel_set.h

// q: G rows of D floats (contiguous); k: n rows of D floats, row j at k + j * k_stride;
// s: row g at s + g * lds (lds >= n).
void AttnScores(const KernelSet& ks, const float* q, int64_t G, int64_t D, const float* k, int64_t k_stride,
                int64_t n, float scale, float* s, int64_t lds);
// p: row g at p + g * ldp; v: n rows of D floats, row j at v + j * v_stride; o: G rows of D
// floats (contiguous), accumulated into.
void AttnWeightedSum(const KernelSet& ks, const float* p, int64_t ldp, int64_t G, const float* v,
                     int64_t v_stride, int64_t n, int64_t D, float* o);

// Attention of query rows over a ring KV cache: position p's key and value at row p % R. A query
// at position p reads the keys FirstKey(p, window) .. p (causal; window 0: all of them), which
// sit in at most two contiguous runs of the ring.
struct RingAttention {
  const float* q = nullptr;    // [S, Hq, D]
  const float* k = nullptr;    // [R, KV, D]
  const float* v = nullptr;    // [R, KV, D]
  const int32_t* pos = nullptr;  // [S], >= 0
  int64_t Hq = 0, D = 0, R = 0, KV = 0;
  int64_t window = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [S, Hq, D]
};

inline int64_t FirstKey(int64_t p, int64_t window) {
  return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

// The keys S queries at pos read, lowest .. highest: they are all in a ring of R rows iff
// highest - lowest + 1 <= R (else newer positions overwrote some). Positions must be >= 0.
struct KeySpan {
  int64_t lowest = 0, highest = -1;
  int64_t rows() const { return highest - lowest + 1; }
};
KeySpan KeysRead(const int32_t* pos, int64_t S, int64_t window);

// Query row t's heads kvh * group + g0 .. + gn - 1 (group = Hq / KV; they share KV head kvh):
// scores, softmax and the weighted sum of the values into a.out. `scores`: gn rows of lds >= R
// floats of scratch. The scalar set runs the scalar twins.
void AttendRing(const KernelSet& ks, const RingAttention& a, int64_t t, int64_t kvh, int64_t g0, int64_t gn,
                float* scores, int64_t lds);

namespace scalar {
void AttnScores(const float* q, int64_t G, int64_t D, const float* k, int64_t k_stride, int64_t n,
                float scale, float* s, int64_t lds);
void AttnWeightedSum(const float* p, int64_t ldp, int64_t G, const float* v, int64_t v_stride,
                     int64_t n, int64_t D, float* o);
}  // namespace scalar

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_ATTENTION_H_
