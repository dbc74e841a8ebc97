// Tests of the matmul driver against the f64 oracle, across every weight type with kernels,
// every ISA of this CPU, odd shapes, thread counts and the sparse row path.
#include "src/kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/panel.h"
#include "src/kernels/quant.h"
#include "src/tensor/half.h"

namespace fg::kernels {
namespace {

using tensor::DType;

std::string Name(DType t) { return std::string(tensor::DTypeName(t)); }

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g(rng);
  for (int64_t i = 0; i < n; i += 29) v[static_cast<size_t>(i)] *= 5.f;  // outliers
  return v;
}

// A quantized random weight matrix; empty `data` if the type cannot be built here.
struct Matrix {
  std::vector<uint8_t> data;
  std::vector<float> deq;  // dequantized, row-major
  WeightMatrix w;
};

// Why `t` cannot be tested, or "" if it can.
std::string Unavailable(DType t) {
  const TypeOps* ops = GetTypeOps(t, Isa::kScalar);
  if (ops == nullptr) return "no kernels registered for " + Name(t) + " (yet)";
  if (ops->quantize_row == nullptr) return "no quantizer for " + Name(t);
  const TypeOps* act = GetTypeOps(ops->dot_type, Isa::kScalar);
  if (ops->dot_type != DType::kF32 && (act == nullptr || act->quantize_row == nullptr)) {
    return "no activation quantizer " + Name(ops->dot_type) + " for " + Name(t);
  }
  return "";
}

Matrix MakeMatrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const TypeOps* ops = GetTypeOps(t, Isa::kScalar);
  const std::vector<float> f = Random(rows * cols, seed);
  const size_t rb = static_cast<size_t>(*tensor::RowBytes(t, cols));
  m.data.resize(rb * static_cast<size_t>(rows));
  m.deq.resize(f.size());
  for (int64_t r = 0; r < rows; ++r) {
    ops->quantize_row(f.data() + r * cols, m.data.data() + r * rb, cols);
    ops->dequantize_row(m.data.data() + r * rb, m.deq.data() + r * cols, cols);
  }
  m.w = {t, m.data.data(), rows, cols, rb};
  return m;
}

// |error| of each activation element after the quantization to `dot_type` that MatMul applies
// (zero for F32 dot types), and the f16 block sums of Q8_1 (for the Q4_1/Q5_1 bound).
std::vector<float> ActivationError(DType dot_type, const std::vector<float>& x, int64_t cols) {
  std::vector<float> e(x.size(), 0.f);
  if (dot_type == DType::kF32) return e;
  const TypeOps* act = GetTypeOps(dot_type, Isa::kScalar);
  std::vector<uint8_t> q(static_cast<size_t>(*tensor::RowBytes(dot_type, cols)));
  std::vector<float> back(static_cast<size_t>(cols));
  for (size_t i = 0; i < x.size() / static_cast<size_t>(cols); ++i) {
    act->quantize_row(x.data() + i * cols, q.data(), cols);
    act->dequantize_row(q.data(), back.data(), cols);
    for (int64_t k = 0; k < cols; ++k) {
      e[i * cols + k] = std::fabs(back[k] - x[i * cols + k]);
    }
  }
  return e;
}

// Per-element bound on |MatMul - MatMulReference| for output (i, r):
//   sum_k |w_rk| |e_ik|                 the activation quantization (exact propagation),
//   + 2^-10 sum_b |m_rb| |s_ib|          Q4_1/Q5_1: the min meets the f16 block sum s,
//   + 2e-5 sum_k |w_rk x_ik|             f32 accumulation and the products of f16 scales.
// and in aggregate NMSE(Y) <= 4 NMSE(X after quantization) + 1e-7: with weights independent of
// the activations, an error e in x reaches y as w.e, so E NMSE(y) ~ NMSE(x) (the factor covers
// the sampling spread; checked where Y has at least 64 outputs).
struct Tolerance {
  std::vector<double> bound;  // per output (i, r), row-major m x rows
  double act_nmse = 0;        // NMSE of the activations after their quantization
  bool f32 = false;           // F32 dot type: no activation quantization
};

Tolerance ToleranceFor(const Matrix& mat, const std::vector<float>& x, int64_t m) {
  const WeightMatrix& w = mat.w;
  const TypeOps* ops = GetTypeOps(w.type, Isa::kScalar);
  Tolerance tol;
  tol.f32 = ops->dot_type == DType::kF32;
  const std::vector<float> e = ActivationError(ops->dot_type, x, w.cols);
  std::vector<float> sums;  // activation block sums s when dot_type is Q8_1
  if (ops->dot_type == DType::kQ8_1) {
    std::vector<block_q8_1> q(static_cast<size_t>(w.cols / 32));
    for (int64_t i = 0; i < m; ++i) {
      GetTypeOps(DType::kQ8_1, Isa::kScalar)->quantize_row(x.data() + i * w.cols, q.data(), w.cols);
      for (const auto& b : q) sums.push_back(tensor::Fp16ToFp32(b.s));
    }
  }
  double xerr2 = 0, x2 = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    xerr2 += static_cast<double>(e[k]) * e[k];
    x2 += static_cast<double>(x[k]) * x[k];
  }
  tol.act_nmse = x2 > 0 ? xerr2 / x2 : 0;
  tol.bound.assign(static_cast<size_t>(m * w.rows), 1e-30);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double& bound = tol.bound[i * w.rows + r];
      for (int64_t k = 0; k < w.cols; ++k) {
        const double wk = std::fabs(mat.deq[r * w.cols + k]);
        bound += wk * e[i * w.cols + k] + 2e-5 * wk * std::fabs(x[i * w.cols + k]);
      }
      if (!sums.empty()) {
        for (int64_t b = 0; b < w.cols / 32; ++b) {
          const uint16_t mh = w.type == DType::kQ4_1
                                  ? reinterpret_cast<const block_q4_1*>(w.row(r))[b].m
                                  : reinterpret_cast<const block_q5_1*>(w.row(r))[b].m;
          bound += std::ldexp(1.0, -10) *
                   std::fabs(tensor::Fp16ToFp32(mh) * sums[i * (w.cols / 32) + b]);
        }
      }
    }
  }
  return tol;
}

void ExpectNearReference(const Tolerance& tol, const std::vector<float>& y,
                         const std::vector<float>& ref, const std::string& what) {
  double err2 = 0, ref2 = 0;
  int failures = 0;
  for (size_t j = 0; j < y.size(); ++j) {
    const double got = y[j], want = ref[j];
    err2 += (got - want) * (got - want);
    ref2 += want * want;
    if (!(std::fabs(got - want) <= tol.bound[j]) && ++failures <= 3) {
      ADD_FAILURE() << what << " at output " << j << ": " << got << " vs " << want << ", bound "
                    << tol.bound[j];
    }
  }
  const double nmse = ref2 > 0 ? err2 / ref2 : err2;
  if (tol.f32) {
    EXPECT_LE(nmse, 1e-7) << what;
  } else if (y.size() >= 64) {
    // A handful of outputs is one draw of a heavy-tailed ratio (an output near zero has a
    // huge relative error), so the aggregate is only checked where it is an average.
    EXPECT_LE(nmse, 4 * tol.act_nmse + 1e-7) << what << " activation NMSE " << tol.act_nmse;
  }
}

std::vector<int64_t> ColsFor(DType t) {
  const int64_t block = tensor::Info(t).block_elems;
  if (block == 256) return {256, 768, 1280};
  return {32, 96, 256, 640};
}

TEST(MatMul, MatchesReferenceOnEveryTypeIsaAndShape) {
  int tested_types = 0;
  for (DType t : tensor::kSupportedWeightTypes) {
    const std::string why = Unavailable(t);
    if (!why.empty()) {
      std::printf("[ SKIPPED  ] MatMul on %s: %s\n", Name(t).c_str(), why.c_str());
      continue;
    }
    ++tested_types;
    uint32_t seed = 1;
    for (int64_t cols : ColsFor(t)) {
      for (int64_t rows : {1, 3, 13, 37, 100}) {
        const Matrix mat = MakeMatrix(t, rows, cols, seed++);
        for (int64_t m : {1, 2, 3, 7, 17, 64}) {
          const std::vector<float> x = Random(m * cols, seed++);
          std::vector<float> ref(static_cast<size_t>(m * rows));
          MatMulReference(mat.w, x.data(), m, ref.data(), rows);
          const Tolerance tol = ToleranceFor(mat, x, m);
          for (Isa isa : AvailableIsas()) {
            std::vector<float> y(ref.size(), NAN);
            MatMulIsa(isa, mat.w, x.data(), m, y.data(), rows, nullptr);
            ExpectNearReference(tol, y, ref,
                                Name(t) + " " + std::string(IsaName(isa)) + " m=" +
                                    std::to_string(m) + " rows=" + std::to_string(rows) +
                                    " cols=" + std::to_string(cols));
          }
        }
      }
    }
  }
  EXPECT_GE(tested_types, 9);  // F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL at least
}

TEST(MatMul, OutputStrideLeavesPaddingAlone) {
  const Matrix mat = MakeMatrix(DType::kQ8_0, 13, 96, 5);
  const std::vector<float> x = Random(3 * 96, 6);
  constexpr int64_t kLdy = 20;
  std::vector<float> y(3 * kLdy, -7.f), dense(3 * 13);
  MatMul(mat.w, x.data(), 3, y.data(), kLdy, nullptr);
  MatMul(mat.w, x.data(), 3, dense.data(), 13, nullptr);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t r = 0; r < kLdy; ++r) {
      if (r < 13) {
        EXPECT_EQ(y[i * kLdy + r], dense[i * 13 + r]);
      } else {
        EXPECT_EQ(y[i * kLdy + r], -7.f);
      }
    }
  }
}

TEST(MatMul, ThreadedEqualsSingleThreadedBitForBit) {
  ThreadPool pool2(2), pool3(3);
  for (DType t : tensor::kSupportedWeightTypes) {
    if (!Unavailable(t).empty()) continue;
    const int64_t cols = ColsFor(t).back();
    for (int64_t rows : {1, 37, 301}) {
      const Matrix mat = MakeMatrix(t, rows, cols, static_cast<uint32_t>(rows));
      for (int64_t m : {1, 7, 64}) {
        const std::vector<float> x = Random(m * cols, static_cast<uint32_t>(m + rows));
        for (Isa isa : AvailableIsas()) {
          std::vector<float> y1(static_cast<size_t>(m * rows)), y2(y1.size()), y3(y1.size());
          MatMulIsa(isa, mat.w, x.data(), m, y1.data(), rows, nullptr);
          MatMulIsa(isa, mat.w, x.data(), m, y2.data(), rows, &pool2);
          MatMulIsa(isa, mat.w, x.data(), m, y3.data(), rows, &pool3);
          const std::string what = Name(t) + " " + std::string(IsaName(isa)) +
                                   " rows=" + std::to_string(rows) + " m=" + std::to_string(m);
          EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0) << what;
          EXPECT_EQ(std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)), 0) << what;
        }
      }
    }
  }
}

// A token's row of the result does not depend on how many tokens the matmul has (1, a 2 x 2
// tile, a panel): decoding one token at a time and appending them in one batch give the same
// bits, on every ISA and type (the panels' and tiles' arithmetic equals vec_dot's).
TEST(MatMul, EachTokensRowDoesNotDependOnTheBatch) {
  ThreadPool pool(2);
  for (DType t : tensor::kSupportedWeightTypes) {
    if (!Unavailable(t).empty()) continue;
    const int64_t cols = ColsFor(t).back();
    for (int64_t rows : {37, 301}) {
      const Matrix mat = MakeMatrix(t, rows, cols, static_cast<uint32_t>(rows + 7));
      const int64_t m_max = 19;
      const std::vector<float> x = Random(m_max * cols, static_cast<uint32_t>(rows + 11));
      for (Isa isa : AvailableIsas()) {
        std::vector<float> one(static_cast<size_t>(m_max * rows));
        for (int64_t i = 0; i < m_max; ++i) {
          MatMulIsa(isa, mat.w, x.data() + i * cols, 1, one.data() + i * rows, rows, &pool);
        }
        for (int64_t m : {2, 3, 4, 7, 8, 9, 16, 19}) {
          std::vector<float> y(static_cast<size_t>(m * rows));
          MatMulIsa(isa, mat.w, x.data(), m, y.data(), rows, &pool);
          EXPECT_EQ(std::memcmp(y.data(), one.data(), y.size() * sizeof(float)), 0)
              << Name(t) << " " << IsaName(isa) << " rows=" << rows << " m=" << m;
        }
      }
    }
  }
}

// On x86 every SIMD set computes the 32-element block types (activations Q8_0) and the K-quants
// (activations Q8_K) with the panels' arithmetic (panel.h): vec_dot, and so the tiles and
// four-row forms that must equal it (quant_test, kquants_test), give PanelDotScalar's bits.
// AVX2 and AVX-512 machines thus agree bit for bit on these types, and a set's panels and its
// one-token path cannot drift apart.
TEST(MatMul, X86VecDotIsThePanelArithmetic) {
  int sets = 0;
  for (Isa isa : AvailableIsas()) {
    if (isa != Isa::kAvx2 && isa != Isa::kAvx512) continue;
    ++sets;
    for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kIQ4_NL, DType::kQ4_K,
                    DType::kQ5_K, DType::kQ6_K}) {
      const bool k = t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K;
      const DType at = k ? DType::kQ8_K : DType::kQ8_0;
      const int64_t cols = k ? 1024 : 640;
      const Matrix mat = MakeMatrix(t, 5, cols, 23);
      const std::vector<float> x = Random(cols, 29);
      std::vector<uint8_t> act(static_cast<size_t>(*tensor::RowBytes(at, cols)));
      GetTypeOps(at, Isa::kScalar)->quantize_row(x.data(), act.data(), cols);
      for (int64_t r = 0; r < 5; ++r) {
        float got = 0;
        GetTypeOps(t, isa)->vec_dot(cols, mat.w.row(r), act.data(), &got);
        const float want = internal::PanelDotScalar(t, cols, mat.w.row(r), act.data());
        EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
            << Name(t) << " " << IsaName(isa) << " row " << r << ": " << got << " vs " << want;
      }
    }
  }
  if (sets == 0) GTEST_SKIP() << "no x86 SIMD set on this CPU";
}

// Prepacked panels (PackPanels, WeightMatrix::panels) give the bits of packing per call and of
// one token at a time, for every m >= 2 (also below the set's min_tokens, where only prepacked
// panels are used); a set without panel kernels for the type packs nothing.
TEST(MatMul, PrepackedPanelsGiveTheSameBits) {
  ThreadPool pool(2);
  int packed_types = 0;
  for (DType t : tensor::kSupportedWeightTypes) {
    if (!Unavailable(t).empty()) continue;
    const int64_t cols = ColsFor(t).back();
    for (int64_t rows : {37, 301}) {
      const Matrix mat = MakeMatrix(t, rows, cols, static_cast<uint32_t>(rows + 3));
      const int64_t m_max = 9;
      const std::vector<float> x = Random(m_max * cols, static_cast<uint32_t>(rows + 5));
      for (Isa isa : AvailableIsas()) {
        const KernelSet& ks = GetKernelSet(isa);
        const size_t bytes = PanelBytes(ks, mat.w);
        if (bytes == 0) {
          EXPECT_EQ(PanelSetOf(ks, mat.w), nullptr);
          continue;
        }
        ++packed_types;
        std::vector<uint8_t> storage(bytes + 64, 0xAB);
        uint8_t* out = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
        PackPanels(ks, mat.w, out, &pool);
        WeightMatrix pre = mat.w;
        pre.panels = out;
        pre.panel_set = PanelSetOf(ks, mat.w);
        for (int64_t m : {1, 2, 3, 5, 8, 9}) {
          std::vector<float> y(static_cast<size_t>(m * rows)), want(y.size());
          MatMul(ks, mat.w, x.data(), m, want.data(), rows, &pool);
          MatMul(ks, pre, x.data(), m, y.data(), rows, m % 2 ? &pool : nullptr);
          EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
              << Name(t) << " " << IsaName(isa) << " rows=" << rows << " m=" << m;
        }
        // Panels packed for another set are ignored, not misread.
        for (Isa other : AvailableIsas()) {
          if (other == isa) continue;
          std::vector<float> y(static_cast<size_t>(3 * rows)), want(y.size());
          MatMulIsa(other, mat.w, x.data(), 3, want.data(), rows, nullptr);
          MatMulIsa(other, pre, x.data(), 3, y.data(), rows, nullptr);
          EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
              << Name(t) << " packed for " << IsaName(isa) << ", run on " << IsaName(other);
        }
      }
    }
  }
  if (ActiveIsa() == Isa::kAvx512) {
    EXPECT_GT(packed_types, 0);  // the panel types exist there
  }
}

TEST(MatMul, MatVecRowsEqualsSelectedRowsOfMatMul) {
  ThreadPool pool(2);
  const Isa saved = ActiveIsa();
  for (DType t : tensor::kSupportedWeightTypes) {
    if (!Unavailable(t).empty()) continue;
    const int64_t cols = ColsFor(t)[1];
    const int64_t rows = 257;
    const Matrix mat = MakeMatrix(t, rows, cols, 99);
    const std::vector<float> x = Random(cols, 98);
    // Scattered ids, repeats, and runs of consecutive ids (which take the four-row kernel).
    const std::vector<int32_t> ids = {256, 0, 17, 17, 3, 255, 128, 1, 200, 199, 42,
                                      100, 101, 102, 103, 104, 250, 251, 252, 253, 7};
    for (Isa isa : AvailableIsas()) {
      SetActiveIsa(isa);
      std::vector<float> full(static_cast<size_t>(rows));
      MatMul(mat.w, x.data(), 1, full.data(), rows, nullptr);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y(ids.size(), NAN);
        MatVecRows(mat.w, x.data(), ids, y.data(), p);
        for (size_t j = 0; j < ids.size(); ++j) {
          EXPECT_EQ(y[j], full[static_cast<size_t>(ids[j])])
              << Name(t) << " " << IsaName(isa) << " id " << ids[j];
        }
      }
      std::vector<float> none(1, -1.f);
      MatVecRows(mat.w, x.data(), {}, none.data(), &pool);
      EXPECT_EQ(none[0], -1.f);
    }
  }
  SetActiveIsa(saved);
}

// Activations quantized for one call must not leak into the next (the scratch is reused).
TEST(MatMul, ScratchReuseAcrossShapes) {
  const Matrix big = MakeMatrix(DType::kQ4_0, 8, 640, 1);
  const Matrix small = MakeMatrix(DType::kQ4_0, 8, 64, 2);
  const std::vector<float> xb = Random(64 * 640, 3), xs = Random(2 * 64, 4);
  std::vector<float> yb(64 * 8), ys(2 * 8), ys_fresh(2 * 8), ref(2 * 8);
  MatMul(small.w, xs.data(), 2, ys_fresh.data(), 8, nullptr);
  MatMul(big.w, xb.data(), 64, yb.data(), 8, nullptr);
  MatMul(small.w, xs.data(), 2, ys.data(), 8, nullptr);
  EXPECT_EQ(ys, ys_fresh);
}

TEST(MatMulDeathTest, UnsupportedTypeIsAnInternalError) {
  std::vector<uint8_t> data(1024);
  const WeightMatrix w{DType::kIQ2_XXS, data.data(), 2, 256, 66};
  std::vector<float> x(256), y(2);
  EXPECT_DEATH(MatMul(w, x.data(), 1, y.data(), 2, nullptr), "internal check failed");
}

}  // namespace
}  // namespace fg::kernels
