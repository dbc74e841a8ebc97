#include "src/export/manifest.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "tests/testing/configs.h"

namespace fg::exporter {
namespace {

using ::fg::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

model::Config Gemma270m() { return fg::testing::Gemma270mConfig(); }

TEST(ManifestTest, V1KeysInV1OrderThenAdditions) {
  ManifestSpec s;
  s.model = "gemma \"quoted\"";
  s.config = Gemma270m();
  s.options.seq = 64;
  s.options.chunk = 32;
  s.exported = {Function::kRedecodeAt, Function::kWithPast};
  auto m = BuildManifest(s);
  FG_ASSERT_OK(m.status());
  const std::vector<std::string> v1 = {
      "contractVersion", "model", "functions", "nLayers", "headDim", "nKvHeads", "seq",
      "maxPositions", "eot", "slidingRopeBase", "globalRopeBase", "globalLayerPeriod",
      "kFirstInOutput", "parameterScope", "parameters", "redecodeArgs", "redecodeOutputs",
      "prefillArgs", "prefillOutputs", "withPastArgs", "withPastOutputs", "redecodeAtArgs",
      "prefillAtArgs", "prefillAtOutputs", "chunk", "prefillWithPastArgs",
      "prefillWithPastOutputs", "toolMap"};
  std::vector<std::string> keys;
  for (auto it = m->begin(); it != m->end(); ++it) keys.push_back(it.key());
  ASSERT_GT(keys.size(), v1.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + v1.size()), v1);
  const auto& j = *m;
  EXPECT_EQ(j["contractVersion"], 1);
  EXPECT_EQ(j["functions"]["prefillWithPast"], "gemma_prefill_with_past");
  EXPECT_EQ(j["globalLayerPeriod"], 6);
  EXPECT_EQ(j["eot"], 106);
  EXPECT_EQ(j["seq"], 64);
  EXPECT_EQ(j["chunk"], 32);
  EXPECT_EQ(j["withPastArgs"].size(), 41u);
  EXPECT_EQ(j["prefillWithPastArgs"].size(), 44u);
  EXPECT_EQ(j["withPastArgs"][0], "token");
  EXPECT_EQ(j["withPastArgs"][1], "cosSliding");
  EXPECT_EQ(j["prefillWithPastArgs"][5], "maskSliding");
  EXPECT_EQ(j["prefillWithPastArgs"][43], "select");
  EXPECT_EQ(j["withPastOutputs"].size(), 37u);
  EXPECT_EQ(j["withPastOutputs"][36], "token");
  EXPECT_EQ(j["redecodeAtArgs"], nlohmann::ordered_json::array({"tokens", "select"}));
  EXPECT_EQ(j["parameters"].size(), 6u);
  EXPECT_EQ(j["parameters"]["withPast"], "model.irpa");
  EXPECT_EQ(j["toolMap"]["0"], "set_lights");
  EXPECT_TRUE(j["toolMap"]["none"].is_null());
  EXPECT_EQ(j["files"].size(), 2u);
  EXPECT_EQ(j["files"]["gemma_at"], "gemma_at.mlir");
  EXPECT_EQ(j["withPastEmbArgs"][1], "emb");
  EXPECT_EQ(j["signatures"]["gemma_with_past"]["args"][3]["shape"],
            nlohmann::ordered_json::array({1, 1, "?", 256}));
  EXPECT_EQ(j["maskHeads"], 4);
  EXPECT_EQ(j["slidingWindow"], 512);
  // Names are escaped by the JSON library.
  EXPECT_THAT(j.dump(), HasSubstr("\"gemma \\\"quoted\\\"\""));
}

TEST(ManifestTest, EmbInputArgs) {
  ManifestSpec s;
  s.config = Gemma270m();
  s.options.emb_input = true;
  auto m = BuildManifest(s);
  FG_ASSERT_OK(m.status());
  EXPECT_EQ((*m)["redecodeAtArgs"], nlohmann::ordered_json::array({"tokens", "emb", "select"}));
  EXPECT_EQ((*m)["embInput"], true);
}

TEST(ManifestTest, DefaultToolMapIsTheSeedCatalogs) {
  std::ifstream f(std::string(FG_SOURCE_DIR) + "/examples/seed_home_toolmap.json");
  ASSERT_TRUE(f) << "examples/seed_home_toolmap.json";
  std::stringstream ss;
  ss << f.rdbuf();
  auto m = ParseToolMap(ss.str());
  FG_ASSERT_OK(m.status());
  EXPECT_EQ(*m, DefaultToolMap());
  EXPECT_EQ(DefaultToolMap()["0"], "set_lights");
}

TEST(ManifestTest, ToolMap) {
  auto m = ParseToolMap(R"({"0": "set_lights", "1": "play_music", "none": null})");
  FG_ASSERT_OK(m.status());
  std::vector<std::string> keys;
  for (auto it = m->begin(); it != m->end(); ++it) keys.push_back(it.key());
  EXPECT_THAT(keys, ElementsAre("0", "1", "none"));
  EXPECT_TRUE(ParseToolMap(R"({"toolMap": {"0": "a"}})").ok());
  EXPECT_THAT(ParseToolMap("[1]"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("object")));
  EXPECT_THAT(ParseToolMap("{\"0\": 3}"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("\"0\"")));
  EXPECT_THAT(ParseToolMap("{"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("JSON")));
}

}  // namespace
}  // namespace fg::exporter
