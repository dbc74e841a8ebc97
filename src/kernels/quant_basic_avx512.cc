// AVX-512 (F/BW/VL/DQ + VNNI) kernels of the plain and 32-element block types: vec_dot of every
// type and the Q8_0 / Q8_1 activation quantizers. Scalar twins: quant_basic.cc.
//
// Block dots use VNNI's _mm256_dpbusd_epi32 (u8 x s8, four products summed into s32, no
// saturation) and AVX-512BW/VL masks; signed weights go through an unsigned offset (see the
// Traits below).
//
// BF16 weights are widened to f32 (exact) rather than using _mm512_dpbf16_ps: that instruction
// needs the activations in bf16 too, which would round them (relative error up to 2^-9) while
// the contract of vec_dot is an f32 activation row (dot_type F32).
// ref: ggml/src/ggml-cpu/arch/x86/quants.c (the AVX512/VNNI paths).
#include <immintrin.h>

#include "src/kernels/blocks.h"
#include "src/kernels/quant_basic_fill.h"
#include "src/kernels/x86_util.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {
namespace {

using x86::Load32;
using x86::Nibbles;

using tensor::Bf16ToFp32;

inline __mmask32 QhMask(const uint8_t qh[4]) { return LoadQh(qh); }

// ---------------------------------------------------------------- plain types

// Sum of x[i] * y[i] where Load widens 16 weights to f32; the tail uses masked loads.
template <typename LoadW>
inline float DotWide(int64_t n, const float* y, LoadW load) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_fmadd_ps(load(i, 0xffff), _mm512_loadu_ps(y + i), s0);
    s1 = _mm512_fmadd_ps(load(i + 16, 0xffff), _mm512_loadu_ps(y + i + 16), s1);
    s2 = _mm512_fmadd_ps(load(i + 32, 0xffff), _mm512_loadu_ps(y + i + 32), s2);
    s3 = _mm512_fmadd_ps(load(i + 48, 0xffff), _mm512_loadu_ps(y + i + 48), s3);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(load(i, 0xffff), _mm512_loadu_ps(y + i), s0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    s1 = _mm512_fmadd_ps(load(i, m), _mm512_maskz_loadu_ps(m, y + i), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

void DotF32(int64_t n, const void* w, const void* a, float* out) {
  const float* x = static_cast<const float*>(w);
  *out = DotWide(n, static_cast<const float*>(a),
                 [x](int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, x + i); });
}

void DotF16(int64_t n, const void* w, const void* a, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  *out = DotWide(n, static_cast<const float*>(a), [x](int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i));
  });
}

void DotBf16(int64_t n, const void* w, const void* a, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  *out = DotWide(n, static_cast<const float*>(a), [x](int64_t i, __mmask16 m) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  });
}

// ---------------------------------------------------------------- activation quantizers

// One block of 32 floats -> 32 int8 rounded to nearest even (as the scalar twin) and the
// unrounded scale; returns the sum of the quants (for Q8_1).
inline int QuantBlock8(const float* x, float* d_out, int8_t* qs) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  *d_out = d;
  const __m512 vid = _mm512_set1_ps(id);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i i0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, vid), kRound));
  const __m512i i1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, vid), kRound));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(i0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(i1));
  return _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
}

// ---------------------------------------------------------------- block dots

// Per type: the weight and activation blocks, how a weight block expands to 32 unsigned bytes
// u in element order, the offset c with w = u - c (0: the weights are u), and whether the
// type carries a min (Q4_1/Q5_1: the block-sum trick of the scalar twin, sum m * s).
//
// VNNI's dpbusd multiplies u8 by s8, so signed weights are stored shifted to unsigned and the
// offset is paid back through the accumulator's start value: dpbusd(-dpbusd(0, c, a), u, a)
// sums (u - c) * a = w * a in every s32 lane. The correction depends on the activation only,
// so a tile computes it once per activation block for all its weight rows.
struct Q8_0Traits {
  using BX = block_q8_0;
  using BY = block_q8_0;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) {
    return _mm256_xor_si256(Load32(b.qs), _mm256_set1_epi8(static_cast<char>(0x80)));  // w + 128
  }
};
struct Q8_1Traits {
  using BX = block_q8_1;
  using BY = block_q8_1;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) {
    return _mm256_xor_si256(Load32(b.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};
struct Q4_0Traits {
  using BX = block_q4_0;
  using BY = block_q8_0;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) { return Nibbles(b.qs); }
};
struct Q4_1Traits {
  using BX = block_q4_1;
  using BY = block_q8_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  FG_INLINE static __m256i Weights(const BX& b) { return Nibbles(b.qs); }
};
struct Q5_0Traits {
  using BX = block_q5_0;
  using BY = block_q8_0;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) {  // nibble | 5th bit << 4
    return _mm256_or_si256(Nibbles(b.qs), _mm256_maskz_mov_epi8(QhMask(b.qh), _mm256_set1_epi8(0x10)));
  }
};
struct Q5_1Traits {
  using BX = block_q5_1;
  using BY = block_q8_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  FG_INLINE static __m256i Weights(const BX& b) {
    return _mm256_or_si256(Nibbles(b.qs), _mm256_maskz_mov_epi8(QhMask(b.qh), _mm256_set1_epi8(0x10)));
  }
};
struct Iq4nlTraits {
  using BX = block_iq4_nl;
  using BY = block_q8_0;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  FG_INLINE static __m256i Weights(const BX& b) {  // codebook lookup, shifted by +128
    const __m128i t = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)),
                                    _mm_set1_epi8(static_cast<char>(0x80)));
    return _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1),
                               Nibbles(b.qs));
  }
};

// An R x T tile of dot products, out[r + R t] = x_r . y_t: x86::BlockTile (x86_util.h: the
// panels' arithmetic, so vec_dot, this tile and a panel give the same bits) with VNNI's integer
// dots. For R > 1 the next rows are prefetched (see below).
// (A member of Tiles, so that quant_basic_fill.h can take it as a type.)
struct Tiles {
  template <class Tr, int R, int T>
  static FG_INLINE void Tile(int64_t nb, const typename Tr::BX* const* x,
                             const typename Tr::BY* const* y, float* out) {
    const __m256i zero = _mm256_setzero_si256();
    // The block's s32 sums, in lane r + R t; and the activation side's offset correction.
    auto block_sums = [&](int64_t j, __m256i* sumi) {
      __m256i u[R], a[T], start[T];
      for (int r = 0; r < R; ++r) {
        if constexpr (R > 1) {
          // R interleaved short streams (rows of a few hundred bytes) do not train the hardware
          // prefetcher the way one long sequential stream does; without this a 4-row Q8_0
          // matvec from DRAM ran 3x slower than row-by-row vec_dot. Fetch into L2 the same block
          // two groups of R rows further on (the rows that follow when they are contiguous; a
          // prefetch never faults). Measured on the 262144 x 640 LM head: one group ahead or
          // into L1 (T0, which ties up the L1 miss buffers) stayed 1.5-2x slower than vec_dot;
          // this is on par or faster.
          _mm_prefetch(reinterpret_cast<const char*>(x[r] + j + 2 * R * nb), _MM_HINT_T1);
        }
        u[r] = Tr::Weights(x[r][j]);
      }
      for (int t = 0; t < T; ++t) {
        a[t] = Load32(y[t][j].qs);
        start[t] = zero;
        if constexpr (Tr::kOffset != 0) {
          start[t] = _mm256_sub_epi32(
              zero, _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(static_cast<char>(Tr::kOffset)), a[t]));
        }
      }
      for (int t = 0; t < T; ++t) {
        for (int r = 0; r < R; ++r) sumi[r + R * t] = _mm256_dpbusd_epi32(start[t], u[r], a[t]);
      }
    };
    x86::BlockTile<Tr, R, T>(nb, x, y, out, block_sums);
  }
};

}  // namespace

void FillBasicAvx512(KernelSet& ks) {
  basic_fill::Fill<Tiles, QuantBlock8, Q8_0Traits, Q8_1Traits, Q4_0Traits, Q4_1Traits, Q5_0Traits,
                   Q5_1Traits, Iq4nlTraits>(ks, {DotF32, DotF16, DotBf16});
}

}  // namespace fg::kernels::internal
