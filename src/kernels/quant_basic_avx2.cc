// AVX2 + FMA + F16C kernels of the plain and 32-element block types: vec_dot of every type and
// the Q8_0 / Q8_1 activation quantizers. Scalar twins: quant_basic.cc.
//
// Integer dots use _mm256_maddubs_epi16 (u8 x s8 -> pairs summed to s16) with the sign trick
// for signed weights: |w| * (a * sign(w)) = w * a. No pair can saturate: |w| <= 128 and
// |a| <= 127 give at most 2 * 128 * 127 = 32512. ref: ggml/src/ggml-cpu/arch/x86/quants.c.
#include <immintrin.h>

#include "src/kernels/blocks.h"
#include "src/kernels/quant_basic_fill.h"
#include "src/kernels/x86_util.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {
namespace {

using x86::BitsToBytes;
using x86::F16;
using x86::HsumEpi32;
using x86::HsumPs;
using x86::Load32;
using x86::Nibbles;

using tensor::Bf16ToFp32;

// Eight s32 partial sums of w * a for 32 unsigned weights (< 128) and signed activations.
inline __m256i DotU8(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// ---------------------------------------------------------------- plain types

void DotF32(int64_t n, const void* w, const void* a, float* out) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
  float s = HsumPs(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) s += x[i] * y[i];
  *out = s;
}

inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void DotF16(int64_t n, const void* w, const void* a, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const float* y = static_cast<const float*>(a);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(LoadF16(x + i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(LoadF16(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
    s2 = _mm256_fmadd_ps(LoadF16(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
    s3 = _mm256_fmadd_ps(LoadF16(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LoadF16(x + i), _mm256_loadu_ps(y + i), s0);
  float s = HsumPs(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) s += F16(x[i]) * y[i];
  *out = s;
}

// BF16 -> F32 is exact: the 16 bits become the high half of the float.
inline __m256 LoadBf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

void DotBf16(int64_t n, const void* w, const void* a, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const float* y = static_cast<const float*>(a);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(LoadBf16(x + i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(LoadBf16(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
    s2 = _mm256_fmadd_ps(LoadBf16(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
    s3 = _mm256_fmadd_ps(LoadBf16(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LoadBf16(x + i), _mm256_loadu_ps(y + i), s0);
  float s = HsumPs(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) s += Bf16ToFp32(x[i]) * y[i];
  *out = s;
}

// ---------------------------------------------------------------- activation quantizers

// One block of 32 floats -> 32 int8 (rounded to nearest even, as the scalar twin) and the
// scale; returns the sum of the quants (for Q8_1).
inline int QuantBlock8(const float* x, float* d_out, int8_t* qs) {
  __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
  __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                           _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const float d = amax / 127.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  *d_out = d;
  const __m256 vid = _mm256_set1_ps(id);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, vid), kRound));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, vid), kRound));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, vid), kRound));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, vid), kRound));
  const int sum = HsumEpi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
  // packs work per 128-bit lane; the permute restores element order.
  i0 = _mm256_packs_epi32(i0, i1);
  i2 = _mm256_packs_epi32(i2, i3);
  i0 = _mm256_packs_epi16(i0, i2);
  i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), i0);
  return sum;
}

// ---------------------------------------------------------------- block dots

// Eight s32 partial sums of w * a for signed weights: |w| * (a * sign(w)), given |w| and w.
FG_INLINE __m256i DotAbs(__m256i abs_w, __m256i sign_w, __m256i a) {
  const __m256i p = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a, sign_w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Per type: the weight and activation blocks, how a weight block expands to 32 bytes in
// element order, and whether those are signed / the type carries a min (Q4_1/Q5_1: the
// block-sum trick of the scalar twin, sum m * s).
struct Q8_0Traits {
  using BX = block_q8_0;
  using BY = block_q8_0;
  static constexpr bool kSigned = true, kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) { return Load32(b.qs); }
};
struct Q8_1Traits {
  using BX = block_q8_1;
  using BY = block_q8_1;
  static constexpr bool kSigned = true, kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) { return Load32(b.qs); }
};
struct Q4_0Traits {
  using BX = block_q4_0;
  using BY = block_q8_0;
  static constexpr bool kSigned = true, kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) { return x86::SignedQ4_0(b); }
};
struct Q4_1Traits {
  using BX = block_q4_1;
  using BY = block_q8_1;
  static constexpr bool kSigned = false, kMin = true;
  FG_INLINE static __m256i Weights(const BX& b) { return Nibbles(b.qs); }
};
struct Q5_0Traits {
  using BX = block_q5_0;
  using BY = block_q8_0;
  static constexpr bool kSigned = true, kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) { return x86::SignedQ5_0(b); }
};
struct Q5_1Traits {
  using BX = block_q5_1;
  using BY = block_q8_1;
  static constexpr bool kSigned = false, kMin = true;
  FG_INLINE static __m256i Weights(const BX& b) {
    return _mm256_or_si256(Nibbles(b.qs),
                           _mm256_and_si256(BitsToBytes(b.qh), _mm256_set1_epi8(0x10)));
  }
};
struct Iq4nlTraits {
  using BX = block_iq4_nl;
  using BY = block_q8_0;
  static constexpr bool kSigned = true, kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) { return x86::SignedIq4nl(b); }
};

// An R x T tile of dot products, out[r + R t] = x_r . y_t: x86::BlockTile (x86_util.h: the
// panels' arithmetic, the AVX-512 set's too, so vec_dot, the tile, the four-row form and a panel
// give the same bits) with the sign trick's integer dots: eight s32 partial sums per block.
// (A member of Tiles, so that quant_basic_fill.h can take it as a type.)
struct Tiles {
  template <class Tr, int R, int T>
  static FG_INLINE void Tile(int64_t nb, const typename Tr::BX* const* x,
                             const typename Tr::BY* const* y, float* out) {
    // The block's eight s32 partial sums of each output, in sumi[r + R t].
    auto block_sums = [&](int64_t j, __m256i* sumi) {
      __m256i w[R], aw[R], a[T];
      for (int r = 0; r < R; ++r) {
        if constexpr (R > 1) {
          // Interleaved short row streams do not train the hardware prefetcher like one long
          // sequential stream; fetch into L2 the same block two groups of R rows further on (the
          // rows that follow when they are contiguous; a prefetch never faults). Into L1 (T0)
          // it was slower: it ties up the L1 miss buffers. See quant_basic_avx512.cc.
          _mm_prefetch(reinterpret_cast<const char*>(x[r] + j + 2 * R * nb), _MM_HINT_T1);
        }
        w[r] = Tr::Weights(x[r][j]);
        if constexpr (Tr::kSigned) aw[r] = _mm256_sign_epi8(w[r], w[r]);
      }
      for (int t = 0; t < T; ++t) a[t] = Load32(y[t][j].qs);
      for (int t = 0; t < T; ++t) {
        for (int r = 0; r < R; ++r) {
          sumi[r + R * t] = Tr::kSigned ? DotAbs(aw[r], w[r], a[t]) : DotU8(w[r], a[t]);
        }
      }
    };
    x86::BlockTile<Tr, R, T>(nb, x, y, out, block_sums);
  }
};

}  // namespace

void FillBasicAvx2(KernelSet& ks) {
  basic_fill::Fill<Tiles, QuantBlock8, Q8_0Traits, Q8_1Traits, Q4_0Traits, Q4_1Traits, Q5_0Traits,
                   Q5_1Traits, Iq4nlTraits>(ks, {DotF32, DotF16, DotBf16});
}

}  // namespace fg::kernels::internal
