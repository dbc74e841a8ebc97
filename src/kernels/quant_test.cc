// Tests of the 32-element block formats and their kernels (quant_basic*.cc): byte layouts
// against hand-computed values, quantize -> dequantize error bounds derived from each
// quantizer, SIMD twins against the scalar kernels, and the Status errors of the checked API.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/kernels/blocks.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/quant.h"
#include "src/tensor/half.h"

namespace fg::kernels {
namespace {

using tensor::DType;
using tensor::Fp16ToFp32;
using tensor::Fp32ToFp16;

constexpr DType kBasicTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                 DType::kQ8_1, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                 DType::kQ5_1, DType::kIQ4_NL};

std::string Name(DType t) { return std::string(tensor::DTypeName(t)); }

size_t Bytes(DType t, int64_t n) { return static_cast<size_t>(*tensor::RowBytes(t, n)); }

// Gaussian values with a few large outliers, like activations and weights.
std::vector<float> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g(rng);
  for (int64_t i = 0; i < n; i += 37) v[static_cast<size_t>(i)] *= 6.f;
  return v;
}

std::vector<float> Dequant(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  EXPECT_THAT(DequantizeRow(t, q.data(), out.data(), n), testing::IsOk());
  return out;
}

// ------------------------------------------------------------------ layouts

TEST(QuantLayout, Q4_0) {
  block_q4_0 b;
  b.d = Fp32ToFp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float y[32];
  ASSERT_THAT(DequantizeRow(DType::kQ4_0, &b, y, 32), testing::IsOk());
  EXPECT_EQ(y[0], -4.0f);   // low nibble 0: 0.5 * (0 - 8)
  EXPECT_EQ(y[9], 0.5f);    // low nibble 9
  EXPECT_EQ(y[15], 3.5f);   // low nibble 15
  EXPECT_EQ(y[16], 3.5f);   // high nibble of byte 0 is 15
  EXPECT_EQ(y[31], -4.0f);  // high nibble of byte 15 is 0
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j));
  }
}

TEST(QuantLayout, Q4_1) {
  block_q4_1 b;
  b.d = Fp32ToFp16(0.5f);
  b.m = Fp32ToFp16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float y[32];
  ASSERT_THAT(DequantizeRow(DType::kQ4_1, &b, y, 32), testing::IsOk());
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[15], 6.5f);
  EXPECT_EQ(y[16], 6.5f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 1.f);
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j) - 1.f);
  }
}

TEST(QuantLayout, Q5_0) {
  block_q5_0 b;
  b.d = Fp32ToFp16(1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  // qh = 0x80010001: the 5th bit of elements 0, 16 and 31, stored little-endian.
  b.qh[0] = 0x01;
  b.qh[1] = 0x00;
  b.qh[2] = 0x01;
  b.qh[3] = 0x80;
  float y[32];
  ASSERT_THAT(DequantizeRow(DType::kQ5_0, &b, y, 32), testing::IsOk());
  EXPECT_EQ(y[0], 0.f);     // (0 | 16) - 16
  EXPECT_EQ(y[1], -15.f);   // 1 - 16
  EXPECT_EQ(y[15], -1.f);   // 15 - 16
  EXPECT_EQ(y[16], 15.f);   // (15 | 16) - 16
  EXPECT_EQ(y[17], -2.f);   // 14 - 16
  EXPECT_EQ(y[31], 0.f);    // (0 | 16) - 16
  EXPECT_EQ(y[30], -15.f);  // 1 - 16
}

TEST(QuantLayout, Q5_1) {
  block_q5_1 b;
  b.d = Fp32ToFp16(1.0f);
  b.m = Fp32ToFp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  b.qh[0] = 0x02;  // element 1
  b.qh[1] = 0x80;  // element 15
  b.qh[2] = 0x00;
  b.qh[3] = 0x40;  // element 30
  float y[32];
  ASSERT_THAT(DequantizeRow(DType::kQ5_1, &b, y, 32), testing::IsOk());
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[1], 17.5f);   // (1 | 16) + 0.5
  EXPECT_EQ(y[15], 31.5f);  // (15 | 16) + 0.5
  EXPECT_EQ(y[16], 15.5f);
  EXPECT_EQ(y[30], 17.5f);  // high nibble of byte 14 is 1, | 16
  EXPECT_EQ(y[31], 0.5f);
}

TEST(QuantLayout, Q8_0AndQ8_1) {
  block_q8_0 a;
  block_q8_1 b;
  a.d = b.d = Fp32ToFp16(0.25f);
  b.s = Fp32ToFp16(123.f);  // not part of the values
  for (int j = 0; j < 32; ++j) a.qs[j] = b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  float ya[32], yb[32];
  ASSERT_THAT(DequantizeRow(DType::kQ8_0, &a, ya, 32), testing::IsOk());
  ASSERT_THAT(DequantizeRow(DType::kQ8_1, &b, yb, 32), testing::IsOk());
  EXPECT_EQ(ya[0], -32.f);
  EXPECT_EQ(ya[31], 30.f);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(ya[j], 0.25f * (j * 8 - 128));
    EXPECT_EQ(yb[j], ya[j]);
  }
  // Byte offsets of the serialized blocks: the scale first, the quants after.
  EXPECT_EQ(offsetof(block_q8_0, qs), 2u);
  EXPECT_EQ(offsetof(block_q8_1, qs), 4u);
  EXPECT_EQ(offsetof(block_q5_0, qs), 6u);
  EXPECT_EQ(offsetof(block_q5_1, qh), 4u);
  EXPECT_EQ(offsetof(block_q5_1, qs), 8u);
}

TEST(QuantLayout, Iq4nl) {
  block_iq4_nl b;
  b.d = Fp32ToFp16(2.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float y[32];
  ASSERT_THAT(DequantizeRow(DType::kIQ4_NL, &b, y, 32), testing::IsOk());
  EXPECT_EQ(y[0], -254.f);
  EXPECT_EQ(y[7], -20.f);
  EXPECT_EQ(y[8], 2.f);
  EXPECT_EQ(y[15], 226.f);
  EXPECT_EQ(y[16], 226.f);
  EXPECT_EQ(y[31], -254.f);
}

TEST(QuantLayout, PlainTypes) {
  const uint16_t h[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};  // 1, -2, 65504, 2^-24
  float y[4];
  ASSERT_THAT(DequantizeRow(DType::kF16, h, y, 4), testing::IsOk());
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -2.f);
  EXPECT_EQ(y[2], 65504.f);
  EXPECT_EQ(y[3], std::ldexp(1.f, -24));
  const uint16_t b[3] = {0x3f80, 0xc040, 0x4049};  // 1, -3, 3.140625
  ASSERT_THAT(DequantizeRow(DType::kBF16, b, y, 3), testing::IsOk());
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -3.f);
  EXPECT_EQ(y[2], 3.140625f);
  const float f[2] = {1.5f, -0.25f};
  ASSERT_THAT(DequantizeRow(DType::kF32, f, y, 2), testing::IsOk());
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -0.25f);
}

// Against gguf-py (gguf.quants: an independent numpy implementation of ggml's formats), on
// data written by testdata/make_quant_golden.py: our quantizer must produce the same bytes and
// our dequantizer the same floats.
TEST(QuantLayout, MatchesGgufPyGolden) {
  const std::string path = std::string(FG_SOURCE_DIR) + "/src/kernels/testdata/quant_golden.bin";
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  const std::vector<char> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  auto take = [&](size_t n) {
    EXPECT_LE(pos + n, all.size());
    const char* p = all.data() + pos;
    pos += n;
    return p;
  };
  int records = 0;
  while (pos < all.size()) {
    uint32_t head[3];
    std::memcpy(head, take(12), 12);
    const auto t = static_cast<DType>(head[1]);
    const int64_t n = head[2];
    SCOPED_TRACE(Name(t));
    ASSERT_NE(GetTypeOps(t), nullptr);
    std::vector<float> x(n), want_y(n);
    if (head[0] == 0) std::memcpy(x.data(), take(n * 4), n * 4);
    std::vector<uint8_t> want_q(Bytes(t, n));
    std::memcpy(want_q.data(), take(want_q.size()), want_q.size());
    std::memcpy(want_y.data(), take(n * 4), n * 4);
    if (head[0] == 0) {
      std::vector<uint8_t> q(want_q.size());
      ASSERT_THAT(QuantizeRow(t, x.data(), q.data(), n), testing::IsOk());
      EXPECT_EQ(q, want_q);
    }
    EXPECT_EQ(Dequant(t, want_q, n), want_y);
    ++records;
  }
  EXPECT_EQ(records, 6);
}

// ------------------------------------------------------------------ round trip

// Largest error a quantizer may make on one element of a block with absolute maximum `amax`
// and range [mn, mx]; derived from the quantizer (see quant_basic.cc) plus the f16 rounding
// of the stored scale/min (relative 2^-11 each, times at most the largest quant).
double MaxElementError(DType t, double amax, double mn, double mx) {
  const double u = std::ldexp(1.0, -11);  // f16 unit roundoff
  const double range = mx - mn;
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return amax * u;  // normal range only (the data stays well inside it)
    case DType::kBF16: return amax * std::ldexp(1.0, -8);
    case DType::kQ8_0:
    case DType::kQ8_1: return amax / 127 * 0.5 + amax * u * 1.01;
    // d = max / -8: step amax/8; -max lands on q = 16, clamped to 15: error one full step.
    case DType::kQ4_0: return amax / 8 + amax * u * 1.01;
    case DType::kQ5_0: return amax / 16 + amax * u * 1.01;
    // step range/15 (31), round to nearest; min and d*q each carry f16 rounding.
    case DType::kQ4_1: return range / 30 + (std::fabs(mn) + range) * u * 1.01;
    case DType::kQ5_1: return range / 62 + (std::fabs(mn) + range) * u * 1.01;
    // The codebook's largest gap is 24 (89..113) on a scale d <= amax/89 that the search may
    // pick; any scale that leaves amax outside [-127d, 113d] errs by more than that and loses
    // the search to the starting point d = amax/127 (checked statistically below too).
    case DType::kIQ4_NL: return amax * 12.0 / 89 + amax * u * 2;
    default: return -1;
  }
}

TEST(QuantRoundTrip, ErrorWithinBlockBound) {
  constexpr int64_t kN = 4096;
  const std::vector<float> x = RandomRow(kN, 7);
  for (Isa isa : AvailableIsas()) {
    for (DType t : kBasicTypes) {
      SCOPED_TRACE(Name(t) + " on " + std::string(IsaName(isa)));
      const TypeOps* ops = GetTypeOps(t, isa);
      ASSERT_NE(ops, nullptr);
      std::vector<uint8_t> q(Bytes(t, kN));
      ops->quantize_row(x.data(), q.data(), kN);
      std::vector<float> y(kN);
      ops->dequantize_row(q.data(), y.data(), kN);
      // Per element: the quantizer's worst case within each block. In aggregate: uniform
      // rounding noise of step s has RMS s / sqrt(12); allow 25% over that model (4096
      // samples make it tight). Steps: Q8 amax/127, Q4_0 amax/8, Q5_0 amax/16, Q4_1 range/15,
      // Q5_1 range/31, IQ4_NL ~16 codebook units of amax/127 (its typical gap).
      const int64_t block = 32;
      double err2 = 0, step2 = 0;
      for (int64_t b = 0; b < kN / block; ++b) {
        double amax = 0, mn = x[b * block], mx = mn;
        for (int64_t j = b * block; j < (b + 1) * block; ++j) {
          amax = std::max(amax, std::fabs(static_cast<double>(x[j])));
          mn = std::min(mn, static_cast<double>(x[j]));
          mx = std::max(mx, static_cast<double>(x[j]));
        }
        const double bound = MaxElementError(t, amax, mn, mx);
        ASSERT_GE(bound, 0);
        for (int64_t j = b * block; j < (b + 1) * block; ++j) {
          const double e = std::fabs(static_cast<double>(y[j]) - x[j]);
          ASSERT_LE(e, bound) << "element " << j;
          err2 += e * e;
        }
        double step = 0;
        switch (t) {
          case DType::kQ8_0: case DType::kQ8_1: step = amax / 127; break;
          case DType::kQ4_0: step = amax / 8; break;
          case DType::kQ5_0: step = amax / 16; break;
          case DType::kQ4_1: step = (mx - mn) / 15; break;
          case DType::kQ5_1: step = (mx - mn) / 31; break;
          case DType::kIQ4_NL: step = amax * 16 / 127; break;
          default: break;
        }
        step2 += step * step * block;
      }
      if (step2 > 0) {
        const double rel_rms = std::sqrt(err2 / step2);
        EXPECT_LE(rel_rms, 1.25 / std::sqrt(12.0)) << rel_rms;
        EXPECT_GE(rel_rms, 0.5 / std::sqrt(12.0)) << rel_rms;  // it really quantized
      }
      if (t == DType::kF32) {
        EXPECT_EQ(err2, 0);
      }
    }
  }
}

TEST(QuantRoundTrip, ZeroBlocksStayZero) {
  std::vector<float> x(64, 0.f);
  for (DType t : kBasicTypes) {
    SCOPED_TRACE(Name(t));
    std::vector<uint8_t> q(Bytes(t, 64));
    ASSERT_THAT(QuantizeRow(t, x.data(), q.data(), 64), testing::IsOk());
    const std::vector<float> y = Dequant(t, q, 64);
    for (float v : y) EXPECT_EQ(v, 0.f);
  }
}

TEST(QuantRoundTrip, Q8_1CarriesScaledSum) {
  const std::vector<float> x = RandomRow(256, 3);
  std::vector<uint8_t> q(Bytes(DType::kQ8_1, 256));
  ASSERT_THAT(QuantizeRow(DType::kQ8_1, x.data(), q.data(), 256), testing::IsOk());
  const auto* b = reinterpret_cast<const block_q8_1*>(q.data());
  for (int i = 0; i < 8; ++i) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += b[i].qs[j];
    const double want = sum * Fp16ToFp32(b[i].d);
    EXPECT_NEAR(Fp16ToFp32(b[i].s), want, std::fabs(want) * 1e-3 + 1e-6) << i;
  }
}

// The SIMD activation quantizers round exactly like the scalar twin.
TEST(QuantSimd, ActivationQuantizersMatchScalarBitForBit) {
  constexpr int64_t kN = 2048;
  std::vector<float> x = RandomRow(kN, 11);
  x[5] = 0.5f * Fp16ToFp32(Fp32ToFp16(1.f));  // some exact ties after scaling are likely too
  for (DType t : {DType::kQ8_0, DType::kQ8_1}) {
    std::vector<uint8_t> want(Bytes(t, kN));
    GetTypeOps(t, Isa::kScalar)->quantize_row(x.data(), want.data(), kN);
    for (Isa isa : AvailableIsas()) {
      std::vector<uint8_t> got(want.size());
      GetTypeOps(t, isa)->quantize_row(x.data(), got.data(), kN);
      EXPECT_EQ(got, want) << Name(t) << " on " << IsaName(isa);
    }
  }
}

// ------------------------------------------------------------------ vec_dot

// Weight row `w` (quantized from random data) and activation row (in dot_type) for `t`.
struct DotInputs {
  std::vector<uint8_t> w, a;
  std::vector<float> wf, af;  // their dequantized values
};

DotInputs MakeDotInputs(DType t, int64_t n, uint32_t seed) {
  const TypeOps* ops = GetTypeOps(t, Isa::kScalar);
  DotInputs in;
  const std::vector<float> w = RandomRow(n, seed), a = RandomRow(n, seed + 1000);
  in.w.resize(Bytes(t, n));
  ops->quantize_row(w.data(), in.w.data(), n);
  in.a.resize(Bytes(ops->dot_type, n));
  GetTypeOps(ops->dot_type, Isa::kScalar)->quantize_row(a.data(), in.a.data(), n);
  in.wf.resize(n);
  in.af.resize(n);
  ops->dequantize_row(in.w.data(), in.wf.data(), n);
  GetTypeOps(ops->dot_type, Isa::kScalar)->dequantize_row(in.a.data(), in.af.data(), n);
  return in;
}

TEST(QuantDot, ScalarMatchesDequantizedDot) {
  for (DType t : kBasicTypes) {
    for (int64_t n : {32, 64, 96, 256, 640, 2048}) {
      SCOPED_TRACE(Name(t) + " n=" + std::to_string(n));
      const DotInputs in = MakeDotInputs(t, n, static_cast<uint32_t>(n));
      double want = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += static_cast<double>(in.wf[i]) * in.af[i];
        mag += std::fabs(static_cast<double>(in.wf[i]) * in.af[i]);
      }
      float got;
      GetTypeOps(t, Isa::kScalar)->vec_dot(n, in.w.data(), in.a.data(), &got);
      // f32 accumulation: a few ulps of the magnitude. Q4_1/Q5_1 fold the minimum through the
      // activation's f16 block sum s, which carries relative error 2^-11 of |s| per block.
      double tol = 1e-5 * mag;
      if (t == DType::kQ4_1 || t == DType::kQ5_1) {
        const auto* y = reinterpret_cast<const block_q8_1*>(in.a.data());
        for (int64_t b = 0; b < n / 32; ++b) {
          const uint16_t m = t == DType::kQ4_1
                                 ? reinterpret_cast<const block_q4_1*>(in.w.data())[b].m
                                 : reinterpret_cast<const block_q5_1*>(in.w.data())[b].m;
          tol += std::fabs(Fp16ToFp32(m) * Fp16ToFp32(y[b].s)) * std::ldexp(1.0, -10);
        }
      }
      EXPECT_NEAR(got, want, tol);
    }
  }
}

TEST(QuantDot, SimdMatchesScalar) {
  for (DType t : kBasicTypes) {
    std::vector<int64_t> sizes = {32, 64, 96, 160, 256, 640, 2048};
    if (tensor::Info(t).block_elems == 1) sizes.insert(sizes.end(), {1, 7, 15, 17, 33, 100, 1000});
    for (int64_t n : sizes) {
      const DotInputs in = MakeDotInputs(t, n, static_cast<uint32_t>(n * 3 + 1));
      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(in.wf[i]) * in.af[i]);
      float want;
      GetTypeOps(t, Isa::kScalar)->vec_dot(n, in.w.data(), in.a.data(), &want);
      for (Isa isa : AvailableIsas()) {
        float got;
        GetTypeOps(t, isa)->vec_dot(n, in.w.data(), in.a.data(), &got);
        // Only the order of the f32 summation differs (integer block sums are exact).
        EXPECT_LE(std::fabs(static_cast<double>(got) - want), 1e-5 * mag)
            << Name(t) << " n=" << n << " on " << IsaName(isa) << ": " << got << " vs " << want;
      }
    }
  }
}

// The 2 x 2 tile kernels return exactly what vec_dot returns (MatMul relies on it for
// thread-count-independent results).
TEST(QuantDot, TileEqualsVecDotBitForBit) {
  int tiles = 0;
  for (Isa isa : AvailableIsas()) {
    for (DType t : kBasicTypes) {
      const DotTileFn tile = GetKernelSet(isa).types[static_cast<int>(t)].tile;
      if (tile == nullptr) continue;
      ++tiles;
      const TypeOps* ops = GetTypeOps(t, isa);
      for (int64_t n : {32, 64, 96, 128, 160, 640}) {
        const DotInputs p = MakeDotInputs(t, n, 5), q = MakeDotInputs(t, n, 6);
        float out[4], want[4];
        tile(n, p.w.data(), q.w.data(), p.a.data(), q.a.data(), out);
        ops->vec_dot(n, p.w.data(), p.a.data(), &want[0]);
        ops->vec_dot(n, q.w.data(), p.a.data(), &want[1]);
        ops->vec_dot(n, p.w.data(), q.a.data(), &want[2]);
        ops->vec_dot(n, q.w.data(), q.a.data(), &want[3]);
        for (int k = 0; k < 4; ++k) {
          EXPECT_EQ(std::memcmp(&out[k], &want[k], sizeof(float)), 0)
              << Name(t) << " " << IsaName(isa) << " n=" << n << " k=" << k << ": " << out[k]
              << " vs " << want[k];
        }
      }
    }
  }
  // Every block type on AVX2 and AVX-512.
  int simd = 0;
  for (Isa isa : AvailableIsas()) simd += isa == Isa::kAvx2 || isa == Isa::kAvx512;
  EXPECT_EQ(tiles, 7 * simd);
}

// The four-row decode kernels return exactly what vec_dot returns.
TEST(QuantDot, RowsEqualVecDotBitForBit) {
  int kernels = 0;
  for (Isa isa : AvailableIsas()) {
    for (DType t : kBasicTypes) {
      const DotRowsFn rows = GetKernelSet(isa).types[static_cast<int>(t)].rows;
      if (rows == nullptr) continue;
      ++kernels;
      const TypeOps* ops = GetTypeOps(t, isa);
      for (int64_t n : {32, 96, 128, 160, 640}) {
        DotInputs in[kDotRows];
        const void* ws[kDotRows];
        for (int k = 0; k < kDotRows; ++k) {
          in[k] = MakeDotInputs(t, n, static_cast<uint32_t>(10 + k));
          ws[k] = in[k].w.data();
        }
        float out[kDotRows];
        rows(n, ws, in[0].a.data(), out);
        for (int k = 0; k < kDotRows; ++k) {
          float want;
          ops->vec_dot(n, ws[k], in[0].a.data(), &want);
          EXPECT_EQ(std::memcmp(&out[k], &want, sizeof(float)), 0)
              << Name(t) << " " << IsaName(isa) << " n=" << n << " row " << k;
        }
      }
    }
  }
  int simd = 0;
  for (Isa isa : AvailableIsas()) simd += isa == Isa::kAvx2 || isa == Isa::kAvx512;
  EXPECT_EQ(kernels, 7 * simd);  // every block type on AVX2 and AVX-512
}

// Extreme quants: -128 weights (possible in a file, never from the quantizer) and +-127
// activations everywhere, where a saturating 16-bit pair sum would show.
TEST(QuantDot, SimdExtremeQuants) {
  constexpr int64_t kN = 256;
  std::vector<block_q8_0> w(kN / 32), a(kN / 32);
  for (int b = 0; b < kN / 32; ++b) {
    w[b].d = a[b].d = Fp32ToFp16(1.f);
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = static_cast<int8_t>(j % 2 ? -128 : 127);
      a[b].qs[j] = static_cast<int8_t>(j % 3 ? -127 : 127);
    }
  }
  float want;
  GetTypeOps(DType::kQ8_0, Isa::kScalar)->vec_dot(kN, w.data(), a.data(), &want);
  double exact = 0;
  for (int b = 0; b < kN / 32; ++b) {
    for (int j = 0; j < 32; ++j) exact += w[b].qs[j] * a[b].qs[j];
  }
  EXPECT_EQ(want, exact);
  for (Isa isa : AvailableIsas()) {
    float got;
    GetTypeOps(DType::kQ8_0, isa)->vec_dot(kN, w.data(), a.data(), &got);
    EXPECT_EQ(got, want) << IsaName(isa);
  }
}

// ------------------------------------------------------------------ errors

TEST(QuantApi, UnsupportedTypeIsAnError) {
  for (DType t : {DType::kIQ2_XXS, DType::kI32, DType::kTQ1_0, DType::kMXFP4}) {
    EXPECT_EQ(GetTypeOps(t), nullptr) << Name(t);
    float buf[256] = {};
    uint8_t q[1024] = {};
    EXPECT_THAT(DequantizeRow(t, q, buf, 256), testing::StatusIs(StatusCode::kUnimplemented, ::testing::_));
    EXPECT_THAT(QuantizeRow(t, buf, q, 256), testing::StatusIs(StatusCode::kUnimplemented, ::testing::_));
  }
}

TEST(QuantApi, RowLengthMustBeWholeBlocks) {
  float buf[64] = {};
  uint8_t q[256] = {};
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kIQ4_NL, DType::kQ5_1}) {
    EXPECT_THAT(DequantizeRow(t, q, buf, 33), testing::StatusIs(StatusCode::kInvalidArgument, ::testing::_));
    EXPECT_THAT(QuantizeRow(t, buf, q, 48), testing::StatusIs(StatusCode::kInvalidArgument, ::testing::_));
    EXPECT_THAT(QuantizeRow(t, buf, q, -32), testing::StatusIs(StatusCode::kInvalidArgument, ::testing::_));
    EXPECT_THAT(QuantizeRow(t, buf, q, 64), testing::IsOk());
  }
  EXPECT_THAT(DequantizeRow(DType::kF16, q, buf, 3), testing::IsOk());  // block of 1
}

TEST(QuantApi, EveryAvailableIsaHasEveryBasicType) {
  for (Isa isa : AvailableIsas()) {
    for (DType t : kBasicTypes) {
      const TypeOps* ops = GetTypeOps(t, isa);
      ASSERT_NE(ops, nullptr) << Name(t);
      EXPECT_EQ(ops->type, t);
      EXPECT_NE(ops->quantize_row, nullptr);
      EXPECT_NE(ops->vec_dot, nullptr);
    }
  }
  EXPECT_EQ(GetTypeOps(DType::kQ4_0)->dot_type, DType::kQ8_0);
  EXPECT_EQ(GetTypeOps(DType::kQ5_1)->dot_type, DType::kQ8_1);
  EXPECT_EQ(GetTypeOps(DType::kBF16)->dot_type, DType::kF32);
}

}  // namespace
}  // namespace fg::kernels
