// The benchmark chart pipeline: bench/summarize.py (compare.sh's tables and its -o results
// file) and bench/plot.py (results files -> PNG). Runs them with FGEMMA_VENV's Python, which
// `make venv` gives matplotlib (scripts/requirements-bench.txt); skips without FGEMMA_VENV.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using fg::testing::RunCommand;
using fg::testing::TempPath;
using Proc = fg::testing::CliResult;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

// A PNG: signature, then the IHDR chunk first with a plausible chart size.
void ExpectPng(const std::string& path) {
  std::string png = ReadAll(path);
  ASSERT_GT(png.size(), 10000u) << path;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_GE(BigEndian32(png, 16), 500u);  // width
  EXPECT_GE(BigEndian32(png, 20), 300u);  // height
  EXPECT_EQ(png.substr(png.size() - 8, 4), "IEND");
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

class BenchPlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* venv = std::getenv("FGEMMA_VENV");
    if (venv == nullptr || *venv == '\0') {
      GTEST_SKIP() << "FGEMMA_VENV is not set (a venv with scripts/requirements-bench.txt; "
                      "'make venv')";
    }
    python_ = std::string(venv) + "/bin/python";
  }

  Proc Plot(const std::string& args) {
    return RunCommand(python_ + " " FG_SOURCE_DIR "/bench/plot.py " + args);
  }
  // stdout only: the tables.
  Proc Summarize(const std::string& args) {
    return RunCommand(python_ + " " FG_SOURCE_DIR "/bench/summarize.py " + args, false);
  }

  std::string python_;
};

// The committed results (docs/benchmarks.png's numbers) draw a PNG.
TEST_F(BenchPlotTest, PlotsCommittedResults) {
  std::string png = TempPath("bench_plot_committed.png");
  std::remove(png.c_str());
  const std::string dir = FG_SOURCE_DIR "/bench/results/";
  Proc r = Plot(dir + "2026-11-30-Q4_K_M.json " + dir + "2026-11-30-Q8_0.json -o " + png);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote " + png));
  ExpectPng(png);
}

// compare.sh's summary on fixed round files: the tables it has always printed, a results file
// whose medians are those of the pooled samples (a test llama.cpp lacks is null), and plot.py
// draws that file.
TEST_F(BenchPlotTest, SummaryTablesAndResultsFileFeedPlot) {
  const std::string rounds = FG_SOURCE_DIR "/tests/data/bench/rounds";
  std::string json = TempPath("bench_plot_results.json");
  std::remove(json.c_str());
  Proc r =
      Summarize(rounds + " 2 --json " + json + " --label tinyQ --command 'bench/compare.sh -k 2'");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, ReadAll(FG_SOURCE_DIR "/tests/data/bench/rounds_summary.md"));

  nlohmann::json d = nlohmann::json::parse(ReadAll(json), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(d.is_object()) << ReadAll(json);
  EXPECT_EQ(d["format"], "fgemma-compare/1");
  EXPECT_EQ(d["label"], "tinyQ");
  EXPECT_EQ(d["model"], "tiny.gguf");
  EXPECT_EQ(d["rounds"], 2);
  EXPECT_EQ(d["command"], "bench/compare.sh -k 2");

  // Pooled samples per (test, threads) from the round files themselves.
  std::map<std::pair<std::string, int>, std::vector<double>> fg, ll;
  for (int k = 1; k <= 2; ++k) {
    for (auto [prefix, acc] : {std::pair{"fg", &fg}, std::pair{"ll", &ll}}) {
      auto rows =
          nlohmann::json::parse(ReadAll(rounds + "/" + prefix + "_" + std::to_string(k) + ".json"));
      for (const auto& row : rows) {
        auto& v = (*acc)[{row["test"].get<std::string>(), row["threads"].get<int>()}];
        for (const auto& s : row["samples"]) v.push_back(s.get<double>());
      }
    }
  }
  ASSERT_EQ(d["speed"].size(), fg.size());
  for (const auto& row : d["speed"]) {
    std::pair<std::string, int> key{row["test"].get<std::string>(), row["threads"].get<int>()};
    SCOPED_TRACE(key.first + " t" + std::to_string(key.second));
    ASSERT_EQ(fg.count(key), 1u);
    EXPECT_DOUBLE_EQ(row["fgemma"]["median"].get<double>(), Median(fg[key]));
    EXPECT_EQ(row["fgemma"]["samples"].size(), fg[key].size());
    if (ll.count(key)) {
      EXPECT_DOUBLE_EQ(row["llama_cpp"]["median"].get<double>(), Median(ll[key]));
    } else {
      EXPECT_TRUE(row["llama_cpp"].is_null());
    }
  }
  EXPECT_EQ(ll.count({"pp16", 2}), 0u);  // the fixture's row without llama.cpp
  ASSERT_EQ(d["ttc"].size(), 4u);
  for (const auto& row : d["ttc"]) {
    EXPECT_EQ(row["catalog"], "smart_home.json");
    EXPECT_GT(row["fgemma"]["median"].get<double>(), 0);
    EXPECT_GT(row["llama_cpp"]["median"].get<double>(), 0);
    EXPECT_GT(row["prompt_tokens"].get<int>(), 0);
  }

  std::string png = TempPath("bench_plot_summary.png");
  std::remove(png.c_str());
  Proc p = Plot(json + " -o " + png);
  ASSERT_EQ(p.rc, 0) << p.out;
  ExpectPng(png);
}

// A missing or malformed results file: exit 1, a message naming the file and what is wrong,
// and no PNG. A bad command line: exit 2.
TEST_F(BenchPlotTest, MalformedInputsAreClearErrors) {
  nlohmann::json good =
      nlohmann::json::parse(ReadAll(FG_SOURCE_DIR "/bench/results/2026-11-30-Q8_0.json"));
  nlohmann::json bad_median = good;
  bad_median["speed"][1]["fgemma"]["median"] = "fast";
  nlohmann::json bad_test = good;
  bad_test["speed"][0]["test"] = "prefill";
  nlohmann::json no_rows = good;
  no_rows["speed"] = nlohmann::json::array();
  nlohmann::json bad_format = good;
  bad_format["format"] = "something-else";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"format\": ", "not valid JSON"},
      {"[1, 2]", "expected a JSON object"},
      {bad_format.dump(), "'format' is \"something-else\""},
      {bad_median.dump(), "speed[1].fgemma.median: expected a number, got \"fast\""},
      {bad_test.dump(), "speed[0].test: expected ppN or tgN"},
      {no_rows.dump(), "no rows"},
  };
  std::string png = TempPath("bench_plot_bad.png");
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].second);
    std::string in = TempPath("bench_plot_bad_" + std::to_string(i) + ".json");
    WriteAll(in, cases[i].first);
    std::remove(png.c_str());
    Proc r = Plot(in + " -o " + png);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_THAT(r.out, HasSubstr("plot.py: " + in + ": " + cases[i].second));
    EXPECT_THAT(r.out, Not(HasSubstr("Traceback")));
    EXPECT_EQ(ReadAll(png), "");
  }

  std::string missing = TempPath("bench_plot_no_such_file.json");
  std::remove(missing.c_str());
  Proc r = Plot(missing + " -o " + png);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("plot.py: " + missing + ": cannot read"));

  r = Plot("");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("usage:"));

  r = Plot("--help");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("RESULTS.json"));
  EXPECT_THAT(r.out, HasSubstr("requirements-bench.txt"));
}

}  // namespace
}  // namespace fg
