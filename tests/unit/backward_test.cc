// The backward pass (src/graph/backward.h), rule by rule: for each differentiable op a tiny
// graph with random inputs, graph::AddBackward with a random cotangent `seed`, run by the
// executor in fast and reference mode; every gradient element is compared with central finite
// differences in double of <seed, y(x)>, computed by the double interpreter
// (tests/testing/graph_double.h). Then the errors AddBackward must report.
//
// Tolerance: MaxGradError (relative, floored at 1% of the tensor's largest element) <= 1e-3.
// The analytic gradients are f32 sums of a few to ~100 terms (relative rounding ~1e-6); the
// finite differences are in double with h = 1e-5 (truncation ~h^2 f''' ~1e-10, cancellation
// ~1e-16 |J| / h ~1e-11), so 1e-3 leaves two to three orders of margin while a wrong rule (a
// missing factor, a wrong sign, a row sent to the wrong place) is off by O(1). The forward
// value itself is also compared (executor vs interpreter, 1e-5), so the interpreter is held to
// the executor's semantics before it judges gradients.
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/graph/backward.h"
#include "src/graph/graph.h"
#include "src/kernels/quant.h"
#include "tests/testing/exec_inputs.h"
#include "tests/testing/graph_double.h"

namespace fg {
namespace {

using ::fg::testing::GraphDouble;
using ::fg::testing::MaxGradError;
using ::fg::testing::Random;
using ::fg::testing::StatusIs;
using graph::Builder;
using graph::ValueId;
using graph::ValueType;
using tensor::DType;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr double kFdStep = 1e-5;
constexpr double kTolerance = 1e-3;

// Stored weights the test owns (quantized from f32 values when asked).
class WeightTable {
 public:
  void Add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values,
           DType type = DType::kF32) {
    const int64_t cols = shape.back(), rows = static_cast<int64_t>(values.size()) / cols;
    const int64_t row_bytes = *tensor::RowBytes(type, cols);
    Entry e{type, std::move(shape), std::vector<uint8_t>(static_cast<size_t>(row_bytes * rows))};
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(kernels::QuantizeRow(type, values.data() + r * cols,
                                       e.bytes.data() + r * row_bytes, cols)
                      .ok());
    }
    entries_[name] = std::move(e);
  }
  // The dequantized values of a weight, row-major.
  std::vector<float> Values(const std::string& name) const {
    const Entry& e = entries_.at(name);
    const int64_t cols = e.shape.back();
    const int64_t row_bytes = *tensor::RowBytes(e.type, cols);
    const int64_t rows = static_cast<int64_t>(e.bytes.size()) / row_bytes;
    std::vector<float> out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(
          kernels::DequantizeRow(e.type, e.bytes.data() + r * row_bytes, out.data() + r * cols, cols)
              .ok());
    }
    return out;
  }
  exec::WeightResolver Resolver() const {
    return [this](std::string_view name) -> StatusOr<exec::WeightData> {
      auto it = entries_.find(std::string(name));
      if (it == entries_.end()) return NotFoundError("no weight " + std::string(name));
      return exec::WeightData{it->second.type, it->second.shape, it->second.bytes.data(),
                              it->second.bytes.size()};
    };
  }

 private:
  struct Entry {
    DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Entry> entries_;
};

// What a case builds: the loss value and the values to differentiate.
struct Built {
  ValueId loss;
  std::vector<ValueId> wrt;
};

struct GradCase {
  std::string name;
  std::function<StatusOr<Built>(Builder&)> build;
  std::map<std::string, std::vector<int32_t>> i32;   // i32 inputs (all of them)
  std::map<std::string, std::vector<float>> f32;     // f32 inputs (the others: random)
  std::map<std::string, std::vector<float>> states;  // state values before the run
  WeightTable weights;
  std::function<graph::TransposedWeight(const graph::Value&)> transposed;
  bool quantized = false;  // a weight is block-quantized
  graph::SparseHead sparse_head;
  // The fast executor's gradients depend on its forward values (a loss over quantized
  // logits), which are off the double function's by the activations' 8-bit rounding: only the
  // reference one is held to the finite differences; the case checks the fast one itself.
  bool fast_gradient_checked_by_case = false;
};

// Central differences of J(v) = <seed, loss(v)> for every element of `wrt`, in double.
std::vector<double> FiniteDifferences(GraphDouble& gd, int loss, const std::vector<double>& seed,
                                      int wrt) {
  const graph::Graph& g = gd.graph();
  const graph::Value& v = g.value(wrt);
  const bool weight = v.type == ValueType::kStored;
  std::vector<double> x;
  if (weight) {
    x = gd.WeightValues(v.name).value();
  } else {
    x = gd.Get(wrt).value();  // the input as last set (a Run has happened)
  }
  auto objective = [&](const std::vector<double>& xv) {
    if (weight) {
      EXPECT_TRUE(gd.OverrideWeight(v.name, xv).ok());
    } else {
      EXPECT_TRUE(gd.SetInput(v.name, std::span<const double>(xv)).ok());
    }
    Status s = gd.Run(loss);
    EXPECT_TRUE(s.ok()) << s.ToString();
    const std::vector<double> y = gd.Get(loss).value();
    double j = 0;
    for (size_t i = 0; i < y.size(); ++i) j += seed[i] * y[i];
    return j;
  };
  std::vector<double> fd(x.size());
  std::vector<double> xp = x;
  for (size_t i = 0; i < x.size(); ++i) {
    xp[i] = x[i] + kFdStep;
    const double jp = objective(xp);
    xp[i] = x[i] - kFdStep;
    const double jm = objective(xp);
    xp[i] = x[i];
    fd[i] = (jp - jm) / (2 * kFdStep);
  }
  objective(x);  // restores the unperturbed value
  return fd;
}

// Builds the case, runs it in both modes and compares every gradient; returns the largest error.
double CheckCase(GradCase& c) {
  SCOPED_TRACE(c.name);
  Builder b;
  auto built = c.build(b);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return INFINITY;
  b.MarkOutput(built->loss, "forward_loss");
  const std::vector<int64_t> loss_shape = b.graph().value(built->loss).shape;
  graph::BackwardSpec spec;
  spec.loss = built->loss;
  spec.seed = b.Input("seed", loss_shape, ValueType::kF32);
  spec.wrt = built->wrt;
  spec.transposed = c.transposed;
  spec.sparse_head = c.sparse_head;
  auto grads = graph::AddBackward(b, spec);
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  if (!grads.ok()) return INFINITY;
  auto finished = b.Finish();
  EXPECT_TRUE(finished.ok()) << finished.status().ToString();
  if (!finished.ok()) return INFINITY;
  const graph::Graph g = *std::move(finished);

  // Inputs: the given ones, the other f32 inputs random.
  uint32_t rnd = 100;
  std::map<std::string, std::vector<float>> f32 = c.f32;
  for (int id : g.inputs()) {
    const graph::Value& v = g.value(id);
    if (v.type == ValueType::kF32 && !f32.count(v.name)) {
      f32[v.name] = Random(static_cast<size_t>(v.elements()), rnd++);
    }
  }
  const std::vector<float>& seed_f = f32["seed"];
  const std::vector<double> seed(seed_f.begin(), seed_f.end());

  GraphDouble gd(g, c.weights.Resolver());
  for (const auto& [name, v] : f32) {
    if (name != "seed") {
      EXPECT_TRUE(gd.SetInput(name, std::span<const float>(v)).ok()) << name;
    }
  }
  for (const auto& [name, v] : c.i32) EXPECT_TRUE(gd.SetInput(name, std::span<const int32_t>(v)).ok());
  for (const auto& [name, v] : c.states) EXPECT_TRUE(gd.SetState(name, std::span<const float>(v)).ok());
  Status s = gd.Run(built->loss);
  EXPECT_TRUE(s.ok()) << s.ToString();
  const std::vector<double> want_loss = gd.Get(built->loss).value();

  std::vector<std::vector<double>> fd;
  for (int w : built->wrt) fd.push_back(FiniteDifferences(gd, built->loss, seed, w));

  double worst = 0;
  ThreadPool pool(2);
  for (bool reference : {false, true}) {
    SCOPED_TRACE(reference ? "reference" : "fast");
    exec::ExecOptions o;
    o.reference = reference;
    auto e = exec::Executor::Create(g, c.weights.Resolver(), &pool, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return INFINITY;
    for (const auto& [name, v] : f32) EXPECT_TRUE((*e)->SetInput(name, std::span<const float>(v)).ok());
    for (const auto& [name, v] : c.i32) EXPECT_TRUE((*e)->SetInput(name, std::span<const int32_t>(v)).ok());
    std::map<std::string, std::vector<float>> states = c.states;  // cache writes change them
    for (auto& [name, v] : states) EXPECT_TRUE((*e)->BindState(name, v.data(), v.size()).ok());
    s = (*e)->Run();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return INFINITY;
    const auto loss = (*e)->OutputF32("forward_loss").value();
    // Fast matmuls of quantized weights quantize their activations too (8-bit): the forward
    // value is that far from the dequantized one in double (the gradients wrt x are not: they
    // go through the f32 transpose). The reference matmul dequantizes and sums in double.
    EXPECT_LE(MaxGradError(loss, want_loss), reference || !c.quantized ? 1e-5 : 1e-1)
        << "forward value";
    for (size_t i = 0; i < built->wrt.size(); ++i) {
      const std::string& name = g.value(built->wrt[i]).name;
      auto got = (*e)->OutputF32("grad." + name);
      EXPECT_TRUE(got.ok()) << got.status().ToString();
      if (!got.ok()) return INFINITY;
      const double err = MaxGradError(*got, fd[i]);
      const bool checked = reference || !c.fast_gradient_checked_by_case;
      if (checked) {
        EXPECT_LE(err, kTolerance) << "d/d " << name;
      }
      std::cout << "[ grad    ] " << c.name << " " << (reference ? "reference" : "fast") << " d/d "
                << name << " (" << got->size() << " elements): max rel error " << err
                << (checked ? "" : " (not checked here: the case checks it)") << "\n";
      if (checked) worst = std::max(worst, err);
    }
  }
  return worst;
}

ValueId F32In(Builder& b, const std::string& name, std::vector<int64_t> shape) {
  return b.Input(name, std::move(shape), ValueType::kF32);
}

TEST(BackwardGradTest, RmsNorm) {
  for (int rank : {2, 3}) {
    GradCase c;
    c.name = "rms_norm rank " + std::to_string(rank);
    std::vector<float> w = Random(16, 3);
    for (float& v : w) v = 1.0f + 0.5f * v;
    c.weights.Add("norm", {16}, w);
    c.build = [rank](Builder& b) -> StatusOr<Built> {
      std::vector<int64_t> shape = rank == 2 ? std::vector<int64_t>{3, 16}
                                             : std::vector<int64_t>{2, 2, 16};
      ValueId x = F32In(b, "x", shape);
      ValueId w = b.Weight("norm", {16}, DType::kF32);
      ValueId y = b.RmsNorm("y", x, w, 1e-6f);
      return Built{y, {x}};
    };
    CheckCase(c);
  }
}

TEST(BackwardGradTest, MatMulF32WrtInputAndWeight) {
  GradCase c;
  c.name = "matmul f32";
  c.weights.Add("W", {5, 8}, Random(40, 4));
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {3, 8});
    ValueId w = b.Weight("W", {5, 8}, DType::kF32);
    ValueId y = b.MatMul("y", x, w);
    // A nonlinearity after the projection, so dW and dx depend on x and on W.
    ValueId z = b.GeluMul("z", y, y);
    return Built{z, {x, w}};
  };
  CheckCase(c);
}

// A frozen quantized weight: dx through its F32 transpose "<name>^T" that the test serves.
TEST(BackwardGradTest, MatMulQuantizedThroughTransposedWeight) {
  for (DType type : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    GradCase c;
    c.name = "matmul " + std::string(tensor::DTypeName(type));
    const int64_t N = 6, K = 256;  // a K-quant row is one 256-element super-block
    c.weights.Add("W", {N, K}, Random(N * K, 5), type);
    const std::vector<float> wq = c.weights.Values("W");
    std::vector<float> wt(static_cast<size_t>(K * N));
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) wt[k * N + n] = wq[n * K + k];
    }
    c.weights.Add("W^T", {K, N}, wt);
    c.transposed = [](const graph::Value& w) { return graph::TransposedName(w, DType::kF32); };
    c.quantized = true;
    c.build = [&](Builder& b) -> StatusOr<Built> {
      ValueId x = F32In(b, "x", {2, K});
      ValueId w = b.Weight("W", {N, K}, type);
      ValueId y = b.MatMul("y", x, w);
      return Built{y, {x}};
    };
    CheckCase(c);
  }
}

// low_rank of x [rows, in] and an f32 weight [in, out] at `scale`, with an addend or not,
// under a GELU product.
GradCase LowRankCase(std::string name, int64_t rows, int64_t in, int64_t out, float scale,
                     bool addend, uint32_t seed) {
  GradCase c;
  c.name = std::move(name);
  c.weights.Add("Wlr", {in, out}, Random(static_cast<size_t>(in * out), seed));
  c.build = [=](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {rows, in});
    std::optional<ValueId> y;
    if (addend) y = F32In(b, "y", {rows, out});
    ValueId w = b.Weight("Wlr", {in, out}, DType::kF32);
    ValueId o = b.LowRank("o", x, w, scale, y);
    Built built{b.GeluMul("z", o, o), {x, w}};
    if (y) built.wrt.push_back(*y);
    return built;
  };
  return c;
}

TEST(BackwardGradTest, LowRankWrtInputWeightAndAddend) {
  for (float scale : {1.0f, 0.7f}) {
    GradCase c = LowRankCase("low_rank scale " + std::to_string(scale), 3, 6, 4, scale, true, 6);
    CheckCase(c);
  }
}

TEST(BackwardGradTest, ReshapeAndTranspose) {
  GradCase c;
  c.name = "reshape + transpose";
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {4, 6});
    ValueId r = b.Reshape("r", x, {2, 3, 4});
    ValueId t = b.Transpose("t", r, {2, 0, 1});
    ValueId u = F32In(b, "u", {4, 2, 3});
    ValueId z = b.GeluMul("z", t, u);  // elementwise weights per position
    return Built{z, {x}};
  };
  CheckCase(c);
}

TEST(BackwardGradTest, Rope) {
  GradCase c;
  c.name = "rope";
  c.i32["pos"] = {0, 3, 17, 1000};
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {4, 2, 8});
    ValueId pos = b.Input("pos", {4}, ValueType::kI32);
    ValueId y = b.Rope("y", x, pos, 10000.0);
    ValueId u = F32In(b, "u", {4, 2, 8});
    ValueId z = b.GeluMul("z", y, u);
    return Built{z, {x}};
  };
  CheckCase(c);
}

// Cache attention: GQA (4 query heads over 2 KV heads), cache rows of a prefix the call does not
// write (random: they are constants), and the call's own rows written by cache_write.
struct AttnSpec {
  std::string name;
  int64_t S, Hq, KV, D, R, window;
  std::vector<int32_t> pos;
};

void CheckAttention(const AttnSpec& a) {
  GradCase c;
  c.name = a.name;
  c.i32["pos"] = a.pos;
  c.states["kc"] = Random(static_cast<size_t>(a.R * a.KV * a.D), 11);
  c.states["vc"] = Random(static_cast<size_t>(a.R * a.KV * a.D), 12);
  // q and k scaled up so that the softmax is far from uniform.
  std::vector<float> q = Random(static_cast<size_t>(a.S * a.Hq * a.D), 13);
  for (float& v : q) v *= 3.0f;
  c.f32["q"] = q;
  c.build = [&a](Builder& b) -> StatusOr<Built> {
    ValueId q = F32In(b, "q", {a.S, a.Hq, a.D});
    ValueId k = F32In(b, "k", {a.S, a.KV, a.D});
    ValueId v = F32In(b, "v", {a.S, a.KV, a.D});
    ValueId pos = b.Input("pos", {a.S}, ValueType::kI32);
    ValueId kc = b.State("kc", {a.R, a.KV, a.D});
    ValueId vc = b.State("vc", {a.R, a.KV, a.D});
    ValueId kc2 = b.CacheWrite("kc2", kc, k, pos);
    ValueId vc2 = b.CacheWrite("vc2", vc, v, pos);
    ValueId o = b.Attention("o", q, kc2, vc2, pos, 0.6f, a.window);
    return Built{o, {q, k, v}};
  };
  CheckCase(c);
}

TEST(BackwardGradTest, AttentionGlobalWithCachedPrefix) {
  // Positions 3..6 after a cached prefix 0..2; 8 rows, no window.
  CheckAttention({"attention global prefix", 4, 4, 2, 8, 8, 0, {3, 4, 5, 6}});
}

TEST(BackwardGradTest, AttentionSlidingRingThatWraps) {
  // Window 3, a ring of 5 rows: positions 6..8 go to rows 1..3, query 6 reads keys 4, 5 (rows
  // 4, 0: the cached prefix) and 6.
  CheckAttention({"attention sliding ring", 3, 4, 2, 8, 5, 3, {6, 7, 8}});
  // Window 4, 7 rows, 4 positions 9..12 (rows 2..5): every query reads prefix and new rows.
  CheckAttention({"attention sliding ring 2", 4, 4, 1, 8, 7, 4, {9, 10, 11, 12}});
  // One token (decode) at position 13 in a ring of 4 rows, window 4.
  CheckAttention({"attention decode", 1, 2, 1, 8, 4, 4, {13}});
}

// Caches written at the queries' positions: attention_back computes dK/dV for those rows only
// (the finite-difference checks above run that way); caches that are plain values: all rows.
TEST(BackwardGradTest, AttentionBackSkipsKeysOnlyBehindACacheWrite) {
  for (bool via_cache_write : {true, false}) {
    Builder b;
    const ValueId q = F32In(b, "q", {2, 2, 8});
    const ValueId pos = b.Input("pos", {2}, ValueType::kI32);
    ValueId kc, vc;
    if (via_cache_write) {
      kc = b.CacheWrite("kc2", b.State("kc", {6, 1, 8}), F32In(b, "k", {2, 1, 8}), pos);
      vc = b.CacheWrite("vc2", b.State("vc", {6, 1, 8}), F32In(b, "v", {2, 1, 8}), pos);
    } else {
      kc = F32In(b, "kc", {6, 1, 8});
      vc = F32In(b, "vc", {6, 1, 8});
    }
    const ValueId o = b.Attention("o", q, kc, vc, pos, 0.5f, 0);
    graph::BackwardSpec s{o, F32In(b, "seed", {2, 16}), {q}, {}};
    ASSERT_TRUE(graph::AddBackward(b, s).ok());
    int found = 0;
    for (const graph::Node& n : b.graph().nodes()) {
      if (n.op != graph::OpKind::kAttentionBack) continue;
      ++found;
      EXPECT_EQ(n.written_keys_only, via_cache_write);
    }
    EXPECT_EQ(found, 1);
  }
}

TEST(BackwardGradTest, AttentionNoPrefix) {
  CheckAttention({"attention no prefix", 5, 2, 2, 8, 5, 0, {0, 1, 2, 3, 4}});
}

TEST(BackwardGradTest, GeluMulBothOperands) {
  GradCase c;
  c.name = "gelu_mul";
  std::vector<float> gate = Random(60, 21);
  for (float& v : gate) v *= 4.0f;  // the curved part of gelu and both tails
  c.f32["gate"] = gate;
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId g = F32In(b, "gate", {3, 20});
    ValueId u = F32In(b, "up", {3, 20});
    ValueId y = b.GeluMul("y", g, u);
    return Built{y, {g, u}};
  };
  CheckCase(c);
}

TEST(BackwardGradTest, AddBothOperandsAndTwoPaths) {
  GradCase c;
  c.name = "add";
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "a", {3, 5});
    ValueId y = F32In(b, "b", {3, 5});
    ValueId s = b.Add("s", x, y);
    ValueId s2 = b.Add("s2", s, x);  // a reaches the loss twice
    ValueId z = b.GeluMul("z", s2, y);
    return Built{z, {x, y}};
  };
  CheckCase(c);
}

TEST(BackwardGradTest, SelectRowsWithRepeatedRows) {
  GradCase c;
  c.name = "select_rows";
  c.i32["rows"] = {4, 0, 4, 2};
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {5, 6});
    ValueId rows = b.Input("rows", {4}, ValueType::kI32);
    ValueId y = b.SelectRows("y", x, rows);
    ValueId z = b.GeluMul("z", y, y);
    return Built{z, {x}};
  };
  CheckCase(c);
}

TEST(BackwardGradTest, Scale) {
  GradCase c;
  c.name = "scale";
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {2, 7});
    ValueId y = b.Scale("y", x, -1.7f);
    ValueId z = b.GeluMul("z", y, x);
    return Built{z, {x}};
  };
  CheckCase(c);
}

TEST(BackwardGradTest, DotBothOperands) {
  GradCase c;
  c.name = "dot";
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "a", {3, 4});
    ValueId y = F32In(b, "b", {4, 5});
    ValueId d = b.Dot("d", x, y);
    ValueId z = b.GeluMul("z", d, d);
    return Built{z, {x, y}};
  };
  CheckCase(c);
}

// Two products share their right operand, whose gradient is not asked for: each rule makes
// its own transpose of it.
TEST(BackwardGradTest, TwoDotsShareAnOperand) {
  GradCase c;
  c.name = "two dots";
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId a1 = F32In(b, "a1", {3, 4});
    ValueId a2 = F32In(b, "a2", {3, 4});
    ValueId m = F32In(b, "m", {4, 5});
    ValueId d1 = b.Dot("d1", a1, m);
    ValueId d2 = b.Dot("d2", a2, m);
    ValueId z = b.GeluMul("z", d1, d2);
    return Built{z, {a1, a2}};
  };
  CheckCase(c);
}

// dot_tn of a [k, m] and b [k, n] (a^T b) under a GELU product, both operands' gradients.
GradCase DotTNCase(std::string name, int64_t k, int64_t m, int64_t n) {
  GradCase c;
  c.name = std::move(name);
  c.build = [=](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "a", {k, m});
    ValueId y = F32In(b, "b", {k, n});
    ValueId d = b.DotTN("d", x, y);
    ValueId z = b.GeluMul("z", d, d);
    return Built{z, {x, y}};
  };
  return c;
}

TEST(BackwardGradTest, DotTNBothOperands) {
  GradCase c = DotTNCase("dot_tn", 4, 3, 5);
  CheckCase(c);
}

// A LoRA's products at sizes the 2-thread pool splits: dot_tn's 16 rows (its rank) and
// low_rank's 24 rows run in ranges of at least 8 rows, dot_tn through low_rank over its rows
// of a^T. The fast gradients are held to the finite differences like the small cases.
TEST(BackwardGradTest, LoraSizedProductsSplitOverTheThreads) {
  GradCase tn = DotTNCase("dot_tn, 16 rows split", 16, 16, 256);
  CheckCase(tn);
  GradCase lr = LowRankCase("low_rank, 24 rows split", 24, 16, 128, 0.5f, false, 7);
  CheckCase(lr);
}

TEST(BackwardGradTest, CrossEntropyWithRowWithoutTarget) {
  GradCase c;
  c.name = "cross_entropy";
  c.i32["targets"] = {3, -1, 0, 9};
  std::vector<float> logits = Random(40, 31);
  for (float& v : logits) v *= 4.0f;
  c.f32["logits"] = logits;
  c.build = [](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "logits", {4, 10});
    ValueId t = b.Input("targets", {4}, ValueType::kI32);
    ValueId l = b.CrossEntropy("loss", x, t);
    return Built{l, {x}};
  };
  CheckCase(c);
}

// The LM head over a few candidate rows per row (quantized, with padding and a repeated
// candidate) into the loss: dx through candidate_logits_back. Candidates are dequantized and
// summed in f32, so the forward value matches the double oracle in fast mode too.
TEST(BackwardGradTest, CandidateLogitsQuantizedWithPadding) {
  for (DType type : {DType::kF32, DType::kQ8_0, DType::kQ6_K}) {
    GradCase c;
    c.name = "candidate_logits " + std::string(tensor::DTypeName(type));
    const int64_t V = 9, D = 256, R = 3, C = 4;
    c.weights.Add("head", {V, D}, Random(V * D, 51), type);
    c.i32["ids"] = {4, 0, 8, -1, 2, 2, 7, 5, 1, -1, -1, 3};
    c.i32["targets"] = {2, 0, 3};
    c.build = [=](Builder& b) -> StatusOr<Built> {
      ValueId x = F32In(b, "x", {R, D});
      ValueId w = b.Weight("head", {V, D}, type);
      ValueId ids = b.Input("ids", {R, C}, ValueType::kI32);
      ValueId logits = b.CandidateLogits("logits", x, w, ids);
      ValueId t = b.Input("targets", {R}, ValueType::kI32);
      return Built{b.CrossEntropy("loss", logits, t), {x}};
    };
    CheckCase(c);
  }
}

// The loss through a frozen quantized LM head with the sparse head gradient on (BackwardSpec::
// sparse_head): dx comes from head_cross_entropy_back, which reads the head's rows and its mean
// row, never a transpose (none is served). With every token's p above the threshold it is the
// exact gradient; a row without a target gets 0.
TEST(BackwardGradTest, SparseHeadThroughHeadCrossEntropyBack) {
  GradCase c;
  c.name = "sparse head";
  const int64_t V = 40, D = 64, R = 3;
  c.weights.Add("head", {V, D}, Random(V * D, 53), DType::kQ8_0);
  const std::vector<float> rows = c.weights.Values("head");
  std::vector<float> mean(D, 0.0f);
  for (int64_t v = 0; v < V; ++v) {
    for (int64_t d = 0; d < D; ++d) mean[d] += rows[v * D + d] / V;
  }
  c.weights.Add("head^mean", {D}, mean);
  c.quantized = true;
  c.sparse_head.threshold = 1e-9f;
  c.sparse_head.max_tokens = V;
  c.sparse_head.mean = [](const graph::Value& w) { return w.name + "^mean"; };
  c.i32["targets"] = {7, -1, 39};
  c.build = [=](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {R, D});
    ValueId w = b.Weight("head", {V, D}, DType::kQ8_0);
    ValueId logits = b.MatMul("logits", x, w);
    ValueId t = b.Input("targets", {R}, ValueType::kI32);
    return Built{b.CrossEntropy("loss", logits, t), {x}};
  };
  c.fast_gradient_checked_by_case = true;
  CheckCase(c);

  // The fast executor: the same gradient as cross_entropy_back and the exact f32 transpose on
  // the same (quantized) logits.
  std::vector<float> wt(static_cast<size_t>(D * V));
  for (int64_t v = 0; v < V; ++v) {
    for (int64_t d = 0; d < D; ++d) wt[d * V + v] = rows[v * D + d];
  }
  c.weights.Add("head^T", {D, V}, wt);
  const std::vector<float> x = Random(R * D, 54), seed = Random(R, 55);
  std::vector<std::vector<float>> dx;
  ThreadPool pool(2);
  for (bool sparse : {true, false}) {
    Builder b;
    auto built = c.build(b);
    ASSERT_TRUE(built.ok());
    graph::BackwardSpec spec{built->loss, F32In(b, "seed", {R}), built->wrt, {}};
    spec.transposed = [](const graph::Value& w) { return graph::TransposedName(w, DType::kF32); };
    if (sparse) spec.sparse_head = c.sparse_head;
    ASSERT_TRUE(graph::AddBackward(b, spec).ok());
    auto g = b.Finish();
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto e = exec::Executor::Create(*std::move(g), c.weights.Resolver(), &pool, {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE((*e)->SetInput("x", std::span<const float>(x)).ok());
    ASSERT_TRUE((*e)->SetInput("seed", std::span<const float>(seed)).ok());
    ASSERT_TRUE((*e)->SetInput("targets", std::span<const int32_t>(c.i32["targets"])).ok());
    ASSERT_TRUE((*e)->Run().ok());
    const auto got = (*e)->OutputF32("grad.x").value();
    dx.emplace_back(got.begin(), got.end());
  }
  const std::vector<double> dense(dx[1].begin(), dx[1].end());
  EXPECT_LE(MaxGradError(dx[0], dense), 1e-5);
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(dx[0][D + d], 0.0f) << "the row without a target";
}

// The rule takes head_cross_entropy_back only where it is the whole story: a frozen quantized
// head whose logits nothing else reads. Logits read twice (or an f32 head) go through
// cross_entropy_back and the transpose as before.
TEST(BackwardGraphTest, SparseHeadOnlyWhereTheLogitsFeedTheLossAlone) {
  for (bool twice : {false, true}) {
    Builder b;
    const ValueId x = F32In(b, "x", {2, 32});
    const ValueId w = b.Weight("head", {8, 32}, DType::kQ8_0);
    const ValueId logits = b.MatMul("logits", x, w);
    ValueId loss = b.CrossEntropy("loss", logits, b.Input("t", {2}, ValueType::kI32));
    if (twice)
      loss =
          b.Add("loss2", loss, b.CrossEntropy("again", logits, b.Input("u", {2}, ValueType::kI32)));
    graph::BackwardSpec s{loss, F32In(b, "seed", {2}), {x}, {}};
    s.transposed = [](const graph::Value& v) { return graph::TransposedName(v, DType::kQ8_0); };
    s.sparse_head.threshold = 1e-5f;
    s.sparse_head.max_tokens = 16;
    s.sparse_head.mean = [](const graph::Value& v) { return v.name + "^mean"; };
    ASSERT_TRUE(graph::AddBackward(b, s).ok());
    int sparse = 0, dense = 0;
    for (const graph::Node& n : b.graph().nodes()) {
      sparse += n.op == graph::OpKind::kHeadCrossEntropyBack;
      dense += n.op == graph::OpKind::kCrossEntropyBack;
    }
    EXPECT_EQ(sparse, twice ? 0 : 1);
    EXPECT_EQ(dense, twice ? 2 : 0);
    EXPECT_EQ(b.graph().Find("head^T").valid(), twice);
    EXPECT_EQ(b.graph().Find("head^mean").valid(), !twice);
  }
}

TEST(BackwardErrorTest, HeadCrossEntropyBackRefusesABadThreshold) {
  Builder b;
  const ValueId w = b.Weight("head", {8, 32}, DType::kQ8_0);
  const ValueId mean = b.Weight("mean", {32}, DType::kF32);
  const ValueId logits = F32In(b, "logits", {2, 8});
  const ValueId t = b.Input("t", {2}, ValueType::kI32);
  const ValueId loss = F32In(b, "loss", {2});
  b.HeadCrossEntropyBack("dx", w, mean, logits, t, loss, loss, 1.5f, 4);
  EXPECT_THAT(b.status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("threshold")));
}

// The training graph's two losses (the whole head for some rows, candidates for others) joined
// by a concat along axis 0: each part's gradient is its slice of the seed.
TEST(BackwardGradTest, ConcatOfTwoLosses) {
  GradCase c;
  c.name = "concat";
  const int64_t V = 7, D = 16;
  c.weights.Add("head", {V, D}, Random(V * D, 52));
  c.i32["ids"] = {6, 1, -1, 3, 0, 2};
  c.i32["tf"] = {5, 2};
  c.i32["ts"] = {0, 2};
  c.build = [=](Builder& b) -> StatusOr<Built> {
    ValueId xf = F32In(b, "xf", {2, D});
    ValueId xs = F32In(b, "xs", {2, D});
    ValueId w = b.Weight("head", {V, D}, DType::kF32);
    ValueId lf = b.CrossEntropy("lf", b.MatMul("full", xf, w), b.Input("tf", {2}, ValueType::kI32));
    ValueId ids = b.Input("ids", {2, 3}, ValueType::kI32);
    ValueId ls = b.CrossEntropy("ls", b.CandidateLogits("cand", xs, w, ids),
                                b.Input("ts", {2}, ValueType::kI32));
    return Built{b.Concat("loss", lf, ls, 0), {xf, xs}};
  };
  CheckCase(c);
}

// A small chain of everything at once: norm, projections, rope, attention, gelu, residual,
// select, LM-head-like matmul and the loss; gradients of an input and two f32 weights.
TEST(BackwardGradTest, Chain) {
  GradCase c;
  c.name = "chain";
  const int64_t S = 3, H = 16, Hq = 2, KV = 1, D = 8, R = 6, V = 12;
  c.i32["pos"] = {4, 5, 6};
  c.i32["rows"] = {2, 0};
  c.i32["targets"] = {5, 11};
  c.states["kc"] = Random(R * KV * D, 41);
  c.states["vc"] = Random(R * KV * D, 42);
  std::vector<float> nw = Random(H, 43);
  for (float& v : nw) v = 1.0f + 0.3f * v;
  c.weights.Add("norm", {H}, nw);
  c.weights.Add("wq", {Hq * D, H}, Random(Hq * D * H, 44));
  c.weights.Add("wk", {KV * D, H}, Random(KV * D * H, 45));
  c.weights.Add("wv", {KV * D, H}, Random(KV * D * H, 46));
  c.weights.Add("wo", {H, Hq * D}, Random(H * Hq * D, 47));
  c.weights.Add("head", {V, H}, Random(V * H, 48));
  c.build = [=](Builder& b) -> StatusOr<Built> {
    ValueId x = F32In(b, "x", {S, H});
    ValueId pos = b.Input("pos", {S}, ValueType::kI32);
    ValueId nwv = b.Weight("norm", {H}, DType::kF32);
    ValueId wq = b.Weight("wq", {Hq * D, H}, DType::kF32);
    ValueId wk = b.Weight("wk", {KV * D, H}, DType::kF32);
    ValueId wv = b.Weight("wv", {KV * D, H}, DType::kF32);
    ValueId wo = b.Weight("wo", {H, Hq * D}, DType::kF32);
    ValueId head = b.Weight("head", {V, H}, DType::kF32);
    ValueId h = b.RmsNorm("h", x, nwv, 1e-6f);
    ValueId q = b.MatMul("q", h, wq);
    ValueId k = b.MatMul("k", h, wk);
    ValueId v = b.MatMul("v", h, wv);
    ValueId q3 = b.Reshape("q3", q, {S, Hq, D});
    ValueId k3 = b.Reshape("k3", k, {S, KV, D});
    ValueId v3 = b.Reshape("v3", v, {S, KV, D});
    ValueId qr = b.Rope("qr", q3, pos, 10000.0);
    ValueId kr = b.Rope("kr", k3, pos, 10000.0);
    ValueId kc = b.State("kc", {R, KV, D});
    ValueId vc = b.State("vc", {R, KV, D});
    ValueId kc2 = b.CacheWrite("kc2", kc, kr, pos);
    ValueId vc2 = b.CacheWrite("vc2", vc, v3, pos);
    ValueId att = b.Attention("att", qr, kc2, vc2, pos, 0.35f, 4);
    ValueId o = b.MatMul("o", att, wo);
    ValueId res = b.Add("res", x, o);
    ValueId act = b.GeluMul("act", res, res);
    ValueId rows = b.Input("rows", {2}, ValueType::kI32);
    ValueId sel = b.SelectRows("sel", act, rows);
    ValueId logits = b.MatMul("logits", sel, head);
    ValueId t = b.Input("targets", {2}, ValueType::kI32);
    ValueId l = b.CrossEntropy("loss", logits, t);
    return Built{l, {x, wq, wv}};
  };
  CheckCase(c);
}

// --- Errors. ---

TEST(BackwardErrorTest, OpWithoutRuleIsUnimplementedNamingTheValue) {
  {
    Builder b;
    // Along axis 1 of [2,3] the operands interleave: no slice is their gradient.
    const ValueId x = F32In(b, "x", {2, 3});
    const ValueId y = F32In(b, "y", {2, 3});
    const ValueId cat = b.Concat("joined", x, y, 1);
    const ValueId seed = F32In(b, "seed", {2, 6});
    graph::BackwardSpec s{cat, seed, {x}, {}};
    EXPECT_THAT(graph::AddBackward(b, s).status(),
                StatusIs(StatusCode::kUnimplemented, AllOf(HasSubstr("concat"), HasSubstr("'joined'"))));
  }
  {
    Builder b;
    const ValueId q = F32In(b, "q", {1, 2, 4});
    const ValueId k = F32In(b, "k", {1, 1, 3, 4});
    const ValueId v = F32In(b, "v", {1, 1, 3, 4});
    const ValueId att = b.AttentionKV("attkv", q, k, v, std::nullopt, 0.5f, 0);
    const ValueId seed = F32In(b, "seed", {1, 8});
    graph::BackwardSpec s{att, seed, {q}, {}};
    EXPECT_THAT(graph::AddBackward(b, s).status(),
                StatusIs(StatusCode::kUnimplemented, HasSubstr("'attkv'")));
  }
  {
    // A backward op on the path (the gradient of a gradient).
    Builder b;
    const ValueId x = F32In(b, "x", {2, 4});
    const ValueId y = b.Scale("y", x, 2.0f);
    const ValueId z = b.GeluMul("z", y, y);
    const ValueId seed = F32In(b, "seed", {2, 4});
    graph::BackwardSpec s{z, seed, {x}, {}};
    auto g = graph::AddBackward(b, s);
    FG_ASSERT_OK(g.status());
    const ValueId seed2 = F32In(b, "seed2", {2, 4});
    graph::BackwardSpec s2{(*g)[0], seed2, {x}, {}, "grad2."};
    EXPECT_THAT(graph::AddBackward(b, s2).status(),
                StatusIs(StatusCode::kUnimplemented, HasSubstr("gelu_mul_back")));
  }
}

// argmax has no rule, but no gradient can reach it: its i32 output feeds only ids (embedding,
// select_rows rows), which carry none. A loss through argmax is therefore "does not depend".
TEST(BackwardErrorTest, ArgmaxCarriesNoGradient) {
  Builder b;
  const ValueId x = F32In(b, "x", {2, 4});
  const ValueId am = b.Argmax("am", x);
  const ValueId table = F32In(b, "table", {4, 3});
  const ValueId sel = b.SelectRows("sel", table, am);
  const ValueId seed = F32In(b, "seed", {2, 3});
  graph::BackwardSpec s{sel, seed, {x}, {}};
  EXPECT_THAT(graph::AddBackward(b, s).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("does not depend")));
}

TEST(BackwardErrorTest, WrtMustBeAnF32InputOrWeight) {
  Builder b;
  const ValueId x = F32In(b, "x", {2, 32});
  const ValueId ids = b.Input("ids", {2}, ValueType::kI32);
  const ValueId wq = b.Weight("wq8", {4, 32}, DType::kQ8_0);
  const ValueId y = b.MatMul("y", x, wq);
  const ValueId z = b.Scale("z", y, 2.0f);
  const ValueId seed = F32In(b, "seed", {2, 4});
  auto tr = [](const graph::Value& w) { return graph::TransposedName(w, DType::kF32); };
  for (ValueId wrt : {y, ids, wq}) {
    graph::BackwardSpec s{z, seed, {wrt}, tr};
    EXPECT_THAT(graph::AddBackward(b, s).status(),
                StatusIs(StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("'" + b.graph().value(wrt).name + "'"),
                               HasSubstr("not an f32 input or an f32 weight"))));
  }
}

TEST(BackwardErrorTest, LossMustDependOnWrt) {
  Builder b;
  const ValueId x = F32In(b, "x", {2, 4});
  const ValueId unused = F32In(b, "unused", {2, 4});
  const ValueId z = b.Scale("z", x, 2.0f);
  const ValueId seed = F32In(b, "seed", {2, 4});
  graph::BackwardSpec s{z, seed, {unused}, {}};
  EXPECT_THAT(graph::AddBackward(b, s).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("does not depend")));
  // One of two: the error names the one.
  graph::BackwardSpec s2{z, seed, {x, unused}, {}};
  EXPECT_THAT(graph::AddBackward(b, s2).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'unused'")));
}

TEST(BackwardErrorTest, QuantizedWeightNeedsTransposed) {
  Builder b;
  const ValueId x = F32In(b, "x", {2, 32});
  const ValueId wq = b.Weight("frozen", {4, 32}, DType::kQ8_0);
  const ValueId y = b.MatMul("y", x, wq);
  const ValueId seed = F32In(b, "seed", {2, 4});
  graph::BackwardSpec s{y, seed, {x}, {}};
  EXPECT_THAT(graph::AddBackward(b, s).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'frozen'"), HasSubstr("transposed"))));
}

TEST(BackwardErrorTest, SeedMustMatchLoss) {
  Builder b;
  const ValueId x = F32In(b, "x", {2, 4});
  const ValueId seed = F32In(b, "seed", {4, 2});
  graph::BackwardSpec s{x, seed, {x}, {}};
  EXPECT_THAT(graph::AddBackward(b, s).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("seed")));
}

TEST(BackwardErrorTest, CandidateOutsideTheVocabularyIsOutOfRange) {
  WeightTable weights;
  weights.Add("head", {5, 8}, Random(40, 61));
  Builder b;
  const ValueId x = F32In(b, "x", {1, 8});
  const ValueId w = b.Weight("head", {5, 8}, DType::kF32);
  const ValueId ids = b.Input("ids", {1, 2}, ValueType::kI32);
  b.MarkOutput(b.CandidateLogits("logits", x, w, ids));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto e = exec::Executor::Create(*std::move(g), weights.Resolver(), nullptr, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE((*e)->SetInput("x", std::span<const float>(Random(8, 62))).ok());
  const std::vector<int32_t> bad = {1, 5};
  ASSERT_TRUE((*e)->SetInput("ids", std::span<const int32_t>(bad)).ok());
  EXPECT_THAT((*e)->Run(), StatusIs(StatusCode::kOutOfRange, HasSubstr("candidate 5")));
}

}  // namespace
}  // namespace fg
