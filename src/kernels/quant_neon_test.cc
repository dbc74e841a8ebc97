// NEON-specific checks of quant_neon.cc beyond the all-ISA tests in quant_test.cc: the NEON
// kernels are really installed, the integer block dots equal the scalar twin bit for bit, the
// Q8_0 quantizer rounds ties to even like the twin, and F16 widening handles subnormals, inf
// and the largest halves. Built on every target; the tests exist only where NEON is compiled.
#if defined(__ARM_NEON) || defined(__aarch64__)

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "src/kernels/blocks.h"
#include "src/kernels/quant.h"
#include "src/tensor/half.h"

namespace fg::kernels {
namespace {

using tensor::Fp16ToFp32;
using tensor::Fp32ToFp16;

std::vector<float> RandomRow(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<uint8_t> Quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(static_cast<size_t>(*tensor::RowBytes(t, static_cast<int64_t>(x.size()))));
  GetTypeOps(t, Isa::kScalar)->quantize_row(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

TEST(QuantNeon, KernelsAreInstalled) {
  for (DType t : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ5_0}) {
    const TypeOps* s = GetTypeOps(t, Isa::kScalar);
    const TypeOps* n = GetTypeOps(t, Isa::kNeon);
    ASSERT_NE(n, nullptr);
    EXPECT_NE(n->vec_dot, s->vec_dot) << tensor::DTypeName(t);
    EXPECT_EQ(n->dot_type, s->dot_type);
  }
  EXPECT_NE(GetTypeOps(DType::kQ8_0, Isa::kNeon)->quantize_row,
            GetTypeOps(DType::kQ8_0, Isa::kScalar)->quantize_row);
}

TEST(QuantNeon, BlockDotsEqualScalarBitForBit) {
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0}) {
    for (int64_t n : {32, 64, 640, 2048}) {
      SCOPED_TRACE(testing::Message() << tensor::DTypeName(t) << " n=" << n);
      const auto w = Quantize(t, RandomRow(n, static_cast<uint32_t>(n), 0.05f));
      const auto a = Quantize(DType::kQ8_0, RandomRow(n, static_cast<uint32_t>(n + 1), 3.0f));
      float want, got;
      GetTypeOps(t, Isa::kScalar)->vec_dot(n, w.data(), a.data(), &want);
      GetTypeOps(t, Isa::kNeon)->vec_dot(n, w.data(), a.data(), &got);
      EXPECT_EQ(got, want);
    }
  }
}

TEST(QuantNeon, Q5HighBitsOfEveryPosition) {
  // One block per element position j: only element j has its 5th bit set, all nibbles 0, so
  // the weights are -16 except 0 at j; an activation of ones gives -16 * 31.
  std::vector<block_q5_0> w(32);
  std::vector<block_q8_0> a(32);
  for (int j = 0; j < 32; ++j) {
    w[j].d = Fp32ToFp16(1.0f);
    std::memset(w[j].qs, 0, sizeof(w[j].qs));
    const uint32_t qh = 1u << j;
    std::memcpy(w[j].qh, &qh, 4);  // little-endian hosts, as the format
    a[j].d = Fp32ToFp16(1.0f);
    for (int k = 0; k < 32; ++k) a[j].qs[k] = static_cast<int8_t>(k == j ? 100 : 1);
  }
  for (int j = 0; j < 32; ++j) {
    float got;
    GetTypeOps(DType::kQ5_0, Isa::kNeon)->vec_dot(32, &w[j], &a[j], &got);
    EXPECT_EQ(got, -16.0f * 31) << "bit " << j;  // the 100 meets the 0 weight
  }
}

TEST(QuantNeon, Q8QuantizerTiesToEvenLikeScalar) {
  // amax 127 makes id exactly 1, so x.5 values are exact ties.
  std::vector<float> x(64);
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(j % 2 ? -(j % 40) : (j % 40)) + 0.5f;
  x[0] = 127.0f;
  x[32] = -127.0f;
  std::vector<uint8_t> want(2 * sizeof(block_q8_0)), got(want.size());
  GetTypeOps(DType::kQ8_0, Isa::kScalar)->quantize_row(x.data(), want.data(), 64);
  GetTypeOps(DType::kQ8_0, Isa::kNeon)->quantize_row(x.data(), got.data(), 64);
  EXPECT_EQ(got, want);
  const auto* b = reinterpret_cast<const block_q8_0*>(got.data());
  EXPECT_EQ(b[0].qs[2], 2);    // 2.5 -> 2
  EXPECT_EQ(b[0].qs[4], 4);    // 4.5 -> 4
  EXPECT_EQ(b[0].qs[3], -2);   // -2.5 -> -2
  EXPECT_EQ(b[0].qs[1], 0);    // -0.5 -> -0
  // Random rows, several scales, including an all-zero block.
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    auto r = RandomRow(2048, 5, scale);
    std::fill(r.begin(), r.begin() + 32, 0.0f);
    std::vector<uint8_t> w2(2048 / 32 * sizeof(block_q8_0)), g2(w2.size());
    GetTypeOps(DType::kQ8_0, Isa::kScalar)->quantize_row(r.data(), w2.data(), 2048);
    GetTypeOps(DType::kQ8_0, Isa::kNeon)->quantize_row(r.data(), g2.data(), 2048);
    EXPECT_EQ(g2, w2) << scale;
  }
}

TEST(QuantNeon, F16SpecialValues) {
  // Subnormal, smallest normal, largest finite and infinite halves against the exact scalar
  // conversion (n = 19: a tail after the 16-wide loop).
  const uint16_t bits[] = {0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x0000,
                           0x8000, 0x3555, 0x0200, 0x8001, 0x7bff, 0x1234, 0x5678, 0xc321,
                           0x3800, 0x0003, 0x2e66};
  const int64_t n = 19;
  std::vector<float> a(n);
  for (int64_t i = 0; i < n; ++i) a[i] = (i % 3 == 0) ? 1.0f : -0.5f;
  float want, got;
  GetTypeOps(DType::kF16, Isa::kScalar)->vec_dot(n, bits, a.data(), &want);
  GetTypeOps(DType::kF16, Isa::kNeon)->vec_dot(n, bits, a.data(), &got);
  double ref = 0;
  for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(Fp16ToFp32(bits[i])) * a[i];
  EXPECT_NEAR(got, ref, 1e-6 * 65504 * 4);
  EXPECT_NEAR(got, want, 1e-6 * 65504 * 4);
  // Half subnormals are f32 normals: the widened sum of these is exact.
  const uint16_t sub[16] = {0x0001, 0x03ff, 0x0200, 0x8001, 0x0003};
  std::vector<float> ones(16, 1.0f);
  GetTypeOps(DType::kF16, Isa::kNeon)->vec_dot(16, sub, ones.data(), &got);
  EXPECT_EQ(got, std::ldexp(1.0f + 1023 + 512 - 1 + 3, -24));
  const uint16_t inf[16] = {0x7c00};
  GetTypeOps(DType::kF16, Isa::kNeon)->vec_dot(16, inf, ones.data(), &got);
  EXPECT_TRUE(std::isinf(got) && got > 0);
}

}  // namespace
}  // namespace fg::kernels

#endif  // __ARM_NEON
