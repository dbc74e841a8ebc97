// Test helpers shared by the runtime tests: deterministic token ids and synthetic models.
#ifndef FGEMMA_RUNTIME_TEST_MODELS_H_
#define FGEMMA_RUNTIME_TEST_MODELS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/gguf_tools/synthetic.h"
#include "src/runtime/model.h"

namespace fg::runtime::test {

// n token ids in [7, vocab), from `seed`.
inline std::vector<int32_t> Tokens(int n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> t;
  uint32_t x = seed;
  while (static_cast<int>(t.size()) < n) {
    x = x * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>(7 + (x >> 8) % (vocab - 7)));
  }
  return t;
}

// A synthetic Gemma 3 of `preset` with weights of `type`, written under the test's temp dir as
// "<tag>_<preset>_<type>.gguf" and loaded; nullptr (with a test failure) if that fails.
inline std::unique_ptr<Model> MakeModel(const std::string& tag, const std::string& preset,
                                        tensor::DType type) {
  auto spec = gguf::SyntheticPreset(preset);
  EXPECT_TRUE(spec.ok());
  if (!spec.ok()) return nullptr;
  spec->default_type = type;
  const std::string path = ::testing::TempDir() + "/" + tag + "_" + preset + "_" +
                           std::string(tensor::DTypeName(type)) + ".gguf";
  Status s = gguf::WriteSyntheticGemma3(*spec, path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

}  // namespace fg::runtime::test

#endif  // FGEMMA_RUNTIME_TEST_MODELS_H_
