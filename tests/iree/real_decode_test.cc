// The real Gemma 3 270M through IREE (FGEMMA_MODEL and FGEMMA_VENV with iree-base-compiler):
// `fgemma export` (bf16 archive), then scripts/iree_decode.py compiles gemma_prefill_at and
// gemma_with_past (llvm-cpu) and decodes 16 greedy tokens for 3 prompts from manifest.json alone.
// They must equal `fgemma run --raw --temp 0 --ids --reference-kernels` (f32 activations against
// the dequantized weights: the arithmetic the exported graph does). The fast kernels quantize
// activations to Q8_K, so on near-ties they may pick another token: that agreement is printed,
// not asserted. The chunked prefill (gemma_prefill_with_past) is checked on one prompt.
// Slow (several minutes on 2 cores: compiling the 262144-row LM head), hence the iree label.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/cli_runner.h"
#include "tests/testing/iree_runner.h"

namespace fg {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Csv(std::string ids) {
  for (char& c : ids) {
    if (c == ' ') c = ',';
  }
  return ids;
}

// The ids line of iree_decode.py's output (its timings go to stderr, which Shell merges).
std::string IdsLine(const std::string& out) {
  size_t p = 0;
  std::string last;
  while (p < out.size()) {
    size_t q = out.find('\n', p);
    if (q == std::string::npos) q = out.size();
    const std::string line = out.substr(p, q - p);
    if (!line.empty() && line.find_first_not_of("0123456789 ") == std::string::npos) last = line;
    p = q + 1;
  }
  return last;
}

size_t CommonPrefix(const std::string& a, const std::string& b) {
  std::vector<std::string> x, y;
  auto split = [](const std::string& s, std::vector<std::string>* out) {
    size_t p = 0;
    while (p < s.size()) {
      size_t q = s.find(' ', p);
      if (q == std::string::npos) q = s.size();
      if (q > p) out->push_back(s.substr(p, q - p));
      p = q + 1;
    }
  };
  split(a, &x);
  split(b, &y);
  size_t n = 0;
  while (n < x.size() && n < y.size() && x[n] == y[n]) ++n;
  return n;
}

TEST(RealDecodeIreeTest, IreeDecodeMatchesTheHost) {
  const char* model = std::getenv("FGEMMA_MODEL");
  if (model == nullptr || *model == '\0') GTEST_SKIP() << "FGEMMA_MODEL is not set";
  std::string why;
  if (fg::testing::IreeTool("iree-compile", &why).empty()) GTEST_SKIP() << why;
  const std::string py = std::string(std::getenv("FGEMMA_VENV")) + "/bin/python";
  const std::string m = std::string(" -m '") + model + "'";
  const std::string dir = fg::testing::TempPath("real_export_" + std::to_string(::getpid()));
  auto ex = fg::testing::RunFgemma("export" + m + " --seq 32 --chunk 16 -o " + dir);
  ASSERT_EQ(ex.rc, 0) << ex.out;
  const std::string vmfb = dir + "_vmfb";
  // The export (512 MiB) and the modules go away however the test ends.
  struct Cleanup {
    std::string a, b;
    ~Cleanup() {
      std::filesystem::remove_all(a);
      std::filesystem::remove_all(b);
    }
  } cleanup{dir, vmfb};

  const std::vector<std::string> prompts = {"The capital of France is",
                                            "Write a haiku about the sea.",
                                            "def fibonacci(n):"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string& p = prompts[i];
    auto ids = fg::testing::RunFgemma("tokenize" + m + " --ids '" + p + "'", false);
    ASSERT_EQ(ids.rc, 0);
    auto ref = fg::testing::RunFgemma(
        "run" + m + " --raw --temp 0 -n 16 --ids --reference-kernels -p '" + p + "'", false);
    ASSERT_EQ(ref.rc, 0);
    auto fast = fg::testing::RunFgemma("run" + m + " --raw --temp 0 -n 16 --ids -p '" + p + "'", false);
    ASSERT_EQ(fast.rc, 0);
    std::string out;
    const std::string cmd = py + " " + FG_SOURCE_DIR + "/scripts/iree_decode.py --export " + dir +
                            " --vmfb-dir " + vmfb + " --steps 16 --ids " + Csv(Trim(ids.out));
    ASSERT_EQ(fg::testing::Shell(cmd + (i == 0 ? " --chunked" : ""), &out), 0) << out;
    out = IdsLine(out);
    EXPECT_EQ(Trim(out), Trim(ref.out)) << "prompt '" << p << "'" << (i == 0 ? " (chunked)" : "");
    std::printf("'%s'%s: IREE %s\n  reference %s\n  fast      %s (first %zu of 16 equal to IREE)\n",
                p.c_str(), i == 0 ? " chunked" : "", Trim(out).c_str(), Trim(ref.out).c_str(),
                Trim(fast.out).c_str(), CommonPrefix(Trim(out), Trim(fast.out)));
    if (i == 0) {
      // The same prompt through gemma_prefill_at.
      ASSERT_EQ(fg::testing::Shell(cmd, &out), 0) << out;
      out = IdsLine(out);
      EXPECT_EQ(Trim(out), Trim(ref.out)) << "prompt '" << p << "'";
    }
  }
}

}  // namespace
}  // namespace fg
