#include "src/kernels/attention.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "src/kernels/kernel_set.h"
#include "src/kernels/ops.h"

namespace fg::kernels {

namespace scalar {

void AttnScores(const float* q, int64_t G, int64_t D, const float* k, int64_t k_stride, int64_t n,
                float scale, float* s, int64_t lds) {
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) {
        acc += static_cast<double>(q[g * D + d]) * k[j * k_stride + d];
      }
      s[g * lds + j] = static_cast<float>(acc) * scale;
    }
  }
}

// f32 steps key by key, in key order (as the SIMD versions): the executor calls this once per
// stretch of the cache (ring segments, the chunk's own keys), and where those stretches split
// depends on the chunk length, so a wider accumulator rounded at each call's end would make a
// token's result depend on how the prompt was chunked.
void AttnWeightedSum(const float* p, int64_t ldp, int64_t G, const float* v, int64_t v_stride,
                     int64_t n, int64_t D, float* o) {
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < n; ++j) {
      const float w = p[g * ldp + j];
      for (int64_t d = 0; d < D; ++d) o[g * D + d] += w * v[j * v_stride + d];
    }
  }
}

}  // namespace scalar

void AttnScores(const KernelSet& ks, const float* q, int64_t G, int64_t D, const float* k,
                int64_t k_stride, int64_t n, float scale, float* s, int64_t lds) {
  const AttentionKernels& a = ks.attention;
  if (a.scores != nullptr && D % a.d_multiple == 0) {
    return a.scores(q, G, D, k, k_stride, n, scale, s, lds);
  }
  const ElementOps& ops = ks.element;
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < n; ++j) s[g * lds + j] = ops.dot(q + g * D, k + j * k_stride, D) * scale;
  }
}

void AttnWeightedSum(const KernelSet& ks, const float* p, int64_t ldp, int64_t G, const float* v,
                     int64_t v_stride, int64_t n, int64_t D, float* o) {
  const AttentionKernels& a = ks.attention;
  if (a.weighted_sum != nullptr && D % a.d_multiple == 0) {
    return a.weighted_sum(p, ldp, G, v, v_stride, n, D, o);
  }
  const ElementOps& ops = ks.element;
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < n; ++j) ops.axpy(p[g * ldp + j], v + j * v_stride, o + g * D, D);
  }
}

namespace internal {

void FillAttentionScalar(KernelSet& ks) {
  ks.attention.scores = scalar::AttnScores;
  ks.attention.weighted_sum = scalar::AttnWeightedSum;
  ks.attention.d_multiple = 1;
}

}  // namespace internal

KeySpan KeysRead(const int32_t* pos, int64_t S, int64_t window) {
  KeySpan span{INT64_MAX, -1};
  for (int64_t t = 0; t < S; ++t) {
    span.lowest = std::min(span.lowest, FirstKey(pos[t], window));
    span.highest = std::max<int64_t>(span.highest, pos[t]);
  }
  if (S == 0) span.lowest = 0;
  return span;
}

void AttendRing(const KernelSet& ks, const RingAttention& a, int64_t t, int64_t kvh, int64_t g0, int64_t gn,
                float* scores, int64_t lds) {
  const int64_t D = a.D, group = a.Hq / a.KV;
  const int64_t p = a.pos[t];
  const int64_t lo = FirstKey(p, a.window);
  const int64_t nk = p - lo + 1;
  const int64_t first = lo % a.R;
  const int64_t run1 = std::min(nk, a.R - first), run2 = nk - run1;
  const float* qv = a.q + (t * a.Hq + kvh * group + g0) * D;
  const float* kb = a.k + kvh * D;
  const float* vb = a.v + kvh * D;
  const int64_t stride = a.KV * D;
  AttnScores(ks, qv, gn, D, kb + first * stride, stride, run1, a.scale, scores, lds);
  if (run2 > 0) AttnScores(ks, qv, gn, D, kb, stride, run2, a.scale, scores + run1, lds);
  for (int64_t g = 0; g < gn; ++g) ks.element.softmax(scores + g * lds, nk);
  float* o = a.out + (t * a.Hq + kvh * group + g0) * D;
  std::memset(o, 0, gn * D * sizeof(float));
  AttnWeightedSum(ks, scores, lds, gn, vb + first * stride, stride, run1, D, o);
  if (run2 > 0) AttnWeightedSum(ks, scores + run1, lds, gn, vb, stride, run2, D, o);
}

}  // namespace fg::kernels
