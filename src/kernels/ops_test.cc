// Element kernels: every ISA in AvailableIsas() against the scalar twin, and the scalar twin
// against the formula evaluated in double.
//
// Bounds: NMSE (sum (y - ref)^2 / sum ref^2) <= 1e-7 for SIMD vs scalar on every f32 path (the
// docs/design.md kernel bound; the observed values are far smaller), Add/Mul/Scale bit-exact,
// Argmax exact index. exp and gelu: per element relative error <= 3e-7 / 1e-6 vs double.
#include "src/kernels/ops.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fg::kernels {
namespace {

constexpr int64_t kLengths[] = {1, 7, 15, 16, 17, 255, 256, 640, 1000};
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

template <typename A, typename B>
double Nmse(const A& y, const B& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(y[i]) - static_cast<double>(ref[i]);
    num += d * d;
    den += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return den == 0 ? num : num / den;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// y is `exact` (a sum or product of two floats, exact in double) rounded to f32: within half an
// ulp. Written in double so x87 excess precision (i686) cannot blur the expectation.
bool CorrectlyRounded(float y, double exact) {
  return std::fabs(static_cast<double>(y) - exact) <= std::ldexp(std::fabs(exact), -24);
}

double GeluTanhDouble(double g) {
  const double u = std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g);
  return 0.5 * g * (1.0 + std::tanh(u));
}

class OpsIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  const ElementOps& ops() const { return GetElementOps(GetParam()); }
};

TEST_P(OpsIsaTest, RmsNormMatchesScalarAndDouble) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    const auto x = Random(n, 1 + n, -3.0f, 3.0f);
    const auto w = Random(n, 2 + n, 0.5f, 1.5f);
    std::vector<float> y(n), ys(n), yn(n), yns(n);
    ops().rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    scalar::RmsNorm(x.data(), w.data(), ys.data(), n, 1e-6f);
    ops().rms_norm(x.data(), nullptr, yn.data(), n, 1e-6f);
    scalar::RmsNorm(x.data(), nullptr, yns.data(), n, 1e-6f);
    EXPECT_LE(Nmse(y, ys), 1e-7);
    EXPECT_LE(Nmse(yn, yns), 1e-7);
    // Scalar vs double formula.
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
    std::vector<double> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = x[i] * inv * w[i];
    EXPECT_LE(Nmse(ys, ref), 1e-13);
    // In place (y aliases x) gives the same result.
    auto xi = x;
    ops().rms_norm(xi.data(), w.data(), xi.data(), n, 1e-6f);
    EXPECT_TRUE(BitEqual(xi, y));
  }
}

TEST_P(OpsIsaTest, RmsNormRowsIsPerRow) {
  const int64_t rows = 4, n = 256;
  const auto x = Random(rows * n, 7, -2.0f, 2.0f);
  const auto w = Random(n, 8, 0.5f, 1.5f);
  std::vector<float> y(rows * n), row(n);
  RmsNormRowsIsa(GetParam(), x.data(), w.data(), y.data(), rows, n, 1e-6f);
  for (int64_t r = 0; r < rows; ++r) {
    ops().rms_norm(x.data() + r * n, w.data(), row.data(), n, 1e-6f);
    EXPECT_EQ(0, std::memcmp(row.data(), y.data() + r * n, n * sizeof(float))) << r;
  }
}

TEST_P(OpsIsaTest, RmsNormOfZerosIsZeroAndEpsMatters) {
  std::vector<float> x(17, 0.0f), y(17, 1.0f);
  ops().rms_norm(x.data(), nullptr, y.data(), 17, 1e-6f);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  // With x^2 == eps the scale is 1/sqrt(2 eps).
  std::vector<float> c(16, 1e-3f), yc(16);
  ops().rms_norm(c.data(), nullptr, yc.data(), 16, 1e-6f);
  for (float v : yc) EXPECT_NEAR(v, 1e-3 / std::sqrt(2e-6), 1e-5);
}

TEST(RopeTest, TableMatchesDoubleFormula) {
  for (double base : {1e4, 1e6}) {
    for (int64_t pos : {0, 1, 511, 512, 4097}) {
      SCOPED_TRACE(testing::Message() << "base " << base << " pos " << pos);
      const int64_t d = 256;
      std::vector<float> c(d / 2), s(d / 2);
      RopeTable(pos, d, base, c.data(), s.data());
      for (int64_t i = 0; i < d / 2; ++i) {
        const double a = pos * std::pow(base, -2.0 * i / d);
        // Rounding a value in [-1, 1] to f32 errs by at most 2^-25.
        EXPECT_NEAR(c[i], std::cos(a), 3e-8) << i;
        EXPECT_NEAR(s[i], std::sin(a), 3e-8) << i;
      }
      if (pos == 0) {
        for (int64_t i = 0; i < d / 2; ++i) {
          EXPECT_EQ(c[i], 1.0f);
          EXPECT_EQ(s[i], 0.0f);
        }
      }
    }
  }
}

TEST(RopeTest, TablesAreRowsOfTable) {
  const int64_t d = 256, half = d / 2, n = 5, pos0 = 509;
  std::vector<float> c(n * half), s(n * half), c1(half), s1(half);
  RopeTables(pos0, n, d, 1e6, c.data(), s.data());
  for (int64_t p = 0; p < n; ++p) {
    RopeTable(pos0 + p, d, 1e6, c1.data(), s1.data());
    EXPECT_EQ(0, std::memcmp(c1.data(), c.data() + p * half, half * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(s1.data(), s.data() + p * half, half * sizeof(float)));
  }
}

TEST_P(OpsIsaTest, RopeMatchesDoubleFormula) {
  for (int64_t d : {256, 64, 34, 2}) {  // 34 and 2: half not a multiple of the lane count
    for (double base : {1e4, 1e6}) {
      for (int64_t pos : {0, 1, 511, 512, 4097}) {
        SCOPED_TRACE(testing::Message() << "d " << d << " base " << base << " pos " << pos);
        const int64_t heads = 4, half = d / 2;
        const auto x = Random(heads * d, static_cast<uint32_t>(pos + d), -2.0f, 2.0f);
        std::vector<float> c(half), s(half);
        RopeTable(pos, d, base, c.data(), s.data());
        auto y = x, ys = x;
        ops().apply_rope(y.data(), heads, d, c.data(), s.data());
        scalar::ApplyRope(ys.data(), heads, d, c.data(), s.data());
        std::vector<double> ref(heads * d);
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t i = 0; i < half; ++i) {
            const double a = pos * std::pow(base, -2.0 * i / d);
            const double x0 = x[h * d + i], x1 = x[h * d + i + half];
            ref[h * d + i] = x0 * std::cos(a) - x1 * std::sin(a);
            ref[h * d + i + half] = x1 * std::cos(a) + x0 * std::sin(a);
          }
        }
        EXPECT_LE(Nmse(ys, ref), 1e-13);
        EXPECT_LE(Nmse(y, ys), 1e-7);
        EXPECT_LE(Nmse(y, ref), 1e-13);
        if (pos == 0) {
          EXPECT_TRUE(BitEqual(y, x));
        }
      }
    }
  }
}

TEST_P(OpsIsaTest, RopeMultiIsPerPosition) {
  const int64_t d = 256, half = d / 2, heads = 4, n = 3, pos0 = 511;
  const auto x = Random(n * heads * d, 99);
  std::vector<float> c(n * half), s(n * half);
  RopeTables(pos0, n, d, 1e4, c.data(), s.data());
  auto y = x;
  ApplyRopeMultiIsa(GetParam(), y.data(), n, heads, d, c.data(), s.data());
  for (int64_t p = 0; p < n; ++p) {
    std::vector<float> one(x.begin() + p * heads * d, x.begin() + (p + 1) * heads * d);
    ops().apply_rope(one.data(), heads, d, c.data() + p * half, s.data() + p * half);
    EXPECT_EQ(0, std::memcmp(one.data(), y.data() + p * heads * d, heads * d * sizeof(float)));
  }
}

TEST_P(OpsIsaTest, ExpAccuracyAndSpecialValues) {
  // A dense grid over the normal range of exp's result.
  std::vector<float> x;
  for (double v = -87.0; v <= 88.5; v += 0.0137) x.push_back(static_cast<float>(v));
  std::vector<float> y(x.size());
  ops().exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::fabs(y[i] - ref) / ref);
  }
  EXPECT_LE(worst, 3e-7);
  const std::vector<float> sp = {-kInf, kInf, -1e4f, 1e4f, 89.0f, -1e30f, 0.0f,
                                 std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> ys(sp.size());
  ops().exp(sp.data(), ys.data(), static_cast<int64_t>(sp.size()));
  EXPECT_EQ(ys[0], 0.0f);
  EXPECT_EQ(ys[1], kInf);
  EXPECT_EQ(ys[2], 0.0f);
  EXPECT_EQ(ys[3], kInf);
  EXPECT_EQ(ys[4], kInf);
  EXPECT_EQ(ys[5], 0.0f);
  EXPECT_EQ(ys[6], 1.0f);
  EXPECT_TRUE(std::isnan(ys[7]));
}

TEST_P(OpsIsaTest, GeluTanhMulMatchesScalarAndDouble) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    const auto g = Random(n, 11 + n, -6.0f, 6.0f);
    const auto u = Random(n, 12 + n, -2.0f, 2.0f);
    std::vector<float> y(n), ys(n);
    ops().gelu_tanh_mul(g.data(), u.data(), y.data(), n);
    scalar::GeluTanhMul(g.data(), u.data(), ys.data(), n);
    EXPECT_LE(Nmse(y, ys), 1e-7);
    std::vector<double> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = GeluTanhDouble(g[i]) * u[i];
    EXPECT_LE(Nmse(ys, ref), 1e-12);
    EXPECT_LE(Nmse(y, ref), 1e-12);
  }
}

TEST_P(OpsIsaTest, GeluTanhWideRangeNoNanOrOverflow) {
  // g over +-1e4 on a log grid (both signs), up = 1, elementwise against double. The f32
  // argument z = 2u carries a relative error of a few ulps, which exp amplifies by |z| (1 - s)
  // with s = 0.5 (1 + tanh(u)); the bound is that condition number times 2.5e-7. The reference
  // is 0.5 g (1 + tanh(u)) while 1 + tanh(u) is not cancelled in double (s > 1e-9), else the
  // same value written as g / (1 + exp(-2u)).
  std::vector<float> g;
  for (double m = 1e-6; m <= 1e4; m *= 1.013) {
    g.push_back(static_cast<float>(m));
    g.push_back(static_cast<float>(-m));
  }
  g.push_back(0.0f);
  g.push_back(1e4f);
  g.push_back(-1e4f);
  const int64_t n = static_cast<int64_t>(g.size());
  std::vector<float> one(n, 1.0f), y(n);
  ops().gelu_tanh_mul(g.data(), one.data(), y.data(), n);
  double worst_rel = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << g[i];
    const double gd = g[i];
    const double u = std::sqrt(2.0 / M_PI) * (gd + 0.044715 * gd * gd * gd);
    const double s = 0.5 * (1.0 + std::tanh(u));
    const double ref = s > 1e-9 ? GeluTanhDouble(gd) : gd / (1.0 + std::exp(-2.0 * u));
    const double cond = 2.0 + std::fabs(2.0 * u) * (1.0 - s);
    // Absolute floor: 1 / (1 + exp(-2u)) below FLT_MIN is flushed to 0 on armv7 NEON (FTZ).
    const double floor = 1.2e-38 * std::max(1.0, std::fabs(gd));
    EXPECT_LE(std::fabs(y[i] - ref), 2.5e-7 * cond * std::fabs(ref) + floor) << "g=" << g[i];
    if (std::fabs(gd) < 3.0 && ref != 0) {
      worst_rel = std::max(worst_rel, std::fabs(y[i] - ref) / std::fabs(ref));
    }
  }
  // Where the model's activations live (|g| < 3) the plain relative error is below 1e-6.
  EXPECT_LE(worst_rel, 1e-6);
}

TEST_P(OpsIsaTest, SoftmaxMatchesScalarAndDouble) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    const auto x = Random(n, 21 + n, -20.0f, 20.0f);
    auto y = x, ys = x;
    ops().softmax(y.data(), n);
    scalar::Softmax(ys.data(), n);
    EXPECT_LE(Nmse(y, ys), 1e-7);
    double m = -1e300, sum = 0;
    for (float v : x) m = std::max(m, static_cast<double>(v));
    for (float v : x) sum += std::exp(v - m);
    std::vector<double> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = std::exp(x[i] - m) / sum;
    EXPECT_LE(Nmse(ys, ref), 1e-13);
    EXPECT_LE(Nmse(y, ref), 1e-12);
    double total = 0;
    for (float v : y) total += v;
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST_P(OpsIsaTest, SoftmaxMaskedEntries) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    // Every other entry masked with -inf or -1e30: those are exactly 0.
    auto x = Random(n, 31 + n, -5.0f, 5.0f);
    for (int64_t i = 1; i < n; i += 2) x[i] = (i % 4 == 1) ? -kInf : -1e30f;
    auto y = x, ys = x;
    ops().softmax(y.data(), n);
    scalar::Softmax(ys.data(), n);
    for (int64_t i = 1; i < n; i += 2) EXPECT_EQ(y[i], 0.0f) << i;
    EXPECT_LE(Nmse(y, ys), 1e-7);
    // All but one masked: exactly one 1.
    const int64_t keep = n / 2;
    std::vector<float> z(n, -kInf);
    for (int64_t i = 0; i < n; i += 3) z[i] = -1e30f;
    z[keep] = 3.5f;
    ops().softmax(z.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(z[i], i == keep ? 1.0f : 0.0f) << i;
    // Fully masked: all zeros (documented), never NaN.
    std::vector<float> all(n, -kInf);
    ops().softmax(all.data(), n);
    for (float v : all) EXPECT_EQ(v, 0.0f);
  }
}

TEST_P(OpsIsaTest, ArgmaxMatchesScalarExactly) {
  for (int64_t n : {1, 7, 15, 16, 17, 255, 256, 640, 1000, 262144}) {
    SCOPED_TRACE(n);
    for (uint32_t seed = 0; seed < 4; ++seed) {
      const auto x = Random(n, seed * 1000 + static_cast<uint32_t>(n), -30.0f, 30.0f);
      EXPECT_EQ(ops().argmax(x.data(), n), scalar::Argmax(x.data(), n));
    }
    // The max at every position class: first, last, lane tails.
    for (int64_t at : {int64_t{0}, n - 1, n / 2, n > 9 ? int64_t{9} : int64_t{0}}) {
      auto x = Random(n, 77, -1.0f, 1.0f);
      x[at] = 5.0f;
      EXPECT_EQ(ops().argmax(x.data(), n), at);
      EXPECT_EQ(scalar::Argmax(x.data(), n), at);
    }
  }
}

TEST_P(OpsIsaTest, ArgmaxTiesGoToLowestIndex) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    std::vector<float> x(n, 1.0f);  // all tied
    EXPECT_EQ(ops().argmax(x.data(), n), 0);
    if (n < 3) continue;
    x.assign(n, -2.0f);
    x[n - 1] = 7.0f;
    x[n / 2] = 7.0f;
    x[1] = 7.0f;
    EXPECT_EQ(ops().argmax(x.data(), n), 1);
    x[1] = -0.0f;  // -0 == +0: ties between signed zeros too
    x[n / 2] = 0.0f;
    x[n - 1] = 0.0f;
    EXPECT_EQ(ops().argmax(x.data(), n), 1);
    EXPECT_EQ(scalar::Argmax(x.data(), n), 1);
  }
}

TEST_P(OpsIsaTest, ArgmaxSkipsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    std::vector<float> x(n, nan);
    EXPECT_EQ(ops().argmax(x.data(), n), 0);  // all NaN: 0
    EXPECT_EQ(scalar::Argmax(x.data(), n), 0);
    x[n - 1] = -kInf;  // the only non-NaN value wins even at -inf
    EXPECT_EQ(ops().argmax(x.data(), n), n - 1);
    EXPECT_EQ(scalar::Argmax(x.data(), n), n - 1);
    auto r = Random(n, 5 + n);
    for (int64_t i = 0; i < n; i += 3) r[i] = nan;
    EXPECT_EQ(ops().argmax(r.data(), n), scalar::Argmax(r.data(), n));
  }
}

TEST_P(OpsIsaTest, AddMulScaleAreExact) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    const auto a = Random(n, 41 + n), b = Random(n, 42 + n);
    std::vector<float> y(n), ys(n);
    ops().add(a.data(), b.data(), y.data(), n);
    scalar::Add(a.data(), b.data(), ys.data(), n);
    EXPECT_TRUE(BitEqual(y, ys));
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(CorrectlyRounded(ys[i], double{a[i]} + b[i]));
    ops().mul(a.data(), b.data(), y.data(), n);
    scalar::Mul(a.data(), b.data(), ys.data(), n);
    EXPECT_TRUE(BitEqual(y, ys));
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(CorrectlyRounded(ys[i], double{a[i]} * b[i]));
    auto x = a, xs = a;
    ops().scale(x.data(), 0.0625f, n);
    scalar::Scale(xs.data(), 0.0625f, n);
    EXPECT_TRUE(BitEqual(x, xs));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(double{xs[i]}, double{a[i]} * 0.0625);
    // In place: y aliases a.
    auto in = a;
    ops().add(in.data(), b.data(), in.data(), n);
    scalar::Add(a.data(), b.data(), ys.data(), n);
    EXPECT_TRUE(BitEqual(in, ys));
  }
}

TEST_P(OpsIsaTest, DotMatchesDouble) {
  for (int64_t n : {1, 7, 15, 16, 17, 255, 256, 640, 1000, 262144}) {
    SCOPED_TRACE(n);
    const auto a = Random(n, 51 + n), b = Random(n, 52 + n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += static_cast<double>(a[i]) * b[i];
      mag += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    const float ys = scalar::Dot(a.data(), b.data(), n);
    const float y = ops().dot(a.data(), b.data(), n);
    EXPECT_NEAR(ys, ref, 1e-7 * mag + 1e-30);
    // f32 lane accumulation: error grows like eps * sqrt(n / lanes); 2e-6 of sum|ab| covers
    // n = 262144 with margin.
    EXPECT_NEAR(y, ref, 2e-6 * mag);
  }
}

TEST_P(OpsIsaTest, AxpyMatchesScalar) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE(n);
    const auto x = Random(n, 61 + n), y0 = Random(n, 62 + n);
    auto y = y0, ys = y0;
    ops().axpy(0.37f, x.data(), y.data(), n);
    scalar::Axpy(0.37f, x.data(), ys.data(), n);
    EXPECT_LE(Nmse(y, ys), 1e-7);
    std::vector<double> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = y0[i] + 0.37 * x[i];
    EXPECT_LE(Nmse(y, ref), 1e-13);
  }
}

// Every ISA's low_rank (with y, and without: from 0) against the scalar twin and a double reference, for ranks 1..64,
// widths around the vector lengths and 1..9 rows; in place too; and each row's bits are those
// of the row run alone (batch invariance).
TEST_P(OpsIsaTest, LowRankMatchesScalar) {
  for (int64_t r : {1, 3, 16, 64}) {
    for (int64_t n : {1, 7, 16, 33, 64, 100, 640}) {
      for (int64_t m : {1, 4, 9}) {
        SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(r) + "x" + std::to_string(n));
        const auto y = Random(m * n, 71 + n), t = Random(m * r, 72 + r),
                   bt = Random(r * n, 73 + n * r);
        std::vector<float> out(m * n), outs(m * n);
        ops().low_rank(y.data(), t.data(), bt.data(), 0.7f, m, r, n, out.data());
        scalar::LowRank(y.data(), t.data(), bt.data(), 0.7f, m, r, n, outs.data());
        EXPECT_LE(Nmse(out, outs), 1e-12);
        std::vector<double> ref(m * n);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double& e = ref[i * n + j];
            e = y[i * n + j];
            for (int64_t k = 0; k < r; ++k) e += 0.7 * t[i * r + k] * static_cast<double>(bt[k * n + j]);
          }
        }
        EXPECT_LE(Nmse(out, ref), 1e-12);
        auto in_place = y;
        ops().low_rank(in_place.data(), t.data(), bt.data(), 0.7f, m, r, n, in_place.data());
        EXPECT_EQ(in_place, out);
        // Without y: the same sums from 0.
        std::vector<float> from0(m * n), from0s(m * n);
        ops().low_rank(nullptr, t.data(), bt.data(), 0.7f, m, r, n, from0.data());
        scalar::LowRank(nullptr, t.data(), bt.data(), 0.7f, m, r, n, from0s.data());
        std::vector<double> ref0(m * n);
        for (int64_t i = 0; i < m * n; ++i) ref0[i] = ref[i] - y[i];
        EXPECT_LE(Nmse(from0, ref0), 1e-12);
        EXPECT_LE(Nmse(from0, from0s), 1e-12);
        for (int64_t i = 0; i < m; ++i) {
          std::vector<float> one(n);
          ops().low_rank(y.data() + i * n, t.data() + i * r, bt.data(), 0.7f, 1, r, n, one.data());
          EXPECT_EQ(0, std::memcmp(one.data(), out.data() + i * n, n * sizeof(float))) << "row " << i;
        }
      }
    }
  }
}

TEST(OpsDispatchTest, FreeFunctionsFollowActiveIsa) {
  const Isa saved = ActiveIsa();
  for (Isa isa : AvailableIsas()) {
    SetActiveIsa(isa);
    EXPECT_EQ(&GetElementOps(), &GetElementOps(isa));
    const auto x = Random(640, 3);
    std::vector<float> y(640), ye(640);
    RmsNorm(x.data(), nullptr, y.data(), 640, 1e-6f);
    GetElementOps(isa).rms_norm(x.data(), nullptr, ye.data(), 640, 1e-6f);
    EXPECT_TRUE(BitEqual(y, ye));
    EXPECT_EQ(Argmax(x.data(), 640), scalar::Argmax(x.data(), 640));
  }
  SetActiveIsa(saved);
}

std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(IsaName(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, OpsIsaTest, ::testing::ValuesIn(AvailableIsas()),
                         IsaParamName);

}  // namespace
}  // namespace fg::kernels
