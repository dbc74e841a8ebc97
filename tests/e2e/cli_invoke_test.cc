// `fgemma invoke` as the real binary on a synthetic model: iree-run-module's input spellings
// (values, raw files, .npy) and output (printed buffer views, .npy files), a prefill -> with_past
// chain through files, --stats, and every kind of bad input (exit 2 for usage, 1 for runtime,
// never a crash, the argument named).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/export/contract.h"
#include "src/export/tensor_io.h"
#include "src/gguf_tools/synthetic.h"
#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// "small": 6 layers (layer 5 global), 4 heads, 1 KV head, head_dim 64, window 16, vocab 1024.
const std::string& Model() {
  static const std::string path = [] {
    std::string p = TempPath("cli_invoke_small.gguf");
    auto spec = gguf::SyntheticPreset("small");
    EXPECT_TRUE(spec.ok());
    EXPECT_TRUE(gguf::WriteSyntheticGemma3(*spec, p).ok());
    return p;
  }();
  return path;
}

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

std::string Commas(const std::vector<int>& v) {
  std::string s = Join(v);
  std::replace(s.begin(), s.end(), ' ', ',');
  return s;
}

std::string OneHot(int n, int at) {
  std::vector<int> v(n, 0);
  v[at] = 1;
  return Join(v);
}

const std::vector<int> kPrompt = {2, 105, 700, 31, 99, 512, 8, 77, 301};

// The last integer of the printed output.
int LastInt(const std::string& out) {
  size_t end = out.find_last_of("0123456789");
  size_t start = out.find_last_not_of("0123456789", end);
  return std::atoi(out.substr(start + 1, end - start).c_str());
}

TEST(CliInvokeTest, PrintsResultsAsIreeRunModule) {
  std::vector<int> padded = kPrompt;
  padded.resize(12, 0);
  auto r = RunFgemma("invoke -m " + Model() + " --function gemma_at '--input=1x12xi32=" +
                         Join(padded) + "' '--input=1x12xf32=" + OneHot(12, 8) + "'",
                     false);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, StartsWith("EXEC @gemma_at\nresult[0]: hal.buffer_view\n1xi32="));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  // gemma (all positions) agrees at position 8; module.-qualified names and commas work.
  auto all = RunFgemma("invoke -m " + Model() + " --function module.gemma --input=1x12xi32=" + Commas(padded), false);
  ASSERT_EQ(all.rc, 0) << all.out;
  EXPECT_THAT(all.out, HasSubstr("result[0]: hal.buffer_view\n12xi32="));
  const std::string line = all.out.substr(all.out.find("12xi32=") + 7);
  std::vector<int> tokens;
  for (size_t i = 0; i < line.size();) {
    size_t j = line.find_first_of(" \n", i);
    tokens.push_back(std::atoi(line.substr(i, j - i).c_str()));
    i = j + 1;
    if (line[j] == '\n') break;
  }
  ASSERT_EQ(tokens.size(), 12u);
  EXPECT_EQ(tokens[8], LastInt(r.out));
}

// gemma_prefill_at -> .npy files -> gemma_with_past with the K/V files, RoPE rows as raw
// little-endian files: the token equals gemma_at on the prompt plus that token.
TEST(CliInvokeTest, PrefillThenWithPastThroughFiles) {
  const int n = static_cast<int>(kPrompt.size());  // 9 rows: below W-1 = 15, all rows pass
  std::string outs;
  for (int l = 0; l < 6; ++l) {
    outs += " --output=@" + TempPath("inv_l" + std::to_string(l) + "k.npy");
    outs += " --output=@" + TempPath("inv_l" + std::to_string(l) + "v.npy");
  }
  outs += " --output=@" + TempPath("inv_tok.npy");
  auto pre = RunFgemma("invoke -m " + Model() + " --reference-kernels --function gemma_prefill_at --input='" +
                       std::to_string(n) + "xi32=" + Join(kPrompt) + "' --input='1x" +
                       std::to_string(n) + "xf32=" + OneHot(n, n - 1) + "'" + outs);
  ASSERT_EQ(pre.rc, 0) << pre.out;
  EXPECT_EQ(pre.out, "");
  FG_ASSERT_OK_AND_ASSIGN(exporter::HostTensor tok, exporter::ReadNpy(TempPath("inv_tok.npy")));
  ASSERT_EQ(tok.shape, (std::vector<int64_t>{1}));
  ASSERT_EQ(tok.type, exporter::ArgType::kI32);
  FG_ASSERT_OK_AND_ASSIGN(exporter::HostTensor k0, exporter::ReadNpy(TempPath("inv_l0k.npy")));
  EXPECT_EQ(k0.shape, (std::vector<int64_t>{1, 1, n, 64}));

  // RoPE rows for position n (sliding base 1e4, global 1e6) as raw f32 files.
  auto raw = [](const std::string& name, const std::vector<float>& v) {
    std::ofstream(TempPath(name), std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return "--input=1x64xf32=@" + TempPath(name);
  };
  std::vector<float> cs, sn, cg, sg;
  exporter::ContractRopeRows(n, 1, 64, 1e4, &cs, &sn);
  exporter::ContractRopeRows(n, 1, 64, 1e6, &cg, &sg);
  std::string args = " --input=1xi32=" + std::to_string(tok.i32[0]) + " " + raw("cs.bin", cs) +
                     " " + raw("sn.bin", sn);
  for (int l = 0; l < 6; ++l) {
    if (l == 5) args += " " + raw("cg.bin", cg) + " " + raw("sg.bin", sg);
    args += " --input=@" + TempPath("inv_l" + std::to_string(l) + "k.npy");
    args += " --input=@" + TempPath("inv_l" + std::to_string(l) + "v.npy");
  }
  auto step = RunFgemma("invoke -m " + Model() + " --reference-kernels --function gemma_with_past" + args, false);
  ASSERT_EQ(step.rc, 0) << step.out;
  EXPECT_THAT(step.out, HasSubstr("result[0]: hal.buffer_view\n1x1x10x64xf32=[[["));
  EXPECT_THAT(step.out, HasSubstr("result[12]: hal.buffer_view\n1xi32="));

  std::vector<int> longer = kPrompt;
  longer.push_back(tok.i32[0]);
  auto at = RunFgemma("invoke -m " + Model() + " --reference-kernels --function gemma_at --input='1x10xi32=" +
                          Join(longer) + "' --input='1x10xf32=" + OneHot(10, 9) + "'",
                      false);
  ASSERT_EQ(at.rc, 0) << at.out;
  EXPECT_EQ(LastInt(step.out), LastInt(at.out));
}

TEST(CliInvokeTest, StatsReportLargestValueAndScratch) {
  auto r = RunFgemma("invoke -m " + Model() + " --stats --function gemma --input=1x32xi32=5");
  ASSERT_EQ(r.rc, 0) << r.out;
  // 32 x 1024 f32 logits are the largest value of the all-positions function.
  EXPECT_THAT(r.out, HasSubstr("gemma: largest value result_output 131072 bytes; executor scratch (arena) "));
  auto at = RunFgemma("invoke -m " + Model() + " --stats --function gemma_at --input=1x32xi32=5 --input=1x32xf32=0");
  ASSERT_EQ(at.rc, 0) << at.out;
  EXPECT_THAT(at.out, HasSubstr("gemma_at: largest value "));
  EXPECT_THAT(at.out, Not(HasSubstr("result_output 131072")));
}

// NumPy writes what invoke reads and reads what invoke writes (skips without the venv).
TEST(CliInvokeTest, NumpyInterop) {
  const char* venv = std::getenv("FGEMMA_VENV");
  if (venv == nullptr || *venv == '\0') GTEST_SKIP() << "FGEMMA_VENV is not set (needs numpy)";
  const std::string py = std::string(venv) + "/bin/python";
  const std::string tokens = TempPath("np_tokens.npy"), sel = TempPath("np_sel.npy");
  std::string script = "import numpy as np; np.save('" + tokens + "', np.array([[" + Commas(kPrompt) +
                       "]], dtype=np.int32)); s = np.zeros((1, 9), np.float32); s[0, 8] = 1; np.save('" +
                       sel + "', s)";
  ASSERT_EQ(std::system((py + " -c \"" + script + "\"").c_str()), 0);
  const std::string out = TempPath("np_out.npy");
  auto r = RunFgemma("invoke -m " + Model() + " --function gemma_at --input=@" + tokens +
                     " --input=@" + sel + " --output=@" + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto direct = RunFgemma("invoke -m " + Model() + " --function gemma_at '--input=1x9xi32=" +
                              Join(kPrompt) + "' '--input=1x9xf32=" + OneHot(9, 8) + "'", false);
  ASSERT_EQ(direct.rc, 0) << direct.out;
  const std::string check = TempPath("np_check.txt");
  script = "import numpy as np; a = np.load('" + out + "'); open('" + check +
           "', 'w').write('%s %s %d' % (a.dtype, a.shape, a[0]))";
  ASSERT_EQ(std::system((py + " -c \"" + script + "\"").c_str()), 0);
  std::ifstream in(check);
  std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, "int32 (1,) " + std::to_string(LastInt(direct.out)));
}

TEST(CliInvokeTest, BadInputsAreClearErrors) {
  const std::string m = "invoke -m " + Model() + " ";
  struct Case {
    std::string args;
    int rc;
    std::string message;
  };
  {
    std::ofstream(TempPath("bad.npy"), std::ios::binary) << "not a numpy file";
  }
  const std::string ok2 = " --input=1x4xi32=2 --input=1x4xf32=0";
  const std::vector<Case> cases = {
      {"--function gemma_at", 2, "takes 2 arguments, got 0"},
      {"--input=1x4xi32=2", 2, "missing --function"},
      {"--function gemma_nope --input=1x4xi32=2", 2, "unknown function 'gemma_nope'"},
      {"--function gemma_at --input=1x4xi32=2", 2, "gemma_at takes 2 arguments, got 1"},
      {"--function gemma_at --input=1x4xi32=2 --input=1x5xf32=0", 2,
       "argument 1 'select': expected shape 1x4xf32, got 1x5xf32"},
      {"--function gemma_at --input=1x4xf32=2 --input=1x4xf32=0", 2,
       "argument 0 'tokens': expected 1x4xi32, got element type f32"},
      {"--function gemma_at --input=1x4xi32=2,3 --input=1x4xf32=0", 2, "--input 0: 2 values for a tensor of 4"},
      {"--function gemma_at --input=1x4xi64=2 --input=1x4xf32=0", 2, "element type 'i64'"},
      {"--function gemma_at --input=@" + TempPath("missing.npy") + " --input=1x4xf32=0", 1,
       "--input 0: cannot open"},
      {"--function gemma_at --input=@" + TempPath("bad.npy") + " --input=1x4xf32=0", 1,
       "not a usable .npy file"},
      {"--function gemma_at --input=1x4xi32=1024 --input=1x4xf32=0", 1,
       "argument 0 'tokens': token id 1024 at index 0 is outside the vocabulary [0, 1024)"},
      {"--function gemma_at --input=1x4xi32=-1 --input=1x4xf32=0", 1, "token id -1"},
      {"--function gemma_at" + ok2 + " --output=@a.npy --output=@b.npy", 2,
       "2 --output given, gemma_at has 1 results"},
      {"--function gemma_at" + ok2 + " --output=x.npy", 2, "must be @FILE.npy"},
      {"--function gemma_at" + ok2 + " --seq 0", 2, "--seq must be in [1, 65536]"},
      {"--function gemma_with_past --input=1xi32=3", 2, "gemma_with_past takes 17 arguments, got 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    auto r = RunFgemma(m + c.args);
    EXPECT_EQ(r.rc, c.rc) << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.message));
    EXPECT_THAT(r.out, HasSubstr("fgemma invoke: "));
  }
  auto help = RunFgemma("invoke --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_THAT(help.out, HasSubstr("--input SPEC"));
}

}  // namespace
}  // namespace fg
