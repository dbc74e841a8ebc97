// The backward-pass kernels (src/kernels/grad.h): every ISA in AvailableIsas() against the
// scalar twin (which computes in double), and the scalar twin against central differences of
// the forward formula in double.
//
// Bounds: NMSE <= 1e-7 for fast vs scalar (the docs/design.md kernel bound on f32 paths);
// CrossEntropyRow relative error <= 1e-6 (a logsumexp of up to 5000 f32 exps, summed in
// double per chunk). The scalar twins vs finite differences: relative 1e-6 (central
// differences in double with h = 1e-5 are good to ~1e-9; the twins round only their result to
// f32, 6e-8).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "src/kernels/cpu.h"
#include "src/kernels/grad.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/ops.h"
#include "src/kernels/quant.h"
#include "src/tensor/dtype.h"

namespace fg::kernels {
namespace {

constexpr int64_t kLengths[] = {1, 7, 16, 17, 64, 255, 640, 1000};

std::vector<float> Rand(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

double Nmse(const std::vector<float>& y, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(y[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? num : num / den;
}

// sum (y - ref)^2 / sum scale^2: the error against the size of `scale` (for results that are
// small by cancellation of terms of that size).
double NmseScaled(const std::vector<float>& y, const std::vector<float>& ref,
                  const std::vector<float>& scale) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(y[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(scale[i]) * scale[i];
  }
  return den == 0 ? num : num / den;
}

class GradIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  const ElementOps& ops() const { return GetElementOps(GetParam()); }
};

TEST_P(GradIsaTest, RmsNormBackMatchesScalar) {
  for (int64_t n : kLengths) {
    for (bool with_w : {true, false}) {
      SCOPED_TRACE("n " + std::to_string(n) + (with_w ? " w" : " no w"));
      const auto x = Rand(n, 1 + n, -3, 3), w = Rand(n, 2 + n, 0.2f, 1.8f), dy = Rand(n, 3 + n);
      std::vector<float> got(n), want(n);
      RmsNormBackRow(ops(), x.data(), with_w ? w.data() : nullptr, dy.data(), got.data(), n, 1e-6f);
      scalar::RmsNormBackRow(x.data(), with_w ? w.data() : nullptr, dy.data(), want.data(), n, 1e-6f);
      // dx = r (w dy) minus its projection on x: for short rows the two terms nearly cancel
      // (n = 1: dx ~ eps / |x|^3), so the error is measured against the first term's size.
      double ss = 0;
      for (float v : x) ss += static_cast<double>(v) * v;
      const double r = 1.0 / std::sqrt(ss / n + 1e-6);
      std::vector<float> first(n);
      for (int64_t i = 0; i < n; ++i) first[i] = static_cast<float>(r * (with_w ? w[i] : 1.0f) * dy[i]);
      EXPECT_LE(NmseScaled(got, want, first), 1e-7);
    }
  }
}

TEST_P(GradIsaTest, GeluMulBackMatchesScalar) {
  for (int64_t n : kLengths) {
    for (int operand : {0, 1}) {
      SCOPED_TRACE("n " + std::to_string(n) + " operand " + std::to_string(operand));
      // Gates over the curved part and both tails (exp(-2a) overflows to inf for large -g).
      const auto g = Rand(n, 5 + n, -12, 12), u = Rand(n, 6 + n), dy = Rand(n, 7 + n);
      std::vector<float> got(n), want(n);
      GeluMulBack(ops(), g.data(), u.data(), dy.data(), got.data(), n, operand);
      scalar::GeluMulBack(g.data(), u.data(), dy.data(), want.data(), n, operand);
      for (float v : got) ASSERT_TRUE(std::isfinite(v));
      EXPECT_LE(Nmse(got, want), 1e-7);
    }
  }
}

TEST_P(GradIsaTest, CrossEntropyMatchesScalar) {
  for (int64_t n : {1, 7, 16, 17, 1000, 1025, 5000}) {
    for (float spread : {1.0f, 30.0f}) {
      SCOPED_TRACE("n " + std::to_string(n) + " spread " + std::to_string(spread));
      const auto x = Rand(n, 9 + n, -spread, spread);
      for (int32_t t : {int32_t{0}, static_cast<int32_t>(n / 2), static_cast<int32_t>(n - 1)}) {
        const float got = CrossEntropyRow(ops(), x.data(), n, t);
        const float want = scalar::CrossEntropyRow(x.data(), n, t);
        EXPECT_NEAR(got, want, 1e-6 * std::max(1.0f, std::fabs(want)));
        std::vector<float> dgot(n), dwant(n);
        CrossEntropyBackRow(ops(), x.data(), n, t, 0.75f, dgot.data());
        scalar::CrossEntropyBackRow(x.data(), n, t, 0.75f, dwant.data());
        // dloss (p - onehot) with f32 probabilities: each element within a few f32 ulps of
        // dloss (when the target holds nearly all the mass, p - 1 is pure cancellation and the
        // whole gradient is tiny, so a relative bound would measure only that).
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_NEAR(dgot[i], dwant[i], 0.75 * 1e-6) << i;
        }
      }
    }
  }
}

// A head of V rows of D in `type` (values in [-1, 1]) and its dequantized rows.
struct Head {
  std::vector<uint8_t> bytes;
  std::vector<float> rows, mean;
  HeadBackArgs args;
};
Head MakeHead(DType type, int64_t V, int64_t D, uint32_t seed) {
  Head h;
  const auto row_bytes = static_cast<size_t>(*tensor::RowBytes(type, D));
  h.bytes.resize(row_bytes * V);
  h.rows = Rand(V * D, seed);
  h.mean.assign(static_cast<size_t>(D), 0.0f);
  for (int64_t v = 0; v < V; ++v) {
    EXPECT_TRUE(QuantizeRow(type, h.rows.data() + v * D, h.bytes.data() + row_bytes * v, D).ok());
    EXPECT_TRUE(DequantizeRow(type, h.bytes.data() + row_bytes * v, h.rows.data() + v * D, D).ok());
    for (int64_t d = 0; d < D; ++d) h.mean[d] += h.rows[v * D + d] / static_cast<float>(V);
  }
  h.args.head = h.bytes.data();
  h.args.type = type;
  h.args.row_bytes = row_bytes;
  h.args.V = V;
  h.args.D = D;
  h.args.mean = h.mean.data();
  return h;
}

TEST_P(GradIsaTest, HeadCrossEntropyBackMatchesScalar) {
  const int64_t V = 1000, D = 64;
  for (DType type : {DType::kF32, DType::kQ8_0}) {
    Head h = MakeHead(type, V, D, 21);
    h.args.rows = GetTypeOps(type, GetParam());
    for (float spread : {1.0f, 30.0f}) {
      const auto x = Rand(V, 22, -spread, spread);
      for (auto [threshold, max_tokens] : {std::pair{1e-9f, 2048}, {1e-3f, 2048}, {1e-3f, 3}}) {
        SCOPED_TRACE(std::string(tensor::DTypeName(type)) + " spread " + std::to_string(spread) +
                     " threshold " + std::to_string(threshold) + " max " +
                     std::to_string(max_tokens));
        h.args.threshold = threshold;
        h.args.max_tokens = max_tokens;
        for (int32_t t : {0, 499, 999}) {
          const float loss = scalar::CrossEntropyRow(x.data(), V, t);
          std::vector<float> got(D), want(D);
          const float tail_got =
              HeadCrossEntropyBackRow(ops(), h.args, x.data(), t, loss, 0.75f, got.data());
          const float tail_want =
              scalar::HeadCrossEntropyBackRow(h.args, x.data(), t, loss, 0.75f, want.data());
          EXPECT_NEAR(tail_got, tail_want, 1e-5);
          EXPECT_LE(Nmse(got, want), 1e-7);
        }
      }
    }
  }
}

struct AttnCase {
  int64_t S, Hq, KV, D, R, window;
  int32_t first_pos;
};

TEST_P(GradIsaTest, AttentionBackMatchesScalar) {
  const AttnCase cases[] = {
      {4, 4, 2, 16, 8, 0, 2},    // global, a prefix of 2
      {5, 4, 1, 32, 7, 3, 9},    // sliding, a ring that wraps
      {1, 2, 1, 64, 5, 5, 20},   // decode
      {6, 8, 2, 17, 16, 0, 0},   // odd head_dim, no prefix
      {3, 2, 2, 256, 6, 4, 30},  // the 270M's head_dim
  };
  for (const AttnCase& c : cases) {
    SCOPED_TRACE("S " + std::to_string(c.S) + " R " + std::to_string(c.R) + " window " +
                 std::to_string(c.window) + " D " + std::to_string(c.D));
    const int64_t cache = c.R * c.KV * c.D;
    auto q = Rand(c.S * c.Hq * c.D, 11, -2, 2);
    auto k = Rand(cache, 12), v = Rand(cache, 13), dout = Rand(c.S * c.Hq * c.D, 14);
    std::vector<int32_t> pos(c.S);
    for (int64_t t = 0; t < c.S; ++t) pos[t] = c.first_pos + static_cast<int32_t>(t);
    // dk, dv start nonzero: the kernels add to them.
    const auto base_k = Rand(cache, 15), base_v = Rand(cache, 16);
    std::vector<float> dq(c.S * c.Hq * c.D), dk = base_k, dv = base_v;
    std::vector<float> dq2(dq.size()), dk2 = base_k, dv2 = base_v;
    AttentionBackArgs a{q.data(), k.data(), v.data(), pos.data(), dout.data(), c.Hq, c.D, c.R,
                        c.KV, c.window, 0.3f, dq.data(), dk.data(), dv.data()};
    AttentionBackArgs a2 = a;
    a2.dq = dq2.data();
    a2.dk = dk2.data();
    a2.dv = dv2.data();
    AttentionBack(GetKernelSet(GetParam()), a, 0, c.S);
    scalar::AttentionBack(a2, 0, c.S);
    EXPECT_LE(Nmse(dq, dq2), 1e-7);
    EXPECT_LE(Nmse(dk, dk2), 1e-7);
    EXPECT_LE(Nmse(dv, dv2), 1e-7);
    // Split in two query ranges, the same result (each range writes its dq rows, adds to dk/dv).
    std::vector<float> dq3(dq.size()), dk3 = base_k, dv3 = base_v;
    AttentionBackArgs a3 = a;
    a3.dq = dq3.data();
    a3.dk = dk3.data();
    a3.dv = dv3.data();
    AttentionBack(GetKernelSet(GetParam()), a3, 0, c.S / 2);
    AttentionBack(GetKernelSet(GetParam()), a3, c.S / 2, c.S);
    EXPECT_LE(Nmse(dq3, dq2), 1e-7);
    EXPECT_LE(Nmse(dk3, dk2), 1e-7);
    EXPECT_LE(Nmse(dv3, dv2), 1e-7);
    // kv_from: the same dq; dk/dv rows of keys from kv_from on as before, the others untouched.
    for (int64_t skip : {int64_t{1}, c.S}) {
      const int64_t from = c.first_pos + skip;
      std::vector<float> dq4(dq.size()), dk4 = base_k, dv4 = base_v;
      std::vector<float> dq5(dq.size()), dk5 = base_k, dv5 = base_v;
      AttentionBackArgs a4 = a, a5 = a;
      a4.dq = dq4.data(), a4.dk = dk4.data(), a4.dv = dv4.data(), a4.kv_from = from;
      a5.dq = dq5.data(), a5.dk = dk5.data(), a5.dv = dv5.data(), a5.kv_from = from;
      AttentionBack(GetKernelSet(GetParam()), a4, 0, c.S);
      scalar::AttentionBack(a5, 0, c.S);
      EXPECT_LE(Nmse(dq4, dq2), 1e-7);
      EXPECT_LE(Nmse(dk4, dk5), 1e-7);
      EXPECT_LE(Nmse(dv4, dv5), 1e-7);
      std::vector<bool> kept(c.R, false);  // rows of keys >= from
      for (int64_t p = from; p < c.first_pos + c.S; ++p) kept[p % c.R] = true;
      for (int64_t r = 0; r < c.R; ++r) {
        for (int64_t i = 0; i < c.KV * c.D; ++i) {
          const size_t e = static_cast<size_t>(r * c.KV * c.D + i);
          if (kept[r]) {
            EXPECT_NEAR(dk4[e], dk2[e], 1e-3 + 1e-3 * std::fabs(dk2[e]));
          } else {
            EXPECT_EQ(dk4[e], base_k[e]);
            EXPECT_EQ(dv4[e], base_v[e]);
          }
        }
      }
    }
  }
}

std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(IsaName(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GradIsaTest, ::testing::ValuesIn(AvailableIsas()),
                         IsaParamName);

// --- The scalar twins against central differences of the forward formulas, in double. ---

constexpr double kH = 1e-5;

double RmsNormDot(const std::vector<double>& x, const std::vector<float>& w,
                  const std::vector<float>& dy, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / x.size() + eps);
  double j = 0;
  for (size_t i = 0; i < x.size(); ++i) j += dy[i] * x[i] * r * w[i];
  return j;
}

TEST(GradScalarTest, RmsNormBackIsTheDerivative) {
  const int64_t n = 24;
  const auto xf = Rand(n, 21, -2, 2), w = Rand(n, 22, 0.5f, 1.5f), dy = Rand(n, 23);
  const float eps = 1e-6f;
  std::vector<float> dx(n);
  scalar::RmsNormBackRow(xf.data(), w.data(), dy.data(), dx.data(), n, eps);
  std::vector<double> x(xf.begin(), xf.end());
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += kH;
    xm[i] -= kH;
    const double fd = (RmsNormDot(xp, w, dy, eps) - RmsNormDot(xm, w, dy, eps)) / (2 * kH);
    EXPECT_NEAR(dx[i], fd, 1e-6 * std::max(1.0, std::fabs(fd))) << i;
  }
}

double Gelu(double g) {
  return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
}

TEST(GradScalarTest, GeluMulBackIsTheDerivative) {
  const int64_t n = 64;
  const auto g = Rand(n, 31, -6, 6), u = Rand(n, 32), dy = Rand(n, 33);
  std::vector<float> dg(n), du(n);
  scalar::GeluMulBack(g.data(), u.data(), dy.data(), dg.data(), n, 0);
  scalar::GeluMulBack(g.data(), u.data(), dy.data(), du.data(), n, 1);
  for (int64_t i = 0; i < n; ++i) {
    const double fd = dy[i] * u[i] * (Gelu(g[i] + kH) - Gelu(g[i] - kH)) / (2 * kH);
    EXPECT_NEAR(dg[i], fd, 1e-6 * std::max(1.0, std::fabs(fd))) << g[i];
    EXPECT_NEAR(du[i], dy[i] * Gelu(g[i]), 1e-6 * std::max(1.0, std::fabs(static_cast<double>(du[i])))) << g[i];
  }
}

TEST(GradScalarTest, CrossEntropyBackIsTheDerivative) {
  const int64_t n = 50;
  const auto xf = Rand(n, 41, -5, 5);
  const int32_t t = 17;
  auto loss = [&](const std::vector<double>& x) {
    double m = *std::max_element(x.begin(), x.end()), s = 0;
    for (double v : x) s += std::exp(v - m);
    return std::log(s) + m - x[t];
  };
  std::vector<double> x(xf.begin(), xf.end());
  EXPECT_NEAR(scalar::CrossEntropyRow(xf.data(), n, t), loss(x), 1e-6 * loss(x));
  std::vector<float> dx(n);
  scalar::CrossEntropyBackRow(xf.data(), n, t, 0.5f, dx.data());
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += kH;
    xm[i] -= kH;
    const double fd = 0.5 * (loss(xp) - loss(xm)) / (2 * kH);
    EXPECT_NEAR(dx[i], fd, 1e-7 + 1e-6 * std::fabs(fd)) << i;
  }
}

// The scalar twin against the head's exact gradient dloss (sum_v p_v E_v - E_t), in double:
// with every token read it is that gradient; with a threshold and a cap it is that gradient
// over the tokens the rule picks (p >= threshold, the max_tokens likeliest) plus the mass left
// out times the mean row, and the difference from the exact one is at most that mass times the
// largest row's norm plus the mean's.
TEST(GradScalarTest, HeadCrossEntropyBackIsTheHeadsGradient) {
  const int64_t V = 3000, D = 32;
  Head h = MakeHead(DType::kF32, V, D, 31);
  const auto x = Rand(V, 32, -12.0f, 12.0f);
  const int32_t t = 17;
  double m = x[0];
  for (float v : x) m = std::max<double>(m, v);
  double sum = 0;
  for (float v : x) sum += std::exp(v - m);
  const double lse = m + std::log(sum);
  std::vector<double> p(V);
  for (int64_t v = 0; v < V; ++v) p[v] = std::exp(x[v] - lse);
  auto gradient = [&](auto keep) {  // dloss (sum_{kept} p_v E_v + tail mean - E_t), dloss 0.5
    std::vector<double> g(D, 0.0);
    double kept = 0;
    for (int64_t v = 0; v < V; ++v) {
      if (v != t && !keep(v)) continue;
      kept += p[v];
      for (int64_t d = 0; d < D; ++d) g[d] += p[v] * h.rows[v * D + d];
    }
    for (int64_t d = 0; d < D; ++d) {
      g[d] = 0.5 * (g[d] - h.rows[t * D + d] + (1.0 - kept) * h.mean[d]);
    }
    return std::pair{g, 1.0 - kept};
  };
  const float loss = static_cast<float>(lse - x[t]);
  auto run = [&](float threshold, int64_t max_tokens, std::vector<float>& dx) {
    h.args.threshold = threshold;
    h.args.max_tokens = max_tokens;
    dx.assign(D, 0.0f);
    return scalar::HeadCrossEntropyBackRow(h.args, x.data(), t, loss, 0.5f, dx.data());
  };
  auto near = [&](const std::vector<float>& got, const std::vector<double>& want, double tol) {
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(got[d], want[d], tol) << d;
  };
  std::vector<float> dx;
  // Every token read: the exact gradient.
  const auto [exact, none] = gradient([](int64_t) { return true; });
  EXPECT_NEAR(run(1e-30f, V, dx), 0.0, 1e-6);
  near(dx, exact, 1e-6);
  // p >= 1e-3: fewer tokens; the rule's own sum.
  const auto [some, some_tail] = gradient([&](int64_t v) { return p[v] >= 1e-3; });
  ASSERT_GT(some_tail, 1e-4) << "the case must leave mass out";
  EXPECT_NEAR(run(1e-3f, V, dx), some_tail, 1e-5);
  near(dx, some, 1e-5);
  double row_max = 0, mean_norm = 0;
  for (int64_t v = 0; v < V; ++v) {
    double n2 = 0;
    for (int64_t d = 0; d < D; ++d) n2 += h.rows[v * D + d] * h.rows[v * D + d];
    row_max = std::max(row_max, std::sqrt(n2));
  }
  for (float v : h.mean) mean_norm += v * v;
  double err2 = 0;
  for (int64_t d = 0; d < D; ++d) err2 += (dx[d] - exact[d]) * (dx[d] - exact[d]);
  EXPECT_LE(std::sqrt(err2), 0.5 * some_tail * (row_max + std::sqrt(mean_norm)) + 1e-6);
  // At most 5 tokens: the 5 likeliest besides the target.
  std::vector<int64_t> order(V);
  for (int64_t v = 0; v < V; ++v) order[v] = v;
  order.erase(order.begin() + t);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  std::vector<bool> top(V, false);
  for (int i = 0; i < 5; ++i) top[order[i]] = true;
  const auto [five, five_tail] = gradient([&](int64_t v) { return top[v]; });
  EXPECT_NEAR(run(1e-30f, 5, dx), five_tail, 1e-5);
  near(dx, five, 1e-5);
}

}  // namespace
}  // namespace fg::kernels
