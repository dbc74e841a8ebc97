// The graph ops of the contract functions (iota, scale, transpose, concat, rope_table,
// attention_kv, dot) on small graphs: shape rules refuse bad operands with a Status, and the
// executor's fast and reference kernels both match a naive double-precision computation here.
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/export/contract.h"
#include "src/graph/graph.h"
#include "src/kernels/ops.h"
#include "tests/testing/exec_inputs.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using ::fg::testing::Nmse;
using ::fg::testing::NoWeights;
using ::fg::testing::Random;
using ::fg::testing::StatusIs;
using graph::Builder;
using graph::ValueId;
using graph::ValueType;
using ::testing::HasSubstr;

// Runs `g` with the given f32 inputs (by name) in reference or fast mode; returns output 0.
// The builder's graph; a build error fails the test (and gives an empty graph).
graph::Graph Finished(Builder& b) {
  auto g = b.Finish();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *std::move(g) : graph::Graph{};
}

std::vector<float> RunF32(graph::Graph g, const std::vector<std::pair<std::string, std::vector<float>>>& in,
                          bool reference, ThreadPool* pool = nullptr) {
  exec::ExecOptions o;
  o.reference = reference;
  auto e = exec::Executor::Create(std::move(g), NoWeights(), pool, o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return {};
  for (const auto& [name, data] : in) EXPECT_TRUE((*e)->SetInput(name, std::span<const float>(data)).ok());
  EXPECT_TRUE((*e)->Run().ok());
  const std::string out = (*e)->graph().output_names()[0];
  auto r = (*e)->OutputF32(out);
  EXPECT_TRUE(r.ok());
  return r.ok() ? std::vector<float>(r->begin(), r->end()) : std::vector<float>{};
}

TEST(ContractOpsTest, TransposeBothPaths) {
  const std::vector<float> x = Random(2 * 3 * 4, 1);
  for (std::vector<int64_t> perm : {std::vector<int64_t>{1, 0, 2}, std::vector<int64_t>{2, 0, 1}}) {
    Builder b;
    ValueId in = b.Input("x", {2, 3, 4}, ValueType::kF32);
    ValueId t = b.Transpose("t", in, perm);
    b.MarkOutput(t, "y");
    graph::Graph g = Finished(b);
    const std::vector<int64_t> shape = g.value(t).shape;
    std::vector<float> want;
    const int64_t strides[3] = {12, 4, 1};
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j)
        for (int64_t k = 0; k < shape[2]; ++k) {
          int64_t idx[3];
          idx[perm[0]] = i;
          idx[perm[1]] = j;
          idx[perm[2]] = k;
          want.push_back(x[idx[0] * strides[0] + idx[1] * strides[1] + idx[2] * strides[2]]);
        }
    EXPECT_EQ(RunF32(g, {{"x", x}}, false), want);
  }
}

TEST(ContractOpsTest, ConcatAlongEachAxis) {
  const std::vector<float> a = Random(2 * 3, 2), bb = Random(2 * 5, 3);
  Builder b;
  ValueId ia = b.Input("a", {2, 3}, ValueType::kF32);
  ValueId ib = b.Input("b", {2, 5}, ValueType::kF32);
  ValueId c = b.Concat("c", ia, ib, 1);
  b.MarkOutput(c);
  std::vector<float> want;
  for (int r = 0; r < 2; ++r) {
    want.insert(want.end(), a.begin() + r * 3, a.begin() + r * 3 + 3);
    want.insert(want.end(), bb.begin() + r * 5, bb.begin() + r * 5 + 5);
  }
  EXPECT_EQ(RunF32(Finished(b), {{"a", a}, {"b", bb}}, false), want);

  Builder b0;
  ValueId x = b0.Input("a", {1, 3}, ValueType::kF32);
  ValueId y = b0.Input("b", {2, 3}, ValueType::kF32);
  ValueId z = b0.Concat("c", x, y, 0);
  b0.MarkOutput(z);
  std::vector<float> p = {1, 2, 3}, q = {4, 5, 6, 7, 8, 9};
  EXPECT_EQ(RunF32(Finished(b0), {{"a", p}, {"b", q}}, false),
            (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// rope_table with the contract's signed tables = the rope op at the same positions.
TEST(ContractOpsTest, RopeTableEqualsRopeAtPositions) {
  const int64_t S = 5, H = 3, D = 16;
  const double base = 1e4;
  const std::vector<float> x = Random(S * H * D, 4);
  for (bool reference : {false, true}) {
    Builder b;
    ValueId in = b.Input("x", {S, H, D}, ValueType::kF32);
    ValueId cs = b.Input("cos", {S, D}, ValueType::kF32);
    ValueId sn = b.Input("sin", {S, D}, ValueType::kF32);
    ValueId r = b.RopeTable("r", in, cs, sn);
    b.MarkOutput(r);
    std::vector<float> c, s;
    exporter::ContractRopeRows(7, S, D, base, &c, &s);
    std::vector<float> got = RunF32(Finished(b), {{"x", x}, {"cos", c}, {"sin", s}}, reference);
    // Naive, in double.
    std::vector<float> want(x.size());
    for (int64_t t = 0; t < S; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          const double a = (7.0 + t) * std::pow(base, -2.0 * i / D);
          const float* xr = &x[(t * H + h) * D];
          want[(t * H + h) * D + i] = static_cast<float>(xr[i] * std::cos(a) - xr[i + D / 2] * std::sin(a));
          want[(t * H + h) * D + i + D / 2] = static_cast<float>(xr[i + D / 2] * std::cos(a) + xr[i] * std::sin(a));
        }
    EXPECT_LE(Nmse(got, want), 1e-12) << reference;
    // The existing rope op (positions 7..11) computes the same rotation.
    Builder b2;
    ValueId in2 = b2.Input("x", {S, H, D}, ValueType::kF32);
    ValueId pos = b2.Input("pos", {S}, ValueType::kI32);
    ValueId r2 = b2.Rope("r", in2, pos, base);
    b2.MarkOutput(r2);
    exec::ExecOptions o;
    o.reference = reference;
    FG_ASSERT_OK_AND_ASSIGN(auto e, exec::Executor::Create(Finished(b2), NoWeights(), nullptr, o));
    std::vector<int32_t> p = {7, 8, 9, 10, 11};
    FG_ASSERT_OK(e->SetInput("x", std::span<const float>(x)));
    FG_ASSERT_OK(e->SetInput("pos", std::span<const int32_t>(p)));
    FG_ASSERT_OK(e->Run());
    FG_ASSERT_OK_AND_ASSIGN(auto r2v, e->OutputF32("r"));
    EXPECT_LE(Nmse(got, std::vector<float>(r2v.begin(), r2v.end())), 1e-12);
  }
}

// Naive attention in double: query i at key T-S+i, causal with window, or an additive mask.
std::vector<float> NaiveAttention(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const float* mask, int64_t S,
                                  int64_t Hq, int64_t KV, int64_t T, int64_t D, float scale,
                                  int64_t window) {
  std::vector<float> out(S * Hq * D);
  for (int64_t i = 0; i < S; ++i)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kvh = h / (Hq / KV), qi = T - S + i;
      std::vector<double> sc(T, -INFINITY);
      double mx = -INFINITY;
      for (int64_t j = 0; j < T; ++j) {
        if (mask == nullptr && (j > qi || (window > 0 && j < qi - window + 1))) continue;
        double d = 0;
        for (int64_t e = 0; e < D; ++e) d += double(q[(i * Hq + h) * D + e]) * k[(kvh * T + j) * D + e];
        sc[j] = d * scale + (mask ? mask[(h * S + i) * T + j] : 0.0);
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (double& s : sc) sum += (s = std::exp(s - mx));
      for (int64_t e = 0; e < D; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < T; ++j) acc += sc[j] / sum * v[(kvh * T + j) * D + e];
        out[(i * Hq + h) * D + e] = static_cast<float>(acc);
      }
    }
  return out;
}

TEST(ContractOpsTest, AttentionKvCausalWindowAndMask) {
  const int64_t S = 5, Hq = 4, KV = 2, D = 16, P = 7, T = P + S, W = 4;
  const float scale = 0.25f;
  const std::vector<float> q = Random(S * Hq * D, 5), k = Random(KV * T * D, 6), v = Random(KV * T * D, 7);
  ThreadPool pool(2);
  for (int64_t window : {int64_t{0}, W}) {
    for (bool masked : {false, true}) {
      SCOPED_TRACE(std::to_string(window) + (masked ? " masked" : " causal"));
      // The contract's chunk mask for rows at positions pos.. with P past keys.
      std::vector<float> mask = exporter::ContractChunkMask(20, P, S, S, window, Hq);
      Builder b;
      ValueId qi = b.Input("q", {S, Hq, D}, ValueType::kF32);
      ValueId ki = b.Input("k", {1, KV, T, D}, ValueType::kF32);
      ValueId vi = b.Input("v", {1, KV, T, D}, ValueType::kF32);
      std::optional<ValueId> mi;
      if (masked) {
        mi = b.Input("mask", {1, Hq, S, T}, ValueType::kF32);
      }
      ValueId a = b.AttentionKV("a", qi, ki, vi, mi, scale, masked ? 0 : window);
      b.MarkOutput(a);
      graph::Graph g = Finished(b);
      std::vector<std::pair<std::string, std::vector<float>>> in = {{"q", q}, {"k", k}, {"v", v}};
      if (masked) in.push_back({"mask", mask});
      // The mask encodes the same causal window, so both variants equal the naive causal one.
      const std::vector<float> want = NaiveAttention(q, k, v, nullptr, S, Hq, KV, T, D, scale, window);
      const std::vector<float> want_masked =
          NaiveAttention(q, k, v, mask.data(), S, Hq, KV, T, D, scale, 0);
      EXPECT_LE(Nmse(want_masked, want), 1e-14);
      EXPECT_LE(Nmse(RunF32(g, in, true), want), 1e-12);
      EXPECT_LE(Nmse(RunF32(g, in, false, &pool), want), 1e-10);
    }
  }
}

TEST(ContractOpsTest, DotScaleIota) {
  const std::vector<float> a = Random(2 * 3, 8), m = Random(3 * 4, 9);
  Builder b;
  ValueId ia = b.Input("a", {2, 3}, ValueType::kF32);
  ValueId im = b.Input("m", {3, 4}, ValueType::kF32);
  ValueId d = b.Dot("d", ia, im);
  ValueId s = b.Scale("s", d, 2.0f);
  b.MarkOutput(s);
  graph::Graph g = Finished(b);
  std::vector<float> want(8);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += double(a[i * 3 + k]) * m[k * 4 + j];
      want[i * 4 + j] = static_cast<float>(acc * 2);
    }
  EXPECT_LE(Nmse(RunF32(g, {{"a", a}, {"m", m}}, true), want), 1e-14);
  EXPECT_LE(Nmse(RunF32(g, {{"a", a}, {"m", m}}, false), want), 1e-12);
  // A one-hot row selects a row exactly.
  Builder b2;
  ValueId sel = b2.Input("sel", {1, 3}, ValueType::kF32);
  ValueId x = b2.Input("x", {3, 4}, ValueType::kF32);
  ValueId r = b2.Dot("r", sel, x);
  b2.MarkOutput(r);
  graph::Graph g2 = Finished(b2);
  for (bool ref : {false, true}) {
    EXPECT_EQ(RunF32(g2, {{"sel", {0, 1, 0}}, {"x", m}}, ref), std::vector<float>(m.begin() + 4, m.begin() + 8));
  }
  Builder b3;
  ValueId io = b3.Iota("i", 5);
  b3.MarkOutput(io);
  FG_ASSERT_OK_AND_ASSIGN(auto e, exec::Executor::Create(Finished(b3), NoWeights(), nullptr));
  FG_ASSERT_OK(e->Run());
  FG_ASSERT_OK_AND_ASSIGN(auto iv, e->OutputI32("i"));
  EXPECT_EQ(std::vector<int32_t>(iv.begin(), iv.end()), (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

// Operands for the shape rules' checks: each check builds one op on a fresh Inputs and reads
// the builder's (first) error.
struct Operands {
  Builder b;
  ValueId x = b.Input("x", {2, 3, 4}, ValueType::kF32);
  ValueId y = b.Input("y", {2, 5, 4}, ValueType::kF32);
  ValueId dyn = b.Input("dyn", {1, 2, graph::kDynamic, 4}, ValueType::kF32);
  ValueId qq = b.Input("q", {3, 4, 4}, ValueType::kF32);
  ValueId k = b.Input("k", {1, 2, 6, 4}, ValueType::kF32);
  ValueId k3 = b.Input("k3", {1, 3, 6, 4}, ValueType::kF32);
  ValueId m = b.Input("m", {1, 4, 3, 5}, ValueType::kF32);
  ValueId m6 = b.Input("m6", {1, 4, 3, 6}, ValueType::kF32);
  ValueId s = b.Input("s", {1, 2}, ValueType::kF32);
  ValueId cs = b.Input("cs", {3, 5}, ValueType::kF32);
};

Status ErrorOf(const std::function<void(Operands&)>& op) {
  Operands o;
  op(o);
  return o.b.status();
}

TEST(ContractOpsTest, ShapeRulesRefuseBadOperands) {
  EXPECT_THAT(ErrorOf([](Operands& o) {
                o.b.Transpose("t", o.x, {0, 0, 1});
              }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a permutation")));
  EXPECT_THAT(ErrorOf([](Operands& o) { o.b.Concat("c", o.x, o.y, 2); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("differ outside axis 2")));
  EXPECT_THAT(ErrorOf([](Operands& o) { o.b.Concat("c", o.x, o.y, 3); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("axis in range")));
  {
    Operands o;
    ValueId cat = o.b.Concat("cat", o.dyn, o.dyn, 2);
    FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, o.b.Finish());
    EXPECT_EQ(g.value(cat).shape, (std::vector<int64_t>{1, 2, graph::kDynamic, 4}));
  }

  EXPECT_THAT(
      ErrorOf([](Operands& o) { o.b.AttentionKV("a", o.qq, o.k3, o.k3, std::nullopt, 1, 0); }),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("disagree")));
  EXPECT_THAT(ErrorOf([](Operands& o) { o.b.AttentionKV("a", o.qq, o.k, o.k, o.m, 1, 0); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("mask must be f32 [1, 4, 3, 6]")));
  EXPECT_THAT(ErrorOf([](Operands& o) { o.b.AttentionKV("a", o.qq, o.k, o.k, o.m6, 1, 2); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no window")));
  FG_EXPECT_OK(ErrorOf([](Operands& o) { o.b.AttentionKV("ok", o.qq, o.k, o.k, o.m6, 1, 0); }));
  EXPECT_THAT(ErrorOf([](Operands& o) { o.b.Dot("d", o.s, o.qq); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("[M,K] x [K,N]")));
  EXPECT_THAT(ErrorOf([](Operands& o) { o.b.RopeTable("r", o.qq, o.cs, o.cs); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cos/sin must be f32 [3, 4]")));
}

TEST(ContractOpsTest, ExecutorRefusesDynamicGraphs) {
  Builder b;
  ValueId d = b.Input("k", {1, 1, graph::kDynamic, 4}, ValueType::kF32);
  b.MarkOutput(d);
  EXPECT_THAT(exec::Executor::Create(Finished(b), NoWeights(), nullptr).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("dynamic shape [1, 1, -1, 4]")));
  Builder r;
  ValueId x = r.Input("k", {1, graph::kDynamic}, ValueType::kF32);
  r.Reshape("r", x, {4});
  EXPECT_THAT(r.status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("dynamic")));
}

// An arena that cannot exist (256 TiB; beyond the address space in 32- and 64-bit builds) is a
// clear ResourceExhausted from Create, never a crash; PlanMemory still reports its size.
TEST(ContractOpsTest, ImpossibleArenaIsResourceExhausted) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on an oversized allocation (allocation-size-too-big) "
                  "instead of returning null unless ASAN_OPTIONS=allocator_may_return_null=1";
#endif
  Builder b;
  ValueId x = b.Input("x", {int64_t{1} << 46}, ValueType::kF32);
  ValueId y = b.Scale("y", x, 2.0f);
  b.MarkOutput(y);
  graph::Graph g = Finished(b);
  const exec::MemoryPlan plan = exec::PlanMemory(g);
  EXPECT_EQ(plan.arena_bytes, uint64_t{2} << 48);
  EXPECT_EQ(plan.largest_bytes, uint64_t{1} << 48);
  EXPECT_THAT(exec::Executor::Create(std::move(g), NoWeights(), nullptr).status(),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("activation memory")));
}

}  // namespace
}  // namespace fg
