// Per-type kernels: the block formats of ggml, dequantize and quantize of rows, and the dot
// product of one weight row with one activation row.
//
// Activations are f32 in the model. For quantized weights they are first quantized (once per
// matmul) to the weight type's `dot_type` (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for
// Q4_1/Q5_1, Q8_K for the K-quants; F32 for F32/F16/BF16), as llama.cpp does, so the inner
// loop is integer multiply-add. ref: ggml/src/ggml-quants.c, ggml-cpu/quants.c.
#ifndef FGEMMA_KERNELS_QUANT_H_
#define FGEMMA_KERNELS_QUANT_H_

#include <cstdint>

#include "fgemma/status.h"
#include "src/kernels/cpu.h"
#include "src/tensor/dtype.h"

namespace fg::kernels {

using tensor::DType;

struct TypeOps {
  DType type = DType::kF32;
  DType dot_type = DType::kF32;  // activation format vec_dot expects
  // src holds n/block_elems blocks; n is a multiple of the block size.
  void (*dequantize_row)(const void* src, float* dst, int64_t n) = nullptr;
  // Round-to-nearest quantizer (ggml's quantize_row_*_ref numerics); for the dot types it is
  // the activation quantizer and has SIMD versions.
  void (*quantize_row)(const float* src, void* dst, int64_t n) = nullptr;
  // *out = sum_i w[i] * a[i] over n elements; w in `type`, a in `dot_type`.
  void (*vec_dot)(int64_t n, const void* w, const void* a, float* out) = nullptr;
};

// Kernels of `t` for `isa`: SIMD members where that ISA has them, scalar ones otherwise.
// nullptr if fgemma has no kernels for `t` (see tensor::Info(t).supported).
// Also nullptr if `isa` is not one of AvailableIsas() (never hands out code the CPU lacks).
const TypeOps* GetTypeOps(DType t, Isa isa);
inline const TypeOps* GetTypeOps(DType t) { return GetTypeOps(t, ActiveIsa()); }

// Checked helpers for callers holding untrusted types/sizes.
Status DequantizeRow(DType t, const void* src, float* dst, int64_t n);
Status QuantizeRow(DType t, const float* src, void* dst, int64_t n);

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_QUANT_H_
