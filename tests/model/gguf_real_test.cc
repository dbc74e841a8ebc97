// The GGUF reader and writer on the real FunctionGemma / Gemma 3 270M Q4_K_M file
// ($FGEMMA_MODEL; skipped with the reason when it is not set or missing).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/gguf/writer.h"

namespace fg::gguf {
namespace {

using tensor::DType;

class GgufRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* m = std::getenv("FGEMMA_MODEL");
    if (m == nullptr || *m == '\0') GTEST_SKIP() << "FGEMMA_MODEL is not set";
    struct stat st;
    if (::stat(m, &st) != 0) GTEST_SKIP() << "FGEMMA_MODEL '" << m << "' does not exist";
    path_ = m;
  }
  std::string path_;
};

TEST_F(GgufRealTest, HeaderTensorsAndTypeMix) {
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::Open(path_));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->tensors().size(), 236u);
  std::map<DType, int> count;
  for (const TensorInfo& t : f->tensors()) count[t.type]++;
  EXPECT_EQ(count[DType::kF32], 109);
  EXPECT_EQ(count[DType::kQ5_0], 81);
  EXPECT_EQ(count[DType::kQ4_K], 27);
  EXPECT_EQ(count[DType::kQ8_0], 10);
  EXPECT_EQ(count[DType::kQ6_K], 9);
  EXPECT_EQ(count.size(), 5u);

  const TensorInfo* emb = f->FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::kQ8_0);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{262144, 640}));
  EXPECT_EQ(emb->size_bytes, 262144ull * 640 / 32 * 34);
  struct Want {
    const char* name;
    DType type;
    std::vector<int64_t> shape;
  };
  for (const Want& w : {Want{"output_norm.weight", DType::kF32, {640}},
                        Want{"blk.0.attn_q.weight", DType::kQ5_0, {1024, 640}},
                        Want{"blk.0.attn_k.weight", DType::kQ5_0, {256, 640}},
                        Want{"blk.0.attn_v.weight", DType::kQ8_0, {256, 640}},
                        Want{"blk.2.attn_v.weight", DType::kQ5_0, {256, 640}},
                        Want{"blk.0.attn_output.weight", DType::kQ4_K, {640, 1024}},
                        Want{"blk.0.attn_q_norm.weight", DType::kF32, {256}},
                        Want{"blk.17.ffn_gate.weight", DType::kQ5_0, {2048, 640}},
                        Want{"blk.17.ffn_down.weight", DType::kQ6_K, {640, 2048}},
                        Want{"blk.2.ffn_down.weight", DType::kQ4_K, {640, 2048}},
                        Want{"blk.17.post_ffw_norm.weight", DType::kF32, {640}}}) {
    const TensorInfo* t = f->FindTensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->type, w.type) << w.name;
    EXPECT_EQ(t->shape, w.shape) << w.name;
  }
  // Tensors lie in the file, aligned, in order.
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    EXPECT_LE(f->data_offset() + t.offset + t.size_bytes, f->bytes().size()) << t.name;
  }
}

TEST_F(GgufRealTest, Metadata) {
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::Open(path_));
  EXPECT_EQ(f->metadata().size(), 33u);
  EXPECT_EQ(*f->GetString("general.architecture"), "gemma3");
  EXPECT_EQ(*f->GetUint("gemma3.context_length"), 32768u);
  EXPECT_EQ(*f->GetUint("gemma3.embedding_length"), 640u);
  EXPECT_EQ(*f->GetUint("gemma3.block_count"), 18u);
  EXPECT_EQ(*f->GetUint("gemma3.feed_forward_length"), 2048u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.head_count"), 4u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.head_count_kv"), 1u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.key_length"), 256u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.value_length"), 256u);
  EXPECT_EQ(*f->GetUint("gemma3.attention.sliding_window"), 512u);
  EXPECT_EQ(*f->GetFloat("gemma3.rope.freq_base"), 1e6);
  EXPECT_EQ(*f->GetFloat("gemma3.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-6f));
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.eos_token_id"), 1u);
  EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(*f->GetUint("general.file_type"), 15u);
  FG_ASSERT_OK_AND_ASSIGN(auto tokens, f->GetStringArray("tokenizer.ggml.tokens"));
  ASSERT_EQ(tokens.size(), 262144u);
  EXPECT_EQ(tokens[2], "<bos>");
  EXPECT_EQ(tokens[105], "<start_of_turn>");
  EXPECT_EQ(tokens[106], "<end_of_turn>");
  EXPECT_EQ(tokens[238], "<0x00>");
  FG_ASSERT_OK_AND_ASSIGN(auto scores, f->GetFloatArray("tokenizer.ggml.scores"));
  EXPECT_EQ(scores.size(), 262144u);
  FG_ASSERT_OK_AND_ASSIGN(auto types, f->GetInt32Array("tokenizer.ggml.token_type"));
  EXPECT_EQ(types[238], 6);
  FG_ASSERT_OK_AND_ASSIGN(auto tags, f->GetStringArray("general.tags"));
  EXPECT_EQ(tags.size(), 4u);
}

TEST_F(GgufRealTest, ReadWriteRoundTripIsBitIdentical) {
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::Open(path_));
  FG_ASSERT_OK_AND_ASSIGN(Writer w, Writer::FromFile(*f));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, w.ToBytes());
  ASSERT_EQ(bytes.size(), f->bytes().size());
  EXPECT_EQ(0, std::memcmp(bytes.data(), f->bytes().data(), bytes.size()));
}

TEST_F(GgufRealTest, InspectExitsZero) {
  std::string cmd = std::string(FG_CLI_PATH) + " inspect '" + path_ + "' > /dev/null";
  int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  cmd = std::string(FG_CLI_PATH) + " inspect --json '" + path_ + "' > /dev/null";
  st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

}  // namespace
}  // namespace fg::gguf
