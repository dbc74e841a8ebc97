// Config and weight table: the happy path on generated GGUFs, then one corrupt variant per
// check (wrong architecture, missing key, inconsistent sizes, missing/misshaped/mistyped
// tensors), each with an error naming what is wrong.
#include "src/model/gemma3/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/gguf/writer.h"
#include "src/model/gemma3/test_model.h"
#include "src/model/gemma3/weights.h"

namespace fg::model {
namespace {

using ::fg::testing::IsOk;
using ::fg::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::MakeTestModel;
using testing::TensorSpec;
using testing::TestModelSpec;

// A parsed in-memory GGUF (the File views `bytes`).
struct Gguf {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
};

std::unique_ptr<Gguf> Parse(const gguf::Writer& w) {
  auto g = std::make_unique<Gguf>();
  auto bytes = w.ToBytes();
  FG_CHECK(bytes.ok());
  g->bytes = std::move(bytes).value();
  auto file = gguf::File::FromBytes(g->bytes);
  FG_CHECK(file.ok());
  g->file = std::move(file).value();
  return g;
}

TestModelSpec Gemma270mLike() {
  // The 270M's metadata with small tensors where they do not matter to the config.
  TestModelSpec s;
  s.n_layers = 2;
  s.hidden = 64;
  s.n_heads = 4;
  s.n_kv_heads = 1;
  s.head_dim = 32;
  s.ffn = 96;
  s.vocab = 37;
  s.context_length = 32768;
  s.sliding_window = 512;
  s.rms_eps = 1e-6f;
  s.rope_base = 1e6;
  return s;
}

TEST(ConfigTest, ReadsEveryField) {
  auto g = Parse(MakeTestModel(Gemma270mLike()));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.ffn, 96);
  EXPECT_EQ(c.vocab, 37);  // rows of token_embd
  EXPECT_EQ(c.context_length, 32768);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
  EXPECT_EQ(c.rope_base_global, 1e6);
  EXPECT_EQ(c.rope_base_local, 1e4);  // absent key: 10 000
  EXPECT_EQ(c.query_scale, 1.0f / std::sqrt(32.0f));
  EXPECT_EQ(c.embed_scale, std::sqrt(64.0f));
  EXPECT_EQ(c.q_dim(), 128);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(c.group_size(), 4);
  EXPECT_THAT(c.ToString(), HasSubstr("layers=2"));
}

TEST(ConfigTest, GlobalLayersAreEverySixth) {
  Config c;
  std::vector<int64_t> global;
  for (int64_t l = 0; l < 18; ++l) {
    if (c.IsGlobal(l)) global.push_back(l);
  }
  EXPECT_EQ(global, (std::vector<int64_t>{5, 11, 17}));
  c.rope_base_global = 1e6;
  c.rope_base_local = 1e4;
  EXPECT_EQ(c.RopeBase(5), 1e6);
  EXPECT_EQ(c.RopeBase(4), 1e4);
}

TEST(ConfigTest, LocalRopeBaseFromMetadata) {
  TestModelSpec s = Gemma270mLike();
  s.rope_base_swa = 5e4;
  auto g = Parse(MakeTestModel(s));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_EQ(c.rope_base_local, 5e4);
}

TEST(ConfigTest, DefaultsWhenOptionalKeysAreAbsent) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.Remove("gemma3.rope.freq_base");
  w.Remove("gemma3.attention.head_count_kv");  // llama.cpp default: head_count
  auto g = Parse(w);
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_EQ(c.rope_base_global, 1e6);
  EXPECT_EQ(c.n_kv_heads, 4);
}

TEST(ConfigTest, VocabComesFromEmbeddingRows) {
  // Fine-tunes with added tokens have 262153 rows; here 45 rows and no tokenizer metadata.
  TestModelSpec s = Gemma270mLike();
  s.vocab = 45;
  auto g = Parse(MakeTestModel(s));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_EQ(c.vocab, 45);
}

TEST(ConfigTest, TwentySevenBUsesHiddenOverHeadsForTheQueryScale) {
  // ref: llama.cpp LLM_ARCH_GEMMA3: 62 layers -> 1/sqrt(n_embd / n_head).
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetUint32("gemma3.block_count", 62);
  auto g = Parse(w);
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_EQ(c.query_scale, 1.0f / std::sqrt(16.0f));  // hidden 64 / 4 heads
}

TEST(ConfigTest, RopeScalingIsRefused) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetFloat32("gemma3.rope.scaling.factor", 8.0f);  // as in Gemma 3 4B and larger
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("rope.scaling.factor")));
  w.SetFloat32("gemma3.rope.scaling.factor", 1.0f);  // no scaling: fine
  auto g1 = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g1->file), IsOk());
}

TEST(ConfigTest, WrongArchitectureIsNamed) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetString("general.architecture", "llama");
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file), StatusIs(StatusCode::kUnimplemented,
                                                 AllOf(HasSubstr("'llama'"), HasSubstr("gemma3"))));
}

TEST(ConfigTest, MissingArchitecture) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.Remove("general.architecture");
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kNotFound, HasSubstr("general.architecture")));
}

TEST(ConfigTest, EachMissingRequiredKeyIsNamed) {
  for (const char* key :
       {"gemma3.context_length", "gemma3.embedding_length", "gemma3.block_count",
        "gemma3.feed_forward_length", "gemma3.attention.head_count",
        "gemma3.attention.layer_norm_rms_epsilon", "gemma3.attention.sliding_window"}) {
    SCOPED_TRACE(key);
    gguf::Writer w = MakeTestModel(Gemma270mLike());
    ASSERT_TRUE(w.Remove(key));
    auto g = Parse(w);
    EXPECT_THAT(ConfigFromGguf(*g->file),
                StatusIs(StatusCode::kNotFound, HasSubstr(std::string("'") + key + "'")));
  }
}

TEST(ConfigTest, WrongKeyTypeIsNamed) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetString("gemma3.block_count", "eighteen");
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("gemma3.block_count")));
}

TEST(ConfigTest, ZeroSizesAreRejected) {
  for (const char* key : {"gemma3.embedding_length", "gemma3.block_count",
                          "gemma3.feed_forward_length", "gemma3.attention.head_count",
                          "gemma3.attention.head_count_kv", "gemma3.attention.key_length"}) {
    SCOPED_TRACE(key);
    gguf::Writer w = MakeTestModel(Gemma270mLike());
    w.SetUint32(key, 0);
    auto g = Parse(w);
    EXPECT_THAT(ConfigFromGguf(*g->file), StatusIs(StatusCode::kInvalidArgument, HasSubstr(key)));
  }
}

TEST(ConfigTest, AbsurdSizesAreRejected) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetUint64("gemma3.attention.key_length", uint64_t{1} << 40);
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("gemma3.attention.key_length")));
}

TEST(ConfigTest, KeyAndValueLengthMustMatch) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetUint32("gemma3.attention.value_length", 16);
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("key_length (32)"), HasSubstr("value_length (16)"))));
}

TEST(ConfigTest, HeadsMustBeAMultipleOfKvHeads) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetUint32("gemma3.attention.head_count_kv", 3);
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("head_count_kv (3)")));
}

TEST(ConfigTest, WindowMustBePositive) {
  {
    gguf::Writer w = MakeTestModel(Gemma270mLike());
    w.SetUint32("gemma3.attention.sliding_window", 0);
    auto g = Parse(w);
    EXPECT_THAT(ConfigFromGguf(*g->file),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("sliding_window")));
  }
  {
    gguf::Writer w = MakeTestModel(Gemma270mLike());
    w.SetInt32("gemma3.attention.sliding_window", -4);
    auto g = Parse(w);
    EXPECT_THAT(ConfigFromGguf(*g->file), StatusIs(StatusCode::kInvalidArgument, HasSubstr("-4")));
  }
}

TEST(ConfigTest, BadEpsilonIsRejected) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  w.SetFloat32("gemma3.attention.layer_norm_rms_epsilon", -1.0f);
  auto g = Parse(w);
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("layer_norm_rms_epsilon")));
}

TEST(ConfigTest, MissingEmbeddingIsNamed) {
  auto g = Parse(MakeTestModel(Gemma270mLike(), [](TensorSpec& t) {
    if (t.name == "token_embd.weight") t.skip = true;
  }));
  EXPECT_THAT(ConfigFromGguf(*g->file),
              StatusIs(StatusCode::kNotFound, HasSubstr("token_embd.weight")));
}

// --- weight table ---

TEST(WeightsTest, BindsEveryTensorWithItsShape) {
  auto g = Parse(MakeTestModel(Gemma270mLike()));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  FG_ASSERT_OK_AND_ASSIGN(Weights w, BindWeights(*g->file, c));
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.token_embd->name, "token_embd.weight");
  EXPECT_EQ(w.output, w.token_embd);  // tied head
  EXPECT_EQ(w.output_norm->name, "output_norm.weight");
  const LayerWeights& L = w.layers[1];
  EXPECT_EQ(L.attn_q->name, "blk.1.attn_q.weight");
  EXPECT_EQ(L.attn_q->shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(L.attn_k->shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(L.attn_v->shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(L.attn_output->shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(L.attn_q_norm->shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(L.ffn_gate->shape, (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(L.ffn_down->shape, (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(L.post_ffw_norm->name, "blk.1.post_ffw_norm.weight");
  for (const gguf::TensorInfo* t :
       {L.attn_norm, L.attn_q, L.attn_k, L.attn_v, L.attn_q_norm, L.attn_k_norm, L.attn_output,
        L.post_attention_norm, L.ffn_norm, L.ffn_gate, L.ffn_up, L.ffn_down, L.post_ffw_norm}) {
    ASSERT_NE(t, nullptr);
  }
}

TEST(WeightsTest, SeparateOutputTensorIsUsedAsTheHead) {
  gguf::Writer w = MakeTestModel(Gemma270mLike());
  std::vector<uint8_t> head(37 * 64 * 4, 0);
  FG_ASSERT_OK(w.AddTensor("output.weight", tensor::DType::kF32, {37, 64}, head));
  auto g = Parse(w);
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  FG_ASSERT_OK_AND_ASSIGN(Weights wt, BindWeights(*g->file, c));
  EXPECT_EQ(wt.output->name, "output.weight");
}

TEST(WeightsTest, MissingTensorIsNamed) {
  for (const char* name :
       {"blk.1.ffn_up.weight", "output_norm.weight", "blk.0.attn_k_norm.weight"}) {
    SCOPED_TRACE(name);
    auto g = Parse(MakeTestModel(Gemma270mLike(), [&](TensorSpec& t) {
      if (t.name == name) t.skip = true;
    }));
    FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
    EXPECT_THAT(BindWeights(*g->file, c),
                StatusIs(StatusCode::kNotFound, HasSubstr(std::string("'") + name + "'")));
  }
}

TEST(WeightsTest, WrongShapeIsNamed) {
  auto g = Parse(MakeTestModel(Gemma270mLike(), [](TensorSpec& t) {
    if (t.name == "blk.0.attn_output.weight") t.shape = {128, 64};  // transposed
  }));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_THAT(BindWeights(*g->file, c),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("blk.0.attn_output.weight"), HasSubstr("{128, 64}"),
                             HasSubstr("expected {64, 128}"))));
}

TEST(WeightsTest, WrongRankIsNamed) {
  auto g = Parse(MakeTestModel(Gemma270mLike(), [](TensorSpec& t) {
    if (t.name == "blk.1.ffn_norm.weight") t.shape = {1, 64};
  }));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_THAT(BindWeights(*g->file, c),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("blk.1.ffn_norm.weight")));
}

TEST(WeightsTest, EmbeddingWidthMustMatchHidden) {
  auto g = Parse(MakeTestModel(Gemma270mLike(), [](TensorSpec& t) {
    if (t.name == "token_embd.weight") t.shape = {37, 32};
  }));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_THAT(BindWeights(*g->file, c),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("token_embd.weight")));
}

TEST(WeightsTest, UnsupportedTypeIsNamed) {
  auto g = Parse(MakeTestModel(Gemma270mLike(), [](TensorSpec& t) {
    if (t.name == "blk.0.attn_q.weight") t.type = tensor::DType::kI32;
  }));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_THAT(BindWeights(*g->file, c),
              StatusIs(StatusCode::kUnimplemented,
                       AllOf(HasSubstr("blk.0.attn_q.weight"), HasSubstr("I32"))));
}

TEST(WeightsTest, QuantizedNormIsRefused) {
  auto g = Parse(MakeTestModel(Gemma270mLike(), [](TensorSpec& t) {
    if (t.name == "blk.0.attn_norm.weight") t.type = tensor::DType::kQ8_0;
  }));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  EXPECT_THAT(BindWeights(*g->file, c),
              StatusIs(StatusCode::kUnimplemented,
                       AllOf(HasSubstr("blk.0.attn_norm.weight"), HasSubstr("Q8_0"))));
}

TEST(WeightsTest, HalfPrecisionNormsAndQuantizedMatricesAreAccepted) {
  auto g = Parse(MakeTestModel(Gemma270mLike(), [](TensorSpec& t) {
    if (t.name == "output_norm.weight") t.type = tensor::DType::kF16;
    if (t.name == "blk.0.attn_q_norm.weight") t.type = tensor::DType::kBF16;
    if (t.name == "blk.0.attn_v.weight") t.type = tensor::DType::kQ8_0;
  }));
  FG_ASSERT_OK_AND_ASSIGN(Config c, ConfigFromGguf(*g->file));
  FG_ASSERT_OK_AND_ASSIGN(Weights w, BindWeights(*g->file, c));
  EXPECT_EQ(w.output_norm->type, tensor::DType::kF16);
  EXPECT_EQ(w.layers[0].attn_v->type, tensor::DType::kQ8_0);
}

}  // namespace
}  // namespace fg::model
