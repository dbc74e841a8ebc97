// Matrix products of a stored (possibly quantized) weight matrix with f32 activations.
#ifndef FGEMMA_KERNELS_MATMUL_H_
#define FGEMMA_KERNELS_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "src/base/thread_pool.h"
#include "src/kernels/cpu.h"
#include "src/tensor/dtype.h"

namespace fg::kernels {

struct KernelSet;  // kernel_set.h

// A weight matrix as stored in GGUF: `rows` rows of `cols` elements, each row `row_bytes`
// long (cols must be a multiple of the type's block size).
struct WeightMatrix {
  tensor::DType type = tensor::DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes;
  }
};

// Y[i][r] = sum_k X[i][k] * W[r][k] for i < m, r < w.rows.
// X is m x w.cols, row-major (stride w.cols); Y has row stride ldy >= w.rows.
// m == 1 is the decode matvec. Work is split over `pool` (nullptr: single-threaded).
// Runs the kernels of `ks`; the reference set runs MatMulReference.
void MatMul(const KernelSet& ks, const WeightMatrix& w, const float* x, int64_t m, float* y,
            int64_t ldy, ThreadPool* pool);
// The same with the active ISA's set.
void MatMul(const WeightMatrix& w, const float* x, int64_t m, float* y, int64_t ldy,
            ThreadPool* pool);
// The same with GetKernelSet(isa) (tests and benchmarks compare ISAs).
void MatMulIsa(Isa isa, const WeightMatrix& w, const float* x, int64_t m, float* y, int64_t ldy,
               ThreadPool* pool);

// y[j] = W[row_ids[j]] . x for one activation row (the sparse LM head: only the logits of the
// tokens a grammar allows). Ids must be in [0, w.rows).
void MatVecRows(const WeightMatrix& w, const float* x, std::span<const int32_t> row_ids, float* y,
                ThreadPool* pool);

// The oracle: dequantize each row to f32 and accumulate in double. Slow; tests only.
void MatMulReference(const WeightMatrix& w, const float* x, int64_t m, float* y, int64_t ldy);

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_MATMUL_H_
