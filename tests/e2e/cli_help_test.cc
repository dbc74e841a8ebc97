// Every fgemma command answers --help (exit 0, on stdout) with a usage line and an aligned
// option table, and refuses an unknown flag with a usage error (exit 2) that names it.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::fg::testing::RunFgemma;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr size_t kHelpColumn = 28;  // where option descriptions start (tools/fgemma/flags.cc)

class CliHelpTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CliHelpTest, HelpIsAlignedAndUnknownFlagsAreUsageErrors) {
  const std::string cmd = GetParam();
  const auto r = RunFgemma(cmd + " --help", /*with_stderr=*/false);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, StartsWith("Usage: fgemma " + cmd));
  int options = 0;
  size_t pos = 0;
  while (pos < r.out.size()) {
    size_t end = r.out.find('\n', pos);
    if (end == std::string::npos) end = r.out.size();
    const std::string line = r.out.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("  -", 0) != 0) continue;  // only option lines
    ++options;
    // The option names end before the column; the description starts exactly there (or on
    // the next line, for long names).
    const size_t gap = line.find("  ", 2);
    if (gap == std::string::npos || gap + 2 > kHelpColumn) continue;
    ASSERT_GT(line.size(), kHelpColumn) << line;
    EXPECT_EQ(line.find_first_not_of(' ', gap), kHelpColumn) << cmd << ": " << line;
  }
  EXPECT_GE(options, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("  -h, --help" + std::string(kHelpColumn - 12, ' ') + "Show"));

  const auto bad = RunFgemma(cmd + " --no-such-flag");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("--no-such-flag"));
}

INSTANTIATE_TEST_SUITE_P(Commands, CliHelpTest,
                         ::testing::Values("run", "call", "invoke", "export", "bench", "quantize",
                                           "inspect", "mkmodel", "tokenize", "serve"));

}  // namespace
}  // namespace fg
