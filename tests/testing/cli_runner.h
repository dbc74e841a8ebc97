// Runs the real fgemma binary (FG_CLI_PATH, set by CMake for tests/<label>/ tests) through the
// shell and returns its exit code and output, for end-to-end CLI tests.
#ifndef FGEMMA_TESTS_TESTING_CLI_RUNNER_H_
#define FGEMMA_TESTS_TESTING_CLI_RUNNER_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

// A folder of this process's own in the temporary folder, removed when the process exits.
// ctest runs every case in its own process at the same time: inputs a suite writes for its
// cases (a model, a catalog) must not be at a path another process rewrites while one reads.
// (The path lives on the heap, never freed: the exit handler runs after statics are destroyed.)
inline const std::string& ProcessTempDir() {
  static const std::string* dir = [] {
    auto* d = new std::string(::testing::TempDir() + "/fgemma_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ProcessTempDir(), ec);
    });
    return d;
  }();
  return *dir;
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_CLI_RUNNER_H_
