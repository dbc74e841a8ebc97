// LoRA adapters (llama.cpp's GGUF format): validation of hostile adapters, and the graph's
// low-rank path held to the reference forward pass with the adapter folded into its weights.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/gguf_tools/synthetic.h"
#include "src/model/gemma3/lora.h"
#include "src/reference/reference.h"
#include "src/runtime/model.h"
#include "src/runtime/session.h"
#include "tests/testing/exec_inputs.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using ::fg::testing::Nmse;
using ::fg::testing::Prompt;
using ::fg::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using tensor::DType;

std::string BaseModel(const std::string& preset = "small", DType type = DType::kF32) {
  auto spec = gguf::SyntheticPreset(preset);
  EXPECT_TRUE(spec.ok());
  spec->default_type = type;
  const std::string path = ::testing::TempDir() + "/lora_base_" + preset + "_" +
                           std::string(tensor::DTypeName(type)) + ".gguf";
  FG_EXPECT_OK(gguf::WriteSyntheticGemma3(*spec, path));
  return path;
}

std::string WriteLora(const gguf::File& base, const model::SyntheticLoraSpec& spec,
                      const std::string& name) {
  auto w = model::SyntheticLora(base, spec);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  const std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  FG_EXPECT_OK(w->WriteFile(path));
  return path;
}

std::unique_ptr<runtime::Session> NewSession(const runtime::Model& m, ThreadPool* pool,
                                             bool reference) {
  runtime::SessionOptions o;
  o.context = 128;
  o.max_chunk = 64;
  o.pool = pool;
  o.reference = reference;
  auto s = runtime::Session::Create(m, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

std::vector<float> SessionLogits(const runtime::Model& m, const std::vector<int32_t>& prompt,
                                 bool reference) {
  ThreadPool pool(2);
  auto s = NewSession(m, &pool, reference);
  EXPECT_TRUE(s->Append(prompt).ok());
  return std::vector<float>(s->logits().begin(), s->logits().end());
}

// The four adapter types, ranks 1..64, a subset of the matrices or all of them (token_embd
// included): the executor's reference kernels equal the reference forward with the adapter
// merged into its f32 weights, and the fast kernels stay close.
TEST(LoraTest, ExecutorMatchesMergedReference) {
  const std::string base_path = BaseModel();
  struct Case {
    DType type;
    int64_t rank;
    std::vector<std::string> modules;
    float alpha;
  };
  const std::vector<Case> cases = {
      {DType::kF32, 1, {"attn_q"}, 0.0f},
      {DType::kF32, 8, {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                        "ffn_down"}, 16.0f},
      {DType::kF16, 16, {"attn_v", "ffn_down", "token_embd"}, 32.0f},
      {DType::kBF16, 4, {"ffn_gate", "ffn_up"}, 8.0f},
      {DType::kQ8_0, 32, {"attn_q", "attn_output", "ffn_down"}, 64.0f},
      {DType::kF32, 64, {"attn_k", "token_embd"}, 128.0f},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(tensor::DTypeName(c.type)) + " rank " + std::to_string(c.rank));
    auto model = runtime::Model::Load(base_path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model::SyntheticLoraSpec spec;
    spec.rank = c.rank;
    spec.modules = c.modules;
    spec.type = c.type;
    spec.alpha = c.alpha;
    spec.seed = 7 + n;
    const std::string lora = WriteLora((*model)->file(), spec, "lora_case" + std::to_string(n++));
    FG_ASSERT_OK((*model)->AddLora({lora, 0.75f}));

    auto ref = reference::Reference::Open(base_path);
    ASSERT_TRUE(ref.ok());
    const std::vector<int32_t> prompt = Prompt(24, (*model)->config().vocab, 3);
    auto base_logits = (*ref)->Logits(prompt);
    FG_ASSERT_OK(base_logits.status());
    FG_ASSERT_OK((*ref)->AddLora(*(*model)->adapters()[0], 0.75f));
    auto want = (*ref)->Logits(prompt);
    FG_ASSERT_OK(want.status());
    // The adapter changes the output (else the comparison below proves nothing).
    EXPECT_GT(Nmse(*base_logits, *want), 1e-4);

    EXPECT_LE(Nmse(SessionLogits(**model, prompt, /*reference=*/true), *want), 1e-6);
    EXPECT_LE(Nmse(SessionLogits(**model, prompt, /*reference=*/false), *want),
              c.type == DType::kQ8_0 ? 1e-4 : 1e-6);
  }
}

// Scale 0 is the base model bit for bit; two adapters add (= the reference with both merged).
TEST(LoraTest, ScaleZeroIsBaseAndAdaptersAdd) {
  const std::string base_path = BaseModel("small", DType::kQ8_0);
  auto base = runtime::Model::Load(base_path);
  ASSERT_TRUE(base.ok());
  const std::vector<int32_t> prompt = Prompt(30, (*base)->config().vocab, 5);
  const std::vector<float> base_logits = SessionLogits(**base, prompt, false);

  model::SyntheticLoraSpec s1;
  s1.seed = 1;
  model::SyntheticLoraSpec s2;
  s2.seed = 2;
  s2.rank = 4;
  s2.modules = {"attn_q", "ffn_up"};
  const std::string l1 = WriteLora((*base)->file(), s1, "lora_add1");
  const std::string l2 = WriteLora((*base)->file(), s2, "lora_add2");

  auto zero = runtime::Model::Load(base_path, {{l1, 0.0f}});
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  const std::vector<float> zero_logits = SessionLogits(**zero, prompt, false);
  ASSERT_EQ(zero_logits.size(), base_logits.size());
  EXPECT_EQ(std::memcmp(zero_logits.data(), base_logits.data(), base_logits.size() * 4), 0);

  auto both = runtime::Model::Load(base_path, {{l1, 1.0f}, {l2, -0.5f}});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  auto ref = reference::Reference::Open(base_path);
  ASSERT_TRUE(ref.ok());
  FG_ASSERT_OK((*ref)->AddLora(*(*both)->adapters()[0], 1.0f));
  FG_ASSERT_OK((*ref)->AddLora(*(*both)->adapters()[1], -0.5f));
  auto want = (*ref)->Logits(prompt);
  FG_ASSERT_OK(want.status());
  EXPECT_LE(Nmse(SessionLogits(**both, prompt, true), *want), 1e-6);
}

// A model merged with BuildMerged (f32 base: the merged weights stay f32) gives the logits of
// the base with the adapter applied at run time; on a quantized base the adapted tensors are
// requantized to their types, which stays close.
TEST(LoraTest, MergedModelEqualsRuntimeAdapter) {
  for (DType type : {DType::kF32, DType::kQ8_0}) {
    SCOPED_TRACE(tensor::DTypeName(type));
    const std::string base_path = BaseModel("small", type);
    auto model = runtime::Model::Load(base_path);
    ASSERT_TRUE(model.ok());
    model::SyntheticLoraSpec spec;
    spec.rank = 8;
    spec.seed = 11;
    const std::string lora = WriteLora((*model)->file(), spec, "lora_merge");
    FG_ASSERT_OK((*model)->AddLora({lora, 1.5f}));
    gguf::RequantizeSpec rs;
    rs.keep_types = true;
    auto w = model::BuildMerged((*model)->file(), (*model)->weights().loras, rs);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    const std::string merged_path = ::testing::TempDir() + "/lora_merged.gguf";
    FG_ASSERT_OK(w->WriteFile(merged_path));
    auto merged = runtime::Model::Load(merged_path);
    ASSERT_TRUE(merged.ok()) << merged.status().ToString();
    // Adapted tensors keep their types; the others are copied byte for byte.
    for (const gguf::TensorInfo& t : (*model)->file().tensors()) {
      const gguf::TensorInfo* m = (*merged)->file().FindTensor(t.name);
      ASSERT_NE(m, nullptr);
      EXPECT_EQ(m->type, t.type) << t.name;
      const bool adapted = (*model)->adapters()[0]->Find(t.name) != nullptr;
      EXPECT_EQ(std::memcmp(m->data, t.data, t.size_bytes) == 0, !adapted) << t.name;
    }
    const std::vector<int32_t> prompt = Prompt(24, (*model)->config().vocab, 9);
    const auto runtime_logits = SessionLogits(**model, prompt, true);
    const double err = Nmse(SessionLogits(**merged, prompt, true), runtime_logits);
    if (type == DType::kF32) {
      EXPECT_LE(err, 1e-6);
    } else {
      // Q8_0 rounding of the merged rows: far below what the adapter changes.
      auto base = runtime::Model::Load(base_path);
      ASSERT_TRUE(base.ok());
      const double effect = Nmse(SessionLogits(**base, prompt, true), runtime_logits);
      EXPECT_LE(err, effect / 20) << "effect " << effect;
    }
  }
}

// A token_embd adapter cannot be merged into a model whose LM head is token_embd.
TEST(LoraTest, MergeRefusesTiedEmbeddingAdapter) {
  auto model = runtime::Model::Load(BaseModel("tiny"));
  ASSERT_TRUE(model.ok());
  model::SyntheticLoraSpec spec;
  spec.modules = {"token_embd"};
  FG_ASSERT_OK((*model)->AddLora({WriteLora((*model)->file(), spec, "lora_embd"), 1.0f}));
  EXPECT_THAT(model::BuildMerged((*model)->file(), (*model)->weights().loras, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("tied")));
}

// One hostile adapter per rejected case: each is refused with an error naming the problem.
class HostileLoraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = runtime::Model::Load(BaseModel("tiny"));
    ASSERT_TRUE(m.ok());
    model_ = std::move(*m);
  }
  // A valid rank-4 adapter on blk.0.attn_q, then `edit` applied to its tensors and metadata.
  Status Load(const std::function<void(std::vector<model::LoraTensorValues>&)>& edit_tensors,
              const std::function<void(gguf::Writer&)>& edit_meta = nullptr) {
    const gguf::TensorInfo* q = model_->file().FindTensor("blk.0.attn_q.weight");
    const int64_t r = 4;
    std::vector<model::LoraTensorValues> t = {
        {"blk.0.attn_q.weight.lora_a", {r, q->shape[1]},
         std::vector<float>(static_cast<size_t>(r * q->shape[1]), 0.01f)},
        {"blk.0.attn_q.weight.lora_b", {q->shape[0], r},
         std::vector<float>(static_cast<size_t>(r * q->shape[0]), 0.02f)}};
    if (edit_tensors) edit_tensors(t);
    auto w = model::LoraWriter("gemma3", 8.0f, t);
    if (!w.ok()) return w.status();
    if (edit_meta) edit_meta(*w);
    // One file per test: ctest runs the tests of this suite in parallel processes.
    const std::string path = ::testing::TempDir() + "/hostile_lora_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                             ".gguf";
    FG_RETURN_IF_ERROR(w->WriteFile(path));
    return model_->AddLora({path, 1.0f});
  }
  std::unique_ptr<runtime::Model> model_;
};

TEST_F(HostileLoraTest, ValidAdapterLoads) { FG_EXPECT_OK(Load(nullptr)); }

TEST_F(HostileLoraTest, NotAnAdapter) {
  EXPECT_THAT(Load(nullptr, [](gguf::Writer& w) { w.SetString("general.type", "model"); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an adapter")));
}

TEST_F(HostileLoraTest, WrongArchitecture) {
  EXPECT_THAT(Load(nullptr, [](gguf::Writer& w) { w.SetString("general.architecture", "llama"); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("another architecture")));
}

TEST_F(HostileLoraTest, NotLora) {
  EXPECT_THAT(Load(nullptr, [](gguf::Writer& w) { w.SetString("adapter.type", "control"); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a LoRA")));
}

TEST_F(HostileLoraTest, NonFiniteAlpha) {
  EXPECT_THAT(Load(nullptr, [](gguf::Writer& w) { w.SetFloat32("adapter.lora.alpha", NAN); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("alpha is not finite")));
}

TEST_F(HostileLoraTest, UnknownBaseTensor) {
  EXPECT_THAT(Load([](auto& t) {
                t[0].name = "blk.9.attn_q.weight.lora_a";
                t[1].name = "blk.9.attn_q.weight.lora_b";
              }),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("'blk.9.attn_q.weight' of the LoRA pair is not in the base")));
}

TEST_F(HostileLoraTest, MissingHalf) {
  EXPECT_THAT(Load([](auto& t) { t.pop_back(); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("has no lora_b tensor")));
}

TEST_F(HostileLoraTest, UnexpectedSuffix) {
  EXPECT_THAT(Load([](auto& t) { t[0].name = "blk.0.attn_q.weight.lora_c"; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("neither a .lora_a nor")));
}

TEST_F(HostileLoraTest, ShapeMismatchNamesBothShapes) {
  EXPECT_THAT(Load([](auto& t) {
                t[0].shape = {4, t[0].shape[1] / 2};
                t[0].values.resize(static_cast<size_t>(t[0].shape[0] * t[0].shape[1]));
              }),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'blk.0.attn_q.weight' does not fit the base tensor"),
                             HasSubstr("lora_a is {4, "))));
}

TEST_F(HostileLoraTest, RankMismatchBetweenHalves) {
  EXPECT_THAT(Load([](auto& t) {
                t[1].shape = {t[1].shape[0], 2};
                t[1].values.resize(static_cast<size_t>(t[1].shape[0] * 2));
              }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("does not fit the base tensor")));
}

TEST_F(HostileLoraTest, NonFiniteValues) {
  EXPECT_THAT(Load([](auto& t) { t[1].values[5] = INFINITY; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("non-finite value")));
}

TEST_F(HostileLoraTest, NormPairsAreSkippedButNotAlone) {
  // A trainer in the llama.cpp family writes attn_q_norm pairs; llama.cpp ignores them.
  FG_EXPECT_OK(Load([](auto& t) {
    t.push_back({"blk.0.attn_q_norm.weight.lora_a", {1, 4}, {1, 2, 3, 4}});
    t.push_back({"blk.0.attn_q_norm.weight.lora_b", {1, 4}, {1, 2, 3, 4}});
  }));
  EXPECT_THAT(Load([](auto& t) {
                t = {{"blk.0.attn_q_norm.weight.lora_a", {1, 4}, {1, 2, 3, 4}},
                     {"blk.0.attn_q_norm.weight.lora_b", {1, 4}, {1, 2, 3, 4}}};
              }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("holds no LoRA pair")));
}

TEST_F(HostileLoraTest, WrongTensorType) {
  EXPECT_THAT(Load([](auto& t) { t[0].type = DType::kQ4_0; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("F32, F16, BF16 or Q8_0")));
}

TEST_F(HostileLoraTest, NonFiniteScale) {
  const std::string path = ::testing::TempDir() + "/ok_lora.gguf";
  model::SyntheticLoraSpec spec;
  spec.modules = {"attn_q"};
  auto w = model::SyntheticLora(model_->file(), spec);
  ASSERT_TRUE(w.ok());
  FG_ASSERT_OK(w->WriteFile(path));
  EXPECT_THAT(model_->AddLora({path, NAN}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("scale is not finite")));
}

TEST_F(HostileLoraTest, ChannelMarkIsBaseOrAdapted) {
  EXPECT_THAT(Load(nullptr, [](gguf::Writer& w) { w.SetString("fgemma.lora.channel", "maybe"); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("fgemma.lora.channel")));
  EXPECT_FALSE(model_->adapters_in_channel());
}

TEST_F(HostileLoraTest, AdaptersWithAndWithoutTheChannelMarkDoNotMix) {
  FG_ASSERT_OK(
      Load(nullptr, [](gguf::Writer& w) { w.SetString("fgemma.lora.channel", "adapted"); }));
  EXPECT_TRUE(model_->adapters_in_channel());
  EXPECT_THAT(Load(nullptr), StatusIs(StatusCode::kInvalidArgument, HasSubstr("tool prior")));
  EXPECT_TRUE(model_->adapters_in_channel());
}

TEST_F(HostileLoraTest, NotAGguf) {
  const std::string path = ::testing::TempDir() + "/garbage_lora.gguf";
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fputs("GGUF but not really", f);
  std::fclose(f);
  Status s = model_->AddLora({path, 1.0f});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("garbage_lora.gguf"));
}

}  // namespace
}  // namespace fg
