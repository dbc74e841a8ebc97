// AVX2 + FMA attention inner loops (see attention.h): attention_avx512.cc's tiles in 8-lane
// vectors, sized for 16 registers. D is a multiple of 8.
#include <immintrin.h>

#include "src/kernels/attention.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/x86_util.h"

namespace fg::kernels::internal {
namespace {

// G query rows (G <= 4) against kJ keys at once: G * kJ accumulators of 8 lanes; each key
// vector is loaded once for all G queries, each query vector once for all kJ keys.
template <int G, int kJ>
inline void ScoresTile(const float* q, int64_t D, const float* k, int64_t k_stride, float scale,
                       float* s, int64_t lds) {
  __m256 acc[G][kJ];
  for (int g = 0; g < G; ++g) {
    for (int j = 0; j < kJ; ++j) acc[g][j] = _mm256_setzero_ps();
  }
  for (int64_t d = 0; d < D; d += 8) {
    __m256 kv[kJ];
    for (int j = 0; j < kJ; ++j) kv[j] = _mm256_loadu_ps(k + j * k_stride + d);
    for (int g = 0; g < G; ++g) {
      const __m256 qv = _mm256_loadu_ps(q + g * D + d);
      for (int j = 0; j < kJ; ++j) acc[g][j] = _mm256_fmadd_ps(qv, kv[j], acc[g][j]);
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int j = 0; j < kJ; ++j) s[g * lds + j] = x86::HsumPs(acc[g][j]) * scale;
  }
}

template <int G>
void ScoresGroup(const float* q, int64_t D, const float* k, int64_t k_stride, int64_t n,
                 float scale, float* s, int64_t lds) {
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) ScoresTile<G, 2>(q, D, k + j * k_stride, k_stride, scale, s + j, lds);
  for (; j < n; ++j) ScoresTile<G, 1>(q, D, k + j * k_stride, k_stride, scale, s + j, lds);
}

// G output rows (G <= 4) x 16 columns held in registers across all n keys; each value vector
// is loaded once for all G rows. Per element: o += p_j * v_j in key order (one FMA per key).
template <int G, int kC>
inline void SumTile(const float* p, int64_t ldp, const float* v, int64_t v_stride, int64_t n,
                    int64_t D, float* o) {
  __m256 acc[G][kC];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < kC; ++c) acc[g][c] = _mm256_loadu_ps(o + g * D + 8 * c);
  }
  for (int64_t j = 0; j < n; ++j) {
    __m256 vv[kC];
    for (int c = 0; c < kC; ++c) vv[c] = _mm256_loadu_ps(v + j * v_stride + 8 * c);
    for (int g = 0; g < G; ++g) {
      const __m256 pb = _mm256_set1_ps(p[g * ldp + j]);
      for (int c = 0; c < kC; ++c) acc[g][c] = _mm256_fmadd_ps(pb, vv[c], acc[g][c]);
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < kC; ++c) _mm256_storeu_ps(o + g * D + 8 * c, acc[g][c]);
  }
}

template <int G>
void SumGroup(const float* p, int64_t ldp, const float* v, int64_t v_stride, int64_t n, int64_t D,
              float* o) {
  int64_t d = 0;
  for (; d + 16 <= D; d += 16) SumTile<G, 2>(p, ldp, v + d, v_stride, n, D, o + d);
  for (; d < D; d += 8) SumTile<G, 1>(p, ldp, v + d, v_stride, n, D, o + d);
}

void AttnScoresAvx2(const float* q, int64_t G, int64_t D, const float* k, int64_t k_stride,
                    int64_t n, float scale, float* s, int64_t lds) {
  int64_t g = 0;
  for (; g + 4 <= G; g += 4) ScoresGroup<4>(q + g * D, D, k, k_stride, n, scale, s + g * lds, lds);
  switch (G - g) {
    case 3:
      ScoresGroup<3>(q + g * D, D, k, k_stride, n, scale, s + g * lds, lds);
      break;
    case 2:
      ScoresGroup<2>(q + g * D, D, k, k_stride, n, scale, s + g * lds, lds);
      break;
    case 1:
      ScoresGroup<1>(q + g * D, D, k, k_stride, n, scale, s + g * lds, lds);
      break;
    default:
      break;
  }
}

void AttnWeightedSumAvx2(const float* p, int64_t ldp, int64_t G, const float* v, int64_t v_stride,
                         int64_t n, int64_t D, float* o) {
  int64_t g = 0;
  for (; g + 4 <= G; g += 4) SumGroup<4>(p + g * ldp, ldp, v, v_stride, n, D, o + g * D);
  switch (G - g) {
    case 3:
      SumGroup<3>(p + g * ldp, ldp, v, v_stride, n, D, o + g * D);
      break;
    case 2:
      SumGroup<2>(p + g * ldp, ldp, v, v_stride, n, D, o + g * D);
      break;
    case 1:
      SumGroup<1>(p + g * ldp, ldp, v, v_stride, n, D, o + g * D);
      break;
    default:
      break;
  }
}

}  // namespace

void FillAttentionAvx2(KernelSet& ks) {
  ks.attention.scores = AttnScoresAvx2;
  ks.attention.weighted_sum = AttnWeightedSumAvx2;
  ks.attention.d_multiple = 8;  // the kernels step D by 8 lanes
}

}  // namespace fg::kernels::internal
