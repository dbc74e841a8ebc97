// Test helper: compile MLIR with iree-compile (llvm-cpu) and run a function with
// iree-run-module from FGEMMA_VENV, passing inputs and reading results as .npy files.
#ifndef FGEMMA_TESTS_TESTING_IREE_RUNNER_H_
#define FGEMMA_TESTS_TESTING_IREE_RUNNER_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fg::testing {

// A host tensor: f32 or i32, outermost-first shape.
struct HostTensor {
  std::vector<int64_t> shape;
  bool is_i32 = false;
  std::vector<float> f;
  std::vector<int32_t> i;
  size_t elements() const {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }
};

inline HostTensor F32Tensor(std::vector<int64_t> shape, std::vector<float> data) {
  HostTensor t;
  t.shape = std::move(shape);
  t.f = std::move(data);
  return t;
}
inline HostTensor I32Tensor(std::vector<int64_t> shape, std::vector<int32_t> data) {
  HostTensor t;
  t.shape = std::move(shape);
  t.is_i32 = true;
  t.i = std::move(data);
  return t;
}

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

inline bool WriteNpy(const std::string& path, const HostTensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + ",";
  if (t.shape.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = std::string("{'descr': '") + (t.is_i32 ? "<i4" : "<f4") +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (t.is_i32) {
    f.write(reinterpret_cast<const char*>(t.i.data()), static_cast<std::streamsize>(t.i.size() * 4));
  } else {
    f.write(reinterpret_cast<const char*>(t.f.data()), static_cast<std::streamsize>(t.f.size() * 4));
  }
  return static_cast<bool>(f);
}

// Reads a little-endian f4 / i4 .npy (v1 or v2 header). False on anything else.
inline bool ReadNpy(const std::string& path, HostTensor* t) {
  std::ifstream f(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (data.size() < 12 || data.compare(0, 6, "\x93NUMPY") != 0) return false;
  size_t hl, off;
  if (data[6] == 1) {
    hl = static_cast<uint8_t>(data[8]) | static_cast<uint8_t>(data[9]) << 8;
    off = 10;
  } else {
    hl = 0;
    for (int k = 0; k < 4; ++k) hl |= static_cast<size_t>(static_cast<uint8_t>(data[8 + k])) << (8 * k);
    off = 12;
  }
  const std::string header = data.substr(off, hl);
  t->is_i32 = header.find("<i4") != std::string::npos;
  if (!t->is_i32 && header.find("<f4") == std::string::npos) return false;
  t->shape.clear();
  size_t a = header.find("'shape': (") + 10, b = header.find(')', a);
  std::stringstream ss(header.substr(a, b - a));
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok.find_first_not_of(' ') != std::string::npos) t->shape.push_back(std::stoll(tok));
  }
  const size_t n = t->elements();
  const char* p = data.data() + off + hl;
  if (data.size() < off + hl + n * 4) return false;
  if (t->is_i32) {
    t->i.resize(n);
    std::memcpy(t->i.data(), p, n * 4);
  } else {
    t->f.resize(n);
    std::memcpy(t->f.data(), p, n * 4);
  }
  return true;
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
                           const std::vector<HostTensor>& inputs, int n_outputs,
                           const std::string& dir, std::vector<HostTensor>* outputs) {
  std::string cmd = runner + " --device=local-task --module=" + vmfb + " --function=" + function;
  if (!irpa.empty()) cmd += " --parameters=model=" + irpa;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string p = dir + "/in" + std::to_string(i) + ".npy";
    if (!WriteNpy(p, inputs[i])) return "cannot write " + p;
    cmd += " --input=@" + p;
  }
  for (int i = 0; i < n_outputs; ++i) cmd += " --output=@" + dir + "/out" + std::to_string(i) + ".npy";
  std::string out;
  const int rc = Shell(cmd, &out);
  if (rc != 0) return "iree-run-module failed (" + std::to_string(rc) + "):\n" + out;
  outputs->assign(n_outputs, HostTensor{});
  for (int i = 0; i < n_outputs; ++i) {
    const std::string p = dir + "/out" + std::to_string(i) + ".npy";
    if (!ReadNpy(p, &(*outputs)[i])) return "cannot read " + p + "\n" + out;
  }
  return "";
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_IREE_RUNNER_H_
