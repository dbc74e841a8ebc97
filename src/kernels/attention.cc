#include "src/kernels/attention.h"

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

void AttnWeightedSum(const float* p, int64_t ldp, int64_t G, const float* v, int64_t v_stride,
                     int64_t n, int64_t D, float* o) {
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t d = 0; d < D; ++d) {
      double acc = o[g * D + d];
      for (int64_t j = 0; j < n; ++j) {
        acc += static_cast<double>(p[g * ldp + j]) * v[j * v_stride + d];
      }
      o[g * D + d] = static_cast<float>(acc);
    }
  }
}

}  // namespace scalar

void AttnScores(Isa isa, const float* q, int64_t G, int64_t D, const float* k, int64_t k_stride,
                int64_t n, float scale, float* s, int64_t lds) {
  if (isa == Isa::kScalar) return scalar::AttnScores(q, G, D, k, k_stride, n, scale, s, lds);
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::kAvx512 && D % 16 == 0) {
    return internal::AttnScoresAvx512(q, G, D, k, k_stride, n, scale, s, lds);
  }
#endif
  const ElementOps& ops = GetElementOps(isa);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < n; ++j) s[g * lds + j] = ops.dot(q + g * D, k + j * k_stride, D) * scale;
  }
}

void AttnWeightedSum(Isa isa, const float* p, int64_t ldp, int64_t G, const float* v,
                     int64_t v_stride, int64_t n, int64_t D, float* o) {
  if (isa == Isa::kScalar) return scalar::AttnWeightedSum(p, ldp, G, v, v_stride, n, D, o);
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::kAvx512 && D % 16 == 0) {
    return internal::AttnWeightedSumAvx512(p, ldp, G, v, v_stride, n, D, o);
  }
#endif
  const ElementOps& ops = GetElementOps(isa);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < n; ++j) ops.axpy(p[g * ldp + j], v + j * v_stride, o + g * D, D);
  }
}

}  // namespace fg::kernels
