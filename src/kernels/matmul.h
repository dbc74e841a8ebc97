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
  // Optional: this matrix's packed panels (PackPanels), made for the kernel set whose panel
  // kernels are `panel_set` (PanelSetOf). A MatMul with that set and m >= 2 then runs them
  // instead of packing each panel again: the same bits, without the packing work (what a few
  // tokens' products cost, per call). Ignored by other sets.
  const uint8_t* panels = nullptr;
  const void* panel_set = nullptr;
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

// The panel kernels of `ks` for w's type (an identity for WeightMatrix::panel_set), or nullptr
// when the set has none (then PanelBytes is 0 and there is nothing to pack).
const void* PanelSetOf(const KernelSet& ks, const WeightMatrix& w);
// Bytes of w's packed panels for `ks` (0: no panel kernels for w's type).
size_t PanelBytes(const KernelSet& ks, const WeightMatrix& w);
// Packs every panel of w into `out` (PanelBytes bytes, 64-byte aligned), split over `pool`.
void PackPanels(const KernelSet& ks, const WeightMatrix& w, uint8_t* out, ThreadPool* pool);

// y[j] = W[row_ids[j]] . x for one activation row (the sparse LM head: only the logits of the
// tokens a grammar allows). Ids must be in [0, w.rows).
void MatVecRows(const WeightMatrix& w, const float* x, std::span<const int32_t> row_ids, float* y,
                ThreadPool* pool);

// The oracle: dequantize each row to f32 and accumulate in double. Slow; tests only.
void MatMulReference(const WeightMatrix& w, const float* x, int64_t m, float* y, int64_t ldy);

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_MATMUL_H_
