// llama.cpp goldens on the real model (tests/data/, written by scripts/gen_goldens_*.py) and
// the comparison the real-model tests share: final-position top-1 and logits, and greedy
// continuations equal up to the first near-tie.
#ifndef FGEMMA_TESTS_TESTING_LLAMA_GOLDENS_H_
#define FGEMMA_TESTS_TESTING_LLAMA_GOLDENS_H_

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/base/status_matchers.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "src/tensor/half.h"

namespace fg::testing {

// Two correct implementations may order a near-tie differently: kernels accumulate in
// different orders and llama.cpp's GELU reads an f16 table. Below this logit margin a
// different choice is not a bug; the comparison of that prompt stops there.
inline constexpr double kTieMargin = 1.0;

inline nlohmann::json LoadGoldenJson(const std::string& name) {
  std::ifstream in(std::string(FG_SOURCE_DIR) + "/tests/data/" + name);
  return nlohmann::json::parse(in);
}

// n little-endian f16 values from tests/data/<name>; empty if the file is short.
inline std::vector<float> LoadGoldenF16(const std::string& name, size_t n) {
  std::ifstream in(std::string(FG_SOURCE_DIR) + "/tests/data/" + name, std::ios::binary);
  std::vector<uint16_t> h(n);
  in.read(reinterpret_cast<char*>(h.data()), static_cast<std::streamsize>(n * 2));
  std::vector<float> f(n);
  if (!in) return {};
  for (size_t i = 0; i < n; ++i) f[i] = tensor::Fp16ToFp32(h[i]);
  return f;
}

// How far llama.cpp is from its own goldens on one prompt: the largest final-logits NMSE over
// its builds and configurations (tests/data/llama_self_spread.json), and which one it was.
struct LlamaSpread {
  double max_nmse = 0;
  std::string worst;
};

inline LlamaSpread SpreadOf(const nlohmann::json& spread, const std::string& prompt) {
  LlamaSpread out;
  for (const auto& [build, b] : spread["builds"].items()) {
    for (const auto& [config, c] : b["configs"].items()) {
      const auto& p = c["prompts"][prompt];
      if (!p.contains("nmse_vs_stored")) continue;
      const double n = p["nmse_vs_stored"].get<double>();
      if (n > out.max_nmse) {
        out.max_nmse = n;
        out.worst = build + "/" + config;
      }
    }
  }
  return out;
}

// Continues `s` (whose logits are the prompt's final position) greedily against llama.cpp's
// `want` tokens and `margins`: equal until the first step where the engines disagree, and
// there the disagreement must be a near-tie in fgemma's own logits. Returns whether all steps
// were equal; adds the steps compared to *compared.
inline bool FollowGreedy(runtime::Session& s, const std::string& name,
                         const std::vector<int32_t>& want, const std::vector<double>& margins,
                         int* compared) {
  runtime::Sampler greedy({});
  int32_t next = greedy.Sample(s.logits());
  for (size_t i = 0; i < want.size(); ++i) {
    if (next != want[i]) {
      const double ours = s.logits()[next] - s.logits()[want[i]];
      EXPECT_LT(ours, kTieMargin) << "step " << i << ": fgemma " << next << ", llama.cpp "
                                  << want[i] << " (llama.cpp margin " << margins[i] << ")";
      std::printf("[ %-9s ] diverges at step %zu: fgemma %d, llama.cpp %d; margins: "
                  "llama.cpp %.3f, fgemma %.3f\n",
                  name.c_str(), i, next, want[i], margins[i], ours);
      return false;
    }
    ++*compared;
    EXPECT_TRUE(s.Append(std::span<const int32_t>(&next, 1)).ok());
    next = greedy.Sample(s.logits());
  }
  return true;
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_LLAMA_GOLDENS_H_
