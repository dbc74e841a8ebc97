// AVX2 panel kernels (panel.h) for the 32-element block types whose activations are Q8_0:
// Q8_0, Q4_0, Q5_0, IQ4_NL; and for Q4_K and Q6_K (activations Q8_K; below "K-quants"). Scalar
// twin: PanelDotScalar in panel.cc; the AVX2 vec_dot, tiles and four-row form
// (quant_basic_avx2.cc, kquants_avx2.cc) use the same arithmetic, so a token's result never
// depends on the batch it came in.
//
// Packed layout, per block j of the 16 rows (576 bytes, as the AVX-512 panels but with the
// signed weights w themselves): for dword q (elements 4q..4q+3) two 32-byte vectors, rows 0-7
// then rows 8-15, lane k holding that dword of the half's row k; then the 16 f32 row scales.
// Without VNNI the products use the sign trick of the tiles: _mm256_maddubs_epi16(|w|,
// sign(a, w)) gives per row two s16 sums of two products each (|w| <= 128, |a| <= 127: at most
// 32,512, never saturated), and _mm256_madd_epi16 by ones their s32 sum. For Q4_0 and Q5_0
// (|w| <= 16) the s16 sums of a block's eight dwords are added before that (each s16 lane then
// holds 8 x 2 products: at most 16 x 16 x 127 = 32,512, exact), one madd per block instead of
// eight. The inner loop per half, block
// and token: eight dword broadcasts, sign, maddubs, add; one convert, one multiply of the eight
// row scales by the token's, one fma. kTok tokens share each loaded weight vector.
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kquants_x86.h"
#include "src/kernels/panel.h"
#include "src/kernels/x86_util.h"

namespace fg::kernels::internal {
namespace {

using tensor::DType;
using x86::Load32;

constexpr size_t kBlockBytes = 8 * 64 + 64;  // weights + scales of one block of 16 rows

// Per type: the block, its signed weights w (32 bytes, element order), and whether |w| <= 16
// (the s16 sums of a whole block cannot overflow).
struct Q8_0P {
  using B = block_q8_0;
  static constexpr bool kSmall = false;
  FG_INLINE static __m256i W(const B& b) { return Load32(b.qs); }
};
struct Q4_0P {
  using B = block_q4_0;
  static constexpr bool kSmall = true;
  FG_INLINE static __m256i W(const B& b) { return x86::SignedQ4_0(b); }
};
struct Q5_0P {
  using B = block_q5_0;
  static constexpr bool kSmall = true;
  FG_INLINE static __m256i W(const B& b) { return x86::SignedQ5_0(b); }
};
struct Iq4nlP {
  using B = block_iq4_nl;
  static constexpr bool kSmall = false;
  FG_INLINE static __m256i W(const B& b) { return x86::SignedIq4nl(b); }
};

size_t PackedBytes(int64_t n) { return static_cast<size_t>(n / kQK) * kBlockBytes; }

// Eight rows' 32-byte blocks v[0..7] (eight dwords each) -> v[q] = dword q of every row, row k
// in lane k: the 8 x 8 dword transpose.
FG_INLINE void Transpose8x8(__m256i v[8]) {
  __m256i t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]);      // dwords 0, 1 | 4, 5
    t[2 * k + 1] = _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]);  // dwords 2, 3 | 6, 7
  }
  for (int k = 0; k < 2; ++k) {                                        // rows 4k .. 4k + 3
    u[4 * k + 0] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);      // dword 0 | 4
    u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);      // dword 1 | 5
    u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);  // dword 2 | 6
    u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);  // dword 3 | 7
  }
  for (int q = 0; q < 4; ++q) {
    v[q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x20);
    v[q + 4] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x31);
  }
}

template <class P>
void Pack(int64_t n, const uint8_t* w, size_t row_bytes, int rows, void* packed) {
  using B = typename P::B;
  const B* x[kPanelRows];
  x86::PanelRows(w, row_bytes, rows, x);
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t j = 0; j < n / kQK; ++j, out += kBlockBytes) {
    for (int h = 0; h < 2; ++h) {
      __m256i v[8];
      for (int k = 0; k < 8; ++k)
        v[k] = 8 * h + k < rows ? P::W(x[8 * h + k][j]) : _mm256_setzero_si256();
      Transpose8x8(v);
      for (int q = 0; q < 8; ++q) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * q + 32 * h), v[q]);
      }
    }
    float d[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) d[r] = r < rows ? _cvtsh_ss(x[r][j].d) : 0.f;
    std::memcpy(out + 8 * 64, d, sizeof d);
  }
}

FG_INLINE __m256i Dword(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// Half h (rows 8h .. 8h + 7) of the panel against T tokens.
template <bool kSmall, int T>
FG_INLINE void RunHalf(int64_t nb, const uint8_t* packed, int h, const uint8_t* act,
                       size_t act_stride, const PanelActSide* side, float* y, int64_t ldy,
                       __m256i live) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  const uint8_t* a[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    a[t] = act + static_cast<size_t>(t) * act_stride + offsetof(block_q8_0, qs);
  }
  const uint8_t* p = packed + 32 * h;
  for (int64_t j = 0; j < nb; ++j, p += kBlockBytes) {
    const size_t off = static_cast<size_t>(j) * sizeof(block_q8_0);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int q = 0; q < 8; ++q) {
      const __m256i w = Load32(p + 64 * q);
      const __m256i aw = _mm256_sign_epi8(w, w);
      for (int t = 0; t < T; ++t) {
        const __m256i prod =
            _mm256_maddubs_epi16(aw, _mm256_sign_epi8(Dword(a[t] + off + 4 * q), w));
        isum[t] = kSmall ? _mm256_add_epi16(isum[t], prod)
                         : _mm256_add_epi32(isum[t], _mm256_madd_epi16(prod, ones));
      }
    }
    const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(p + 8 * 64));
    for (int t = 0; t < T; ++t) {
      const __m256i s = kSmall ? _mm256_madd_epi16(isum[t], ones) : isum[t];
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
                               _mm256_mul_ps(dw, _mm256_set1_ps(side[t * nb + j].d)), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * ldy + 8 * h, live, acc[t]);
}

constexpr int kTok = 4;  // tokens per pass

// Calls half(T, h, t, live) for each half h of a panel of `rows` rows (live: its rows' lanes)
// and its tokens t in runs of T = kTok, then the last 1 to 3 (T as std::integral_constant).
template <class F>
FG_INLINE void EachHalfAndRun(int rows, int64_t tokens, F&& half) {
  for (int h = 0; h < 2 && 8 * h < rows; ++h) {
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows - 8 * h),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int64_t t = 0;
    for (; t + kTok <= tokens; t += kTok) half(std::integral_constant<int, kTok>(), h, t, live);
    switch (tokens - t) {
      case 3:
        half(std::integral_constant<int, 3>(), h, t, live);
        break;
      case 2:
        half(std::integral_constant<int, 2>(), h, t, live);
        break;
      case 1:
        half(std::integral_constant<int, 1>(), h, t, live);
        break;
      default:
        break;
    }
  }
}

template <class P>
void Run(int64_t n, const void* packed, const uint8_t* act, size_t act_stride,
         const PanelActSide* side, int64_t tokens, float* y, int64_t ldy, int rows) {
  const int64_t nb = n / kQK;
  const auto* pk = static_cast<const uint8_t*>(packed);
  EachHalfAndRun(rows, tokens, [&](auto T, int h, int64_t t, __m256i live) {
    RunHalf<P::kSmall, T()>(nb, pk, h, act + static_cast<size_t>(t) * act_stride, act_stride,
                            side + t * nb, y + t * ldy, ldy, live);
  });
}

// From three tokens on for Q4_0 / Q5_0, four for Q8_0 / IQ4_NL (a panel packed per call; a
// prepacked one runs from two). Below, the 2 x 2 tiles are faster: fg_kernels_benchmark
// MatMul/TYPE/2048x640/mM/threads:2 on a 2-core AVX2 EPYC (Zen 1), tile time / panel time,
// medians of 5:
//   m:        2     3     4     8
//   Q8_0    0.70  0.92  0.99  1.10
//   IQ4_NL  0.70  0.99  0.99  1.21
//   Q4_0    0.80  1.19  1.20  1.45
//   Q5_0    0.78  1.20  1.18  1.56
// The small types' panels sum a block's s16 products before one madd (kSmall), so they win
// sooner.
template <class P>
const PanelKernels* Kernels() {
  static const PanelKernels k{0, true, P::kSmall ? 3 : 4, PackedBytes, Pack<P>, Run<P>};
  return &k;
}

// ---------------------------------------------------------------- K-quants
//
// Per super-block of the 16 rows (panel.h's arithmetic; the layout of the AVX-512 K panels with
// 32-byte halves): 64 dwords (q = elements 4q..4q+3, unsigned: Q4_K q <= 15, Q6_K q + 32 <= 63)
// as two halves of 8 rows; per sub-block of G its scale as an int16 pair per row (for vpmaddwd);
// per pair of Q8_K block sums the rows' coefficients as int16 pairs; d and -dmin. The products:
// vpmaddubsw of the unsigned weights and the token's dword, summed in int16 over kAdd dwords
// (Q4_K 8: 8 x 2 x 15 x 128 = 30,720; Q6_K 2: 2 x 2 x 63 x 128 = 32,256; never saturated), then
// one vpmaddwd by the sub-block's scale: where the vec_dot needs one vpmaddwd per 32 products,
// a Q4_K panel needs one per 256.
template <class P>
struct KLayout : P {
  static constexpr int kGroups = kQK_K / P::kG;
  static constexpr int kAdd = P::kMin ? 8 : 2;  // dwords summed in int16 before a vpmaddwd
  static constexpr size_t kSc = 4096;
  static constexpr size_t kCorr = kSc + kGroups * 64;
  static constexpr size_t kD = kCorr + 8 * 64;
  static constexpr size_t kBytes = kD + 2 * 64;
};

template <class P>
size_t KPackedBytes(int64_t n) {
  return static_cast<size_t>(n / kQK_K) * KLayout<P>::kBytes;
}

template <class P>
void KPack(int64_t n, const uint8_t* w, size_t row_bytes, int rows, void* packed) {
  using L = KLayout<P>;
  using B = typename P::B;
  const B* x[kPanelRows];
  x86::PanelRows(w, row_bytes, rows, x);
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t j = 0; j < n / kQK_K; ++j, out += L::kBytes) {
    for (int c = 0; c < 8; ++c) {
      for (int h = 0; h < 2; ++h) {
        __m256i v[8];
        for (int k = 0; k < 8; ++k) {
          v[k] = 8 * h + k < rows ? P::Chunk(x[8 * h + k][j], c) : _mm256_setzero_si256();
        }
        Transpose8x8(v);
        for (int q = 0; q < 8; ++q) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * (8 * c + q) + 32 * h), v[q]);
        }
      }
    }
    auto* sc = reinterpret_cast<int16_t*>(out + L::kSc);
    auto* coef = reinterpret_cast<int16_t*>(out + L::kCorr);
    float d[2 * kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) {
      int32_t s[16] = {};
      int16_t cf[16] = {};
      float dr = 0, ndr = 0;
      if (r < rows) P::Scales(x[r][j], s, cf, &dr, &ndr);
      // Row r is lane r % 8 of half r / 8: its two int16 at 32 (r / 8) + 4 (r % 8) bytes.
      const size_t lane = static_cast<size_t>(16 * (r / 8) + 2 * (r % 8));
      for (int g = 0; g < L::kGroups; ++g) {
        sc[32 * g + lane] = sc[32 * g + lane + 1] = static_cast<int16_t>(s[g]);
      }
      for (int i = 0; i < 8; ++i) {
        coef[32 * i + lane] = cf[2 * i];
        coef[32 * i + lane + 1] = cf[2 * i + 1];
      }
      d[r] = dr;
      d[kPanelRows + r] = ndr;
    }
    std::memcpy(out + L::kD, d, sizeof d);
  }
}

// Half h (rows 8h .. 8h + 7) of a K panel against T tokens.
template <class P, int T>
FG_INLINE void KRunHalf(int64_t nb, const uint8_t* packed, int h, const uint8_t* act,
                        size_t act_stride, float* y, int64_t ldy, __m256i live) {
  using L = KLayout<P>;
  constexpr int kDw = P::kG / 4;  // dwords per sub-block
  __m256 acc[T];
  const uint8_t* a[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    a[t] = act + static_cast<size_t>(t) * act_stride;
  }
  const uint8_t* p = packed + 32 * h;
  for (int64_t j = 0; j < nb; ++j, p += L::kBytes) {
    const size_t off = static_cast<size_t>(j) * sizeof(BlockQ8K);
    __m256i main[T], corr[T];
    for (int t = 0; t < T; ++t) main[t] = corr[t] = _mm256_setzero_si256();
    for (int g = 0; g < L::kGroups; ++g) {
      const __m256i sc = Load32(p + L::kSc + 64 * g);
      for (int q0 = 0; q0 < kDw; q0 += L::kAdd) {
        __m256i s16[T];
        for (int t = 0; t < T; ++t) s16[t] = _mm256_setzero_si256();
        for (int q = q0; q < q0 + L::kAdd; ++q) {
          const __m256i w = Load32(p + 64 * (g * kDw + q));
          for (int t = 0; t < T; ++t) {
            s16[t] = _mm256_add_epi16(
                s16[t], _mm256_maddubs_epi16(
                            w, Dword(a[t] + off + offsetof(BlockQ8K, qs) + 4 * (g * kDw + q))));
          }
        }
        for (int t = 0; t < T; ++t)
          main[t] = _mm256_add_epi32(main[t], _mm256_madd_epi16(s16[t], sc));
      }
    }
    for (int i = 0; i < 8; ++i) {
      const __m256i c = Load32(p + L::kCorr + 64 * i);
      for (int t = 0; t < T; ++t) {
        corr[t] = _mm256_add_epi32(
            corr[t], _mm256_madd_epi16(c, Dword(a[t] + off + offsetof(BlockQ8K, bsums) + 4 * i)));
      }
    }
    const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(p - 32 * h + L::kD) + 8 * h);
    for (int t = 0; t < T; ++t) {
      float da;
      std::memcpy(&da, a[t] + off + offsetof(BlockQ8K, d), sizeof da);
      const __m256 vda = _mm256_set1_ps(da);
      if constexpr (P::kMin) {
        const __m256 nd = _mm256_loadu_ps(reinterpret_cast<const float*>(p - 32 * h + L::kD) +
                                          kPanelRows + 8 * h);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(main[t]), _mm256_mul_ps(d, vda), acc[t]);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr[t]), _mm256_mul_ps(nd, vda), acc[t]);
      } else {
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(main[t], corr[t])),
                                 _mm256_mul_ps(d, vda), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * ldy + 8 * h, live, acc[t]);
}

template <class P>
void KRun(int64_t n, const void* packed, const uint8_t* act, size_t act_stride,
          const PanelActSide* /*side*/, int64_t tokens, float* y, int64_t ldy, int rows) {
  const int64_t nb = n / kQK_K;
  const auto* pk = static_cast<const uint8_t*>(packed);
  EachHalfAndRun(rows, tokens, [&](auto T, int h, int64_t t, __m256i live) {
    KRunHalf<P, T()>(nb, pk, h, act + static_cast<size_t>(t) * act_stride, act_stride, y + t * ldy,
                     ldy, live);
  });
}

// From 8 tokens on, as the AVX-512 K panels. fg_kernels_benchmark MatMul/Q4_K|Q6_K/640x2048, 1
// thread, on a 2-core AMD EPYC (Zen 1), medians of 5 to 7 (this VM's runs vary by up to 2x),
// panel speed over the 2 x 2 tiles: Q4_K m2 0.50x, m4 0.65x, m8 0.81x / 1.09x (two runs), m16
// 0.88x / 1.74x, m32 1.70x, m64 2.37x, m512 2.50x; Q6_K m2 0.57x, m4 0.62x, m8 0.87x / 1.16x,
// m16 1.11x / 1.16x, m32 1.30x, m64 1.47x, m512 1.55x.
constexpr int kKMinTokens = 8;

template <class P>
const PanelKernels* KKernels() {
  static const PanelKernels k{0, false, kKMinTokens, KPackedBytes<P>, KPack<P>, KRun<P>};
  return &k;
}
}  // namespace

void FillPanelAvx2(KernelSet& ks) {
  auto panel = [&ks](DType t) -> const PanelKernels*& {
    return ks.types[static_cast<int>(t)].panel;
  };
  panel(DType::kQ8_0) = Kernels<Q8_0P>();
  panel(DType::kQ4_0) = Kernels<Q4_0P>();
  panel(DType::kQ5_0) = Kernels<Q5_0P>();
  panel(DType::kIQ4_NL) = Kernels<Iq4nlP>();
  panel(DType::kQ4_K) = KKernels<kquants_x86::Q4KPanel>();
  panel(DType::kQ6_K) = KKernels<kquants_x86::Q6KPanel>();
}

}  // namespace fg::kernels::internal
