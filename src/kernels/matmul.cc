// The matmul driver: quantizes the activations once to the weight type's dot_type, then splits
// the weight rows over the pool and runs the per-type vec_dot kernels.
//
// Loop order (per thread, over its contiguous share of rows): for each tile of activation rows
// sized to stay in L2, for each weight row (pair), for each activation row (pair) in the tile.
// One weight row (at most a few KiB) stays in L1 while it meets every activation of the tile,
// and the weight matrix is streamed from memory once per tile (once in total for m <= the
// tile). Where the kernel set has a 2 x 2 register-tile kernel for the type (TypeKernels::tile:
// the block types on AVX2 / AVX-512) pairs of rows meet pairs of tokens, so each weight block is
// unpacked once per two tokens; m == 1 (decode) takes four rows at a time where the set has such
// a kernel (TypeKernels::rows), so each activation block is loaded and prepared once per four rows.
//
// Where the set has packed-panel kernels for the type (panel.h: Q8_0/Q4_0/Q5_0/IQ4_NL on AVX2
// and AVX-512, Q4_K/Q6_K on AVX-512), m > 1 takes them instead: the threads split the weight
// rows in panels of 16, each panel is packed once into a per-thread buffer and meets all m
// tokens. A panel computes each output with the arithmetic of the set's vec_dot (panel.h), so
// a token's result does not depend on m.
//
// Every output element is computed by the same operations on the same inputs whatever the
// split, so results do not depend on the number of threads.
#include "src/kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "src/base/check.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/panel.h"
#include "src/kernels/quant.h"

namespace fg::kernels {
namespace {

// Activation tile in bytes: about half of a small core's L2.
constexpr size_t kActTileBytes = 128 * 1024;
constexpr int64_t kMaxTokTile = 64;
// Smallest amount of work (multiply-adds) worth handing a thread of its own.
constexpr int64_t kMinWorkPerThread = ThreadPool::kMinWork;

struct Plan {
  const TypeOps* ops = nullptr;
  DotTileFn tile = nullptr;  // 2 x 2 register tile for m > 1, if the set has one
  DotRowsFn rows = nullptr;  // 4 rows x 1 token for m == 1, if the set has one
  const internal::PanelKernels* panel = nullptr;  // packed panels for m > 1, if any
  const uint8_t* act = nullptr;  // m activation rows in ops->dot_type
  size_t act_stride = 0;         // bytes between activation rows
  const internal::PanelActSide* side = nullptr;  // panel: m x (cols / 32) block data
};

const TypeKernels& KernelsFor(const KernelSet& ks, const WeightMatrix& w) {
  const TypeKernels* k = ks.type(w.type);
  FG_CHECK(k != nullptr);  // the loader admits only types with kernels
  const auto row_bytes = tensor::RowBytes(w.type, w.cols);
  FG_CHECK(row_bytes.has_value());
  FG_CHECK(w.row_bytes >= static_cast<size_t>(*row_bytes));
  return *k;
}

// Brings the m activation rows into the dot type. F32 dot types use x in place; others are
// quantized into a per-calling-thread buffer that only ever grows (no allocation per call once
// warm). Large batches quantize in parallel (rows are independent, so results do not change).
Plan Prepare(const KernelSet& ks, const WeightMatrix& w, const float* x, int64_t m,
             ThreadPool* pool) {
  Plan p;
  const TypeKernels& k = KernelsFor(ks, w);
  p.ops = &k.ops;
  p.tile = k.tile;
  p.rows = k.rows;
  if (m > 1) {
    p.panel = k.panel;
    // Prepacked panels pay from two tokens on; packing them per call only from min_tokens.
    const bool prepacked = w.panels != nullptr && w.panel_set == k.panel;
    if (p.panel != nullptr && m < p.panel->min_tokens && !prepacked) p.panel = nullptr;
  }
  if (p.ops->dot_type == tensor::DType::kF32) {
    p.act = reinterpret_cast<const uint8_t*>(x);
    p.act_stride = static_cast<size_t>(w.cols) * sizeof(float);
    return p;
  }
  const TypeOps* act_ops = ks.type_ops(p.ops->dot_type);
  FG_CHECK(act_ops != nullptr && act_ops->quantize_row != nullptr);
  const auto stride = tensor::RowBytes(p.ops->dot_type, w.cols);
  FG_CHECK(stride.has_value());
  p.act_stride = static_cast<size_t>(*stride);
  thread_local std::vector<uint8_t> buffer;
  const size_t need = p.act_stride * static_cast<size_t>(m);
  if (buffer.size() < need) buffer.resize(need);
  uint8_t* act = buffer.data();
  const int64_t cols = w.cols;
  const size_t stride_bytes = p.act_stride;
  const int64_t nb = cols / 32;
  const internal::PanelKernels* panel =
      p.panel != nullptr && p.panel->side ? p.panel : nullptr;
  // Not `side` in the lambda: a thread_local named there is the running thread's own. Decode
  // (m == 1, no panel) never touches it.
  internal::PanelActSide* side_data = nullptr;
  if (panel != nullptr) {
    thread_local std::vector<internal::PanelActSide> side;
    if (side.size() < static_cast<size_t>(m * nb)) side.resize(static_cast<size_t>(m * nb));
    side_data = side.data();
  }
  auto quantize = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint8_t* row = act + static_cast<size_t>(i) * stride_bytes;
      act_ops->quantize_row(x + i * cols, row, cols);
      if (panel != nullptr) internal::PanelSide(cols, row, panel->offset, side_data + i * nb);
    }
  };
  if (pool != nullptr && m > 1) {
    pool->ParallelFor(m, quantize, std::max<int64_t>(1, kMinWorkPerThread / (cols * 8)));
  } else {
    quantize(0, m);
  }
  p.act = act;
  if (panel != nullptr) p.side = side_data;
  return p;
}

// Most tokens for which ComputePanels prefetches the next panel's rows: where it was measured
// to pay (the LM head over a training example's ~15 loss rows, fg_kernels_benchmark
// MatMul/Q8_0/262144x640/m16: 1.2x; a per-app tune's ~32-row projections). Past them a panel's
// run is long enough for the hardware's own prefetch; the runtime's calls read prepacked panels
// (PackPanels), which this does not touch.
constexpr int64_t kPrefetchMaxTokens = 64;

// A hint to bring [p, p + bytes) into the caches; no effect on any result.
void Prefetch(const uint8_t* p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
}

// Panels [p0, p1) of kPanelRows weight rows for all m activation rows: each panel is packed
// once into a per-thread buffer, then meets every token (panel.h).
void ComputePanels(const Plan& p, const WeightMatrix& w, int64_t m, float* y, int64_t ldy,
                   int64_t p0, int64_t p1) {
  const size_t bytes = p.panel->packed_bytes(w.cols);
  if (w.panels != nullptr && w.panel_set == p.panel) {
    for (int64_t i = p0; i < p1; ++i) {
      const int64_t r = i * internal::kPanelRows;
      const int rows = static_cast<int>(std::min<int64_t>(internal::kPanelRows, w.rows - r));
      p.panel->run(w.cols, w.panels + static_cast<size_t>(i) * bytes, p.act, p.act_stride,
                   p.side, m, y + r, ldy, rows);
    }
    return;
  }
  thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < bytes + 64) scratch.resize(bytes + 64);
  const auto base = reinterpret_cast<uintptr_t>(scratch.data());
  void* buf = scratch.data() + ((64 - base % 64) % 64);
  for (int64_t i = p0; i < p1; ++i) {
    const int64_t r = i * internal::kPanelRows;
    const int rows = static_cast<int>(std::min<int64_t>(internal::kPanelRows, w.rows - r));
    p.panel->pack(w.cols, w.row(r), w.row_bytes, rows, buf);
    if (m <= kPrefetchMaxTokens && i + 1 < p1) {
      // The next panel's weight rows, contiguous, fetched while this panel meets the tokens:
      // with few tokens, a weight that is not in the caches (the LM head over a training
      // example's loss rows, a training step's projections) otherwise stalls every pack on
      // memory, and memory idles while the panel runs.
      const int64_t next =
          std::min<int64_t>(internal::kPanelRows, w.rows - r - internal::kPanelRows);
      Prefetch(w.row(r + internal::kPanelRows), static_cast<size_t>(next) * w.row_bytes);
    }
    p.panel->run(w.cols, buf, p.act, p.act_stride, p.side, m, y + r, ldy, rows);
  }
}

// Rows [r0, r1) of Y for all m activation rows.
void ComputeRows(const Plan& p, const WeightMatrix& w, int64_t m, float* y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  const auto dot = p.ops->vec_dot;
  const int64_t n = w.cols;
  if (m == 1) {
    int64_t r = r0;
    if (p.rows != nullptr) {
      // Bit-identical to vec_dot, so where the groups of four start does not matter.
      for (; r + kDotRows <= r1; r += kDotRows) {
        const void* ws[kDotRows];
        for (int k = 0; k < kDotRows; ++k) ws[k] = w.row(r + k);
        p.rows(n, ws, p.act, &y[r]);
      }
    }
    for (; r < r1; ++r) dot(n, w.row(r), p.act, &y[r]);
    return;
  }
  const int64_t tile = std::clamp<int64_t>(
      static_cast<int64_t>(kActTileBytes / std::max<size_t>(p.act_stride, 1)), 1, kMaxTokTile);
  for (int64_t t0 = 0; t0 < m; t0 += tile) {
    const int64_t t1 = std::min(m, t0 + tile);
    int64_t r = r0;
    if (p.tile != nullptr) {
      // Pairs of weight rows against pairs of activation rows; the tile returns exactly what
      // vec_dot would, so the odd row / token left over below may use vec_dot.
      for (; r + 2 <= r1; r += 2) {
        const uint8_t* w0 = w.row(r);
        const uint8_t* w1 = w.row(r + 1);
        int64_t t = t0;
        for (; t + 2 <= t1; t += 2) {
          const uint8_t* a0 = p.act + static_cast<size_t>(t) * p.act_stride;
          float out[4];
          p.tile(n, w0, w1, a0, a0 + p.act_stride, out);
          y[t * ldy + r] = out[0];
          y[t * ldy + r + 1] = out[1];
          y[(t + 1) * ldy + r] = out[2];
          y[(t + 1) * ldy + r + 1] = out[3];
        }
        if (t < t1) {
          const uint8_t* a = p.act + static_cast<size_t>(t) * p.act_stride;
          dot(n, w0, a, &y[t * ldy + r]);
          dot(n, w1, a, &y[t * ldy + r + 1]);
        }
      }
    }
    for (; r < r1; ++r) {
      const uint8_t* wr = w.row(r);
      const uint8_t* a = p.act + static_cast<size_t>(t0) * p.act_stride;
      for (int64_t t = t0; t < t1; ++t, a += p.act_stride) dot(n, wr, a, &y[t * ldy + r]);
    }
  }
}

}  // namespace

void MatMul(const KernelSet& ks, const WeightMatrix& w, const float* x, int64_t m, float* y,
            int64_t ldy, ThreadPool* pool) {
  if (ks.reference) return MatMulReference(w, x, m, y, ldy);
  if (m <= 0 || w.rows <= 0) return;
  FG_CHECK(ldy >= w.rows);
  const Plan p = Prepare(ks, w, x, m, pool);
  if (p.panel != nullptr) {
    const int64_t panels = (w.rows + internal::kPanelRows - 1) / internal::kPanelRows;
    if (pool == nullptr || pool->size() == 1) {
      ComputePanels(p, w, m, y, ldy, 0, panels);
      return;
    }
    const int64_t grain = std::max<int64_t>(
        1, kMinWorkPerThread / std::max<int64_t>(1, w.cols * m * internal::kPanelRows));
    pool->ParallelFor(
        panels, [&](int64_t b, int64_t e) { ComputePanels(p, w, m, y, ldy, b, e); }, grain);
    return;
  }
  if (pool == nullptr || pool->size() == 1) {
    ComputeRows(p, w, m, y, ldy, 0, w.rows);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kMinWorkPerThread / std::max<int64_t>(1, w.cols * m));
  pool->ParallelFor(
      w.rows, [&](int64_t r0, int64_t r1) { ComputeRows(p, w, m, y, ldy, r0, r1); }, grain);
}

const void* PanelSetOf(const KernelSet& ks, const WeightMatrix& w) {
  if (ks.reference) return nullptr;
  return KernelsFor(ks, w).panel;
}

size_t PanelBytes(const KernelSet& ks, const WeightMatrix& w) {
  const auto* panel = static_cast<const internal::PanelKernels*>(PanelSetOf(ks, w));
  if (panel == nullptr) return 0;
  const int64_t panels = (w.rows + internal::kPanelRows - 1) / internal::kPanelRows;
  return static_cast<size_t>(panels) * panel->packed_bytes(w.cols);
}

void PackPanels(const KernelSet& ks, const WeightMatrix& w, uint8_t* out, ThreadPool* pool) {
  const auto* panel = static_cast<const internal::PanelKernels*>(PanelSetOf(ks, w));
  if (panel == nullptr) return;
  const size_t bytes = panel->packed_bytes(w.cols);
  const int64_t panels = (w.rows + internal::kPanelRows - 1) / internal::kPanelRows;
  auto pack = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = i * internal::kPanelRows;
      const int rows = static_cast<int>(std::min<int64_t>(internal::kPanelRows, w.rows - r));
      panel->pack(w.cols, w.row(r), w.row_bytes, rows, out + static_cast<size_t>(i) * bytes);
    }
  };
  if (pool == nullptr || pool->size() == 1) {
    pack(0, panels);
  } else {
    pool->ParallelFor(panels, pack, 1);
  }
}

void MatMulIsa(Isa isa, const WeightMatrix& w, const float* x, int64_t m, float* y, int64_t ldy,
               ThreadPool* pool) {
  MatMul(GetKernelSet(isa), w, x, m, y, ldy, pool);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t m, float* y, int64_t ldy,
            ThreadPool* pool) {
  MatMul(ActiveKernelSet(), w, x, m, y, ldy, pool);
}

void MatVecRows(const WeightMatrix& w, const float* x, std::span<const int32_t> row_ids, float* y,
                ThreadPool* pool) {
  if (row_ids.empty()) return;
  const Plan p = Prepare(ActiveKernelSet(), w, x, 1, nullptr);
  auto row = [&](int64_t j) {
    const int32_t r = row_ids[static_cast<size_t>(j)];
    FG_CHECK(r >= 0 && r < w.rows);
    return w.row(r);
  };
  auto run = [&](int64_t b, int64_t e) {
    // The four-row kernel prefetches the rows that follow its group, which only pays off for
    // consecutive ids (for scattered ids it would double the memory traffic), so it takes
    // runs of four consecutive ids and vec_dot the rest (both give the same bits).
    int64_t j = b;
    while (j < e) {
      const int32_t r = row_ids[static_cast<size_t>(j)];
      bool run = p.rows != nullptr && j + kDotRows <= e;
      for (int k = 1; run && k < kDotRows; ++k) {
        run = row_ids[static_cast<size_t>(j + k)] == r + k;
      }
      if (run) {
        const void* ws[kDotRows];
        for (int k = 0; k < kDotRows; ++k) ws[k] = row(j + k);
        p.rows(w.cols, ws, p.act, &y[j]);
        j += kDotRows;
      } else {
        p.ops->vec_dot(w.cols, row(j), p.act, &y[j]);
        ++j;
      }
    }
  };
  const int64_t n = static_cast<int64_t>(row_ids.size());
  if (pool == nullptr || pool->size() == 1) {
    run(0, n);
  } else {
    pool->ParallelFor(n, run, std::max<int64_t>(1, kMinWorkPerThread / std::max<int64_t>(1, w.cols)));
  }
}

void MatMulReference(const WeightMatrix& w, const float* x, int64_t m, float* y, int64_t ldy) {
  const TypeOps* ops = GetKernelSet(Isa::kScalar).type_ops(w.type);
  FG_CHECK(ops != nullptr);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    ops->dequantize_row(w.row(r), row.data(), w.cols);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * w.cols;
      double s = 0;
      for (int64_t k = 0; k < w.cols; ++k) s += static_cast<double>(row[k]) * xi[k];
      y[i * ldy + r] = static_cast<float>(s);
    }
  }
}

}  // namespace fg::kernels
