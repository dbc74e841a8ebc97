// The packed-panel kernels against their scalar twin, bit for bit, on every ISA that has them.
#include "src/kernels/panel.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/kquant_blocks.h"
#include "src/kernels/quant.h"

namespace fg::kernels::internal {
namespace {

using tensor::DType;

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0,  DType::kQ5_0,
                            DType::kIQ4_NL, DType::kQ4_K, DType::kQ6_K};

DType ActType(DType t) { return GetTypeOps(t, Isa::kScalar)->dot_type; }

std::vector<int64_t> ColsFor(DType t) {
  if (tensor::Info(t).block_elems == 256) return {256, 768, 2048};
  return {32, 96, 640};
}

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g(rng);
  for (size_t i = 0; i < v.size(); i += 13) v[i] *= 7.f;  // outliers: full-range quants
  return v;
}

std::vector<uint8_t> Quantize(DType t, const std::vector<float>& f, int64_t rows, int64_t cols) {
  const TypeOps* ops = GetTypeOps(t, Isa::kScalar);
  const size_t rb = static_cast<size_t>(*tensor::RowBytes(t, cols));
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ops->quantize_row(f.data() + r * cols, out.data() + r * rb, cols);
  return out;
}

TEST(Panel, RunEqualsScalarTwinBitForBit) {
  int kernels = 0;
  std::mt19937 rng(7);
  for (Isa isa : AvailableIsas()) {
    for (DType t : kTypes) {
      const PanelKernels* k = GetKernelSet(isa).types[static_cast<int>(t)].panel;
      if (k == nullptr) continue;
      ++kernels;
      for (int64_t cols : ColsFor(t)) {
        const size_t rb = static_cast<size_t>(*tensor::RowBytes(t, cols));
        const size_t ab = static_cast<size_t>(*tensor::RowBytes(ActType(t), cols));
        for (int rows : {1, 5, 16}) {
          std::vector<uint8_t> w = Quantize(t, Random(rows * cols, rng), rows, cols);
          if (t == DType::kQ8_0) {  // the extremes of the int8 range, -128 included
            auto* b = reinterpret_cast<block_q8_0*>(w.data());
            b[0].qs[0] = -128;
            b[0].qs[1] = 127;
            b[0].qs[31] = -128;
          }
          for (int64_t m : {1, 3, 4, 9, 15}) {
            const std::vector<uint8_t> a = Quantize(ActType(t), Random(m * cols, rng), m, cols);
            std::vector<PanelActSide> side(static_cast<size_t>(m * cols / kQK));
            for (int64_t i = 0; k->side && i < m; ++i) {
              PanelSide(cols, a.data() + i * ab, k->offset, side.data() + i * (cols / kQK));
            }
            std::vector<uint8_t> packed(k->packed_bytes(cols) + 64);
            void* buf = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
            k->pack(cols, w.data(), rb, rows, buf);
            constexpr int64_t kLdy = 19;  // > kPanelRows: the lanes past `rows` must stay
            std::vector<float> y(static_cast<size_t>(m * kLdy), -3.f);
            k->run(cols, buf, a.data(), ab, side.data(), m, y.data(), kLdy, rows);
            const std::string what = std::string(tensor::DTypeName(t)) + " " +
                                     std::string(IsaName(isa)) + " cols=" + std::to_string(cols) +
                                     " rows=" + std::to_string(rows) + " m=" + std::to_string(m);
            for (int64_t i = 0; i < m; ++i) {
              for (int r = 0; r < kLdy; ++r) {
                const float got = y[static_cast<size_t>(i * kLdy + r)];
                if (r >= rows) {
                  ASSERT_EQ(got, -3.f) << what << " wrote past the panel's rows at " << r;
                  continue;
                }
                const float want = PanelDotScalar(t, cols, w.data() + r * rb, a.data() + i * ab);
                uint32_t gb, wb;
                std::memcpy(&gb, &got, 4);
                std::memcpy(&wb, &want, 4);
                ASSERT_EQ(gb, wb) << what << " token " << i << " row " << r << ": " << got
                                  << " vs " << want;
              }
            }
          }
        }
      }
    }
  }
  // Random weight bytes reach every code (all 6-bit scales and mins, negative Q6_K scales).
  for (Isa isa : AvailableIsas()) {
    for (DType t : {DType::kQ4_K, DType::kQ6_K}) {
      const PanelKernels* k = GetKernelSet(isa).types[static_cast<int>(t)].panel;
      if (k == nullptr) continue;
      const int64_t cols = 512;
      const int rows = 16;
      const size_t rb = static_cast<size_t>(*tensor::RowBytes(t, cols));
      const size_t ab = static_cast<size_t>(*tensor::RowBytes(ActType(t), cols));
      std::vector<uint8_t> w(rb * rows);
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      // Finite f16 scales below 2: clear bits 6 and 2 of each scale's high byte.
      const size_t block = t == DType::kQ4_K ? sizeof(BlockQ4K) : sizeof(BlockQ6K);
      for (size_t b = 0; b < w.size(); b += block) {
        if (t == DType::kQ4_K) {
          w[b + 1] &= 0x3b;  // d
          w[b + 3] &= 0x3b;  // dmin
        } else {
          w[b + block - 1] &= 0x3b;  // d, the last two bytes
        }
      }
      const int64_t m = 5;
      const std::vector<uint8_t> a = Quantize(ActType(t), Random(m * cols, rng), m, cols);
      std::vector<uint8_t> packed(k->packed_bytes(cols) + 64);
      void* buf = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
      k->pack(cols, w.data(), rb, rows, buf);
      std::vector<float> y(static_cast<size_t>(m * rows));
      k->run(cols, buf, a.data(), ab, nullptr, m, y.data(), rows, rows);
      for (int64_t i = 0; i < m; ++i) {
        for (int r = 0; r < rows; ++r) {
          const float want = PanelDotScalar(t, cols, w.data() + r * rb, a.data() + i * ab);
          const float got = y[static_cast<size_t>(i * rows + r)];
          ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
              << tensor::DTypeName(t) << " random bytes token " << i << " row " << r << ": "
              << got << " vs " << want;
        }
      }
    }
  }
  if (kernels == 0) GTEST_SKIP() << "no ISA of this CPU (or FGEMMA_ISA) has panel kernels";
}

// Every weight at its largest magnitude (-128, -8, -16, -127) against every activation at
// +-127: the worst case for the integer sums (the AVX2 panels add a Q4_0 / Q5_0 block's
// products in 16-bit lanes, 16 products a lane: 32,512 for Q5_0), which must still give the
// twin's bits and the exact sum.
TEST(Panel, WeightsAtTheirExtremes) {
  int kernels = 0;
  const int64_t cols = 640, nb = cols / kQK;
  for (Isa isa : AvailableIsas()) {
    for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kIQ4_NL}) {
      const PanelKernels* k = GetKernelSet(isa).types[static_cast<int>(t)].panel;
      if (k == nullptr) continue;
      ++kernels;
      const int rows = kPanelRows;
      const size_t rb = static_cast<size_t>(*tensor::RowBytes(t, cols));
      // Quants 0 (Q8_0: -128): the smallest weight of each type.
      std::vector<uint8_t> w(rb * rows, t == DType::kQ8_0 ? 0x80 : 0);
      const size_t block = rb / static_cast<size_t>(nb);
      for (size_t b = 0; b < w.size(); b += block) {
        const uint16_t one = 0x3c00;  // f16 1.0, the block's scale d (its first field)
        std::memcpy(w.data() + b, &one, sizeof one);
      }
      const float wmin = t == DType::kQ8_0   ? -128.f
                         : t == DType::kQ4_0 ? -8.f
                         : t == DType::kQ5_0 ? -16.f
                                             : static_cast<float>(kIq4nlValues[0]);
      for (int sign : {1, -1}) {
        std::vector<block_q8_0> a(static_cast<size_t>(2 * nb));  // two tokens
        for (auto& blk : a) {
          blk.d = 0x3c00;
          for (auto& q : blk.qs) q = static_cast<int8_t>(127 * sign);
        }
        std::vector<PanelActSide> side(static_cast<size_t>(2 * nb));
        const size_t ab = static_cast<size_t>(nb) * sizeof(block_q8_0);
        for (int i = 0; k->side && i < 2; ++i) {
          PanelSide(cols, reinterpret_cast<const uint8_t*>(a.data()) + i * ab, k->offset,
                    side.data() + i * nb);
        }
        std::vector<uint8_t> packed(k->packed_bytes(cols) + 64);
        void* buf = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
        k->pack(cols, w.data(), rb, rows, buf);
        std::vector<float> y(static_cast<size_t>(2 * rows));
        k->run(cols, buf, reinterpret_cast<const uint8_t*>(a.data()), ab, side.data(), 2, y.data(),
               rows, rows);
        const float exact = wmin * 127.f * static_cast<float>(sign * cols);
        for (int i = 0; i < 2 * rows; ++i) {
          const float want =
              PanelDotScalar(t, cols, w.data() + (i % rows) * rb,
                             reinterpret_cast<const uint8_t*>(a.data()) + (i / rows) * ab);
          EXPECT_EQ(want, exact);
          EXPECT_EQ(std::memcmp(&y[static_cast<size_t>(i)], &want, 4), 0)
              << tensor::DTypeName(t) << " " << IsaName(isa) << " sign " << sign << " output " << i
              << ": " << y[static_cast<size_t>(i)] << " vs " << want;
        }
      }
    }
  }
  if (kernels == 0) GTEST_SKIP() << "no ISA of this CPU (or FGEMMA_ISA) has these panels";
}

// The K-quant panels with every weight, scale and min at its extreme against activations of
// +-127 and -128 (the int16 sums of the AVX2 panels' worst case: Q4_K 8 dwords of 15 x 128
// pairs, Q6_K 2 dwords of 63 x 128 pairs), each output the twin's bits, which are the exact sum
// in f32 (past 2^24, to its rounding).
TEST(Panel, KQuantWeightsAtTheirExtremes) {
  int kernels = 0;
  const int64_t cols = 512, nb = cols / kQK_K;
  for (Isa isa : AvailableIsas()) {
    for (DType t : {DType::kQ4_K, DType::kQ6_K}) {
      const PanelKernels* k = GetKernelSet(isa).types[static_cast<int>(t)].panel;
      if (k == nullptr) continue;
      ++kernels;
      for (int8_t scale : {int8_t{127}, int8_t{-128}}) {
        const int rows = kPanelRows;
        const size_t rb = static_cast<size_t>(*tensor::RowBytes(t, cols));
        std::vector<uint8_t> w(rb * rows, 0xff);  // q 15 (Q4_K) / 63 (Q6_K); Q4_K scales, mins 63
        // A weight's value and a Q4_K min (d = dmin = 1).
        const double wq = t == DType::kQ4_K ? 63 * 15 : scale * 31.0;
        const double wmin = t == DType::kQ4_K ? 63 : 0;
        for (int64_t b = 0; b < rows * nb; ++b) {
          const uint16_t one = 0x3c00;
          if (t == DType::kQ4_K) {
            auto* blk = reinterpret_cast<BlockQ4K*>(w.data()) + b;
            std::memcpy(&blk->d, &one, 2);
            std::memcpy(&blk->dmin, &one, 2);
          } else {
            auto* blk = reinterpret_cast<BlockQ6K*>(w.data()) + b;
            std::memcpy(&blk->d, &one, 2);
            for (auto& s : blk->scales) s = scale;
          }
        }
        for (int a_q : {127, -127, -128}) {
          std::vector<BlockQ8K> a(static_cast<size_t>(2 * nb));  // two tokens
          for (auto& blk : a) {
            blk.d = 1.0f;
            for (auto& q : blk.qs) q = static_cast<int8_t>(a_q);
            for (auto& s : blk.bsums) s = static_cast<int16_t>(16 * a_q);
          }
          std::vector<uint8_t> packed(k->packed_bytes(cols) + 64);
          void* buf = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
          k->pack(cols, w.data(), rb, rows, buf);
          std::vector<float> y(static_cast<size_t>(2 * rows));
          const size_t ab = static_cast<size_t>(nb) * sizeof(BlockQ8K);
          k->run(cols, buf, reinterpret_cast<const uint8_t*>(a.data()), ab, nullptr, 2, y.data(),
                 rows, rows);
          const double exact = (wq - wmin) * a_q * static_cast<double>(cols);
          for (int i = 0; i < 2 * rows; ++i) {
            const float want =
                PanelDotScalar(t, cols, w.data() + (i % rows) * rb,
                               reinterpret_cast<const uint8_t*>(a.data()) + (i / rows) * ab);
            EXPECT_NEAR(want, exact, 1e-6 * std::fabs(exact))
                << tensor::DTypeName(t) << " a " << a_q;
            EXPECT_EQ(std::memcmp(&y[static_cast<size_t>(i)], &want, 4), 0)
                << tensor::DTypeName(t) << " " << IsaName(isa) << " scale " << int{scale} << " a "
                << a_q << " output " << i << ": " << y[static_cast<size_t>(i)] << " vs " << want;
          }
        }
        if (t == DType::kQ4_K) break;  // one scale byte pattern (0xff)
      }
    }
  }
  if (kernels == 0) GTEST_SKIP() << "no ISA of this CPU (or FGEMMA_ISA) has these panels";
}

// The twin itself against the dequantized weights and activations in double (and Q5_K, which
// has no panels, but whose x86 vec_dot is checked against the twin: matmul_test).
TEST(Panel, ScalarTwinMatchesDequantizedDot) {
  std::mt19937 rng(3);
  std::vector<DType> types(std::begin(kTypes), std::end(kTypes));
  types.push_back(DType::kQ5_K);
  for (DType t : types) {
    const int64_t cols = ColsFor(t).back();
    const std::vector<uint8_t> w = Quantize(t, Random(cols, rng), 1, cols);
    const std::vector<uint8_t> a = Quantize(ActType(t), Random(cols, rng), 1, cols);
    std::vector<float> wf(cols), af(cols);
    GetTypeOps(t, Isa::kScalar)->dequantize_row(w.data(), wf.data(), cols);
    GetTypeOps(ActType(t), Isa::kScalar)->dequantize_row(a.data(), af.data(), cols);
    double want = 0, mag = 0;
    for (int64_t k = 0; k < cols; ++k) {
      want += static_cast<double>(wf[k]) * af[k];
      mag += std::fabs(static_cast<double>(wf[k]) * af[k]);
    }
    const float got = PanelDotScalar(t, cols, w.data(), a.data());
    EXPECT_NEAR(got, want, 1e-5 * mag) << tensor::DTypeName(t);
  }
}

}  // namespace
}  // namespace fg::kernels::internal
