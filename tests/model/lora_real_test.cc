// LoRA adapters on the real Gemma 3 270M Q4_K_M against llama.cpp (scripts/gen_goldens_lora.py,
// llama.cpp built from the pinned llama-cpp-python sdist's source), both directions:
// - an adapter fgemma writes (SyntheticLora with the script's mklora arguments: the generator
//   is exact, so this is the file llama.cpp loaded) and
// - one written by gguf-py as llama.cpp's convert_lora_to_gguf.py writes a PEFT checkpoint
//   (Q8_0 lora_a, F16 lora_b; tests/data/lora_gguf_py.gguf), at scale 0.8.
// For 6 prompts: final-position top-1 where llama.cpp's margin is clear, the chat prompt's final
// logits within the session goldens' bound (twice llama.cpp's own spread on that prompt), and
// 32-step greedy continuations equal up to the first near-tie (tests/testing/llama_goldens.h).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/model/gemma3/lora.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "tests/testing/llama_goldens.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using ::fg::testing::FollowGreedy;
using ::fg::testing::LoadGoldenF16;
using ::fg::testing::LoadGoldenJson;
using ::fg::testing::Nmse;

std::string ModelPath() {
  const char* p = std::getenv("FGEMMA_MODEL");
  return p ? p : "";
}

// The adapter file `name` of the goldens, as the script made it.
std::string AdapterPath(const std::string& name, const runtime::Model& base,
                        const nlohmann::json& g) {
  if (name == "gguf_py") return std::string(FG_SOURCE_DIR) + "/tests/data/lora_gguf_py.gguf";
  // mklora --rank 8 --alpha 16 --amplitude 0.01 --seed 1 (checked against the goldens' record).
  EXPECT_EQ(g["mklora_args"], nlohmann::json({"--rank", "8", "--alpha", "16", "--amplitude",
                                               "0.01", "--seed", "1"}));
  model::SyntheticLoraSpec spec;
  spec.rank = 8;
  spec.alpha = 16;
  spec.amplitude = 0.01f;
  spec.seed = 1;
  auto w = model::SyntheticLora(base.file(), spec);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  const std::string path = ::testing::TempDir() + "/lora_real_fgemma.gguf";
  EXPECT_TRUE(w->WriteFile(path).ok());
  return path;
}

TEST(LoraRealTest, MatchesLlamaCppWithTheSameAdapter) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const nlohmann::json g = LoadGoldenJson("lora_goldens.json");
  ThreadPool pool(2);
  for (const auto& a : g["adapters"]) {
    const std::string adapter = a["name"];
    SCOPED_TRACE(adapter);
    auto base = runtime::Model::Load(ModelPath());
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    const std::string path = AdapterPath(adapter, **base, g);
    auto model = runtime::Model::Load(ModelPath(), {{path, a["scale"].get<float>()}});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    int identical = 0, compared = 0;
    for (const auto& p : a["prompts"]) {
      const std::string name = p["name"];
      SCOPED_TRACE(name);
      runtime::SessionOptions o;
      o.context = 2048;
      o.max_chunk = 256;
      o.pool = &pool;
      auto s = runtime::Session::Create(**model, o);
      FG_ASSERT_OK(s.status());
      FG_ASSERT_OK((*s)->Append(p["tokens"].get<std::vector<int32_t>>()));
      runtime::Sampler greedy({});
      if (p["final_margin"].get<double>() >= 0.5) {
        EXPECT_EQ(greedy.Sample((*s)->logits()), p["final_top1"].get<int>());
      }
      if (name == "chat") {
        const std::vector<float> want =
            LoadGoldenF16("lora_logits_" + adapter + ".f16", (*s)->logits().size());
        ASSERT_FALSE(want.empty());
        const double nmse = Nmse((*s)->logits(), want);
        const double bound =
            2 * ::fg::testing::SpreadOf(LoadGoldenJson("llama_self_spread.json"), name).max_nmse;
        std::printf("[ %-7s ] chat final logits NMSE vs llama.cpp %.3g (bound %.3g)\n",
                    adapter.c_str(), nmse, bound);
        EXPECT_LE(nmse, bound);
      }
      identical += FollowGreedy(**s, name, p["greedy"].get<std::vector<int32_t>>(),
                                p["margins"].get<std::vector<double>>(), &compared);
    }
    std::printf("[ %-7s ] %d/%zu prompts identical for all 32 steps; %d steps compared\n",
                adapter.c_str(), identical, a["prompts"].size(), compared);
  }
}

}  // namespace
}  // namespace fg
