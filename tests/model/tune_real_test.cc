// `fgemma tune` on the real model (FGEMMA_MODEL, Gemma 3 270M Q4_K_M): a short run on a few
// labelled requests of examples/smart_home.json. The loss falls from the first epoch to the
// third, the adapter loads, and `fgemma call --lora` then answers a request it was trained on
// with the trained call, where the base model (--no-lora) does not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::testing::HasSubstr;

std::string ModelPath() {
  const char* p = std::getenv("FGEMMA_MODEL");
  return p ? p : "";
}

TEST(TuneRealTest, LossFallsAndTheCallChanges) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const std::string dir = ::testing::TempDir();
  const std::string data = dir + "/tune_real.jsonl", out = dir + "/tune_real.gguf";
  const std::string tools = std::string(FG_SOURCE_DIR) + "/examples/smart_home.json";
  FILE* f = std::fopen(data.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      "{\"request\":\"start a timer for 90 seconds\",\"calls\":[{\"name\":\"set_timer\","
      "\"arguments\":{\"duration_seconds\":90}}]}\n"
      "{\"request\":\"cancel the pasta timer\",\"calls\":[{\"name\":\"cancel_timer\","
      "\"arguments\":{\"label\":\"pasta\"}}]}\n"
      "{\"request\":\"kitchen lights off\",\"calls\":[{\"name\":\"set_light\","
      "\"arguments\":{\"room\":\"kitchen\",\"state\":\"off\"}}]}\n"
      "{\"request\":\"play some jazz\",\"calls\":[{\"name\":\"play_media\","
      "\"arguments\":{\"query\":\"jazz\"}}]}\n",
      f);
  std::fclose(f);
  auto r = testing::RunFgemma(
      "tune -m " + ModelPath() + " --tools " + tools + " --data " + data + " -o " + out +
      " --epochs 5 --batch-tokens 40 --lr 3e-3 --init-lora none --average 1 -t 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<double> epoch_loss;  // "epoch N: train loss X" (no std::regex: see cli_tune_test)
  const std::string key = ": train loss ";
  for (size_t p = r.out.find(key); p != std::string::npos; p = r.out.find(key, p + 1)) {
    epoch_loss.push_back(std::strtod(r.out.c_str() + p + key.size(), nullptr));
  }
  ASSERT_EQ(epoch_loss.size(), 5u) << r.out;
  EXPECT_LT(epoch_loss[4], 0.5 * epoch_loss[0]) << r.out;

  const std::string call = "call -m " + ModelPath() + " --tools " + tools +
                           " -t 2 \"cancel the pasta timer\"";
  auto tuned = testing::RunFgemma(call + " --lora " + out, false);
  ASSERT_EQ(tuned.rc, 0) << tuned.out;
  const nlohmann::json j = nlohmann::json::parse(tuned.out);
  EXPECT_EQ(j["name"], "cancel_timer") << tuned.out;
  EXPECT_EQ(j["arguments"], nlohmann::json({{"label", "pasta"}})) << tuned.out;
  // The base model: without --no-lora, -m naming the default model brings the shipped call
  // adapter, which answers this request too.
  auto base = testing::RunFgemma(call + " --no-lora", false);
  ASSERT_EQ(base.rc, 0) << base.out;
  EXPECT_NE(base.out, tuned.out);
}

}  // namespace
}  // namespace fg
