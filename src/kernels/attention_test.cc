#include "src/kernels/attention.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "src/kernels/cpu.h"

namespace fg::kernels {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Every available ISA against the double-accumulating scalar twin, over group sizes that hit
// the 4-row blocks and every remainder, key counts that hit the 4-key blocks and their tails,
// head dims that take the 64-column tiles, the 16-column tail and (48 % 64, 40 % 16) fallbacks.
TEST(AttentionTest, EveryIsaMatchesTheScalarTwin) {
  std::mt19937 rng(7);
  for (Isa isa : AvailableIsas()) {
    for (int64_t G : {1, 2, 3, 4, 5, 8}) {
      for (int64_t D : {16, 40, 48, 64, 256}) {
        for (int64_t n : {1, 3, 4, 7, 37}) {
          const int64_t ks = D + 8, vs = D + 24, lds = n + 3;
          auto q = Random(G * D, rng), k = Random(n * ks, rng), v = Random(n * vs, rng);
          std::vector<float> s_want(G * lds, -7.0f), s_got(G * lds, -7.0f);
          scalar::AttnScores(q.data(), G, D, k.data(), ks, n, 0.0625f, s_want.data(), lds);
          AttnScores(isa, q.data(), G, D, k.data(), ks, n, 0.0625f, s_got.data(), lds);
          for (int64_t i = 0; i < G * lds; ++i) {
            EXPECT_NEAR(s_got[i], s_want[i], 1e-5f + 1e-5f * std::fabs(s_want[i]))
                << IsaName(isa) << " G=" << G << " D=" << D << " n=" << n << " i=" << i;
          }
          auto p = Random(G * lds, rng, 0.0f, 1.0f);
          auto o_want = Random(G * D, rng), o_got = o_want;
          scalar::AttnWeightedSum(p.data(), lds, G, v.data(), vs, n, D, o_want.data());
          AttnWeightedSum(isa, p.data(), lds, G, v.data(), vs, n, D, o_got.data());
          for (int64_t i = 0; i < G * D; ++i) {
            EXPECT_NEAR(o_got[i], o_want[i], 1e-5f + 1e-5f * std::fabs(o_want[i]))
                << IsaName(isa) << " G=" << G << " D=" << D << " n=" << n << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(AttentionTest, ScalarTwinIsTheDefinition) {
  // 2 heads, 2 keys, D = 2, by hand.
  const float q[] = {1, 2, 3, 4};
  const float k[] = {1, 0, /*pad*/ 9, 0, 1, 9};
  float s[4];
  scalar::AttnScores(q, 2, 2, k, 3, 2, 0.5f, s, 2);
  EXPECT_FLOAT_EQ(s[0], 0.5f);
  EXPECT_FLOAT_EQ(s[1], 1.0f);
  EXPECT_FLOAT_EQ(s[2], 1.5f);
  EXPECT_FLOAT_EQ(s[3], 2.0f);
  const float p[] = {0.25f, 0.75f, 1.0f, 0.0f};
  const float v[] = {4, 8, 12, 16};
  float o[] = {1, 1, 0, 0};
  scalar::AttnWeightedSum(p, 2, 2, v, 2, 2, 2, o);
  EXPECT_FLOAT_EQ(o[0], 1 + 0.25f * 4 + 0.75f * 12);
  EXPECT_FLOAT_EQ(o[1], 1 + 0.25f * 8 + 0.75f * 16);
  EXPECT_FLOAT_EQ(o[2], 4);
  EXPECT_FLOAT_EQ(o[3], 8);
}

}  // namespace
}  // namespace fg::kernels
