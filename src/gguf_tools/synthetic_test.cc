#include "src/gguf_tools/synthetic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/kernels/quant.h"

namespace fg::gguf {
namespace {

using ::fg::testing::IsOk;
using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using tensor::DType;

StatusOr<std::vector<uint8_t>> Image(const SyntheticSpec& spec) {
  FG_ASSIGN_OR_RETURN(Writer w, BuildSyntheticGemma3(spec));
  return w.ToBytes();
}

TEST(SyntheticTest, TinyHasRealKeysShapesAndTypes) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("tiny"));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, Image(spec));
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(*f->GetString("general.architecture"), "gemma3");
  EXPECT_EQ(*f->GetUint("gemma3.block_count"), 2u);
  EXPECT_EQ(*f->GetUint("gemma3.embedding_length"), 64u);
  EXPECT_EQ(*f->GetUint("gemma3.feed_forward_length"), 128u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.head_count"), 2u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.head_count_kv"), 1u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.key_length"), 32u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.value_length"), 32u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.sliding_window"), 8u);
  EXPECT_EQ(*f->GetUint("gemma3.context_length"), 256u);
  EXPECT_EQ(*f->GetFloat("gemma3.rope.freq_base"), 1e6);
  EXPECT_EQ(*f->GetFloat("gemma3.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-6f));
  EXPECT_EQ(f->Find("gemma3.rope.freq_base_swa"), nullptr);
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.eos_token_id"), 1u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.unknown_token_id"), 3u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.padding_token_id"), 0u);
  EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(*f->GetBool("tokenizer.ggml.add_eos_token"));
  EXPECT_FALSE(*f->GetBool("tokenizer.ggml.add_space_prefix"));
  EXPECT_EQ(*f->GetUint("general.file_type"), 0u);

  ASSERT_EQ(f->tensors().size(), 2u + 13u * 2u);
  EXPECT_EQ(f->tensors()[0].name, "output_norm.weight");
  EXPECT_EQ(f->tensors()[1].name, "token_embd.weight");
  EXPECT_EQ(f->tensors()[2].name, "blk.0.attn_k.weight");
  std::map<std::string, std::vector<int64_t>> want = {
      {"token_embd.weight", {640, 64}},        {"output_norm.weight", {64}},
      {"blk.1.attn_q.weight", {64, 64}},       {"blk.1.attn_k.weight", {32, 64}},
      {"blk.1.attn_v.weight", {32, 64}},       {"blk.1.attn_output.weight", {64, 64}},
      {"blk.1.attn_q_norm.weight", {32}},      {"blk.1.attn_k_norm.weight", {32}},
      {"blk.1.ffn_gate.weight", {128, 64}},    {"blk.1.ffn_up.weight", {128, 64}},
      {"blk.1.ffn_down.weight", {64, 128}},    {"blk.1.post_ffw_norm.weight", {64}},
      {"blk.1.post_attention_norm.weight", {64}}, {"blk.0.ffn_norm.weight", {64}},
  };
  for (const auto& [name, shape] : want) {
    const TensorInfo* t = f->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    EXPECT_EQ(t->type, DType::kF32) << name;
  }
}

TEST(SyntheticTest, WeightsAreSane) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("tiny"));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, Image(spec));
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  auto stats = [&](const std::string& name, double* mean, double* sd) {
    const TensorInfo* t = f->FindTensor(name);
    ASSERT_NE(t, nullptr);
    std::vector<float> v(t->n_elements);
    std::memcpy(v.data(), t->data, t->size_bytes);
    double s = 0, s2 = 0;
    for (float x : v) {
      s += x;
      s2 += static_cast<double>(x) * x;
    }
    *mean = s / v.size();
    *sd = std::sqrt(s2 / v.size() - *mean * *mean);
  };
  double m, sd;
  stats("blk.0.ffn_down.weight", &m, &sd);  // fan_in 128
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0 / std::sqrt(128.0), 0.01);
  stats("blk.0.attn_norm.weight", &m, &sd);  // 1 + small noise
  EXPECT_NEAR(m, 1.0, 0.05);
  EXPECT_NEAR(sd, 0.1, 0.03);
  stats("token_embd.weight", &m, &sd);
  EXPECT_NEAR(sd, 0.5 / 8.0, 0.005);
}

TEST(SyntheticTest, SameSeedSameBytesOtherSeedOtherWeights) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("tiny"));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> a, Image(spec));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> b, Image(spec));
  EXPECT_EQ(a, b);
  spec.seed = 2;
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> c, Image(spec));
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(SyntheticTest, ReadWriteRoundTripIsBitIdentical) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("small"));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> a, Image(spec));
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(a));
  FG_ASSERT_OK_AND_ASSIGN(Writer w, Writer::FromFile(*f));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> b, w.ToBytes());
  EXPECT_EQ(a, b);
}

TEST(SyntheticTest, SmallHasAGlobalLayer) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("small"));
  EXPECT_EQ(spec.layers, 6);  // layer 5 is global (l % 6 == 5)
  EXPECT_GT(spec.window, 0);
  spec.write_rope_base_local = true;
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, Image(spec));
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(*f->GetFloat("gemma3.rope.freq_base_swa"), 1e4);
  EXPECT_EQ(f->tensors().size(), 2u + 13u * 6u);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), 1024u);
}

TEST(SyntheticTest, VocabularyLayout) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticVocab v, MakeSyntheticVocab(640, 1));
  ASSERT_EQ(v.tokens.size(), 640u);
  ASSERT_EQ(v.scores.size(), 640u);
  ASSERT_EQ(v.types.size(), 640u);
  EXPECT_EQ(v.tokens[0], "<pad>");
  EXPECT_EQ(v.tokens[1], "<eos>");
  EXPECT_EQ(v.tokens[2], "<bos>");
  EXPECT_EQ(v.tokens[3], "<unk>");
  EXPECT_EQ(v.tokens[4], "<mask>");
  EXPECT_EQ(v.tokens[5], "[multimodal]");
  EXPECT_EQ(v.types[5], 4);
  EXPECT_EQ(v.tokens[6], "<unused0>");
  EXPECT_EQ(v.tokens[45], "<unused39>");
  EXPECT_EQ(v.tokens[46], "<start_function_declaration>");
  EXPECT_EQ(v.tokens[47], "<end_function_declaration>");
  EXPECT_EQ(v.tokens[48], "<start_function_call>");
  EXPECT_EQ(v.tokens[49], "<end_function_call>");
  EXPECT_EQ(v.tokens[50], "<start_function_response>");
  EXPECT_EQ(v.tokens[51], "<end_function_response>");
  EXPECT_EQ(v.tokens[52], "<escape>");
  EXPECT_EQ(v.tokens[53], "<unused47>");
  EXPECT_EQ(v.tokens[104], "<unused98>");
  EXPECT_EQ(v.tokens[105], "<start_of_turn>");
  EXPECT_EQ(v.tokens[106], "<end_of_turn>");
  EXPECT_EQ(v.tokens[107], "\n");
  EXPECT_EQ(v.types[107], 4);
  for (int i = 0; i < 107; ++i) {
    if (i != 5) {
      EXPECT_EQ(v.types[i], 3) << i;
    }
  }
  EXPECT_EQ(v.tokens[238], "<0x00>");
  EXPECT_EQ(v.tokens[238 + 0x41], "<0x41>");
  EXPECT_EQ(v.tokens[493], "<0xFF>");
  for (int i = 238; i < 494; ++i) {
    EXPECT_EQ(v.types[i], 6);
    EXPECT_EQ(v.scores[i], 0.f);
  }
  EXPECT_EQ(v.tokens[494], "\xe2\x96\x81");
  EXPECT_EQ(v.tokens[495], "\xe2\x96\x81" "a");
  for (int i = 494; i < 640; ++i) {
    EXPECT_EQ(v.types[i], 1);
    EXPECT_EQ(v.scores[i], -static_cast<float>(i - 494));
  }
  std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(unique.size(), v.tokens.size());
  FG_ASSERT_OK_AND_ASSIGN(SyntheticVocab big, MakeSyntheticVocab(4096, 1));
  EXPECT_NE(std::find(big.tokens.begin(), big.tokens.end(), "\xe2\x96\x81light"), big.tokens.end());
  EXPECT_NE(std::find(big.tokens.begin(), big.tokens.end(), "\xe2\x96\x81the"), big.tokens.end());
  EXPECT_THAT(MakeSyntheticVocab(512, 1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("vocab must be")));
}

TEST(SyntheticTest, TypeOverridesAndQuantizedWeights) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("tiny"));
  spec.default_type = DType::kF16;
  spec.type_overrides = {{"token_embd", DType::kQ8_0}, {"ffn_down", DType::kQ8_0}};
  EXPECT_EQ(SyntheticTensorType(spec, "blk.0.attn_norm.weight", 1), DType::kF32);
  EXPECT_EQ(SyntheticTensorType(spec, "blk.0.ffn_down.weight", 2), DType::kQ8_0);
  EXPECT_EQ(SyntheticTensorType(spec, "blk.0.ffn_up.weight", 2), DType::kF16);
  auto image = Image(spec);
  if (!image.ok() && image.status().code() == StatusCode::kUnimplemented) {
    GTEST_SKIP() << "quantizer not available yet: " << image.status().ToString();
  }
  FG_ASSERT_OK(image.status());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(*image));
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, DType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_down.weight")->type, DType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_gate.weight")->type, DType::kF16);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_norm.weight")->type, DType::kF32);
  EXPECT_EQ(*f->GetUint("general.file_type"), 1u);
  // The Q8_0 weights dequantize close to the F32 ones of the same seed.
  SyntheticSpec plain = spec;
  plain.default_type = DType::kF32;
  plain.type_overrides.clear();
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> pbytes, Image(plain));
  FG_ASSERT_OK_AND_ASSIGN(auto p, File::FromBytes(pbytes));
  const TensorInfo* q = f->FindTensor("blk.0.ffn_down.weight");
  const TensorInfo* r = p->FindTensor("blk.0.ffn_down.weight");
  std::vector<float> deq(q->n_elements), ref(r->n_elements);
  FG_ASSERT_OK(kernels::DequantizeRow(DType::kQ8_0, q->data, deq.data(), q->n_elements));
  std::memcpy(ref.data(), r->data, r->size_bytes);
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (deq[i] - ref[i]) * (deq[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  EXPECT_LT(err / norm, 1e-3);
}

TEST(SyntheticTest, BadSpecs) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("tiny"));
  SyntheticSpec s = spec;
  s.heads = 3;
  s.kv_heads = 2;
  EXPECT_THAT(BuildSyntheticGemma3(s),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("multiple of kv_heads")));
  s = spec;
  s.layers = 0;
  EXPECT_THAT(BuildSyntheticGemma3(s), StatusIs(StatusCode::kInvalidArgument, HasSubstr("layers")));
  s = spec;
  s.default_type = DType::kQ4_K;  // 64-wide rows do not fit 256-element blocks
  EXPECT_THAT(BuildSyntheticGemma3(s),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("not a multiple of the Q4_K block size 256")));
  EXPECT_THAT(SyntheticPreset("huge"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("huge")));
}

TEST(SyntheticTest, Preset270mMatchesRealMix) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("270m"));
  std::map<DType, int> count;
  count[DType::kF32] += 1;  // output_norm
  count[SyntheticTensorType(spec, "token_embd.weight", 2)]++;
  const char* kNames[] = {"attn_k", "attn_k_norm", "attn_norm", "attn_output", "attn_q",
                          "attn_q_norm", "attn_v", "ffn_down", "ffn_gate", "ffn_norm",
                          "ffn_up", "post_attention_norm", "post_ffw_norm"};
  for (int l = 0; l < 18; ++l) {
    for (const char* n : kNames) {
      std::string name = "blk." + std::to_string(l) + "." + n + ".weight";
      bool norm = std::string(n).find("norm") != std::string::npos;
      count[SyntheticTensorType(spec, name, norm ? 1 : 2)]++;
    }
  }
  EXPECT_EQ(count[DType::kF32], 109);
  EXPECT_EQ(count[DType::kQ5_0], 81);
  EXPECT_EQ(count[DType::kQ4_K], 27);
  EXPECT_EQ(count[DType::kQ8_0], 10);
  EXPECT_EQ(count[DType::kQ6_K], 9);
  EXPECT_EQ(SyntheticTensorType(spec, "blk.4.attn_v.weight", 2), DType::kQ8_0);
  EXPECT_EQ(SyntheticTensorType(spec, "blk.14.attn_v.weight", 2), DType::kQ5_0);
  EXPECT_EQ(SyntheticTensorType(spec, "blk.1.ffn_down.weight", 2), DType::kQ6_K);
  EXPECT_EQ(SyntheticTensorType(spec, "blk.11.ffn_down.weight", 2), DType::kQ4_K);
}

}  // namespace
}  // namespace fg::gguf
