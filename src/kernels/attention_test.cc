#include "src/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "src/kernels/cpu.h"
#include "src/kernels/kernel_set.h"

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
          AttnScores(GetKernelSet(isa), q.data(), G, D, k.data(), ks, n, 0.0625f, s_got.data(), lds);
          for (int64_t i = 0; i < G * lds; ++i) {
            EXPECT_NEAR(s_got[i], s_want[i], 1e-5f + 1e-5f * std::fabs(s_want[i]))
                << IsaName(isa) << " G=" << G << " D=" << D << " n=" << n << " i=" << i;
          }
          auto p = Random(G * lds, rng, 0.0f, 1.0f);
          auto o_want = Random(G * D, rng), o_got = o_want;
          scalar::AttnWeightedSum(p.data(), lds, G, v.data(), vs, n, D, o_want.data());
          AttnWeightedSum(GetKernelSet(isa), p.data(), lds, G, v.data(), vs, n, D, o_got.data());
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

// The ring walk: positions past the ring's length (keys wrapped to rows p % R, read as two
// runs), with and without a sliding window, every ISA against attention written out per key in
// double over the positions themselves.
TEST(AttentionTest, AttendRingMatchesAttentionOverPositions) {
  std::mt19937 rng(11);
  const int64_t Hq = 4, KV = 2, D = 16, R = 8, group = Hq / KV;
  for (int64_t window : {0, 5}) {
    for (int64_t p0 : {0, 3, 6, 13}) {
      const int64_t S = 3;
      // Keys of positions 0 .. p0 + S - 1, the newest R of them in the ring.
      const int64_t P = p0 + S;
      auto kpos = Random(P * KV * D, rng), vpos = Random(P * KV * D, rng);
      std::vector<float> k(R * KV * D), v(R * KV * D);
      for (int64_t p = std::max<int64_t>(0, P - R); p < P; ++p) {
        std::copy_n(kpos.begin() + p * KV * D, KV * D, k.begin() + (p % R) * KV * D);
        std::copy_n(vpos.begin() + p * KV * D, KV * D, v.begin() + (p % R) * KV * D);
      }
      auto q = Random(S * Hq * D, rng);
      std::vector<int32_t> pos(S);
      for (int64_t t = 0; t < S; ++t) pos[t] = static_cast<int32_t>(p0 + t);
      const KeySpan span = KeysRead(pos.data(), S, window);
      if (span.rows() > R) {
        // Not every key survives: the executor refuses these positions.
        EXPECT_EQ(window, 0) << p0;
        continue;
      }
      // Expected: softmax over keys FirstKey(p) .. p of scale * q.k, then sum p * v, in double.
      const float scale = 0.25f;
      std::vector<double> want(S * Hq * D, 0.0);
      for (int64_t t = 0; t < S; ++t) {
        for (int64_t h = 0; h < Hq; ++h) {
          const int64_t kvh = h / group, lo = FirstKey(pos[t], window);
          std::vector<double> w;
          double mx = -1e300, sum = 0;
          for (int64_t j = lo; j <= pos[t]; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) {
              dot += static_cast<double>(q[(t * Hq + h) * D + d]) * kpos[(j * KV + kvh) * D + d];
            }
            w.push_back(dot * scale);
            mx = std::max(mx, w.back());
          }
          for (double& x : w) sum += (x = std::exp(x - mx));
          for (int64_t j = lo; j <= pos[t]; ++j) {
            for (int64_t d = 0; d < D; ++d) {
              want[(t * Hq + h) * D + d] += w[j - lo] / sum * vpos[(j * KV + kvh) * D + d];
            }
          }
        }
      }
      for (Isa isa : AvailableIsas()) {
        std::vector<float> out(S * Hq * D, -9.0f), scores(group * R);
        RingAttention a;
        a.q = q.data();
        a.k = k.data();
        a.v = v.data();
        a.pos = pos.data();
        a.Hq = Hq;
        a.D = D;
        a.R = R;
        a.KV = KV;
        a.window = window;
        a.scale = scale;
        a.out = out.data();
        for (int64_t t = 0; t < S; ++t) {
          for (int64_t kvh = 0; kvh < KV; ++kvh) {
            // The group in two shares, as the executor splits it when threads outnumber tasks.
            AttendRing(GetKernelSet(isa), a, t, kvh, 0, 1, scores.data(), R);
            AttendRing(GetKernelSet(isa), a, t, kvh, 1, group - 1, scores.data(), R);
          }
        }
        for (int64_t i = 0; i < S * Hq * D; ++i) {
          EXPECT_NEAR(out[i], want[i], 1e-5) << IsaName(isa) << " window=" << window
                                              << " p0=" << p0 << " i=" << i;
        }
      }
    }
  }
}

TEST(AttentionTest, KeysReadSpansFirstKeyToNewestPosition) {
  const int32_t pos[] = {7, 9, 8};
  EXPECT_EQ(KeysRead(pos, 3, 0).lowest, 0);
  EXPECT_EQ(KeysRead(pos, 3, 0).highest, 9);
  EXPECT_EQ(KeysRead(pos, 3, 4).lowest, 4);  // position 7's window: 4 .. 7
  EXPECT_EQ(KeysRead(pos, 3, 4).rows(), 6);
  EXPECT_EQ(FirstKey(2, 4), 0);
}

}  // namespace
}  // namespace fg::kernels
