// AVX-512 + VNNI panel kernels (panel.h) for the 32-element block types whose activations are
// Q8_0: Q8_0, Q4_0, Q5_0, IQ4_NL. Scalar twin: PanelDotScalar in panel.cc.
//
// Packed layout, per block j of the 16 rows (576 bytes): eight 64-byte vectors, vector q with
// dword q (elements 4q..4q+3, unsigned u = w + offset) of row r in lane r, then the 16 f32
// scales. The inner loop per block and token: the block's int32 sums start from the token's
// correction -offset * sum(a); eight vpdpbusd, each against one activation dword broadcast from
// memory; one convert, one multiply of the 16 row scales by the token scale, one fma.
// kTokB (K-quants: kTok) tokens share each loaded weight vector.
//
// K-quant panels (Q4_K, Q6_K; activations Q8_K), per super-block of the 16 rows: 64 weight
// vectors (dword q = elements 4q..4q+3, unsigned), the per-sub-block int32 scales (one vector
// per sub-block of G), eight vectors of int16 pairs (the coefficients of the Q8_K block sums,
// for vpdpwssd), the f32 scales d and -dmin. Per sub-block and token: G/4 vpdpbusd, one
// vpmulld by the sub-block scales, one add; per super-block: eight vpdpwssd, then one (Q6_K)
// or two (Q4_K) fma.
#include <immintrin.h>

#include <cstring>

#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kquants_internal.h"
#include "src/kernels/kquants_x86.h"
#include "src/kernels/panel.h"
#include "src/kernels/x86_util.h"

namespace fg::kernels::internal {
namespace {

using tensor::DType;

constexpr size_t kBlockBytes = 8 * 64 + 64;  // weights + scales of one block of 16 rows

using x86::Load32;
using x86::Nibbles;

// Per type: the block, its unsigned expansion u = w + kOffset (32 bytes, element order).
struct Q8_0P {
  using B = block_q8_0;
  static constexpr int kOffset = 128;
  FG_INLINE static __m256i U(const B& b) {
    return _mm256_xor_si256(Load32(b.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};
struct Q4_0P {
  using B = block_q4_0;
  static constexpr int kOffset = 8;
  FG_INLINE static __m256i U(const B& b) { return Nibbles(b.qs); }
};
struct Q5_0P {
  using B = block_q5_0;
  static constexpr int kOffset = 16;
  FG_INLINE static __m256i U(const B& b) {
    return _mm256_or_si256(Nibbles(b.qs),
                           _mm256_maskz_mov_epi8(LoadQh(b.qh), _mm256_set1_epi8(0x10)));
  }
};
struct Iq4nlP {
  using B = block_iq4_nl;
  static constexpr int kOffset = 128;
  FG_INLINE static __m256i U(const B& b) {
    const __m128i t = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)),
                                    _mm_set1_epi8(static_cast<char>(0x80)));
    return _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1),
                               Nibbles(b.qs));
  }
};

size_t PackedBytes(int64_t n) { return static_cast<size_t>(n / kQK) * kBlockBytes; }

// One stage of the 16 x 8 dword transpose: swaps bit i of the register index with bit i of
// the lane index (i < 3) in the eight registers.
template <int kBit>
FG_INLINE void SwapBit(__m512i v[8]) {
  constexpr int b = 1 << kBit;
  alignas(64) int32_t ix[16], iy[16];
  for (int l = 0; l < 16; ++l) {
    ix[l] = (l & b) ? 16 + (l & ~b) : l;
    iy[l] = (l & b) ? 16 + l : (l | b);
  }
  const __m512i idx_x = _mm512_load_si512(ix), idx_y = _mm512_load_si512(iy);
  for (int k = 0; k < 8; ++k) {
    if (k & b) continue;
    const __m512i x = v[k], y = v[k | b];
    v[k] = _mm512_permutex2var_epi32(x, idx_x, y);
    v[k | b] = _mm512_permutex2var_epi32(x, idx_y, y);
  }
}

template <class P>
void Pack(int64_t n, const uint8_t* w, size_t row_bytes, int rows, void* packed) {
  using B = typename P::B;
  const B* x[kPanelRows];
  x86::PanelRows(w, row_bytes, rows, x);
  auto* out = static_cast<uint8_t*>(packed);
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  for (int64_t j = 0; j < n / kQK; ++j, out += kBlockBytes) {
    // v[k] = [row k | row k + 8]: lane 8p + q holds dword q of row 8p + k. Swapping the three
    // register-index bits with the three low lane bits leaves dword q of row 8p + k in
    // register q, lane 8p + k.
    __m512i v[8];
    alignas(64) uint16_t dh[kPanelRows];
    for (int k = 0; k < 8; ++k) {
      const __m256i lo = k < rows ? P::U(x[k][j]) : _mm256_setzero_si256();
      const __m256i hi = k + 8 < rows ? P::U(x[k + 8][j]) : _mm256_setzero_si256();
      v[k] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    for (int r = 0; r < kPanelRows; ++r) dh[r] = x[r][j].d;
    SwapBit<0>(v);
    SwapBit<1>(v);
    SwapBit<2>(v);
    for (int q = 0; q < 8; ++q) _mm512_store_si512(out + 64 * q, v[q]);
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dh)));
    _mm512_store_ps(reinterpret_cast<float*>(out + 8 * 64), _mm512_maskz_mov_ps(live, d));
  }
}

FG_INLINE __m512i Dword(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

template <int T>
FG_INLINE void RunTokens(int64_t nb, const uint8_t* packed, const uint8_t* act, size_t act_stride,
                         const PanelActSide* side, float* y, int64_t ldy, __mmask16 live) {
  __m512 acc[T];
  const uint8_t* a[T];
  const PanelActSide* s[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_setzero_ps();
    a[t] = act + static_cast<size_t>(t) * act_stride + offsetof(block_q8_0, qs);
    s[t] = side + t * nb;
  }
  const uint8_t* p = packed;
  for (int64_t j = 0; j < nb; ++j, p += kBlockBytes) {
    __m512i w[8];
    for (int q = 0; q < 8; ++q) w[q] = _mm512_load_si512(p + 64 * q);
    const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(p + 8 * 64));
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_set1_epi32(s[t][j].corr);
    const size_t off = static_cast<size_t>(j) * sizeof(block_q8_0);
    for (int q = 0; q < 8; ++q) {
      for (int t = 0; t < T; ++t) isum[t] = _mm512_dpbusd_epi32(isum[t], w[q], Dword(a[t] + off + 4 * q));
    }
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]),
                               _mm512_mul_ps(dw, _mm512_set1_ps(s[t][j].d)), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, live, acc[t]);
}

constexpr int kTok = 4;
constexpr int kTokB = 8;  // tokens per pass of the 32-element block kernel

void Run(int64_t n, const void* packed, const uint8_t* act, size_t act_stride,
         const PanelActSide* side, int64_t tokens, float* y, int64_t ldy, int rows) {
  const int64_t nb = n / kQK;
  const auto* p = static_cast<const uint8_t*>(packed);
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  int64_t t = 0;
  for (; t + kTokB <= tokens; t += kTokB) {
    RunTokens<kTokB>(nb, p, act + static_cast<size_t>(t) * act_stride, act_stride, side + t * nb,
                     y + t * ldy, ldy, live);
  }
  if (t + kTok <= tokens) {
    RunTokens<kTok>(nb, p, act + static_cast<size_t>(t) * act_stride, act_stride, side + t * nb,
                    y + t * ldy, ldy, live);
    t += kTok;
  }
  const uint8_t* a = act + static_cast<size_t>(t) * act_stride;
  switch (tokens - t) {
    case 3: RunTokens<3>(nb, p, a, act_stride, side + t * nb, y + t * ldy, ldy, live); break;
    case 2: RunTokens<2>(nb, p, a, act_stride, side + t * nb, y + t * ldy, ldy, live); break;
    case 1: RunTokens<1>(nb, p, a, act_stride, side + t * nb, y + t * ldy, ldy, live); break;
    default: break;
  }
}

template <class P>
const PanelKernels* Kernels() {
  static const PanelKernels k{P::kOffset, true, 2, PackedBytes, Pack<P>, Run};
  return &k;
}

// ---------------------------------------------------------------- K-quants

// 16 rows' 32-byte chunks u[0..15] -> the 8 lane-per-row vectors at out.
FG_INLINE void StoreTransposed(const __m256i u[kPanelRows], uint8_t* out) {
  __m512i v[8];
  for (int k = 0; k < 8; ++k) v[k] = _mm512_inserti64x4(_mm512_castsi256_si512(u[k]), u[k + 8], 1);
  SwapBit<0>(v);
  SwapBit<1>(v);
  SwapBit<2>(v);
  for (int q = 0; q < 8; ++q) _mm512_store_si512(out + 64 * q, v[q]);
}

// The layouts of the packed super-blocks (offsets of the scales, the block sums' coefficients,
// d and -dmin; kquants_x86.h has the weights and scales).
struct Q4KP : kquants_x86::Q4KPanel {
  static constexpr size_t kSc = 4096;
  static constexpr size_t kCorr = kSc + 8 * 64;
  static constexpr size_t kD = kCorr + 8 * 64;
  static constexpr size_t kBytes = kD + 2 * 64;
};
struct Q6KP : kquants_x86::Q6KPanel {
  static constexpr size_t kSc = 4096;
  static constexpr size_t kCorr = kSc + 16 * 64;
  static constexpr size_t kD = kCorr + 8 * 64;
  static constexpr size_t kBytes = kD + 2 * 64;
};

template <class P>
size_t KPackedBytes(int64_t n) { return static_cast<size_t>(n / kQK_K) * P::kBytes; }

template <class P>
void KPack(int64_t n, const uint8_t* w, size_t row_bytes, int rows, void* packed) {
  using B = typename P::B;
  constexpr int kGroups = kQK_K / P::kG;
  const B* x[kPanelRows];
  x86::PanelRows(w, row_bytes, rows, x);
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t j = 0; j < n / kQK_K; ++j, out += P::kBytes) {
    for (int c = 0; c < 8; ++c) {
      __m256i u[kPanelRows];
      for (int r = 0; r < kPanelRows; ++r) u[r] = r < rows ? P::Chunk(x[r][j], c) : _mm256_setzero_si256();
      StoreTransposed(u, out + c * 8 * 64);
    }
    auto* sc = reinterpret_cast<int32_t*>(out + P::kSc);
    auto* coef = reinterpret_cast<int16_t*>(out + P::kCorr);
    auto* d = reinterpret_cast<float*>(out + P::kD);
    for (int r = 0; r < kPanelRows; ++r) {
      int32_t s[16];
      int16_t cf[16];
      float dr = 0, ndr = 0;
      if (r < rows) {
        P::Scales(x[r][j], s, cf, &dr, &ndr);
      } else {
        for (int g = 0; g < 16; ++g) s[g] = cf[g] = 0;
      }
      for (int g = 0; g < kGroups; ++g) sc[g * kPanelRows + r] = s[g];
      for (int i = 0; i < 8; ++i) {  // pair i: lane r holds coef[2i] (low half), coef[2i + 1]
        coef[(i * kPanelRows + r) * 2] = cf[2 * i];
        coef[(i * kPanelRows + r) * 2 + 1] = cf[2 * i + 1];
      }
      d[r] = dr;
      d[kPanelRows + r] = ndr;
    }
  }
}

template <class P, int T>
FG_INLINE void KRunTokens(int64_t nb, const uint8_t* packed, const uint8_t* act, size_t act_stride,
                          float* y, int64_t ldy, __mmask16 live) {
  constexpr int kGroups = kQK_K / P::kG;
  constexpr int kDw = P::kG / 4;  // dwords per sub-block
  __m512 acc[T];
  const uint8_t* a[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_setzero_ps();
    a[t] = act + static_cast<size_t>(t) * act_stride;
  }
  const uint8_t* p = packed;
  for (int64_t j = 0; j < nb; ++j, p += P::kBytes) {
    const size_t off = static_cast<size_t>(j) * sizeof(BlockQ8K);
    __m512i main[T], corr[T];
    for (int t = 0; t < T; ++t) main[t] = corr[t] = _mm512_setzero_si512();
    for (int g = 0; g < kGroups; ++g) {
      __m512i w[kDw];
      for (int q = 0; q < kDw; ++q) w[q] = _mm512_load_si512(p + 64 * (g * kDw + q));
      const __m512i sc = _mm512_load_si512(p + P::kSc + 64 * g);
      __m512i gs[T];
      for (int t = 0; t < T; ++t) gs[t] = _mm512_setzero_si512();
      for (int q = 0; q < kDw; ++q) {
        for (int t = 0; t < T; ++t) {
          gs[t] = _mm512_dpbusd_epi32(
              gs[t], w[q], Dword(a[t] + off + offsetof(BlockQ8K, qs) + 4 * (g * kDw + q)));
        }
      }
      for (int t = 0; t < T; ++t) main[t] = _mm512_add_epi32(main[t], _mm512_mullo_epi32(gs[t], sc));
    }
    for (int i = 0; i < 8; ++i) {
      const __m512i c = _mm512_load_si512(p + P::kCorr + 64 * i);
      for (int t = 0; t < T; ++t) {
        corr[t] = _mm512_dpwssd_epi32(corr[t], c, Dword(a[t] + off + offsetof(BlockQ8K, bsums) + 4 * i));
      }
    }
    const __m512 d = _mm512_load_ps(reinterpret_cast<const float*>(p + P::kD));
    for (int t = 0; t < T; ++t) {
      float da;
      std::memcpy(&da, a[t] + off + offsetof(BlockQ8K, d), sizeof da);
      const __m512 vda = _mm512_set1_ps(da);
      if constexpr (P::kMin) {
        const __m512 nd = _mm512_load_ps(reinterpret_cast<const float*>(p + P::kD + 64));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(main[t]), _mm512_mul_ps(d, vda), acc[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(corr[t]), _mm512_mul_ps(nd, vda), acc[t]);
      } else {
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(main[t], corr[t])),
                                 _mm512_mul_ps(d, vda), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, live, acc[t]);
}

template <class P>
void KRun(int64_t n, const void* packed, const uint8_t* act, size_t act_stride,
          const PanelActSide* /*side*/, int64_t tokens, float* y, int64_t ldy, int rows) {
  const int64_t nb = n / kQK_K;
  const auto* p = static_cast<const uint8_t*>(packed);
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  int64_t t = 0;
  for (; t + kTok <= tokens; t += kTok) {
    KRunTokens<P, kTok>(nb, p, act + static_cast<size_t>(t) * act_stride, act_stride, y + t * ldy,
                        ldy, live);
  }
  const uint8_t* a = act + static_cast<size_t>(t) * act_stride;
  switch (tokens - t) {
    case 3: KRunTokens<P, 3>(nb, p, a, act_stride, y + t * ldy, ldy, live); break;
    case 2: KRunTokens<P, 2>(nb, p, a, act_stride, y + t * ldy, ldy, live); break;
    case 1: KRunTokens<P, 1>(nb, p, a, act_stride, y + t * ldy, ldy, live); break;
    default: break;
  }
}

template <class P>
const PanelKernels* KKernels() {
  static const PanelKernels k{0, false, 8, KPackedBytes<P>, KPack<P>, KRun<P>};
  return &k;
}

}  // namespace

void FillPanelAvx512(KernelSet& ks) {
  auto panel = [&ks](DType t) -> const PanelKernels*& { return ks.types[static_cast<int>(t)].panel; };
  panel(DType::kQ8_0) = Kernels<Q8_0P>();
  panel(DType::kQ4_0) = Kernels<Q4_0P>();
  panel(DType::kQ5_0) = Kernels<Q5_0P>();
  panel(DType::kIQ4_NL) = Kernels<Iq4nlP>();
  panel(DType::kQ4_K) = KKernels<Q4KP>();
  panel(DType::kQ6_K) = KKernels<Q6KP>();
}

}  // namespace fg::kernels::internal
