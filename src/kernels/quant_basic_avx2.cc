// AVX2 + FMA + F16C kernels of the plain and 32-element block types: vec_dot of every type and
// the Q8_0 / Q8_1 activation quantizers. Scalar twins: quant_basic.cc.
//
// Integer dots use _mm256_maddubs_epi16 (u8 x s8 -> pairs summed to s16) with the sign trick
// for signed weights: |w| * (a * sign(w)) = w * a. No pair can saturate: |w| <= 128 and
// |a| <= 127 give at most 2 * 128 * 127 = 32512. ref: ggml/src/ggml-cpu/arch/x86/quants.c.
#include <immintrin.h>

#include <cstring>

#include "src/kernels/blocks.h"
#include "src/kernels/quant_basic_internal.h"
#include "src/kernels/registry.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {
namespace {

// Hardware f16 -> f32 (F16C); exact, like tensor::Fp16ToFp32, without its branches.
inline float F16(uint16_t h) { return _cvtsh_ss(h); }

using tensor::Bf16ToFp32;
using tensor::Fp32ToFp16;

inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int HsumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// 16 packed bytes -> 32 bytes in element order: low nibbles (elements 0..15) in the low lane,
// high nibbles (elements 16..31) in the high lane.
inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// 32 bits -> 32 bytes, 0xff where the bit of that element is set.
inline __m256i BitsToBytes(const uint8_t qh[4]) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Eight s32 partial sums of w * a for 32 signed weights and 32 signed activations.
inline __m256i DotS8(__m256i w, __m256i a) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
// Same for unsigned weights (< 128).
inline __m256i DotU8(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

inline __m256i Load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
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
  float s = Hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
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
  float s = Hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
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
  float s = Hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
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
  const int sum =
      HsumI32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
  // packs work per 128-bit lane; the permute restores element order.
  i0 = _mm256_packs_epi32(i0, i1);
  i2 = _mm256_packs_epi32(i2, i3);
  i0 = _mm256_packs_epi16(i0, i2);
  i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), i0);
  return sum;
}

void QuantQ8_0(const float* src, void* dst, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float d;
    QuantBlock8(src + i * kQK, &d, y[i].qs);
    y[i].d = Fp32ToFp16(d);
  }
}

void QuantQ8_1(const float* src, void* dst, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float d;
    const int sum = QuantBlock8(src + i * kQK, &d, y[i].qs);
    y[i].d = Fp32ToFp16(d);
    y[i].s = Fp32ToFp16(static_cast<float>(sum) * d);  // unrounded d, as the scalar twin
  }
}

// ---------------------------------------------------------------- block dots

// acc += float(sumi) * (dx * dy), one block at a time.
// The f16 scales are broadcast as bits and converted in-register (two instructions each,
// versus scalar convert + multiply + broadcast); same value as F16(dx) * F16(dy).
inline __m256 Accum(__m256 acc, __m256i sumi, uint16_t dx, uint16_t dy) {
  const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(dx))),
                                 _mm256_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(dy))));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, acc);
}

void DotQ8_0(int64_t n, const void* w, const void* a, float* out) {
  const block_q8_0* x = static_cast<const block_q8_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = Accum(acc, DotS8(Load32(x[i].qs), Load32(y[i].qs)), x[i].d, y[i].d);
  }
  *out = Hsum(acc);
}

void DotQ8_1(int64_t n, const void* w, const void* a, float* out) {
  const block_q8_1* x = static_cast<const block_q8_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = Accum(acc, DotS8(Load32(x[i].qs), Load32(y[i].qs)), x[i].d, y[i].d);
  }
  *out = Hsum(acc);
}

void DotQ4_0(int64_t n, const void* w, const void* a, float* out) {
  const block_q4_0* x = static_cast<const block_q4_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const __m256i eight = _mm256_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_sub_epi8(Nibbles(x[i].qs), eight);
    acc = Accum(acc, DotS8(q, Load32(y[i].qs)), x[i].d, y[i].d);
  }
  *out = Hsum(acc);
}

void DotQ4_1(int64_t n, const void* w, const void* a, float* out) {
  const block_q4_1* x = static_cast<const block_q4_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;  // sum of m * s: the block-sum trick (see the scalar twin)
  for (int64_t i = 0; i < n / kQK; ++i) {
    summs += F16(x[i].m) * F16(y[i].s);
    acc = Accum(acc, DotU8(Nibbles(x[i].qs), Load32(y[i].qs)), x[i].d, y[i].d);
  }
  *out = Hsum(acc) + summs;
}

void DotQ5_0(int64_t n, const void* w, const void* a, float* out) {
  const block_q5_0* x = static_cast<const block_q5_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const __m256i f0 = _mm256_set1_epi8(static_cast<char>(0xf0));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    // q - 16 as int8: the nibble with 0xf0 or-ed in where the 5th bit is clear (= nibble - 16),
    // the plain nibble where it is set (= nibble + 16 - 16).
    const __m256i hi = _mm256_andnot_si256(BitsToBytes(x[i].qh), f0);
    const __m256i q = _mm256_or_si256(Nibbles(x[i].qs), hi);
    acc = Accum(acc, DotS8(q, Load32(y[i].qs)), x[i].d, y[i].d);
  }
  *out = Hsum(acc);
}

void DotQ5_1(int64_t n, const void* w, const void* a, float* out) {
  const block_q5_1* x = static_cast<const block_q5_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  const __m256i b4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    summs += F16(x[i].m) * F16(y[i].s);
    const __m256i q = _mm256_or_si256(Nibbles(x[i].qs), _mm256_and_si256(BitsToBytes(x[i].qh), b4));
    acc = Accum(acc, DotU8(q, Load32(y[i].qs)), x[i].d, y[i].d);
  }
  *out = Hsum(acc) + summs;
}

void DotIq4nl(int64_t n, const void* w, const void* a, float* out) {
  const block_iq4_nl* x = static_cast<const block_iq4_nl*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  const __m256i table = _mm256_set_m128i(t, t);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_shuffle_epi8(table, Nibbles(x[i].qs));  // codebook lookup
    acc = Accum(acc, DotS8(q, Load32(y[i].qs)), x[i].d, y[i].d);
  }
  *out = Hsum(acc);
}

}  // namespace

void RegisterBasicAvx2(OpsTable& t) {
  auto op = [&t](DType type) -> TypeOps& { return t.ops[static_cast<int>(type)]; };
  op(DType::kF32).vec_dot = DotF32;
  op(DType::kF16).vec_dot = DotF16;
  op(DType::kBF16).vec_dot = DotBf16;
  op(DType::kQ8_0).vec_dot = DotQ8_0;
  op(DType::kQ8_0).quantize_row = QuantQ8_0;
  op(DType::kQ8_1).vec_dot = DotQ8_1;
  op(DType::kQ8_1).quantize_row = QuantQ8_1;
  op(DType::kQ4_0).vec_dot = DotQ4_0;
  op(DType::kQ4_1).vec_dot = DotQ4_1;
  op(DType::kQ5_0).vec_dot = DotQ5_0;
  op(DType::kQ5_1).vec_dot = DotQ5_1;
  op(DType::kIQ4_NL).vec_dot = DotIq4nl;
}

}  // namespace fg::kernels::internal
