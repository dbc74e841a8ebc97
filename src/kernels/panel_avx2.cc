// AVX2 panel kernels (panel.h) for the 32-element block types whose activations are Q8_0:
// Q8_0, Q4_0, Q5_0, IQ4_NL. Scalar twin: PanelDotScalar in panel.cc; the AVX2 vec_dot, tile and
// four-row form (quant_basic_avx2.cc) use the same arithmetic, so a token's result never depends
// on the batch it came in.
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

#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
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
  for (int r = 0; r < kPanelRows; ++r) {
    x[r] = reinterpret_cast<const B*>(w + static_cast<size_t>(r < rows ? r : 0) * row_bytes);
  }
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

template <class P>
void Run(int64_t n, const void* packed, const uint8_t* act, size_t act_stride,
         const PanelActSide* side, int64_t tokens, float* y, int64_t ldy, int rows) {
  const int64_t nb = n / kQK;
  const auto* pk = static_cast<const uint8_t*>(packed);
  for (int h = 0; h < 2 && 8 * h < rows; ++h) {
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows - 8 * h),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int64_t t = 0;
    for (; t + kTok <= tokens; t += kTok) {
      RunHalf<P::kSmall, kTok>(nb, pk, h, act + static_cast<size_t>(t) * act_stride, act_stride,
                               side + t * nb, y + t * ldy, ldy, live);
    }
    const uint8_t* a = act + static_cast<size_t>(t) * act_stride;
    const PanelActSide* s = side + t * nb;
    switch (tokens - t) {
      case 3:
        RunHalf<P::kSmall, 3>(nb, pk, h, a, act_stride, s, y + t * ldy, ldy, live);
        break;
      case 2:
        RunHalf<P::kSmall, 2>(nb, pk, h, a, act_stride, s, y + t * ldy, ldy, live);
        break;
      case 1:
        RunHalf<P::kSmall, 1>(nb, pk, h, a, act_stride, s, y + t * ldy, ldy, live);
        break;
      default:
        break;
    }
  }
}

// From two tokens on, as the AVX-512 panels of these types: at m = 2 (fg_kernels_benchmark
// MatMul/Q8_0/2048x640/m2, 1 thread) the panel ran about as fast as the old 2 x 2 tile (10.9 /
// 15.0 against 13.2 / 15.1 GOP/s, two noisy runs), and from m = 4 faster.
template <class P>
const PanelKernels* Kernels() {
  static const PanelKernels k{0, true, 2, PackedBytes, Pack<P>, Run<P>};
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
}

}  // namespace fg::kernels::internal
