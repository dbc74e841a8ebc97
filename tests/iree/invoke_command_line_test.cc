// One command line, two engines: `fgemma invoke` and iree-run-module (on the module
// `fgemma export` wrote and iree-compile built) take the same --function/--input/--output
// arguments and print byte-identical results (EXEC line, result headers, tokens) and write
// byte-identical .npy files. Skips without the IREE tools (FGEMMA_VENV).
#include <fstream>
#include <iterator>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/gguf_tools/synthetic.h"
#include "tests/testing/cli_runner.h"
#include "tests/testing/iree_runner.h"

namespace fg {
namespace {

using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(InvokeCommandLineTest, SameArgumentsSameOutputAsIreeRunModule) {
  std::string why;
  const std::string compiler = fg::testing::IreeTool("iree-compile", &why);
  const std::string runner = fg::testing::IreeTool("iree-run-module", &why);
  if (compiler.empty() || runner.empty()) GTEST_SKIP() << why;
  const std::string model = TempPath("invoke_cl_tiny.gguf");
  auto spec = gguf::SyntheticPreset("tiny");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(gguf::WriteSyntheticGemma3(*spec, model).ok());

  struct Case {
    const char* graph;
    const char* function;
    std::string inputs;
  };
  const Case cases[] = {
      {"redecode_at", "gemma_at",
       " '--input=1x8xi32=2 105 7 9 11 0 0 0' '--input=1x8xf32=0 0 0 0 1 0 0 0'"},
      {"redecode", "gemma", " --input=1x8xi32=2,105,7,9,11,0,0,0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.function);
    const std::string dir = TempPath(std::string("invoke_cl_") + c.graph);
    auto ex = RunFgemma("export -m " + model + " --graph " + c.graph + " --seq 8 --dtype f32 -o " + dir);
    ASSERT_EQ(ex.rc, 0) << ex.out;
    const std::string vmfb = dir + ".vmfb";
    ASSERT_EQ(fg::testing::IreeCompile(compiler, dir + "/" + c.function + ".mlir", vmfb), "");

    std::string iree_out;
    const std::string iree_cmd = runner + " --device=local-task --module=" + vmfb +
                                 " --parameters=model=" + dir + "/model.irpa --function=" +
                                 c.function + c.inputs;
    ASSERT_EQ(fg::testing::Shell(iree_cmd + " 2>/dev/null", &iree_out), 0) << iree_out;
    auto ours = RunFgemma("invoke -m " + model + " --function " + c.function + c.inputs, false);
    ASSERT_EQ(ours.rc, 0) << ours.out;
    EXPECT_EQ(ours.out, iree_out);
    EXPECT_THAT(ours.out, ::testing::StartsWith(std::string("EXEC @") + c.function + "\nresult[0]: hal.buffer_view\n"));

    // --output=@file.npy: the same bytes.
    const std::string a = dir + "_iree.npy", b = dir + "_fgemma.npy";
    ASSERT_EQ(fg::testing::Shell(iree_cmd + " --output=@" + a, &iree_out), 0) << iree_out;
    ours = RunFgemma("invoke -m " + model + " --function " + c.function + c.inputs + " --output=@" + b);
    ASSERT_EQ(ours.rc, 0) << ours.out;
    EXPECT_EQ(ReadAll(b), ReadAll(a));
    EXPECT_FALSE(ReadAll(a).empty());
  }
}

// `fgemma export --lora` writes the merged weights: the compiled graph run by IREE prints what
// `fgemma invoke` prints on the model `fgemma merge --type f32` writes from the same adapter.
TEST(InvokeCommandLineTest, ExportWithAdapterEqualsMergedModel) {
  std::string why;
  const std::string compiler = fg::testing::IreeTool("iree-compile", &why);
  const std::string runner = fg::testing::IreeTool("iree-run-module", &why);
  if (compiler.empty() || runner.empty()) GTEST_SKIP() << why;
  const std::string model = TempPath("invoke_lora_tiny.gguf");
  auto spec = gguf::SyntheticPreset("tiny");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(gguf::WriteSyntheticGemma3(*spec, model).ok());
  const std::string lora = TempPath("invoke_lora_r4.gguf");
  ASSERT_EQ(RunFgemma("mklora -m " + model + " -o " + lora + " --rank 4 --amplitude 0.2").rc, 0);
  const std::string merged = TempPath("invoke_lora_merged.gguf");
  auto mg = RunFgemma("merge -q -m " + model + " --lora " + lora + " --type f32 -o " + merged);
  ASSERT_EQ(mg.rc, 0) << mg.out;
  const std::string dir = TempPath("invoke_lora_export");
  auto ex = RunFgemma("export -m " + model + " --lora " + lora +
                      " --graph redecode_at --seq 8 --dtype f32 -o " + dir);
  ASSERT_EQ(ex.rc, 0) << ex.out;
  const std::string vmfb = dir + ".vmfb";
  ASSERT_EQ(fg::testing::IreeCompile(compiler, dir + "/gemma_at.mlir", vmfb), "");
  const std::string inputs = " '--input=1x8xi32=2 105 7 9 11 0 0 0' '--input=1x8xf32=0 0 0 0 1 0 0 0'";
  std::string iree_out;
  ASSERT_EQ(fg::testing::Shell(runner + " --device=local-task --module=" + vmfb +
                                   " --parameters=model=" + dir +
                                   "/model.irpa --function=gemma_at" + inputs + " 2>/dev/null",
                               &iree_out),
            0)
      << iree_out;
  auto ours = RunFgemma("invoke -m " + merged + " --function gemma_at" + inputs, false);
  ASSERT_EQ(ours.rc, 0) << ours.out;
  EXPECT_EQ(ours.out, iree_out);
  // And the adapter changed the function (else the comparison proves nothing).
  auto base = RunFgemma("invoke -m " + model + " --function gemma_at" + inputs, false);
  EXPECT_NE(base.out, iree_out);
}

}  // namespace
}  // namespace fg
