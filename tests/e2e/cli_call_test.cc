// fgemma call end to end on a synthetic model (fgemma mkmodel; its vocabulary has the
// FunctionGemma tokens at ids 46-52): the JSON shapes, every bad input, --repl, the prefix
// cache directory (reuse, corruption), constrained output that always parses and validates, and
// determinism.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "src/text/call_parser.h"
#include "src/text/tool_catalog.h"
#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;
using ::testing::HasSubstr;
using ::testing::Not;

// Enums, booleans and an argument-less tool: the grammar bounds every output, so even a random
// model finishes its call.
constexpr char kCatalog[] = R"({"tools": [
  {"type": "function", "function": {"name": "set_light", "description": "Turns a light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
                    "state": {"type": "string", "enum": ["on", "off"]}},
     "required": ["room", "state"]}}},
  {"type": "function", "function": {"name": "set_mode", "description": "Thermostat mode.",
   "parameters": {"type": "object",
     "properties": {"mode": {"type": "string", "enum": ["heat", "cool", "auto"]},
                    "eco": {"type": "boolean"}},
     "required": ["mode", "eco"]}}},
  {"type": "function", "function": {"name": "stop_music", "description": "Stops the music."}}
]})";

// Written to a file of this process and renamed into place: ctest runs every case in its own
// process, in parallel, and each rewrites the fixture's catalog, so a plain truncate-and-write
// let another case read an empty file now and then.
std::string Write(const std::string& name, const std::string& text) {
  const std::string p = TempPath(name);
  const std::string tmp = p + ".tmp" + std::to_string(::getpid());
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
  std::filesystem::rename(tmp, p);
  return p;
}

class CliCall : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(TempPath("cli_call_tiny.gguf"));
    auto r = RunFgemma("mkmodel -o " + *model_ + " --context 4096");
    ASSERT_EQ(r.rc, 0) << r.out;
    catalog_ = new std::string(Write("cli_call_catalog.json", kCatalog));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete catalog_;
  }
  // "call -m MODEL --tools CATALOG -t 1 " + args
  static std::string Args(const std::string& args) {
    return "call -m " + *model_ + " --tools " + *catalog_ + " -t 1 " + args;
  }
  static std::string* model_;
  static std::string* catalog_;
};
std::string* CliCall::model_ = nullptr;
std::string* CliCall::catalog_ = nullptr;

// The parsed call validates against the catalog.
void ExpectValidCall(const nlohmann::json& j) {
  ASSERT_TRUE(j.is_object() && j.contains("name") && j.contains("arguments")) << j.dump();
  auto cat = text::ParseToolCatalog(kCatalog);
  ASSERT_TRUE(cat.ok());
  const text::Tool* tool = cat->Find(j["name"].get<std::string>());
  ASSERT_NE(tool, nullptr) << j.dump();
  Status v = text::ValidateCall(*tool, j["arguments"]);
  EXPECT_TRUE(v.ok()) << v.ToString() << " " << j.dump();
}

// On the default model (no -m) a program that finds no shipped call adapter beside it (a copy
// of the binary elsewhere, an install without share/fgemma) says so on stderr, once, and runs
// the base model; --no-lora and another model (-m) ask for no adapter and get no note.
TEST_F(CliCall, SaysWhenTheShippedAdapterIsMissing) {
  const std::string dir = fg::testing::ProcessTempDir() + "/lone/bin";
  std::filesystem::create_directories(dir);
  const std::string exe = dir + "/fgemma";
  std::filesystem::copy_file(FG_CLI_PATH, exe, std::filesystem::copy_options::overwrite_existing);
  const std::string env = "env -u FGEMMA_CALL_LORA -u FGEMMA_TUNE_LORA FGEMMA_MODEL=" + *model_ + " ";
  const std::string call = " call --tools " + *catalog_ + " -t 1 ";
  const std::string req = " \"turn the light on\"";
  auto r = fg::testing::RunCommand(env + exe + call + req);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("note: the shipped call adapter (fgemma-call-lora.gguf) is not in"));
  EXPECT_EQ(r.out.find("note: the shipped"), r.out.rfind("note: the shipped")) << "once: " << r.out;
  const std::string other = dir + "/other.gguf";  // another header: not the default model
  ASSERT_EQ(RunFgemma("mkmodel -o " + other + " --context 2048").rc, 0);
  for (const std::string& flags : {std::string(" --no-lora"), " -m " + other}) {
    r = fg::testing::RunCommand(env + exe + call + flags + req);
    EXPECT_EQ(r.rc, 0) << flags << ": " << r.out;
    EXPECT_THAT(r.out, Not(HasSubstr("note: the shipped"))) << flags;
  }
}

TEST_F(CliCall, Help) {
  auto r = RunFgemma("call --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* flag : {"--tools", "--dialect", "--constrain", "--cache-dir", "--repl",
                           "--max-calls", "--stats", "--tool-map", "--prepack"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  EXPECT_THAT(RunFgemma("--help").out, HasSubstr("call"));
}

TEST_F(CliCall, ConstrainedOutputAlwaysParsesAndValidates) {
  for (const char* req : {"turn the light on", "lights off in the kitchen", "heat please",
                          "stop the music", "what?", "\xc3\xa9t\xc3\xa9"}) {
    auto r = RunFgemma(Args(std::string("\"") + req + "\""), /*with_stderr=*/false);
    ASSERT_EQ(r.rc, 0) << req << ": " << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    ExpectValidCall(j);
  }
}

TEST_F(CliCall, SeveralCallsAreAnArray) {
  auto r = RunFgemma(Args("--max-calls 3 \"lights on and heat\""), false);
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_GE(j.size(), 1u);
  ASSERT_LE(j.size(), 3u);
  for (const auto& c : j) ExpectValidCall(c);
}

TEST_F(CliCall, DeterministicAndSamplingIsSeeded) {
  auto a = RunFgemma(Args("\"turn the light on\""), false);
  auto b = RunFgemma(Args("\"turn the light on\""), false);
  EXPECT_EQ(a.rc, 0);
  EXPECT_EQ(a.out, b.out);
  auto s1 = RunFgemma(Args("--temp 1 --seed 5 \"turn the light on\""), false);
  auto s2 = RunFgemma(Args("--temp 1 --seed 5 \"turn the light on\""), false);
  EXPECT_EQ(s1.rc, 0) << s1.out;
  EXPECT_EQ(s1.out, s2.out);
  ExpectValidCall(nlohmann::json::parse(s1.out));
}

// An array of integers, which the random model (like the base Gemma 3) writes item after item:
// with a small -n, greedy or sampled, the output is still a valid call and the exit code 0.
TEST_F(CliCall, SmallBudgetsStillEndInAValidCall) {
  constexpr char kArrays[] = R"([{"name": "add_numbers", "description": "Adds numbers.",
    "parameters": {"type": "object",
      "properties": {"values": {"type": "array", "items": {"type": "integer"}},
                     "scale": {"type": "number"}},
      "required": ["values", "scale"]}}])";
  const std::string catalog = Write("cli_call_arrays.json", kArrays);
  auto cat = text::ParseToolCatalog(kArrays);
  ASSERT_TRUE(cat.ok());
  // 32 tokens is the shortest call on this vocabulary (its pieces are mostly single characters).
  for (const char* flags : {"-n 32", "-n 36", "-n 40 --temp 1 --seed 3", "-n 48 --temp 1 --seed 4",
                            "-n 36 --full-head"}) {
    auto r = RunFgemma("call -m " + *model_ + " --tools " + catalog + " -t 1 " + flags +
                           " \"add 4, 5 and 6\"",
                       /*with_stderr=*/false);
    ASSERT_EQ(r.rc, 0) << flags << ": " << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.value("name", "") == "add_numbers") << flags << ": " << r.out;
    Status v = text::ValidateCall(cat->tools[0], j["arguments"]);
    EXPECT_TRUE(v.ok()) << flags << ": " << v.ToString() << " " << r.out;
  }
}

TEST_F(CliCall, UnconstrainedPrintsJsonEvenWhenNoCall) {
  auto r = RunFgemma(Args("--constrain off -n 12 \"turn the light on\""), false);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  // Exit 1 exactly when the output is invalid call markup (then "error" says why).
  EXPECT_EQ(r.rc, j.contains("error") ? 1 : 0) << r.out;
  // The random model writes no call: the content shape.
  if (!j.contains("name")) {
    EXPECT_TRUE(j.contains("content") && j.contains("calls")) << r.out;
  }
  auto again = RunFgemma(Args("--constrain off -n 12 \"turn the light on\""), false);
  EXPECT_EQ(again.out, r.out);
}

TEST_F(CliCall, BadInput) {
  struct Case {
    std::string args;
    int rc;
    std::string message;
  };
  const std::string bad_json = Write("cli_call_bad.json", "{\"tools\": [");
  const std::string bad_tool = Write("cli_call_badtool.json", R"([{"description": "no name"}])");
  const std::string file = Write("cli_call_notadir", "x");
  std::string long_request(9000, 'a');
  for (size_t i = 1; i < long_request.size(); i += 2) long_request[i] = ' ';
  const std::vector<Case> cases = {
      {"call -m " + *model_ + " \"hi\"", 2, "missing --tools"},
      {Args(""), 2, "missing the REQUEST"},
      {Args("\"\""), 2, "empty"},
      {Args("\"   \""), 2, "empty"},
      {Args("--dialect klingon hi"), 2, "klingon"},
      {Args("--constrain maybe hi"), 2, "maybe"},
      {Args("--dialect compact hi"), 2, "--tool-map"},
      {Args("--temp -1 hi"), 2, "temperature"},
      {Args("--max-calls 0 hi"), 2, "--max-calls"},
      {Args("--draft 17 hi"), 2, "--draft"},
      {Args("--draft -1 hi"), 2, "--draft"},
      {Args("--tool-channel -1 hi"), 2, "--tool-channel"},
      {Args("--tool-channel nan hi"), 2, "--tool-channel"},
      {Args("--copy-bias -1 hi"), 2, "--copy-bias"},
      {Args("--copy-bias inf hi"), 2, "--copy-bias"},
      {Args("--blend 1 hi"), 2, "--blend"},
      {Args("--blend -0.5 hi"), 2, "--blend"},
      {Args("--blend nan hi"), 2, "--blend"},
      {Args("--repl hi"), 2, "--repl"},
      {Args("--bogus hi"), 2, "bogus"},
      {"call -m " + *model_ + " --tools " + bad_json + " hi", 1, "cli_call_bad.json"},
      {"call -m " + *model_ + " --tools " + bad_tool + " hi", 1, "name"},
      {"call -m " + *model_ + " --tools /nonexistent/tools.json hi", 1, "nonexistent"},
      {"call -m /nonexistent.gguf --tools " + *catalog_ + " hi", 1, "nonexistent"},
      {Args("--constrain off \"" + long_request + "\""), 1, "context"},
      {Args("-c 64 --constrain off hi"), 1, "context"},
      {Args("--constrain off --cache-dir " + file + " hi"), 1, "not a directory"},
      {Args("--constrain off --cache-dir " + file + "/sub hi"), 1, "cache dir"},
  };
  for (const Case& c : cases) {
    auto r = RunFgemma(c.args);
    EXPECT_EQ(r.rc, c.rc) << c.args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.out, HasSubstr("fgemma call")) << c.args;
  }
}

// --prepack: the same calls, with the panels packed once (a Q8_0 model: F32 weights have no
// panels; the tool prior on, so its runs use them too), which --stats reports.
TEST_F(CliCall, PrepackGivesTheSameCalls) {
  const std::string q8 = TempPath("cli_call_tiny_q8_0.gguf");
  ASSERT_EQ(RunFgemma("mkmodel -o " + q8 + " --type q8_0 --context 4096").rc, 0);
  const std::string in = Write("cli_call_prepack.txt",
                               "turn the light on\nstop the music\nkitchen lights off please\n");
  // stdout and stderr together: the calls are the lines that start with '{'.
  std::string calls[2], stats[2];
  for (int packed : {0, 1}) {
    auto r = RunFgemma("call -m " + q8 + " --tools " + *catalog_ +
                       " -t 2 --tool-channel 4 --repl --stats" + (packed ? " --prepack" : "") +
                       " < " + in);
    ASSERT_EQ(r.rc, 0) << r.out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      (line.rfind('{', 0) == 0 ? calls[packed] : stats[packed]) += line + "\n";
    }
  }
  EXPECT_EQ(std::count(calls[0].begin(), calls[0].end(), '\n'), 3) << calls[0];
  EXPECT_EQ(calls[1], calls[0]);
  EXPECT_THAT(stats[0], HasSubstr("prepacked panels 0.0 MiB")) << stats[0];
  EXPECT_THAT(stats[1], HasSubstr("prepacked panels ")) << stats[1];
  EXPECT_THAT(stats[1], Not(HasSubstr("prepacked panels 0.0 MiB"))) << stats[1];
}

TEST_F(CliCall, ReplAnswersEachLineFromTheCachedPrefix) {
  const std::string in =
      Write("cli_call_repl.txt", "turn the light on\n\nstop the music\nturn the light on\n");
  // stdout and stderr together: JSON lines start with '{', the --stats lines do not.
  auto r = RunFgemma(Args("--constrain off -n 10 --repl --stats < " + in));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<nlohmann::json> lines;
  std::string stats;
  size_t at = 0;
  while (at < r.out.size()) {
    const size_t nl = r.out.find('\n', at);
    const std::string line = r.out.substr(at, nl - at);
    if (!line.empty() && line[0] == '{') {
      lines.push_back(nlohmann::json::parse(line));
    } else {
      stats += line + "\n";
    }
    at = nl + 1;
  }
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_THAT(lines[1].value("error", ""), HasSubstr("empty"));
  EXPECT_EQ(lines[0], lines[3]);
  auto single = RunFgemma(Args("--constrain off -n 10 \"stop the music\""), false);
  EXPECT_EQ(nlohmann::json::parse(single.out), lines[2]);
  // The catalog is prefilled once; the later requests reuse it.
  EXPECT_THAT(stats, HasSubstr("(prefill,"));
  EXPECT_THAT(stats, HasSubstr("(memory,"));
  EXPECT_EQ(stats.find("(prefill,"), stats.rfind("(prefill,"));
  // The last request repeats the first one, but "stop the music" came in between: nothing
  // after the catalog is shared with the previous call.
  EXPECT_THAT(stats, Not(HasSubstr("tokens + 1")));
}

TEST_F(CliCall, ReplReusesTheTokensARequestSharesWithThePreviousOne) {
  const std::string in = Write("cli_call_reuse.txt", "turn the light on\nturn the light on\n");
  auto reuse = RunFgemma(Args("--constrain off -n 10 --repl --stats < " + in));
  ASSERT_EQ(reuse.rc, 0) << reuse.out;
  auto full = RunFgemma(Args("--constrain off -n 10 --repl --stats --no-reuse < " + in));
  ASSERT_EQ(full.rc, 0) << full.out;
  // "+ N reused" on the second request's stats line: N > 0 with reuse, 0 without.
  auto reused = [](const std::string& out) {
    std::vector<int> n;
    for (size_t at = out.find(" reused)"); at != std::string::npos;
         at = out.find(" reused)", at + 1)) {
      const size_t plus = out.rfind("+ ", at);
      n.push_back(std::stoi(out.substr(plus + 2, at - plus - 2)));
    }
    return n;
  };
  const std::vector<int> with = reused(reuse.out), without = reused(full.out);
  ASSERT_EQ(with.size(), 2u) << reuse.out;
  ASSERT_EQ(without.size(), 2u) << full.out;
  EXPECT_EQ(with[0], 0);
  EXPECT_GT(with[1], 0);
  EXPECT_EQ(without[1], 0);
}

TEST_F(CliCall, CacheDirIsReusedAndCorruptionNeverChangesTheAnswer) {
  const std::string dir = TempPath("cli_call_cache");
  std::filesystem::remove_all(dir);
  const std::string args =
      Args("--constrain off -n 10 --stats --cache-dir " + dir + " \"lights on\"");
  auto first = RunFgemma(args);
  // Free text without call markup (the synthetic model's greedy 10 tokens) is a valid
  // unconstrained answer: exit 0.
  ASSERT_EQ(first.rc, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("(prefill,"));
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  auto second = RunFgemma(args);
  EXPECT_THAT(second.out, HasSubstr("(disk,"));
  auto stdout_only = [&] { return RunFgemma(args, false).out; };
  const std::string want = stdout_only();
  // The answer line a run printed itself (stdout and stderr are merged in .out).
  auto answer = [](const std::string& out) {
    size_t at = 0;
    while (at < out.size()) {
      const size_t nl = std::min(out.find('\n', at), out.size());
      if (out[at] == '{') return nlohmann::json::parse(out.substr(at, nl - at));
      at = nl + 1;
    }
    return nlohmann::json();
  };
  ASSERT_TRUE(answer(want).is_object()) << want;

  // Flip a byte in the middle: a warning, a prefill, the same answer; the file is repaired.
  std::string bytes;
  {
    std::ifstream f(files[0], std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() / 2] ^= 0x40;
  std::ofstream(files[0], std::ios::binary | std::ios::trunc) << bytes;
  auto corrupt = RunFgemma(args);
  EXPECT_THAT(corrupt.out, HasSubstr("warning"));
  EXPECT_THAT(corrupt.out, HasSubstr("corrupt"));
  EXPECT_THAT(corrupt.out, HasSubstr("(prefill,"));
  EXPECT_EQ(corrupt.rc, first.rc);
  EXPECT_EQ(answer(corrupt.out), answer(want)) << corrupt.out;
  EXPECT_EQ(stdout_only(), want);
  EXPECT_THAT(RunFgemma(args).out, HasSubstr("(disk,"));
  // Truncated to nothing: the same.
  std::ofstream(files[0], std::ios::binary | std::ios::trunc) << "";
  auto empty = RunFgemma(args);
  EXPECT_THAT(empty.out, HasSubstr("warning"));
  EXPECT_EQ(empty.rc, first.rc);
  EXPECT_EQ(answer(empty.out), answer(want)) << empty.out;
  EXPECT_EQ(stdout_only(), want);
}

// `fgemma bench` time-to-call rows on a synthetic model: both kinds, the prompt and output ids
// that bench/compare.sh replays, times that are numbers, and tokens/s derived from them.
TEST_F(CliCall, BenchTimeToCallRowsCarryTheirFields) {
  auto r = RunFgemma("bench -m " + *model_ + " -p '' -n '' -r 2 -t 1 --tools " + *catalog_ +
                         " --json",
                     false);
  ASSERT_EQ(r.rc, 0) << r.out;
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  ASSERT_TRUE(rows.is_array()) << r.out;
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0].value("test", ""), "ttc_cold");
  EXPECT_EQ(rows[1].value("test", ""), "ttc_warm");
  for (const nlohmann::json& row : rows) {
    SCOPED_TRACE(row.dump());
    ASSERT_TRUE(row.contains("prompt_ids") && row["prompt_ids"].is_array());
    ASSERT_TRUE(row.contains("output_ids") && row["output_ids"].is_array());
    EXPECT_EQ(static_cast<int64_t>(row["prompt_ids"].size()), row.value("prompt_tokens", -1));
    EXPECT_EQ(static_cast<int64_t>(row["output_ids"].size()), row.value("generated_tokens", -1));
    EXPECT_GT(row["prompt_ids"].size(), 0u);
    EXPECT_EQ(row["prompt_ids"][0], 2);  // <bos>
    EXPECT_GT(row["output_ids"].size(), 0u);
    ASSERT_TRUE(row.contains("valid") && row["valid"].is_boolean());
    EXPECT_TRUE(row["valid"].get<bool>());  // the grammar bounds every output of this catalog
    ASSERT_TRUE(row.contains("ms") && row["ms"].is_number());
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    ASSERT_TRUE(row.contains("samples_ms") && row["samples_ms"].is_array());
    ASSERT_EQ(row["samples_ms"].size(), 2u);
    // tokens_per_s is the median of the per-repetition rates (of two: their mean).
    const double tokens = static_cast<double>(row["prompt_ids"].size() + row["output_ids"].size());
    const double r0 = tokens / row["samples_ms"][0].get<double>() * 1e3;
    const double r1 = tokens / row["samples_ms"][1].get<double>() * 1e3;
    EXPECT_NEAR(row.value("tokens_per_s", -1.0), 0.5 * (r0 + r1), 1e-6 * (r0 + r1));
    EXPECT_NEAR(row.value("stddev", -1.0), std::abs(r0 - r1) / std::sqrt(2.0),
                1e-6 * (r0 + r1) + 1e-9);
  }
  EXPECT_EQ(rows[0]["output_ids"], rows[1]["output_ids"]);
  EXPECT_EQ(rows[0]["prompt_ids"], rows[1]["prompt_ids"]);
}

}  // namespace
}  // namespace fg
