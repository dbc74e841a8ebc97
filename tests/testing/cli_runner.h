// Runs the real fgemma binary (FG_CLI_PATH, set by CMake for tests/<label>/ tests) through the
// shell and returns its exit code and output, for end-to-end CLI tests.
#ifndef FGEMMA_TESTS_TESTING_CLI_RUNNER_H_
#define FGEMMA_TESTS_TESTING_CLI_RUNNER_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace fg::testing {

struct CliResult {
  int rc = -1;      // exit code; -1 if the process did not exit normally (a crash)
  std::string out;  // stdout, and stderr unless with_stderr is false
};

// Runs `cmd` through the shell; stderr is joined to stdout, or dropped.
inline CliResult RunCommand(const std::string& cmd, bool with_stderr = true) {
  CliResult r;
  FILE* p = ::popen((cmd + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (p == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline CliResult RunFgemma(const std::string& args, bool with_stderr = true) {
  return RunCommand(std::string(FG_CLI_PATH) + " " + args, with_stderr);
}

// A path in the test's temporary folder.
inline std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_CLI_RUNNER_H_
