// LoRA adapters through the CLI, run as the real binary: mklora, --lora/--lora-scaled on run,
// call and invoke, fgemma merge (the merged model answers as the adapter does), bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

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
  return ::fg::testing::ProcessTempDir() + "/cli_lora_" + name;
}

class CliLoraTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(Tmp("small.gguf"));
    lora_ = new std::string(Tmp("r8.gguf"));
    ASSERT_EQ(Fgemma("mkmodel -o " + *model_ + " --preset small --seed 3").rc, 0);
    Result r = Fgemma("mklora -m " + *model_ + " -o " + *lora_ + " --rank 8 --amplitude 0.2");
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  static void TearDownTestSuite() {
    delete model_;
    delete lora_;
  }
  // Greedy ids of `fgemma run --raw` with `extra` flags.
  static Result Ids(const std::string& extra) {
    return Fgemma("run -m " + *model_ + " --raw -p 'a b c d' -n 12 --temp 0 --ids " + extra,
                  /*with_stderr=*/false);
  }
  static std::string* model_;
  static std::string* lora_;
};
std::string* CliLoraTest::model_ = nullptr;
std::string* CliLoraTest::lora_ = nullptr;

TEST_F(CliLoraTest, AdapterChangesOutputAndScaleZeroIsBase) {
  Result base = Ids("");
  ASSERT_EQ(base.rc, 0) << base.out;
  Result adapted = Ids("--lora " + *lora_);
  ASSERT_EQ(adapted.rc, 0) << adapted.out;
  EXPECT_NE(adapted.out, base.out);
  Result zero = Ids("--lora-scaled " + *lora_ + " 0");
  ASSERT_EQ(zero.rc, 0) << zero.out;
  EXPECT_EQ(zero.out, base.out);
  Result one = Ids("--lora-scaled=" + *lora_ + " 1");
  EXPECT_EQ(one.out, adapted.out);
  // llama.cpp's FILE:S spelling, and two adapters at half scale each equal one at full scale
  // up to rounding (the same greedy tokens here).
  EXPECT_EQ(Ids("--lora-scaled " + *lora_ + ":1").out, adapted.out);
  EXPECT_EQ(Ids("--lora-scaled " + *lora_ + ":0.5," + *lora_ + ":0.5").out, adapted.out);
  EXPECT_EQ(Ids("--lora-scaled " + *lora_ + ":0").out, base.out);
}

TEST_F(CliLoraTest, MergedModelAnswersAsTheAdapter) {
  const std::string merged = Tmp("merged.gguf");
  Result m = Fgemma("merge -q -m " + *model_ + " --lora " + *lora_ + " -o " + merged);
  ASSERT_EQ(m.rc, 0) << m.out;
  Result adapted = Ids("--lora " + *lora_);
  Result got = Fgemma("run -m " + merged + " --raw -p 'a b c d' -n 12 --temp 0 --ids", false);
  ASSERT_EQ(got.rc, 0) << got.out;
  EXPECT_EQ(got.out, adapted.out);
}

TEST_F(CliLoraTest, CallTakesAdapters) {
  const std::string catalog = Tmp("tools.json");
  FILE* f = std::fopen(catalog.c_str(), "w");
  std::fputs(R"([{"name":"set_light","description":"Turn a light on or off",
    "parameters":{"type":"object","properties":{"state":{"type":"string","enum":["on","off"]}},
    "required":["state"]}}])",
             f);
  std::fclose(f);
  Result r = Fgemma("call -m " + *model_ + " --tools " + catalog + " --lora " + *lora_ +
                        " 'turn the light on'",
                    false);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"name\":\"set_light\""));
}

// The shipped call adapter ($FGEMMA_CALL_LORA here) follows the default model ($FGEMMA_MODEL):
// applied without -m, with -m naming it, and with -m naming a copy of it; not to another model
// of the same shapes, nor with --no-lora.
TEST_F(CliLoraTest, TheShippedCallAdapterFollowsTheDefaultModel) {
  const std::string catalog = Tmp("notes.json");
  FILE* f = std::fopen(catalog.c_str(), "w");
  std::fputs(R"([{"name":"add_note","description":"Write a note",
    "parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}])",
             f);
  std::fclose(f);
  const std::string copy = Tmp("copy.gguf");
  std::filesystem::copy_file(*model_, copy, std::filesystem::copy_options::overwrite_existing);
  const std::string other = Tmp("other.gguf");  // the same preset and shapes, other weights
  ASSERT_EQ(Fgemma("mkmodel -o " + other + " --preset small --seed 5").rc, 0);
  auto call = [&](const std::string& flags) {
    Result r = ::fg::testing::RunCommand("FGEMMA_MODEL=" + *model_ + " FGEMMA_CALL_LORA=" + *lora_ +
                                             " " + FG_CLI_PATH + " call --tools " + catalog +
                                             " -n 24 " + flags + " 'note that the milk is out'",
                                         /*with_stderr=*/false);
    EXPECT_EQ(r.rc, 0) << flags << ": " << r.out;
    return r.out;
  };
  const std::string adapted = call("-m " + *model_ + " --lora " + *lora_);
  const std::string base = call("-m " + *model_ + " --no-lora");
  ASSERT_NE(adapted, base);  // the adapter changes this call
  EXPECT_EQ(call(""), adapted);
  EXPECT_EQ(call("-m " + *model_), adapted);
  EXPECT_EQ(call("-m " + copy), adapted);
  EXPECT_EQ(call("--no-lora"), base);
  EXPECT_EQ(call("-m " + other), call("-m " + other + " --no-lora"));
  EXPECT_NE(call("-m " + other), call("-m " + other + " --lora " + *lora_));
}

TEST_F(CliLoraTest, BadInput) {
  // A missing adapter file: runtime error naming it.
  Result missing = Ids("--lora " + Tmp("nope.gguf"));
  EXPECT_EQ(missing.rc, 1);
  Result missing_err = Fgemma("run -m " + *model_ + " -p x -n 1 --lora " + Tmp("nope.gguf"));
  EXPECT_THAT(missing_err.out, HasSubstr("nope.gguf"));
  // The base model given as an adapter.
  Result not_adapter = Fgemma("run -m " + *model_ + " -p x -n 1 --lora " + *model_);
  EXPECT_EQ(not_adapter.rc, 1);
  EXPECT_THAT(not_adapter.out, HasSubstr("not an adapter"));
  // Usage errors: a scale that is no number, a missing scale, merge without an adapter.
  Result bad_scale = Fgemma("run -m " + *model_ + " -p x --lora-scaled " + *lora_ + " abc");
  EXPECT_EQ(bad_scale.rc, 2);
  EXPECT_THAT(bad_scale.out, HasSubstr("the scale must be a number"));
  Result no_scale = Fgemma("run -m " + *model_ + " -p x --lora-scaled " + *lora_);
  EXPECT_EQ(no_scale.rc, 2);
  EXPECT_THAT(no_scale.out, HasSubstr("needs two values"));
  Result bad_colon = Fgemma("run -m " + *model_ + " -p x --lora-scaled " + *lora_ + ":x");
  EXPECT_EQ(bad_colon.rc, 2);
  EXPECT_THAT(bad_colon.out, HasSubstr("the scale must be a number"));
  Result no_lora = Fgemma("merge -m " + *model_ + " -o " + Tmp("x.gguf"));
  EXPECT_EQ(no_lora.rc, 2);
  EXPECT_FALSE(std::filesystem::exists(Tmp("x.gguf")));
  // An adapter for another model (other shapes): runtime error naming the tensor.
  const std::string other = Tmp("tiny.gguf");
  ASSERT_EQ(Fgemma("mkmodel -o " + other + " --preset tiny").rc, 0);
  Result wrong = Fgemma("run -m " + other + " -p x -n 1 --lora " + *lora_);
  EXPECT_EQ(wrong.rc, 1);
  EXPECT_THAT(wrong.out, HasSubstr("does not fit the base tensor"));
  // mklora: unknown module is a usage error.
  Result bad_module = Fgemma("mklora -m " + *model_ + " -o " + Tmp("y.gguf") + " --modules attn_z");
  EXPECT_EQ(bad_module.rc, 2);
}

}  // namespace
}  // namespace fg
