// AVX2-level K-quant helpers shared by kquants_avx2.cc and kquants_avx512.cc, the only files that
// include it (CMake builds both with at least the AVX2 flags, on x86 only). The helpers have
// internal linkage (static), as in x86_util.h: an inline function with external linkage
// compiled with AVX-512 flags could be picked by the linker for the AVX2 file's call.
#ifndef FGEMMA_KERNELS_KQUANTS_X86_H_
#define FGEMMA_KERNELS_KQUANTS_X86_H_

#include <immintrin.h>

#include <cstdint>

#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kquants_internal.h"
#include "src/kernels/x86_util.h"

namespace fg::kernels::kquants_x86 {

// Q4_K/Q5_K packed scales -> bytes 0-7 the 6-bit scales, bytes 8-15 the mins, on 32-bit lanes
// u0..u2 of the 12 bytes (the same mapping as UnpackScalesMinsK4):
//   lane 0: u0 & 0x3f..                       (scales 0-3)
//   lane 1: (u2 & 0x0f..) | ((u0 >> 2) & 0x30..)  (scales 4-7)
//   lane 2: u1 & 0x3f..                       (mins 0-3)
//   lane 3: ((u2 >> 4) & 0x0f..) | ((u1 >> 2) & 0x30..)  (mins 4-7)
// Reads 16 bytes; the 4 past the scales are the block's first quants, so it stays in the block.
static inline __m128i UnpackK4(const uint8_t* q) {
  const __m128i u = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i low = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));   // u0 u2 u1 u2
  const __m128i high = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  const __m128i lo = _mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)),
                                   _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i hi = _mm_and_si128(_mm_srli_epi32(high, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(lo, hi);
}

// vpshufb index that broadcasts i16 element i of each 128-bit lane.
static inline __m256i BroadcastI16Index(int i) {
  return _mm256_set1_epi16(static_cast<int16_t>(((2 * i + 1) << 8) | (2 * i)));
}

// Sub-blocks 2k and 2k + 1 of a Q4_K (kHigh false) or Q5_K block as unsigned levels, 32 bytes
// each: qs32 = the block's qs + 32 k holds them in its low and high nibbles. For Q5_K, *hbits
// (the block's qh when k = 0) gives the fifth bits in its two lowest bits of every byte and is
// shifted right by 2 for the next k.
template <bool kHigh>
static inline void UnpackQ45KPair(const uint8_t* qs32, __m256i* hbits, __m256i* q_lo,
                                  __m256i* q_hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs32));
  *q_lo = _mm256_and_si256(q4, m4);
  *q_hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
  if constexpr (kHigh) {
    const __m256i m1 = _mm256_set1_epi8(1);
    *q_lo = _mm256_or_si256(*q_lo, _mm256_slli_epi16(_mm256_and_si256(*hbits, m1), 4));
    *q_hi = _mm256_or_si256(*q_hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(*hbits, 1), m1), 4));
    *hbits = _mm256_srli_epi16(*hbits, 2);
  }
}

// Step k (0..3) of a Q4_K / Q5_K block . Q8_K block: sub-blocks 2k and 2k + 1 as i16 scales
// (s[0], s[1]), unsigned levels (q[0], q[1]) and the activations they meet (a[0], a[1]).
// scales: the block's 8 sub-block scales as i16 in both 128-bit lanes; qs, a_qs: the blocks'
// quants; hbits as in UnpackQ45KPair.
template <bool kHigh>
static inline void Q45KStep(__m256i scales, const uint8_t* qs, const int8_t* a_qs, int k,
                            __m256i* hbits, __m256i s[2], __m256i q[2], __m256i a[2]) {
  s[0] = _mm256_shuffle_epi8(scales, BroadcastI16Index(2 * k));
  s[1] = _mm256_shuffle_epi8(scales, BroadcastI16Index(2 * k + 1));
  UnpackQ45KPair<kHigh>(qs + 32 * k, hbits, &q[0], &q[1]);
  a[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a_qs + 64 * k));
  a[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a_qs + 64 * k + 32));
}

// Half h (0 or 1) of a Q6_K block as unsigned 6-bit levels (w + 32), 32 bytes per vector, and
// their i16 scales: q[i] holds elements 128h + 32i .. 128h + 32i + 31; s[i] the scale of each
// (8h + 2i for the first 16, 8h + 2i + 1 for the others). scales16: the block's 16 scales as i16.
static inline void UnpackQ6KHalf(const BlockQ6K& b, __m256i scales16, int h, __m256i q[4],
                                 __m256i s[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const uint8_t* ql = b.ql + 64 * h;
  const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
  const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
  // Scales 8h..8h+7 in both 128-bit lanes, then each one broadcast over its 16 elements.
  const __m256i sc = h == 0 ? _mm256_permute2x128_si256(scales16, scales16, 0x00)
                            : _mm256_permute2x128_si256(scales16, scales16, 0x11);
  for (int i = 0; i < 4; ++i) {
    const __m256i idx = _mm256_set_m128i(_mm256_castsi256_si128(BroadcastI16Index(2 * i + 1)),
                                         _mm256_castsi256_si128(BroadcastI16Index(2 * i)));
    s[i] = _mm256_shuffle_epi8(sc, idx);
  }
}

// The Q6_K offset 32 folded into one i32 vector to subtract per block: 32 * sc_g * bsum_g.
static inline __m256i Q6KOffset(__m256i scales16, const BlockQ8K& a) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  return _mm256_slli_epi32(_mm256_madd_epi16(scales16, bs), 5);
}

// The K-quant panels' weights and scales (panel_avx2.cc, panel_avx512.cc; panel.h has the
// arithmetic): Chunk(b, c) is elements 32c .. 32c + 31 of a super-block as 32 unsigned bytes
// (Q4_K: q; Q6_K: q = w + 32); Scales gives the kG-element sub-blocks' scales sc, the
// coefficients coef of the 16 Q8_K block sums (Q4_K: the sub-blocks' mins; Q6_K: 32 x its
// scale, the offset), and the f32 factors of main (d) and of the block-sum term (nd = -dmin;
// Q6_K: 0, its term is subtracted from main).
static inline __m256i Low4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
static inline __m256i High4(__m256i v) { return Low4(_mm256_srli_epi16(v, 4)); }
// Bits 2s, 2s + 1 of each byte, moved to bits 4, 5.
static inline __m256i Two(__m256i v, int s) {
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 2 * s), _mm256_set1_epi8(3)), 4);
}

// In an unnamed namespace: member functions of a named one would have external linkage, and
// the linker could give one set's calls the other set's code (see above).
namespace {

struct Q4KPanel {
  using B = BlockQ4K;
  static constexpr int kG = 32;  // elements per scaled sub-block
  static constexpr bool kMin = true;
  static inline __m256i Chunk(const B& b, int c) {
    const __m256i q = x86::Load32(b.qs + 32 * (c / 2));
    return c % 2 == 0 ? Low4(q) : High4(q);
  }
  // sc: 16 ints (the 8 sub-block scales, 8 unused); coef: 16 int16 for the block sums.
  static void Scales(const B& b, int32_t sc[16], int16_t coef[16], float* d, float* nd) {
    uint8_t sm[16];  // scales 0..7, mins 8..15
    internal::UnpackScalesMinsK4(b.scales, sm);
    for (int j = 0; j < 8; ++j) {
      sc[j] = sm[j];
      sc[8 + j] = 0;
      coef[2 * j] = coef[2 * j + 1] = static_cast<int16_t>(sm[8 + j]);
    }
    *d = _cvtsh_ss(b.d);
    *nd = -_cvtsh_ss(b.dmin);
  }
};

struct Q6KPanel {
  using B = BlockQ6K;
  static constexpr int kG = 16;
  static constexpr bool kMin = false;
  static inline __m256i Chunk(const B& b, int c) {
    const int h = c / 4, r = c % 4;
    const __m256i ql = x86::Load32(b.ql + 64 * h + 32 * (r % 2));
    const __m256i qh = x86::Load32(b.qh + 32 * h);
    return _mm256_or_si256(r < 2 ? Low4(ql) : High4(ql), Two(qh, r));
  }
  static void Scales(const B& b, int32_t sc[16], int16_t coef[16], float* d, float* nd) {
    for (int g = 0; g < 16; ++g) {
      sc[g] = b.scales[g];
      coef[g] = static_cast<int16_t>(32 * b.scales[g]);
    }
    *d = _cvtsh_ss(b.d);
    *nd = 0;
  }
};

}  // namespace

// The dot products of both sets, with the panels' arithmetic (panel.h): per super-block the
// exact int32 sum(s), then f32 fmas in block order, so vec_dot, the 2 x 2 tiles and the panels of
// either set give the same bits for the same rows, and a matmul's result for a token does not
// depend on how many tokens it has. M::Acc(acc, p, s) is the set's int16 x int16 -> int32
// accumulate, acc + sum of the pairs p * s: vpdpwssd (AVX-512 VNNI) or vpmaddwd + vpaddd (AVX2);
// M is local to each including file, so every instantiation has internal linkage.
using x86::F16;
using x86::Fma;
using x86::Hsum4Epi32;
using x86::HsumsEpi32;

template <class M, bool kHigh, typename Block>
static inline void VecDotQ45K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  const int64_t nb = n / kQK_K;
  float acc = 0;
  // The panels' arithmetic (panel.h): exact block sums, then two f32 fmas per block in block
  // order. Four blocks' sums are reduced together.
  __m256i mains[4];
  __m128i mins[4];
  auto flush = [&](int64_t b0, int count) {
    int32_t mv[4], nv[4];
    HsumsEpi32(mains, count, mv);
    HsumsEpi32(mins, count, nv);
    for (int k = 0; k < count; ++k) {
      const int64_t b = b0 + k;
      acc = Fma(static_cast<float>(mv[k]), F16(x[b].d) * y[b].d, acc);
      acc = Fma(static_cast<float>(nv[k]), -F16(x[b].dmin) * y[b].d, acc);
    }
  };
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i scales_mins = _mm256_cvtepu8_epi16(UnpackK4(x[b].scales));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums));
    const __m128i bs_pairs =
        _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i mins_dot = _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), bs_pairs);

    const __m128i sc = _mm256_castsi256_si128(scales_mins);
    const __m256i scales = _mm256_set_m128i(sc, sc);
    __m256i hbits;
    if constexpr (kHigh) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
    // Two accumulators: one chain of 8 dependent accumulates would bound the loop by its latency.
    __m256i sumi_lo = _mm256_setzero_si256(), sumi_hi = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      __m256i s[2], q[2], av[2];
      Q45KStep<kHigh>(scales, x[b].qs, y[b].qs, k, &hbits, s, q, av);
      sumi_lo = M::Acc(sumi_lo, _mm256_maddubs_epi16(q[0], av[0]), s[0]);
      sumi_hi = M::Acc(sumi_hi, _mm256_maddubs_epi16(q[1], av[1]), s[1]);
    }
    mains[b % 4] = _mm256_add_epi32(sumi_lo, sumi_hi);
    mins[b % 4] = mins_dot;
    if (b % 4 == 3) flush(b - 3, 4);
  }
  if (nb % 4 != 0) flush(nb - nb % 4, static_cast<int>(nb % 4));
  *out = acc;
}

template <class M>
static inline void VecDotQ6K(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ6K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  const int64_t nb = n / kQK_K;
  float acc = 0;
  __m256i sums[4];  // four blocks' sums, reduced together (see VecDotQ45K)
  auto flush = [&](int64_t b0, int count) {
    int32_t v[4];
    HsumsEpi32(sums, count, v);
    for (int k = 0; k < count; ++k) {
      acc = Fma(static_cast<float>(v[k]), F16(x[b0 + k].d) * y[b0 + k].d, acc);
    }
  };
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i scales16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
    const __m256i offset = Q6KOffset(scales16, y[b]);
    __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q[4], sc[4];
      UnpackQ6KHalf(x[b], scales16, h, q, sc);
      for (int i = 0; i < 4; ++i) {
        const __m256i s = sc[i];
        const __m256i av =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 128 * h + 32 * i));
        if (i % 2 == 0) {
          sumi0 = M::Acc(sumi0, _mm256_maddubs_epi16(q[i], av), s);
        } else {
          sumi1 = M::Acc(sumi1, _mm256_maddubs_epi16(q[i], av), s);
        }
      }
    }
    sums[b % 4] = _mm256_sub_epi32(_mm256_add_epi32(sumi0, sumi1), offset);
    if (b % 4 == 3) flush(b - 3, 4);
  }
  if (nb % 4 != 0) flush(nb - nb % 4, static_cast<int>(nb % 4));
  *out = acc;
}

// Block b's f32 factors of the four (row, token) pairs of an R x T tile, lane r + R t:
// d_w * d_a, and (Q4_K / Q5_K, when nd is given) -dmin_w * d_a.
template <int R, int T, typename Block>
static inline void BlockScales(const Block* const* x, const BlockQ8K* const* y, int64_t b,
                               __m128* d, __m128* nd) {
  alignas(16) float dv[4], ndv[4];
  for (int l = 0; l < 4; ++l) {
    const float ya = y[l / R][b].d;
    dv[l] = F16(x[l % R][b].d) * ya;
    if constexpr (requires { x[0][b].dmin; }) ndv[l] = -F16(x[l % R][b].dmin) * ya;
  }
  *d = _mm_load_ps(dv);
  if (nd != nullptr) *nd = _mm_load_ps(ndv);
}

// R weight rows x T activation rows, R * T = 4: the 2 x 2 tile of batched matmuls and the four
// rows of decode. Each (row, token) pair runs exactly the operation sequence of VecDotQ45K /
// VecDotQ6K above (integer block sums are exact; the f32 steps, in the four lanes of one 128-bit
// vector, are per lane the same IEEE operations in the same order), so out[r + R t] is bit for
// bit vec_dot(w_r, a_t); the weight unpacking (nibbles, high bits, scales) is done once for all
// tokens, and the activations are loaded once for all rows.
template <class M, bool kHigh, typename Block, int R, int T>
static inline void TileQ45KRT(int64_t n, const Block* const* x, const BlockQ8K* const* y,
                              float* out) {
  static_assert(R * T == 4, "four dot products");
  __m128 acc = _mm_setzero_ps();  // lane r + R t
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    __m128i mins[4];
    __m256i scales[R], hbits[R];
    __m128i bs_pairs[T];
    for (int t = 0; t < T; ++t) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].bsums));
      bs_pairs[t] = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    }
    for (int r = 0; r < R; ++r) {
      const __m256i scales_mins = _mm256_cvtepu8_epi16(UnpackK4(x[r][b].scales));
      for (int t = 0; t < T; ++t) {
        mins[r + R * t] = _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), bs_pairs[t]);
      }
      const __m128i sc = _mm256_castsi256_si128(scales_mins);
      scales[r] = _mm256_set_m128i(sc, sc);
      if constexpr (kHigh)
        hbits[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r][b].qh));
    }
    __m256i sumi_lo[4], sumi_hi[4];
    for (int l = 0; l < 4; ++l) sumi_lo[l] = sumi_hi[l] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      __m256i a_lo[T], a_hi[T];
      for (int t = 0; t < T; ++t) {
        a_lo[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 64 * k));
        a_hi[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 64 * k + 32));
      }
      for (int r = 0; r < R; ++r) {
        const __m256i s_lo = _mm256_shuffle_epi8(scales[r], BroadcastI16Index(2 * k));
        const __m256i s_hi = _mm256_shuffle_epi8(scales[r], BroadcastI16Index(2 * k + 1));
        __m256i q_lo, q_hi;
        UnpackQ45KPair<kHigh>(x[r][b].qs + 32 * k, &hbits[r], &q_lo, &q_hi);
        for (int t = 0; t < T; ++t) {
          const int l = r + R * t;
          sumi_lo[l] = M::Acc(sumi_lo[l], _mm256_maddubs_epi16(q_lo, a_lo[t]), s_lo);
          sumi_hi[l] = M::Acc(sumi_hi[l], _mm256_maddubs_epi16(q_hi, a_hi[t]), s_hi);
        }
      }
    }
    const __m128i mains = Hsum4Epi32(
        _mm256_add_epi32(sumi_lo[0], sumi_hi[0]), _mm256_add_epi32(sumi_lo[1], sumi_hi[1]),
        _mm256_add_epi32(sumi_lo[2], sumi_hi[2]), _mm256_add_epi32(sumi_lo[3], sumi_hi[3]));
    const __m128i min_sums = Hsum4Epi32(mins[0], mins[1], mins[2], mins[3]);
    __m128 d, nd;
    BlockScales<R, T>(x, y, b, &d, &nd);
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(mains), d, acc);
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(min_sums), nd, acc);
  }
  _mm_storeu_ps(out, acc);
}

template <class M, int R, int T>
static inline void TileQ6KRT(int64_t n, const BlockQ6K* const* x, const BlockQ8K* const* y,
                             float* out) {
  static_assert(R * T == 4, "four dot products");
  // One accumulator per (row, token): four independent chains already, and fewer live
  // registers than VecDotQ6K's two (the scales are loaded again where needed).
  auto scales16 = [&](int r, int64_t b) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r][b].scales)));
  };
  __m128 acc = _mm_setzero_ps();  // lane r + R t
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    __m256i sumi[4];
    for (int l = 0; l < 4; ++l) sumi[l] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      for (int r = 0; r < R; ++r) {
        __m256i q[4], sc[4];
        UnpackQ6KHalf(x[r][b], scales16(r, b), h, q, sc);
        for (int i = 0; i < 4; ++i) {
          for (int t = 0; t < T; ++t) {
            const __m256i av =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 128 * h + 32 * i));
            sumi[r + R * t] = M::Acc(sumi[r + R * t], _mm256_maddubs_epi16(q[i], av), sc[i]);
          }
        }
      }
    }
    for (int l = 0; l < 4; ++l) {
      sumi[l] = _mm256_sub_epi32(sumi[l], Q6KOffset(scales16(l % R, b), y[l / R][b]));
    }
    const __m128i sums = Hsum4Epi32(sumi[0], sumi[1], sumi[2], sumi[3]);
    __m128 d;
    BlockScales<R, T>(x, y, b, &d, nullptr);
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(sums), d, acc);
  }
  _mm_storeu_ps(out, acc);
}

// The KernelSet forms: the 2 x 2 tiles (DotTileFn) and the Q4_K / Q5_K four rows (DotRowsFn).
// Q6_K has no four-row form: on Zen 1 its 4 x 1 tile ran decode's MatVec/Q6_K/640x2048 at
// 144-146 us against 138-141 us for vec_dot row by row (fg_kernels_benchmark, 1 thread, medians
// of two runs); Q4_K's runs it at 113-115 against 122-125 us, so the AVX2 set has it; the AVX-512
// set's was not measured (no such CPU at hand) and it keeps vec_dot row by row.
template <class M, bool kHigh, typename Block>
static void TileQ45K(int64_t n, const void* w0, const void* w1, const void* a0, const void* a1,
                     float* out) {
  const Block* x[2] = {static_cast<const Block*>(w0), static_cast<const Block*>(w1)};
  const BlockQ8K* y[2] = {static_cast<const BlockQ8K*>(a0), static_cast<const BlockQ8K*>(a1)};
  TileQ45KRT<M, kHigh, Block, 2, 2>(n, x, y, out);
}
template <class M, bool kHigh, typename Block>
static void RowsQ45K(int64_t n, const void* const* w, const void* a, float* out) {
  const Block* x[4];
  for (int r = 0; r < 4; ++r) x[r] = static_cast<const Block*>(w[r]);
  const BlockQ8K* y = static_cast<const BlockQ8K*>(a);
  TileQ45KRT<M, kHigh, Block, 4, 1>(n, x, &y, out);
}
template <class M>
static void TileQ6K(int64_t n, const void* w0, const void* w1, const void* a0, const void* a1,
                    float* out) {
  const BlockQ6K* x[2] = {static_cast<const BlockQ6K*>(w0), static_cast<const BlockQ6K*>(w1)};
  const BlockQ8K* y[2] = {static_cast<const BlockQ8K*>(a0), static_cast<const BlockQ8K*>(a1)};
  TileQ6KRT<M, 2, 2>(n, x, y, out);
}
}  // namespace fg::kernels::kquants_x86

#endif  // FGEMMA_KERNELS_KQUANTS_X86_H_
