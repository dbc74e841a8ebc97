// `fgemma mkmodel` and `fgemma inspect`, run as the real binary: exit codes, output, JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/mapped_file.h"
#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Result = ::fg::testing::CliResult;

Result Fgemma(const std::string& args, bool with_stderr = true) {
  return ::fg::testing::RunFgemma(args, with_stderr);
}

// In this process's own folder (ProcessTempDir: cases run in parallel processes).
std::string Tmp(const std::string& name) {
  return ::fg::testing::ProcessTempDir() + "/cli_gguf_" + name;
}

TEST(CliGgufTest, MkmodelThenInspect) {
  std::string path = Tmp("tiny.gguf");
  Result mk = Fgemma("mkmodel -o " + path + " --preset tiny --seed 7");
  ASSERT_EQ(mk.rc, 0) << mk.out;
  EXPECT_THAT(mk.out, HasSubstr("wrote"));

  Result text = Fgemma("inspect " + path);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("GGUF v3, alignment 32"));
  EXPECT_THAT(text.out, HasSubstr("gemma3.block_count"));
  EXPECT_THAT(text.out, HasSubstr("token_embd.weight"));
  EXPECT_THAT(text.out, HasSubstr("blk.1.post_ffw_norm.weight"));
  EXPECT_THAT(text.out, HasSubstr("[640, 64]"));
  EXPECT_THAT(text.out, HasSubstr("string[640]"));
  EXPECT_THAT(text.out, HasSubstr("total      28 tensors"));

  Result brief = Fgemma("inspect --no-tensors " + path);
  ASSERT_EQ(brief.rc, 0);
  EXPECT_THAT(brief.out, Not(HasSubstr("blk.1.post_ffw_norm.weight")));
  EXPECT_THAT(brief.out, HasSubstr("Summary:"));

  Result js = Fgemma("inspect --json " + path, /*with_stderr=*/false);
  ASSERT_EQ(js.rc, 0);
  nlohmann::json j = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << js.out.substr(0, 400);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["tensor_count"], 28);
  EXPECT_EQ(j["tensors"].size(), 28u);
  EXPECT_EQ(j["tensors"][1]["name"], "token_embd.weight");
  EXPECT_EQ(j["tensors"][1]["shape"], nlohmann::json::array({640, 64}));
  EXPECT_EQ(j["tensors"][1]["type"], "F32");
  bool found_tokens = false;
  for (const auto& kv : j["metadata"]) {
    if (kv["key"] == "tokenizer.ggml.tokens") {
      found_tokens = true;
      EXPECT_EQ(kv["count"], 640);
      EXPECT_EQ(kv["head"][0], "<pad>");
      EXPECT_LE(kv["head"].size(), 8u);
    }
    if (kv["key"] == "gemma3.block_count") {
      EXPECT_EQ(kv["value"], 2);
    }
  }
  EXPECT_TRUE(found_tokens);
  std::remove(path.c_str());
}

TEST(CliGgufTest, MkmodelIsDeterministic) {
  std::string a = Tmp("a.gguf"), b = Tmp("b.gguf"), c = Tmp("c.gguf");
  ASSERT_EQ(Fgemma("mkmodel -o " + a + " --seed 3 --type f16 --tensor-type token_embd=q8_0").rc,
            0);
  ASSERT_EQ(Fgemma("mkmodel -o " + b + " --seed 3 --type f16 --tensor-type token_embd=q8_0").rc,
            0);
  ASSERT_EQ(Fgemma("mkmodel -o " + c + " --seed 4 --type f16 --tensor-type token_embd=q8_0").rc,
            0);
  auto fa = MappedFile::Open(a), fb = MappedFile::Open(b), fc = MappedFile::Open(c);
  ASSERT_TRUE(fa.ok() && fb.ok() && fc.ok());
  auto bytes = [](const auto& m) { return std::vector<uint8_t>(m->bytes().begin(), m->bytes().end()); };
  EXPECT_EQ(bytes(*fa), bytes(*fb));
  EXPECT_NE(bytes(*fa), bytes(*fc));
  auto f = gguf::File::Open(a);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->FindTensor("token_embd.weight")->type, tensor::DType::kQ8_0);
  EXPECT_EQ((*f)->FindTensor("blk.0.ffn_up.weight")->type, tensor::DType::kF16);
  for (const auto& p : {a, b, c}) std::remove(p.c_str());
}

TEST(CliGgufTest, MkmodelShapeFlags) {
  std::string path = Tmp("shaped.gguf");
  Result r = Fgemma("mkmodel -o " + path + " --layers 3 --hidden 32 --heads 4 --kv-heads 2 "
                    "--head-dim 8 --ffn 64 --vocab 700 --window 4 --context 128 --rope-swa");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto f = gguf::File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*(*f)->GetUint("gemma3.block_count"), 3u);
  EXPECT_EQ(*(*f)->GetUint("gemma3.attention.head_count_kv"), 2u);
  EXPECT_EQ(*(*f)->GetFloat("gemma3.rope.freq_base_swa"), 1e4);
  EXPECT_EQ((*f)->FindTensor("blk.2.attn_q.weight")->shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ((*f)->FindTensor("blk.2.attn_k.weight")->shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ((*f)->FindTensor("token_embd.weight")->shape, (std::vector<int64_t>{700, 32}));
  std::remove(path.c_str());
}

TEST(CliGgufTest, ErrorsAndExitCodes) {
  std::string path = Tmp("never.gguf");
  Result r = Fgemma("inspect /nonexistent/model.gguf");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("/nonexistent/model.gguf"));
  std::string junk = Tmp("junk.gguf");
  FILE* fp = std::fopen(junk.c_str(), "wb");
  std::fputs("not a gguf file at all", fp);
  std::fclose(fp);
  r = Fgemma("inspect " + junk);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("bad magic"));
  std::remove(junk.c_str());

  EXPECT_EQ(Fgemma("inspect").rc, 2);
  EXPECT_EQ(Fgemma("inspect --frobnicate x.gguf").rc, 2);
  EXPECT_EQ(Fgemma("inspect a.gguf b.gguf").rc, 2);
  EXPECT_EQ(Fgemma("inspect --help").rc, 0);

  EXPECT_EQ(Fgemma("mkmodel").rc, 2);  // -o is required
  r = Fgemma("mkmodel -o " + path + " --preset giant");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("giant"));
  r = Fgemma("mkmodel -o " + path + " --type q9_9");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("q9_9"));
  r = Fgemma("mkmodel -o " + path + " --tensor-type ffn_down");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("PATTERN=TYPE"));
  r = Fgemma("mkmodel -o " + path + " --type q4_k");  // 64-wide rows, 256-wide blocks
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("block size 256"));
  r = Fgemma("mkmodel -o " + path + " --layers 0");
  EXPECT_EQ(r.rc, 2);
  r = Fgemma("mkmodel -o " + path + " --vocab 100");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("vocab"));
  r = Fgemma("mkmodel -o /nonexistent_dir_fgemma/x.gguf");
  EXPECT_EQ(r.rc, 1);
  FILE* check = std::fopen(path.c_str(), "rb");
  EXPECT_EQ(check, nullptr) << "a failed mkmodel left a file";
  if (check) std::fclose(check);
}

}  // namespace
}  // namespace fg
