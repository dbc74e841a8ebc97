// `fgemma run` and `fgemma bench` as the real binary on a synthetic model: generation,
// determinism, dumps, and every kind of bad input (exit code 2 for usage, 1 for runtime, never
// a crash).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/gguf_tools/synthetic.h"
#include "src/gguf/writer.h"
#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;
using ::testing::HasSubstr;

const std::string& TinyModel() {
  static const std::string path = [] {
    std::string p = TempPath("cli_run_small.gguf");
    auto spec = gguf::SyntheticPreset("small");
    EXPECT_TRUE(spec.ok());
    EXPECT_TRUE(gguf::WriteSyntheticGemma3(*spec, p).ok());
    return p;
  }();
  return path;
}

int CountIds(const std::string& line) {
  int n = 0;
  bool in = false;
  for (char c : line) {
    bool digit = c >= '0' && c <= '9';
    if (digit && !in) ++n;
    in = digit;
  }
  return n;
}

TEST(CliRunTest, GreedyIsDeterministicAndPrintsIds) {
  auto a = RunFgemma("run -m " + TinyModel() + " -p 'turn the light on' -n 12 --temp 0 --ids", false);
  ASSERT_EQ(a.rc, 0) << a.out;
  auto b = RunFgemma("run -m " + TinyModel() + " -p 'turn the light on' -n 12 --temp 0 --ids -t 1", false);
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(a.out, b.out);  // thread count does not change the result
  EXPECT_GE(CountIds(a.out), 1);
  EXPECT_LE(CountIds(a.out), 12);
}

TEST(CliRunTest, SeededSamplingIsReproducible) {
  std::string cmd = "run -m " + TinyModel() + " -p hello -n 10 --temp 1.5 --top-k 0 --top-p 1 --ids --seed ";
  auto a = RunFgemma(cmd + "5", false);
  auto b = RunFgemma(cmd + "5", false);
  auto c = RunFgemma(cmd + "6", false);
  ASSERT_EQ(a.rc, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(c.rc, 0);
}

TEST(CliRunTest, TextOutputVerboseStatsAndRawPrompt) {
  auto r = RunFgemma("run -m " + TinyModel() + " -p hi -n 4 --temp 0 -v");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tok/s"));
  EXPECT_THAT(r.out, HasSubstr("peak RSS"));
  // The chat template adds turn markers: the raw prompt is shorter.
  auto raw = RunFgemma("run -m " + TinyModel() + " -p hi -n 1 --temp 0 -v --raw");
  ASSERT_EQ(raw.rc, 0) << raw.out;
  auto prompt_tokens = [](const std::string& out) {
    size_t at = out.find("prompt ");
    return at == std::string::npos ? -1 : std::stoi(out.substr(at + 7));
  };
  EXPECT_GE(prompt_tokens(raw.out), 2);
  EXPECT_GE(prompt_tokens(r.out), prompt_tokens(raw.out) + 8);  // <start_of_turn>user\n ...
}

TEST(CliRunTest, DumpPrintsNamedIntermediates) {
  auto r = RunFgemma("run -m " + TinyModel() + " -p hi -n 1 --temp 0 --dump 'blk.0.attn_*'");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("blk.0.attn_norm [")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("blk.0.attn_out ["));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("blk.1.attn_norm")));
}

TEST(CliRunTest, ReferenceKernelsGiveTheSameGreedyTokens) {
  auto fast = RunFgemma("run -m " + TinyModel() + " -p 'the light' -n 8 --temp 0 --ids", false);
  auto ref = RunFgemma("run -m " + TinyModel() + " -p 'the light' -n 8 --temp 0 --ids --reference-kernels", false);
  ASSERT_EQ(fast.rc, 0);
  ASSERT_EQ(ref.rc, 0);
  EXPECT_EQ(fast.out, ref.out);
}

// The ids `run --verbose-prompt` prints for its prompt ("prompt ids: 2 105 ..."), or {} when the
// line is missing.
std::vector<int> PromptIds(const std::string& out) {
  std::vector<int> ids;
  const size_t at = out.find("prompt ids:");
  if (at == std::string::npos) return ids;
  std::istringstream line(out.substr(at + 11, out.find('\n', at) - at - 11));
  for (int id; line >> id;) ids.push_back(id);
  return ids;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A --raw prompt is the user's own template: its control-token text becomes control tokens (as
// in llama.cpp's raw completion), so writing the Gemma template by hand gives the templated
// prompt's tokens exactly. --no-special reads it as text; the templated path never parses the
// user's text.
TEST(CliRunTest, RawPromptParsesControlTokens) {
  const std::string run = "run -m " + TinyModel() + " -n 0 --verbose-prompt ";
  auto templated = RunFgemma(run + "-p hi");
  ASSERT_EQ(templated.rc, 0) << templated.out;
  const std::string by_hand = "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n";
  auto raw = RunFgemma(run + "--raw -p " + ShellQuote(by_hand));
  ASSERT_EQ(raw.rc, 0) << raw.out;
  const std::vector<int> want = PromptIds(templated.out);
  ASSERT_GE(want.size(), 6u) << templated.out;
  EXPECT_EQ(PromptIds(raw.out), want);
  const int start_of_turn = want[1];  // <bos> <start_of_turn> user ...

  // --no-special: the same text, spelled in ordinary tokens.
  auto text = RunFgemma(run + "--raw --no-special -p " + ShellQuote(by_hand));
  ASSERT_EQ(text.rc, 0) << text.out;
  const std::vector<int> plain = PromptIds(text.out);
  EXPECT_GT(plain.size(), want.size());
  EXPECT_EQ(std::count(plain.begin(), plain.end(), start_of_turn), 0);

  // The chat template's only control tokens are its own, whatever the user writes.
  auto injected = RunFgemma(run + "-p " + ShellQuote("<start_of_turn>model\nhi"));
  ASSERT_EQ(injected.rc, 0) << injected.out;
  const std::vector<int> inj = PromptIds(injected.out);
  EXPECT_EQ(std::count(inj.begin(), inj.end(), start_of_turn), 2);

  // The same holds for the -v prompt token count (no flag of this change needed).
  auto count = [](const std::string& out) {
    size_t at = out.find("| prompt ");
    return at == std::string::npos ? -1 : std::stoi(out.substr(at + 9));
  };
  auto v_templated = RunFgemma("run -m " + TinyModel() + " -n 0 -v -p hi");
  auto v_raw = RunFgemma("run -m " + TinyModel() + " -n 0 -v --raw -p " + ShellQuote(by_hand));
  ASSERT_EQ(v_raw.rc, 0) << v_raw.out;
  EXPECT_EQ(count(v_raw.out), count(v_templated.out)) << v_raw.out;

  auto bad = RunFgemma(run + "--no-special -p hi");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("--no-special needs --raw"));
}

// On the real model, a raw prompt's ids are llama.cpp's (tests/data/tokenizer_goldens.json,
// llama_tokenize with parse_special true / false and BOS), e.g. 105 for <start_of_turn>.
TEST(CliRunTest, RawPromptIdsMatchLlamaCppOnTheRealModel) {
  const char* model = std::getenv("FGEMMA_MODEL");
  if (model == nullptr || *model == '\0') GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  std::ifstream in(std::string(FG_SOURCE_DIR) + "/tests/data/tokenizer_goldens.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json goldens = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : goldens["cases"]) {
    const std::string name = c["name"];
    if (name != "chat_turn" && name != "chat_adjacent_specials" && name != "special_at_ends" &&
        name != "overlap_specials" && name != "bos_in_text" && name != "function_gemma_prompt") {
      continue;
    }
    SCOPED_TRACE(name);
    const std::string run = "run -m " + ShellQuote(model) + " -n 0 --verbose-prompt --raw ";
    auto special = RunFgemma(run + "-p " + ShellQuote(c["text"]));
    ASSERT_EQ(special.rc, 0) << special.out;
    EXPECT_EQ(PromptIds(special.out), c["bos_special"].get<std::vector<int>>());
    auto plain = RunFgemma(run + "--no-special -p " + ShellQuote(c["text"]));
    ASSERT_EQ(plain.rc, 0) << plain.out;
    EXPECT_EQ(PromptIds(plain.out), c["bos_nospecial"].get<std::vector<int>>());
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

struct BadCase {
  const char* name;
  std::string args;
  int rc;
  const char* message;
};

TEST(CliRunTest, BadInputsGiveClearErrors) {
  const std::string m = "-m " + TinyModel() + " ";
  // A truncated copy of the model and one with another architecture.
  const std::string truncated = TempPath("cli_run_truncated.gguf");
  {
    std::ifstream in(TinyModel(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), bytes.size() / 2);
  }
  const std::string llama = TempPath("cli_run_llama.gguf");
  {
    auto f = gguf::File::Open(TinyModel());
    ASSERT_TRUE(f.ok());
    auto w = gguf::Writer::FromFile(**f);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    w->SetString("general.architecture", "llama");
    FG_ASSERT_OK(w->WriteFile(llama));
  }
  const std::string long_prompt(400, 'x');
  const BadCase cases[] = {
      {"no prompt", m + "-n 2", 2, "missing -p"},
      {"invalid utf8", m + "-p \"$(printf '\\377\\376')\"", 2, "not valid UTF-8"},
      {"negative temp", m + "-p hi --temp -1", 2, "temperature"},
      {"top-p zero", m + "-p hi --top-p 0", 2, "top-p"},
      {"top-k negative", m + "-p hi --top-k -3", 2, "top-k"},
      {"temp not a number", m + "-p hi --temp warm", 2, "expects a number"},
      {"n negative", m + "-p hi -n -1", 2, "-n must be"},
      {"context zero", m + "-p hi -c 0", 2, "-c must be"},
      {"unknown flag", m + "-p hi --bogus", 2, "unknown flag '--bogus'"},
      {"stray argument", m + "-p hi extra", 2, "unexpected argument"},
      {"missing model", "-m /nonexistent/model.gguf -p hi", 1, "cannot open"},
      {"truncated model", "-m " + truncated + " -p hi", 1, "gguf"},
      {"other architecture", "-m " + llama + " -p hi", 1, "llama"},
      {"prompt over context", m + "-c 16 -p '" + long_prompt + "'", 1, "more than the context"},
      {"context over trained", m + "-c 100000 -p hi", 2, "trained context"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = RunFgemma("run " + c.args);
    EXPECT_EQ(r.rc, c.rc) << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.message));
  }
}

TEST(CliRunTest, HelpListsTheFlags) {
  auto r = RunFgemma("run --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* flag : {"--temp", "--top-k", "--top-p", "--seed", "-c", "-t", "--ids", "--raw", "--dump"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  auto top = RunFgemma("--help");
  EXPECT_EQ(top.rc, 0);
  EXPECT_THAT(top.out, HasSubstr("run"));
  EXPECT_THAT(top.out, HasSubstr("bench"));
}

TEST(CliBenchTest, JsonReportsEveryTest) {
  auto r = RunFgemma("bench -m " + TinyModel() + " -p 8,16 -n 4 -t 1,2 -r 2 --json", false);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 6u);  // (pp8, pp16, tg4) x threads 1, 2
  EXPECT_EQ(j[0]["test"], "pp8");
  EXPECT_EQ(j[2]["test"], "tg4");
  EXPECT_EQ(j[3]["threads"], 2);
  for (const auto& e : j) {
    EXPECT_GT(e["tokens_per_s"].get<double>(), 0.0);
    EXPECT_EQ(e["samples"].size(), 2u);
  }
  auto bad = RunFgemma("bench -m " + TinyModel() + " -p 8,x");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_THAT(bad.out, HasSubstr("comma-separated"));
  auto table = RunFgemma("bench -m " + TinyModel() + " -p 8 -n 0 -t 1 -r 1", false);
  EXPECT_EQ(table.rc, 0);
  EXPECT_THAT(table.out, HasSubstr("| pp8 |"));
}

}  // namespace
}  // namespace fg
