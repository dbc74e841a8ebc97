// Test helper: compile MLIR with iree-compile (llvm-cpu) and run a function with
// iree-run-module from FGEMMA_VENV, passing inputs and reading results as .npy files
// (exporter::WriteNpy / ReadNpy).
#ifndef FGEMMA_TESTS_TESTING_IREE_RUNNER_H_
#define FGEMMA_TESTS_TESTING_IREE_RUNNER_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/export/host_invoke.h"
#include "src/export/tensor_io.h"

namespace fg::testing {

// The venv's IREE tools, or an empty string (with the reason in *why) when absent.
inline std::string IreeTool(const std::string& tool, std::string* why) {
  const char* venv = std::getenv("FGEMMA_VENV");
  if (venv == nullptr || *venv == '\0') {
    *why = "FGEMMA_VENV is not set (make test sets it)";
    return "";
  }
  std::string path = std::string(venv) + "/bin/" + tool;
  if (::access(path.c_str(), X_OK) != 0) {
    *why = tool + " is not installed in " + venv + " (pip install iree-base-compiler iree-base-runtime)";
    return "";
  }
  return path;
}

// Runs a shell command, returns its exit code; output (stdout+stderr) into *out.
inline int Shell(const std::string& cmd, std::string* out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[65536];
  size_t n;
  out->clear();
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Compiles `mlir` to `vmfb` for llvm-cpu on the host CPU. Returns "" or the tool's output.
inline std::string IreeCompile(const std::string& compiler, const std::string& mlir,
                               const std::string& vmfb) {
  std::string out;
  const int rc = Shell(compiler + " --iree-hal-target-backends=llvm-cpu --iree-llvmcpu-target-cpu=host " +
                           mlir + " -o " + vmfb,
                       &out);
  return rc == 0 ? "" : "iree-compile failed (" + std::to_string(rc) + "):\n" + out;
}

// Runs `function` of `vmfb` with the parameter archive under scope "model". `dir` holds the
// temporary .npy files. Returns "" on success (results in *outputs) or the error.
inline std::string IreeRun(const std::string& runner, const std::string& vmfb,
                           const std::string& irpa, const std::string& function,
                           const std::vector<exporter::HostTensor>& inputs, int n_outputs,
                           const std::string& dir, std::vector<exporter::HostTensor>* outputs) {
  std::string cmd = runner + " --device=local-task --module=" + vmfb + " --function=" + function;
  if (!irpa.empty()) cmd += " --parameters=model=" + irpa;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string p = dir + "/in" + std::to_string(i) + ".npy";
    if (Status w = exporter::WriteNpy(p, inputs[i]); !w.ok()) return w.ToString();
    cmd += " --input=@" + p;
  }
  for (int i = 0; i < n_outputs; ++i) cmd += " --output=@" + dir + "/out" + std::to_string(i) + ".npy";
  std::string out;
  const int rc = Shell(cmd, &out);
  if (rc != 0) return "iree-run-module failed (" + std::to_string(rc) + "):\n" + out;
  outputs->clear();
  for (int i = 0; i < n_outputs; ++i) {
    auto t = exporter::ReadNpy(dir + "/out" + std::to_string(i) + ".npy");
    if (!t.ok()) return t.status().ToString() + "\n" + out;
    outputs->push_back(std::move(*t));
  }
  return "";
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_IREE_RUNNER_H_
