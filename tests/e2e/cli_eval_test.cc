// `fgemma eval` as the real binary: scores on a synthetic model (whose calls are random but
// always valid under the grammar), JSON output, and bad data files and flags.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::testing::HasSubstr;
using Result = ::fg::testing::CliResult;

Result Fgemma(const std::string& args, bool with_stderr = true) {
  return ::fg::testing::RunFgemma(args, with_stderr);
}

// In this process's own folder (ProcessTempDir: cases run in parallel processes).
std::string Tmp(const std::string& name) {
  return ::fg::testing::ProcessTempDir() + "/cli_eval_" + name;
}

void Write(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

class CliEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Tmp("small.gguf");
    ASSERT_EQ(Fgemma("mkmodel -o " + model_ + " --preset small --seed 5").rc, 0);
    tools_ = Tmp("tools.json");
    Write(tools_, R"([{"name":"set_light","description":"Turn a light on or off",
      "parameters":{"type":"object","properties":{"state":{"type":"string","enum":["on","off"]}},
      "required":["state"]}}])");
    data_ = Tmp("data.jsonl");
    Write(data_,
          "{\"request\":\"turn the light on\",\"calls\":[{\"name\":\"set_light\",\"arguments\":"
          "{\"state\":\"on\"}}]}\n\n"
          "{\"request\":\"lights off\",\"calls\":[{\"name\":\"set_light\",\"arguments\":"
          "{\"state\":\"off\"}}]}\n");
  }
  std::string model_, tools_, data_;
};

TEST_F(CliEvalTest, ScoresEveryRequest) {
  // One tool with one enum member required: every grammar-valid call names set_light.
  Result r = Fgemma("eval -m " + model_ + " --tools " + tools_ + " --data " + data_ + " --json",
                    false);
  ASSERT_EQ(r.rc, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["requests"], 2);
  EXPECT_EQ(j[0]["valid"], 2);
  EXPECT_EQ(j[0]["function"], 2);
  const int exact = j[0]["exact"];
  EXPECT_EQ(static_cast<int>(j[0]["misses"].size()), 2 - exact);
  Result table = Fgemma("eval -m " + model_ + " --tools " + tools_ + " --data " + data_, false);
  ASSERT_EQ(table.rc, 0);
  EXPECT_THAT(table.out, HasSubstr("| 2 | 2/2 (100.0 %) | 2/2 (100.0 %) |"));
  // Progress to a pipe: plain lines (the first request and the catalog's end), no carriage
  // return.
  Result progress =
      ::fg::testing::RunCommand(std::string("(") + FG_CLI_PATH + " eval -m " + model_ +
                                " --tools " + tools_ + " --data " + data_ + " 2>&1 >/dev/null)");
  ASSERT_EQ(progress.rc, 0) << progress.out;
  EXPECT_EQ(progress.out, tools_ + ": 1/2\n" + tools_ + ": 2/2\n");
}

// --prepack scores the same (a Q8_0 model, whose weights have panels).
TEST_F(CliEvalTest, PrepackScoresTheSame) {
  const std::string q8 = Tmp("small_q8_0.gguf");
  ASSERT_EQ(Fgemma("mkmodel -o " + q8 + " --preset small --type q8_0 --seed 5").rc, 0);
  nlohmann::json j[2];
  for (int packed : {0, 1}) {
    Result r = Fgemma("eval -m " + q8 + " --tools " + tools_ + " --data " + data_ + " --json" +
                          (packed ? " --prepack" : ""),
                      false);
    ASSERT_EQ(r.rc, 0) << r.out;
    j[packed] = nlohmann::json::parse(r.out);
    ASSERT_EQ(j[packed].size(), 1u);
    for (auto it = j[packed][0].begin(); it != j[packed][0].end();) {
      it = it.key().find("ms") != std::string::npos ? j[packed][0].erase(it) : std::next(it);
    }
  }
  EXPECT_EQ(j[0][0]["requests"], 2);
  EXPECT_EQ(j[1], j[0]);
}

TEST_F(CliEvalTest, BadInput) {
  const std::string bad = Tmp("bad.jsonl");
  Write(bad, "{\"request\":\"x\",\"calls\":[{\"name\":\"set_light\"}]}\n{\"request\": 3}\n");
  Result r = Fgemma("eval -m " + model_ + " --tools " + tools_ + " --data " + bad);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("line 2: no \"request\" string"));
  Result unpaired = Fgemma("eval -m " + model_ + " --tools " + tools_);
  EXPECT_EQ(unpaired.rc, 2);
  Result missing = Fgemma("eval -m " + model_ + " --tools " + tools_ + " --data " + Tmp("none"));
  EXPECT_EQ(missing.rc, 1);
  Write(bad, "\n");
  Result empty = Fgemma("eval -m " + model_ + " --tools " + tools_ + " --data " + bad);
  EXPECT_EQ(empty.rc, 1);
  EXPECT_THAT(empty.out, HasSubstr("holds no example"));
}

// --examples (as fgemma call's): labelled requests listed in the tool prior's texts. A good file
// scores; a bad line, a tool the catalog lacks, a missing file are runtime errors (1), an
// --examples per --tools that does not pair a usage error (2). The same checks for fgemma call.
TEST_F(CliEvalTest, ExamplesForTheToolPrior) {
  const std::string base = "eval -m " + model_ + " --tools " + tools_ + " --data " + data_;
  Result ok = Fgemma(base + " --examples " + data_ + " --tool-channel 1 --json", false);
  ASSERT_EQ(ok.rc, 0) << ok.out;
  EXPECT_EQ(nlohmann::json::parse(ok.out)[0]["requests"], 2);
  const std::string bad = Tmp("bad_examples.jsonl");
  Write(bad, "{\"request\":\"x\",\"calls\":[{\"name\":\"set_light\"}]}\n{\"calls\": []}\n");
  Result line = Fgemma(base + " --examples " + bad);
  EXPECT_EQ(line.rc, 1);
  EXPECT_THAT(line.out, HasSubstr("--examples '" + bad + "' line 2: no \"request\" string"));
  const std::string other = Tmp("other_examples.jsonl");
  Write(other, "{\"request\":\"x\",\"calls\":[{\"name\":\"set_heater\"}]}\n");
  Result unknown = Fgemma(base + " --examples " + other);
  EXPECT_EQ(unknown.rc, 1);
  EXPECT_THAT(unknown.out, HasSubstr("'set_heater' is not a tool of the catalog"));
  Result missing = Fgemma(base + " --examples " + Tmp("none"));
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.out, HasSubstr("--examples"));
  Result unpaired = Fgemma(base + " --examples " + data_ + " --examples " + data_);
  EXPECT_EQ(unpaired.rc, 2);
  EXPECT_THAT(unpaired.out, HasSubstr("one --examples FILE per --tools"));
  const std::string call = "call -m " + model_ + " --tools " + tools_ + " --tool-channel 1 ";
  Result called = Fgemma(call + "--examples " + data_ + " 'turn the light on'", false);
  ASSERT_EQ(called.rc, 0) << called.out;
  EXPECT_THAT(called.out, HasSubstr("set_light"));
  EXPECT_EQ(Fgemma(call + "--examples " + bad + " 'turn the light on'").rc, 1);
  Result call_unknown = Fgemma(call + "--examples " + other + " 'turn the light on'");
  EXPECT_EQ(call_unknown.rc, 1);
  EXPECT_THAT(call_unknown.out, HasSubstr("'set_heater' is not a tool of the catalog"));
}

}  // namespace
}  // namespace fg
