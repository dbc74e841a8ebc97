// K-quant kernels (Q4_K, Q5_K, Q6_K, Q8_K).
//
// - Hand-built blocks dequantize to values worked out from the format (so a wrong scale/min
//   unpacking or bit position fails).
// - Quantize -> dequantize of Gaussian data stays within the type's block error. Derivation
//   (x ~ N(0, s^2), uniform rounding error step / sqrt(12)):
//     Q4_K: 32 values span about 4.2 s; 16 levels -> step ~0.28 s -> rel RMS ~0.08, bound 0.1.
//     Q5_K: 32 levels -> step ~0.14 s -> ~0.04, bound 0.05.
//     Q6_K: symmetric, 16 values reach about 1.8 s; 32 levels per sign -> step ~0.056 s -> ~0.016,
//           bound 0.025.
// - Every ISA's vec_dot against the scalar twin (1e-6 of sum_e |w_e a_e|, the size f32 rounding
//   scales with; relative to the result itself that is <= ~1e-5 except where terms cancel), the
//   scalar vec_dot against dequantized weights . dequantized activations in double, the SIMD
//   Q8_K quantizer bit-identical to the scalar one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/status_matchers.h"
#include "src/kernels/cpu.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kquants_internal.h"
#include "src/kernels/matmul.h"
#include "src/kernels/quant.h"
#include "src/tensor/dtype.h"
#include "src/tensor/half.h"

namespace fg::kernels {
namespace {

using tensor::DType;
using tensor::Fp32ToFp16;

constexpr DType kWeightTypes[] = {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

const TypeOps& Ops(DType t, Isa isa = Isa::kScalar) {
  const TypeOps* o = GetTypeOps(t, isa);
  EXPECT_NE(o, nullptr) << tensor::DTypeName(t);
  return *o;
}

std::vector<uint8_t> Quantize(DType t, const std::vector<float>& x, Isa isa = Isa::kScalar) {
  std::vector<uint8_t> q(*tensor::RowBytes(t, static_cast<int64_t>(x.size())));
  Ops(t, isa).quantize_row(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> Dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(n);
  Ops(t).dequantize_row(q.data(), y.data(), n);
  return y;
}

std::vector<float> Gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    // Vary the scale per super-block and add an offset so mins and signed scales both matter.
    const float blk_scale = 0.02f * static_cast<float>(1 + (i / 256) % 5);
    v[i] = blk_scale * nd(rng) + ((i / 256) % 3 == 1 ? 0.5f * blk_scale : 0.f);
  }
  return v;
}

double RelRms(const std::vector<float>& y, const std::vector<float>& x) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    den += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

// ---------------------------------------------------------------------------------------------
// Hand-built blocks.

// 12 packed bytes and the 6-bit scales/mins they hold, worked out by hand from the layout:
// j < 4: sc = q[j] & 63, m = q[j+4] & 63; j >= 4: sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4,
// m = (q[j+4] >> 4) | (q[j] >> 6) << 4.
constexpr uint8_t kPacked[12] = {0xC1, 0x42, 0x83, 0x3F, 0x40, 0xC7, 0x05, 0x8A, 0x21, 0x43, 0x65, 0x87};
constexpr uint8_t kScales[8] = {1, 2, 3, 63, 49, 19, 37, 7};
constexpr uint8_t kMins[8] = {0, 7, 5, 10, 18, 52, 6, 40};

TEST(KQuantsTest, UnpacksScalesAndMins) {
  uint8_t out[16];
  internal::UnpackScalesMinsK4(kPacked, out);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(out[j], kScales[j]) << "scale " << j;
    EXPECT_EQ(out[8 + j], kMins[j]) << "min " << j;
  }
}

TEST(KQuantsTest, Q4KHandBuiltBlock) {
  BlockQ4K b{};
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3400;  // 0.25
  std::memcpy(b.scales, kPacked, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  std::vector<float> y(256);
  Ops(DType::kQ4_K).dequantize_row(&b, y.data(), 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const int q = (j % 2 == 0) ? l % 16 : 15 - l % 16;  // low nibble for even sub-blocks
    EXPECT_EQ(y[e], 0.5f * kScales[j] * q - 0.25f * kMins[j]) << "element " << e;
  }
  // Two values by hand: element 0 (q 0, sub-block 0) and element 200 (sub-block 6, even, so
  // the low nibble of qs[128 + 8] = 8; scale 37, min 6) and 232 (sub-block 7, high nibble 7).
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[200], 146.5f);
  EXPECT_EQ(y[232], 0.5f * 7 * 7 - 0.25f * 40);
}

TEST(KQuantsTest, Q5KHandBuiltBlock) {
  BlockQ5K b{};
  b.d = 0x3800;
  b.dmin = 0x3400;
  std::memcpy(b.scales, kPacked, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(l * 37 + 11);
  std::vector<float> y(256);
  Ops(DType::kQ5_K).dequantize_row(&b, y.data(), 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const int nib = (j % 2 == 0) ? l % 16 : 15 - l % 16;
    const int high = (b.qh[l] >> j) & 1;  // sub-block j takes bit j of qh[l]
    EXPECT_EQ(y[e], 0.5f * kScales[j] * (nib + 16 * high) - 0.25f * kMins[j]) << "element " << e;
  }
}

TEST(KQuantsTest, Q6KHandBuiltBlock) {
  BlockQ6K b{};
  b.d = 0x3000;  // 0.125
  const int8_t sc[16] = {-128, 127, -1, 5, 0, 64, -64, 3, 9, -9, 100, -100, 1, 2, -3, 4};
  std::memcpy(b.scales, sc, 16);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i * 29 + 7);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(i * 53 + 3);
  std::vector<float> y(256);
  Ops(DType::kQ6_K).dequantize_row(&b, y.data(), 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    const uint8_t lbyte = b.ql[64 * h + l + (quarter % 2) * 32];
    const int low = quarter < 2 ? (lbyte & 15) : (lbyte >> 4);
    const int high = (b.qh[32 * h + l] >> (2 * quarter)) & 3;
    EXPECT_EQ(y[e], 0.125f * sc[e / 16] * (low + 16 * high - 32)) << "element " << e;
  }
  // Element 0 by hand: ql[0] = 7, qh[0] = 3 -> q = 7 + 48 - 32 = 23, scale -128.
  EXPECT_EQ(y[0], 0.125f * -128 * 23);
}

TEST(KQuantsTest, Q8KDequantize) {
  BlockQ8K b{};
  b.d = 0.375f;
  for (int i = 0; i < 256; ++i) b.qs[i] = static_cast<int8_t>(i - 128 < -127 ? -127 : i - 128);
  std::vector<float> y(256);
  Ops(DType::kQ8_K).dequantize_row(&b, y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.375f * b.qs[i]);
}

TEST(KQuantsTest, RegistryAndPublicApi) {
  for (DType t : kWeightTypes) {
    for (Isa isa : AvailableIsas()) {
      const TypeOps* o = GetTypeOps(t, isa);
      ASSERT_NE(o, nullptr);
      EXPECT_EQ(o->type, t);
      EXPECT_EQ(o->dot_type, DType::kQ8_K);
      EXPECT_NE(o->vec_dot, nullptr);
      EXPECT_NE(o->quantize_row, nullptr);
    }
  }
  const TypeOps* q8 = GetTypeOps(DType::kQ8_K, Isa::kScalar);
  ASSERT_NE(q8, nullptr);
  EXPECT_NE(q8->quantize_row, nullptr);
  std::vector<float> x = Gaussian(512, 1), y(512);
  std::vector<uint8_t> q(2 * sizeof(BlockQ4K));
  FG_EXPECT_OK(QuantizeRow(DType::kQ4_K, x.data(), q.data(), 512));
  FG_EXPECT_OK(DequantizeRow(DType::kQ4_K, q.data(), y.data(), 512));
  EXPECT_LT(RelRms(y, x), 0.1);
  EXPECT_FALSE(DequantizeRow(DType::kQ4_K, q.data(), y.data(), 300).ok());  // not a multiple
}

// ---------------------------------------------------------------------------------------------
// Quantizers.

struct ErrorCase {
  DType type;
  double bound;
};

TEST(KQuantsTest, QuantizeDequantizeWithinBlockError) {
  const ErrorCase cases[] = {{DType::kQ4_K, 0.1}, {DType::kQ5_K, 0.05}, {DType::kQ6_K, 0.025},
                             {DType::kQ8_K, 0.01}};
  const std::vector<float> x = Gaussian(256 * 15, 7);
  double prev = 1;
  for (const ErrorCase& c : cases) {
    const double e = RelRms(Dequantize(c.type, Quantize(c.type, x), 256 * 15), x);
    EXPECT_LT(e, c.bound) << tensor::DTypeName(c.type);
    EXPECT_LT(e, prev) << "more bits must not be worse: " << tensor::DTypeName(c.type);
    prev = e;
    std::printf("%s rel RMS %.4f (bound %.3f)\n", std::string(tensor::DTypeName(c.type)).c_str(), e,
                c.bound);
  }
}

// llama.cpp's own quantizer output for fixed inputs (tests/data/kquants_ggml_quant.json, from
// scripts/gen_kquants_ggml.py through ctypes into ggml's quantize_row_*_ref): fgemma must write
// the same bytes, on every ISA for the Q8_K activation quantizer.
TEST(KQuantsTest, QuantizersWriteTheBytesGgmlWrites) {
  std::ifstream in(std::string(FG_SOURCE_DIR) + "/tests/data/kquants_ggml_quant.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json doc = nlohmann::json::parse(in);
  const std::vector<float> x = doc.at("input").get<std::vector<float>>();
  ASSERT_EQ(static_cast<int64_t>(x.size()), doc.at("n").get<int64_t>());
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K}) {
    const std::string name(tensor::DTypeName(t));
    const std::string hex = doc.at("quantized").at(name).get<std::string>();
    std::vector<uint8_t> want(hex.size() / 2);
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    for (Isa isa : AvailableIsas()) {
      const std::vector<uint8_t> got = Quantize(t, x, isa);
      ASSERT_EQ(got.size(), want.size()) << name;
      const int64_t bb = tensor::Info(t).block_bytes;
      for (size_t b = 0; b < got.size() / bb; ++b) {
        EXPECT_TRUE(std::equal(got.begin() + b * bb, got.begin() + (b + 1) * bb, want.begin() + b * bb))
            << name << " block " << b << " differs from ggml on " << IsaName(isa);
      }
    }
  }
}

TEST(KQuantsTest, QuantizeBeatsPlainRounding) {
  // The fitted scales must do better than min/max rounding with the same level count (what a
  // broken search or a lost requantization step would fall back to). 4-bit asymmetric here.
  const std::vector<float> x = Gaussian(256 * 8, 11);
  double naive_num = 0, den = 0;
  for (int s = 0; s < 256 * 8 / 32; ++s) {
    float lo = 0, hi = 0;
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * s + l]);
      hi = std::max(hi, x[32 * s + l]);
    }
    const float step = (hi - lo) / 15;
    for (int l = 0; l < 32; ++l) {
      const float v = x[32 * s + l];
      const float r = lo + step * std::nearbyint((v - lo) / step);
      naive_num += (r - v) * (r - v);
      den += v * v;
    }
  }
  const double q4 = RelRms(Dequantize(DType::kQ4_K, Quantize(DType::kQ4_K, x), 256 * 8), x);
  EXPECT_LT(q4, std::sqrt(naive_num / den));
}

TEST(KQuantsTest, ZeroAndConstantBlocks) {
  std::vector<float> x(512, 0.f);
  for (int i = 256; i < 512; ++i) x[i] = 0.75f;  // constant block: a min fit (Q4_K/Q5_K)
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K}) {
    const std::vector<float> y = Dequantize(t, Quantize(t, x), 512);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.f) << tensor::DTypeName(t) << " " << i;
    for (int i = 256; i < 512; ++i) {
      ASSERT_NEAR(y[i], 0.75f, 0.75f * 0.02f) << tensor::DTypeName(t) << " " << i;
    }
  }
}

TEST(KQuantsTest, Q8KQuantizerLevelsAndBsums) {
  std::vector<float> x = Gaussian(512, 3);
  x[17] = -3.0f;  // the largest |x| of block 0 is negative: it maps to level -127, d > 0
  const std::vector<uint8_t> q = Quantize(DType::kQ8_K, x);
  const auto* b = reinterpret_cast<const BlockQ8K*>(q.data());
  EXPECT_EQ(b[0].qs[17], -127);
  EXPECT_FLOAT_EQ(b[0].d, 3.0f / 127);
  for (int blk = 0; blk < 2; ++blk) {
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += b[blk].qs[16 * g + l];
      EXPECT_EQ(b[blk].bsums[g], s);
    }
    for (int i = 0; i < 256; ++i) EXPECT_GE(b[blk].qs[i], -127);
  }
}

TEST(KQuantsTest, SimdQ8KQuantizerBitIdentical) {
  std::vector<float> x = Gaussian(256 * 9, 5);
  for (int i = 256; i < 512; ++i) x[i] = 0.f;  // an all-zero block
  x[600] = 2.f;                                // a tie on |x|: the first one (+2) sets the sign
  x[700] = -2.f;
  x[900] = -1e-30f;                            // tiny block maximum
  for (int i = 768; i < 1024; ++i) x[i] = i == 900 ? x[i] : 0.f;
  const std::vector<uint8_t> ref = Quantize(DType::kQ8_K, x);
  for (Isa isa : AvailableIsas()) {
    const std::vector<uint8_t> got = Quantize(DType::kQ8_K, x, isa);
    EXPECT_EQ(got, ref) << IsaName(isa);
  }
}

// ---------------------------------------------------------------------------------------------
// Dot products.

// Random blocks of every type straight from bytes: levels, scales (negative Q6_K ones too) and
// mins over their full ranges; f16 scales kept finite and moderate.
std::vector<uint8_t> RandomBlocks(DType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  std::vector<uint8_t> q(*tensor::RowBytes(t, n));
  for (auto& v : q) v = static_cast<uint8_t>(byte(rng));
  const int64_t nb = n / 256;
  for (int64_t b = 0; b < nb; ++b) {
    if (t == DType::kQ4_K || t == DType::kQ5_K) {
      auto* blk = q.data() + b * tensor::Info(t).block_bytes;
      const uint16_t d = Fp32ToFp16(scale(rng)), dmin = Fp32ToFp16(scale(rng));
      std::memcpy(blk, &d, 2);
      std::memcpy(blk + 2, &dmin, 2);
    } else if (t == DType::kQ6_K) {
      auto* blk = reinterpret_cast<BlockQ6K*>(q.data()) + b;
      blk->d = Fp32ToFp16(scale(rng));
    } else if (t == DType::kQ8_K) {
      auto* blk = reinterpret_cast<BlockQ8K*>(q.data()) + b;
      blk->d = scale(rng);
      for (int i = 0; i < 256; ++i) {
        if (blk->qs[i] == -128) blk->qs[i] = -127;
      }
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += blk->qs[16 * g + l];
        blk->bsums[g] = static_cast<int16_t>(s);
      }
    }
  }
  return q;
}

// The dot product in double from dequantized values, and the size float rounding is relative
// to: sum_e |w_e a_e|, with Q4_K/Q5_K weights split into their scale part d sc q and min part
// dmin m (they can cancel in w_e while each is rounded in f32).
void DoubleDot(DType t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a, int64_t n,
               double* dot, double* l1) {
  const std::vector<float> wf = Dequantize(t, w, n), af = Dequantize(DType::kQ8_K, a, n);
  std::vector<float> scale_part = wf;
  if (t == DType::kQ4_K || t == DType::kQ5_K) {
    std::vector<uint8_t> no_min = w;
    const int64_t bb = tensor::Info(t).block_bytes;
    for (int64_t b = 0; b < n / 256; ++b) std::memset(no_min.data() + b * bb + 2, 0, 2);  // dmin
    scale_part = Dequantize(t, no_min, n);
  }
  *dot = 0;
  *l1 = 0;
  for (int64_t i = 0; i < n; ++i) {
    *dot += static_cast<double>(wf[i]) * af[i];
    *l1 += std::fabs(static_cast<double>(scale_part[i]) * af[i]) +
           std::fabs((static_cast<double>(scale_part[i]) - wf[i]) * af[i]);
  }
}

constexpr int64_t kLengths[] = {256, 512, 2048 + 256, 4096 + 3 * 256};

TEST(KQuantsTest, VecDotMatchesDequantizedDoubleAndAllIsasMatchScalar) {
  uint32_t seed = 100;
  double max_rel = 0;  // largest |simd - scalar| / |scalar|, for the log
  for (DType t : kWeightTypes) {
    for (int64_t n : kLengths) {
      for (int source = 0; source < 2; ++source) {
        // source 0: quantizer output of Gaussian data; 1: random bytes (extreme levels).
        std::vector<uint8_t> w, a;
        if (source == 0) {
          w = Quantize(t, Gaussian(n, ++seed));
          a = Quantize(DType::kQ8_K, Gaussian(n, ++seed));
        } else {
          w = RandomBlocks(t, n, ++seed);
          a = RandomBlocks(DType::kQ8_K, n, ++seed);
        }
        double ref, scale;
        DoubleDot(t, w, a, n, &ref, &scale);
        float scalar = 0;
        Ops(t).vec_dot(n, w.data(), a.data(), &scalar);
        const std::string what = std::string(tensor::DTypeName(t)) + " n=" + std::to_string(n) +
                                 " source=" + std::to_string(source);
        // Same sum; only f32 rounding of the block scales and the accumulation differ.
        EXPECT_LE(std::fabs(scalar - ref), 1e-6 * scale) << what;
        for (Isa isa : AvailableIsas()) {
          float got = 0;
          Ops(t, isa).vec_dot(n, w.data(), a.data(), &got);
          EXPECT_LE(std::fabs(got - scalar), 1e-6 * scale) << what << " " << IsaName(isa);
          max_rel = std::max(max_rel, static_cast<double>(std::fabs(got - scalar)) / std::max(std::fabs(static_cast<double>(scalar)), 1e-30));
        }
      }
    }
  }
  std::printf("largest SIMD vs scalar vec_dot difference relative to the result: %.3g\n", max_rel);
}

// The 2 x 2 tiles MatMul uses for m > 1 return exactly what vec_dot returns (results must not
// depend on how rows and tokens fall into tiles or threads). Random bytes hit every level.
TEST(KQuantsTest, TileEqualsVecDotBitForBit) {
  uint32_t seed = 300;
  int tiles = 0;
  for (Isa isa : AvailableIsas()) {
    for (DType t : kWeightTypes) {
      const DotTileFn tile = GetKernelSet(isa).types[static_cast<int>(t)].tile;
      if (tile == nullptr) continue;
      ++tiles;
      for (int64_t n : kLengths) {
        std::vector<uint8_t> w[2], a[2];
        for (int i = 0; i < 2; ++i) {
          w[i] = RandomBlocks(t, n, ++seed);
          a[i] = i == 0 ? RandomBlocks(DType::kQ8_K, n, ++seed)
                        : Quantize(DType::kQ8_K, Gaussian(n, ++seed));
        }
        float out[4];
        tile(n, w[0].data(), w[1].data(), a[0].data(), a[1].data(), out);
        for (int r = 0; r < 2; ++r) {
          for (int tok = 0; tok < 2; ++tok) {
            float want = 0;
            Ops(t, isa).vec_dot(n, w[r].data(), a[tok].data(), &want);
            EXPECT_EQ(std::memcmp(&out[r + 2 * tok], &want, sizeof(float)), 0)
                << tensor::DTypeName(t) << " " << IsaName(isa) << " n=" << n << " r=" << r
                << " t=" << tok << ": " << out[r + 2 * tok] << " vs " << want;
          }
        }
      }
    }
  }
  // Q4_K, Q5_K and Q6_K have tiles on AVX2 and AVX-512.
  int x86 = 0;
  for (Isa isa : AvailableIsas()) x86 += isa == Isa::kAvx2 || isa == Isa::kAvx512;
  EXPECT_EQ(tiles, 3 * x86);
}

// The four-row form decode uses (DotRowsFn) returns exactly what vec_dot returns, per row.
TEST(KQuantsTest, RowsEqualVecDotBitForBit) {
  uint32_t seed = 500;
  int forms = 0;
  for (Isa isa : AvailableIsas()) {
    for (DType t : kWeightTypes) {
      const DotRowsFn rows = GetKernelSet(isa).types[static_cast<int>(t)].rows;
      if (rows == nullptr) continue;
      ++forms;
      for (int64_t n : kLengths) {
        std::vector<uint8_t> w[kDotRows];
        const void* ws[kDotRows];
        for (int r = 0; r < kDotRows; ++r) {
          w[r] = RandomBlocks(t, n, ++seed);
          ws[r] = w[r].data();
        }
        for (int i = 0; i < 2; ++i) {
          const std::vector<uint8_t> a = i == 0 ? RandomBlocks(DType::kQ8_K, n, ++seed)
                                                : Quantize(DType::kQ8_K, Gaussian(n, ++seed));
          float out[kDotRows];
          rows(n, ws, a.data(), out);
          for (int r = 0; r < kDotRows; ++r) {
            float want = 0;
            Ops(t, isa).vec_dot(n, w[r].data(), a.data(), &want);
            EXPECT_EQ(std::memcmp(&out[r], &want, sizeof(float)), 0)
                << tensor::DTypeName(t) << " " << IsaName(isa) << " n=" << n << " r=" << r << ": "
                << out[r] << " vs " << want;
          }
        }
      }
    }
  }
  // Q4_K and Q5_K have the four-row form on AVX2 (kquants_x86.h says why only there).
  int avx2 = 0;
  for (Isa isa : AvailableIsas()) avx2 += isa == Isa::kAvx2;
  EXPECT_EQ(forms, 2 * avx2);
}

TEST(KQuantsTest, VecDotOfQuantizedRowsTracksF32Dot) {
  // End to end: quantize weights and activations, compare with the f32 dot of the originals.
  // The error is the quantization noise: a few percent of the product's scale for Q4_K.
  const int64_t n = 2048;
  const std::vector<float> w = Gaussian(n, 21), x = Gaussian(n, 22);
  double ref = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref += static_cast<double>(w[i]) * x[i];
    norm += static_cast<double>(w[i]) * w[i] * x[i] * x[i];
  }
  norm = std::sqrt(norm);
  const ErrorCase cases[] = {{DType::kQ4_K, 0.15}, {DType::kQ5_K, 0.08}, {DType::kQ6_K, 0.04}};
  for (const ErrorCase& c : cases) {
    const std::vector<uint8_t> qw = Quantize(c.type, w), qx = Quantize(DType::kQ8_K, x);
    for (Isa isa : AvailableIsas()) {
      float got = 0;
      Ops(c.type, isa).vec_dot(n, qw.data(), qx.data(), &got);
      EXPECT_LE(std::fabs(got - ref), c.bound * norm) << tensor::DTypeName(c.type) << " " << IsaName(isa);
    }
  }
}

TEST(KQuantsTest, MatMulMatchesReferenceAtModelShapes) {
  // The driver quantizes activations to Q8_K; the reference keeps them f32. The difference is
  // that quantization noise: Q8_K rel RMS ~0.007 (see above) -> output NMSE ~5e-5, bound 2e-4.
  struct Shape {
    DType type;
    int64_t rows, cols;
  };
  for (const Shape& s : {Shape{DType::kQ4_K, 67, 1024}, Shape{DType::kQ5_K, 33, 512},
                         Shape{DType::kQ6_K, 41, 2048}}) {
    const int64_t rb = *tensor::RowBytes(s.type, s.cols);
    std::vector<uint8_t> bytes(static_cast<size_t>(s.rows * rb));
    const std::vector<float> wf = Gaussian(s.rows * s.cols, 31);
    for (int64_t r = 0; r < s.rows; ++r) {
      Ops(s.type).quantize_row(wf.data() + r * s.cols, bytes.data() + r * rb, s.cols);
    }
    const WeightMatrix w{s.type, bytes.data(), s.rows, s.cols, static_cast<size_t>(rb)};
    for (int64_t m : {1, 5}) {
      const std::vector<float> x = Gaussian(m * s.cols, 32);
      std::vector<float> ref(m * s.rows), y(m * s.rows);
      MatMulReference(w, x.data(), m, ref.data(), s.rows);
      for (Isa isa : AvailableIsas()) {
        MatMulIsa(isa, w, x.data(), m, y.data(), s.rows, nullptr);
        double num = 0, den = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          num += (static_cast<double>(y[i]) - ref[i]) * (static_cast<double>(y[i]) - ref[i]);
          den += static_cast<double>(ref[i]) * ref[i];
        }
        EXPECT_LE(num / den, 2e-4) << tensor::DTypeName(s.type) << " m=" << m << " " << IsaName(isa);
      }
    }
  }
}

}  // namespace
}  // namespace fg::kernels
