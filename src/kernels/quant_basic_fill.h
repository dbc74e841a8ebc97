// The KernelSet entries of the plain and 32-element block types, written once for
// quant_basic_avx2.cc and quant_basic_avx512.cc: from the file's own R x T tile kernel they
// make each block type's vec_dot (1 x 1), 2 x 2 tile and four-row form, from its one-block
// quantizer the Q8_0 / Q8_1 activation quantizers, and set them with the plain types' dots.
//
// Included only by those two files. Everything here is a template over the including file's
// kernel struct K, which lives in that file's anonymous namespace, so every instantiation has
// internal linkage and is compiled with that file's flags: no code of one ISA can be picked by
// the linker for another (see docs/architecture.md, "ISA dispatch").
//
// K provides the file's tile kernel as
//   template <class Tr, int R, int T> static void Tile(int64_t nb, const typename Tr::BX* const*,
//                                                      const typename Tr::BY* const*, float*);
// and the traits types name each block type's weight block (BX) and activation block (BY).
#ifndef FGEMMA_KERNELS_QUANT_BASIC_FILL_H_
#define FGEMMA_KERNELS_QUANT_BASIC_FILL_H_

#include <cstdint>

#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal::basic_fill {

template <class K, class Tr>
void VecDot(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const typename Tr::BX*>(w);
  const auto* y = static_cast<const typename Tr::BY*>(a);
  K::template Tile<Tr, 1, 1>(n / kQK, &x, &y, out);
}

template <class K, class Tr>
void TileDot(int64_t n, const void* w0, const void* w1, const void* a0, const void* a1,
             float* out) {
  using BX = typename Tr::BX;
  using BY = typename Tr::BY;
  const BX* x[2] = {static_cast<const BX*>(w0), static_cast<const BX*>(w1)};
  const BY* y[2] = {static_cast<const BY*>(a0), static_cast<const BY*>(a1)};
  K::template Tile<Tr, 2, 2>(n / kQK, x, y, out);
}

template <class K, class Tr>
void RowsDot(int64_t n, const void* const* w, const void* a, float* out) {
  using BX = typename Tr::BX;
  const BX* x[kDotRows];
  for (int r = 0; r < kDotRows; ++r) x[r] = static_cast<const BX*>(w[r]);
  const auto* y = static_cast<const typename Tr::BY*>(a);
  K::template Tile<Tr, kDotRows, 1>(n / kQK, x, &y, out);
}

// One block of 32 floats -> 32 int8 (rounded to nearest even, as the scalar twin) and the
// unrounded scale d; returns the sum of the quants.
using QuantBlockFn = int (*)(const float* x, float* d, int8_t* qs);

template <QuantBlockFn kBlock>
void QuantizeQ8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float d;
    kBlock(src + i * kQK, &d, y[i].qs);
    y[i].d = tensor::Fp32ToFp16(d);
  }
}

template <QuantBlockFn kBlock>
void QuantizeQ8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float d;
    const int sum = kBlock(src + i * kQK, &d, y[i].qs);
    y[i].d = tensor::Fp32ToFp16(d);
    y[i].s = tensor::Fp32ToFp16(static_cast<float>(sum) * d);  // unrounded d, as the scalar twin
  }
}

template <class K, class Tr>
void SetBlockType(KernelSet& ks, DType t) {
  TypeKernels& k = ks.types[static_cast<int>(t)];
  k.ops.vec_dot = VecDot<K, Tr>;
  k.tile = TileDot<K, Tr>;
  k.rows = RowsDot<K, Tr>;
}

using DotFn = void (*)(int64_t n, const void* w, const void* a, float* out);

// The plain types' vec_dot of the file (weights F32 / F16 / BF16, activations F32).
struct PlainDots {
  DotFn f32, f16, bf16;
};

template <class K, QuantBlockFn kQuantBlock, class Q8_0, class Q8_1, class Q4_0, class Q4_1,
          class Q5_0, class Q5_1, class Iq4nl>
void Fill(KernelSet& ks, const PlainDots& plain) {
  auto ops = [&ks](DType t) -> TypeOps& { return ks.types[static_cast<int>(t)].ops; };
  ops(DType::kF32).vec_dot = plain.f32;
  ops(DType::kF16).vec_dot = plain.f16;
  ops(DType::kBF16).vec_dot = plain.bf16;
  ops(DType::kQ8_0).quantize_row = QuantizeQ8_0<kQuantBlock>;
  ops(DType::kQ8_1).quantize_row = QuantizeQ8_1<kQuantBlock>;
  SetBlockType<K, Q8_0>(ks, DType::kQ8_0);
  SetBlockType<K, Q8_1>(ks, DType::kQ8_1);
  SetBlockType<K, Q4_0>(ks, DType::kQ4_0);
  SetBlockType<K, Q4_1>(ks, DType::kQ4_1);
  SetBlockType<K, Q5_0>(ks, DType::kQ5_0);
  SetBlockType<K, Q5_1>(ks, DType::kQ5_1);
  SetBlockType<K, Iq4nl>(ks, DType::kIQ4_NL);
}

}  // namespace fg::kernels::internal::basic_fill

#endif  // FGEMMA_KERNELS_QUANT_BASIC_FILL_H_
