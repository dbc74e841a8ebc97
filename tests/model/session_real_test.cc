// The session on the real Gemma 3 270M Q4_K_M against llama.cpp's goldens
// (scripts/gen_goldens_session.py), 10 prompts of 6 to 1187 tokens (past the window):
// - final-position top-1 identical wherever llama.cpp's own margin is clear;
// - final-position logits NMSE no larger than twice what llama.cpp itself keeps from the same
//   goldens when only its arithmetic changes (scripts/llama_self_spread.py ->
//   tests/data/llama_self_spread.json: its AVX2 build, token-by-token prefill, flash attention,
//   f16 KV cache). Not the 1e-3 issue 3 first asked for: with 8-bit activations a last-bit
//   difference can move an activation across a quantization step, and the engine amplifies it
//   to the noise floor of the quantization; llama.cpp's own AVX2 build is 6.8e-3 from its
//   AVX-512 goldens on story600. Twice: two independent roundings of that size add in NMSE;
// - 32-step greedy continuations identical until the first step where the two engines
//   disagree, and there the disagreement must be a near-tie in fgemma's own logits (the token
//   llama.cpp chose within kTieMargin of fgemma's best). llama.cpp's AVX2 build keeps all 32
//   steps on 3 of the 10 prompts; the test prints both counts. A real bug moves logits by far
//   more: with the global layers' RoPE base set to the sliding one the NMSE read 4.1e-2 (chat)
//   and 2.0e-2 (story600).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "src/tensor/half.h"
#include "tests/testing/llama_goldens.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using ::fg::testing::Nmse;

using ::fg::testing::FollowGreedy;
using ::fg::testing::LoadGoldenF16;
using ::fg::testing::LlamaSpread;
using ::fg::testing::SpreadOf;

std::string ModelPath() {
  const char* p = std::getenv("FGEMMA_MODEL");
  return p ? p : "";
}

nlohmann::json LoadJson(const std::string& name) { return ::fg::testing::LoadGoldenJson(name); }

class SessionRealTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (ModelPath().empty()) return;
    auto m = runtime::Model::Load(ModelPath());
    if (m.ok()) model_ = std::move(*m).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
    ASSERT_NE(model_, nullptr) << "cannot load " << ModelPath();
  }
  // Both tests' sessions: 2048 positions, prefill in chunks of 256 (the prompts run past the
  // 512-row window, so several chunks and the ring are exercised).
  static runtime::SessionOptions Options(ThreadPool* pool) {
    runtime::SessionOptions o;
    o.context = 2048;
    o.max_chunk = 256;
    o.pool = pool;
    return o;
  }
  static runtime::Model* model_;
};
runtime::Model* SessionRealTest::model_ = nullptr;

TEST_F(SessionRealTest, MatchesLlamaCppGoldens) {
  const nlohmann::json g = LoadJson("session_goldens.json");
  const nlohmann::json spread = LoadJson("llama_self_spread.json");
  ThreadPool pool(2);
  int identical_prompts = 0, compared_steps = 0;
  for (const auto& p : g["prompts"]) {
    const std::string name = p["name"];
    SCOPED_TRACE(name);
    std::vector<int32_t> tokens = p["tokens"].get<std::vector<int32_t>>();
    runtime::SessionOptions o = Options(&pool);
    auto s = runtime::Session::Create(*model_, o);
    FG_ASSERT_OK(s.status());
    FG_ASSERT_OK((*s)->Append(tokens));

    runtime::Sampler greedy({});
    const int32_t top1 = greedy.Sample((*s)->logits());
    if (p["final_margin"].get<double>() >= 0.5) {
      EXPECT_EQ(top1, p["final_top1"].get<int>());
    }
    if (p["full_logits"].get<bool>()) {
      std::vector<float> want =
          LoadGoldenF16("session_logits_" + name + ".f16", (*s)->logits().size());
      ASSERT_FALSE(want.empty());
      const double nmse = Nmse((*s)->logits(), want);
      std::printf("[ %-9s ] final logits NMSE vs llama.cpp: %.3g\n", name.c_str(), nmse);
      if (tokens.size() < 10) {
        // The same function on the reference kernels (f32 activations, double accumulation):
        // how much of the distance is fgemma's kernels and how much llama.cpp's own rounding.
        o.reference = true;
        auto r = runtime::Session::Create(*model_, o);
        FG_ASSERT_OK(r.status());
        FG_ASSERT_OK((*r)->Append(tokens));
        std::printf("[ %-9s ] reference kernels: NMSE vs llama.cpp %.3g, vs fast kernels %.3g\n",
                    name.c_str(), Nmse((*r)->logits(), want), Nmse((*s)->logits(), (*r)->logits()));
        o.reference = false;
      }
      const LlamaSpread ls = SpreadOf(spread, name);
      ASSERT_GT(ls.max_nmse, 0) << "llama_self_spread.json has no NMSE for " << name;
      std::printf("[ %-9s ] llama.cpp against its own goldens: up to %.3g (%s)\n", name.c_str(),
                  ls.max_nmse, ls.worst.c_str());
      EXPECT_LE(nmse, 2 * ls.max_nmse);
    }

    const bool all_same = FollowGreedy(**s, name, p["greedy"].get<std::vector<int32_t>>(),
                                       p["margins"].get<std::vector<double>>(), &compared_steps);
    identical_prompts += all_same;
  }
  std::printf("[ summary   ] %d/%zu prompts identical for all %d steps; %d steps compared\n",
              identical_prompts, g["prompts"].size(), g["steps"].get<int>(), compared_steps);
  for (const auto& [build, b] : spread["builds"].items()) {
    for (const auto& [config, c] : b["configs"].items()) {
      int same = 0;
      for (const auto& [prompt, p] : c["prompts"].items()) same += p["first_diff_vs_stored"].is_null();
      std::printf("[ llama.cpp ] %s/%s: %d/%zu prompts identical to its goldens\n", build.c_str(),
                  config.c_str(), same, c["prompts"].size());
    }
  }
}

// Prompts of 5 to ~1200 tokens whose 32-step greedy continuation is well conditioned in
// llama.cpp (scripts/gen_goldens_stable.py: its best token leads by >= 1.0 at every step, and
// three other configurations of llama.cpp write the same tokens; chosen from llama.cpp's runs
// alone). There no near-tie excuses a difference: fgemma must write the same 32 tokens.
// Confident continuations survive small bugs (with the global RoPE base set to the sliding one
// 1 of 18 prompts changed), so this checks the letter of issue 3's greedy criterion and gross
// breakage; MatchesLlamaCppGoldens' NMSE bound is the sensitive check.
TEST_F(SessionRealTest, WellConditionedGreedyEqualsLlamaCppExactly) {
  const nlohmann::json g = LoadJson("stable_goldens.json");
  ThreadPool pool(2);
  int kept = 0, shortest = 1 << 30, longest = 0;
  for (const auto& p : g["prompts"]) {
    if (!p["kept"].get<bool>()) continue;
    const std::string name = p["name"];
    SCOPED_TRACE(name);
    const auto tokens = p["tokens"].get<std::vector<int32_t>>();
    const auto want = p["greedy"].get<std::vector<int32_t>>();
    ++kept;
    shortest = std::min<int>(shortest, static_cast<int>(tokens.size()));
    longest = std::max<int>(longest, static_cast<int>(tokens.size()));
    runtime::SessionOptions o = Options(&pool);
    auto s = runtime::Session::Create(*model_, o);
    FG_ASSERT_OK(s.status());
    FG_ASSERT_OK((*s)->Append(tokens));
    runtime::Sampler greedy({});
    std::vector<int32_t> got;
    double min_margin = 1e30;
    for (size_t i = 0; i < want.size(); ++i) {
      const std::span<const float> lg = (*s)->logits();
      const int32_t next = greedy.Sample(lg);
      float second = -1e30f;
      for (size_t v = 0; v < lg.size(); ++v) {
        if (static_cast<int32_t>(v) != next) second = std::max(second, lg[v]);
      }
      const double margin = lg[next] - second;
      min_margin = std::min(min_margin, margin);
      got.push_back(next);
      FG_ASSERT_OK((*s)->Append(std::span<const int32_t>(&next, 1)));
    }
    EXPECT_EQ(got, want);
    std::printf("[ %-12s ] %4zu tokens: %s; smallest margin llama.cpp %.3f, fgemma %.3f\n",
                name.c_str(), tokens.size(), got == want ? "32/32 equal" : "DIFFERS",
                p["min_margin"].get<double>(), min_margin);
  }
  std::printf("[ summary      ] %d well-conditioned prompts of %d to %d tokens\n", kept, shortest,
              longest);
  EXPECT_GE(kept, 10);
  EXPECT_LE(shortest, 16);
  EXPECT_GE(longest, 1000);
}

}  // namespace
}  // namespace fg
