// The emitter's text: weights as parameters (declared once per module, the tied embedding
// shared by the gather and the LM head), the contract's public function names, dynamic P as
// `?`, archive dtypes; and the archive writer's conversions. iree-compile itself checks the
// text in tests/iree/ (contract_iree_test, stablehlo_forward_test).
#include "src/export/stablehlo.h"

#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/export/archive.h"
#include "src/export/contract_graphs.h"
#include "src/gguf/reader.h"
#include "src/model/gemma3/test_model.h"
#include "src/tensor/half.h"

namespace fg::exporter {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

struct Fixture {
  std::unique_ptr<gguf::File> file;
  model::Config config;
  model::Weights weights;
};

Fixture Make(const model::testing::TestModelSpec& spec) {
  Fixture f;
  auto bytes = model::testing::MakeTestModel(spec).ToBytes();
  EXPECT_TRUE(bytes.ok());
  static std::vector<std::vector<uint8_t>> keep;  // FromBytes does not copy
  keep.push_back(std::move(*bytes));
  auto file = gguf::File::FromBytes(keep.back());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  f.file = std::move(*file);
  auto c = model::ConfigFromGguf(*f.file);
  EXPECT_TRUE(c.ok());
  f.config = *c;
  auto w = model::BindWeights(*f.file, f.config);
  EXPECT_TRUE(w.ok());
  f.weights = *w;
  return f;
}

model::testing::TestModelSpec SixLayers() {
  model::testing::TestModelSpec s;
  s.n_layers = 6;
  s.n_kv_heads = 1;
  return s;
}

TEST(StablehloTest, OneModuleAllFunctionsWeightsOnce) {
  Fixture f = Make(SixLayers());
  std::vector<graph::Graph> graphs;
  for (Function fn : kAllFunctions) {
    ContractSpec spec;
    spec.function = fn;
    spec.seq = 8;
    spec.chunk = 4;
    auto g = BuildContractFunction(f.config, f.weights, spec);
    FG_ASSERT_OK(g.status());
    graphs.push_back(std::move(*g));
  }
  std::vector<EmitFunction> fns;
  for (size_t i = 0; i < graphs.size(); ++i) {
    fns.push_back({std::string(FunctionName(kAllFunctions[i])), &graphs[i]});
  }
  auto text = EmitModule(fns, {});
  FG_ASSERT_OK(text.status());
  const std::string& t = *text;
  for (Function fn : kAllFunctions) {
    EXPECT_EQ(Count(t, "func.func public @" + std::string(FunctionName(fn)) + "("), 1u) << FunctionName(fn);
  }
  // Every weight is a parameter global, declared once however many functions use it; the tied
  // embedding is one global (gather and LM head), bf16 by default; norm vectors stay f32.
  EXPECT_EQ(Count(t, "#flow.parameter.named<\"model\"::\"token_embd.weight\"> : tensor<40x32xbf16>"), 1u);
  EXPECT_EQ(Count(t, "util.global private"), 2u + 13u * 6u);
  EXPECT_EQ(Count(t, "#flow.parameter.named<\"model\"::\"output_norm.weight\"> : tensor<32xf32>"), 1u);
  EXPECT_THAT(t, Not(HasSubstr("default")));
  // gemma_with_past: P is dynamic in its K/V arguments and results.
  const size_t wp = t.find("func.func public @gemma_with_past(");
  ASSERT_NE(wp, std::string::npos);
  const std::string sig = t.substr(wp, t.find('{', wp) - wp);
  EXPECT_THAT(sig, HasSubstr("tensor<1x1x?x8xf32>"));
  EXPECT_THAT(sig, HasSubstr("-> (tensor<1x1x?x8xf32>"));
  EXPECT_THAT(sig, HasSubstr("tensor<1xi32>)"));
}

TEST(StablehloTest, WeightTypes) {
  Fixture f = Make(SixLayers());
  ContractSpec spec;
  spec.function = Function::kRedecodeAt;
  auto g = BuildContractFunction(f.config, f.weights, spec);
  FG_ASSERT_OK(g.status());
  EmitFunction fn{"gemma_at", &*g};
  for (WeightType wt : {WeightType::kF16, WeightType::kF32}) {
    auto text = EmitModule(std::span(&fn, 1), {.weight_type = wt});
    FG_ASSERT_OK(text.status());
    EXPECT_THAT(*text, HasSubstr("\"blk.0.attn_q.weight\"> : tensor<32x32x" + std::string(WeightTypeName(wt)) + ">"));
  }
  EXPECT_EQ(ParseWeightType("bf16"), WeightType::kBf16);
  EXPECT_EQ(ParseWeightType("q8_0"), std::nullopt);
  EXPECT_EQ(StoredWeightType({640}, WeightType::kBf16), WeightType::kF32);
  EXPECT_EQ(StoredWeightType({10, 640}, WeightType::kF16), WeightType::kF16);
}

TEST(StablehloTest, RefusesAWeightWithTwoShapes) {
  graph::Builder a, b;
  a.Weight("w", {2, 3}, tensor::DType::kF32);
  b.Weight("w", {3, 3}, tensor::DType::kF32);
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph ga, a.Finish());
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph gb, b.Finish());
  std::vector<EmitFunction> fns = {{"a", &ga}, {"b", &gb}};
  EXPECT_THAT(EmitModule(fns, {}), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'w' has two shapes")));
}

TEST(ArchiveTest, Bf16RoundsToNearestEven) {
  // Values between bf16 neighbours: ties go to the even mantissa, others to the nearest.
  const float one = 1.0f, ulp = 1.0f / 128;  // bf16 has 7 explicit mantissa bits
  std::vector<float> v = {one + ulp / 2, one + ulp + ulp / 2, one + ulp * 0.75f, -2.5f};
  gguf::TensorInfo t;
  t.name = "x";
  t.type = tensor::DType::kF32;
  t.shape = {2, 2};
  t.n_elements = 4;
  t.data = reinterpret_cast<const uint8_t*>(v.data());
  std::vector<uint8_t> out(8);
  FG_ASSERT_OK(ConvertTensor(t, WeightType::kBf16, out));
  std::vector<float> got;
  for (int i = 0; i < 4; ++i) {
    uint16_t h;
    std::memcpy(&h, &out[2 * i], 2);
    got.push_back(tensor::Bf16ToFp32(h));
  }
  EXPECT_EQ(got, (std::vector<float>{one, one + 2 * ulp, one + ulp, -2.5f}));
}

TEST(ArchiveTest, MissingTensorIsNamed) {
  Fixture f = Make(SixLayers());
  graph::Builder b;
  b.Weight("blk.9.attn_q.weight", {2, 2}, tensor::DType::kF32);
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, b.Finish());
  const graph::Graph* gp = &g;
  IrpaWriter w;
  EXPECT_THAT(AddGraphWeights(*f.file, std::span(&gp, 1), WeightType::kBf16, &w),
              StatusIs(StatusCode::kNotFound, HasSubstr("'blk.9.attn_q.weight'")));
}

}  // namespace
}  // namespace fg::exporter
