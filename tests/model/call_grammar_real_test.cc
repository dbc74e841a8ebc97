// CallGrammar on the real 262k Gemma 3 vocabulary (ids 46..52 renamed to the FunctionGemma
// controls, as FunctionGemma has them) with examples/smart_home.json:
// (a) random valid calls rendered with RenderCall and tokenized are accepted token by token;
// (b) random walks over Allowed() give text that ParseModelOutput parses and ValidateCall accepts
//     with the exact tool names.
// Prints Create time, the first Allowed() per kind of state, the memoized Allowed() cost and the
// number of memoized states (no thresholds: timings are reported, not tested).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fgemma/function_caller.h"
#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/text/call_grammar.h"
#include "src/text/call_parser.h"
#include "src/text/function_prompt.h"
#include "src/text/grammar_test_util.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::text {
namespace {

using namespace grammar_test;  // NOLINT
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class CallGrammarReal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("FGEMMA_MODEL");
    if (path == nullptr || !std::filesystem::exists(path)) return;
    auto file = gguf::File::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto vocab = LoadVocab(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    const char* kControl[] = {"<start_function_declaration>", "<end_function_declaration>",
                              "<start_function_call>",        "<end_function_call>",
                              "<start_function_response>",    "<end_function_response>",
                              "<escape>"};
    for (int i = 0; i < 7; ++i) {
      vocab->tokens[46 + i] = kControl[i];
      vocab->types[46 + i] = static_cast<int32_t>(TokenType::kControl);
    }
    vocab_ = new Vocab(*vocab);
    auto tok = Tokenizer::Create(*std::move(vocab));
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = std::move(*tok).release();
    closing_ = new std::vector<char>(ClosingPieces(*tok_));
    auto catalog = LoadToolCatalog(std::string(FG_SOURCE_DIR) + "/examples/smart_home.json");
    ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
    catalog_ = new ToolCatalog(*std::move(catalog));
  }
  void SetUp() override {
    const char* path = std::getenv("FGEMMA_MODEL");
    if (path == nullptr || !std::filesystem::exists(path)) {
      GTEST_SKIP() << "FGEMMA_MODEL unset or missing: needs the real vocabulary";
    }
    // The model is there, so a null here means an ASSERT in SetUpTestSuite failed: a failure.
    ASSERT_TRUE(tok_ != nullptr && catalog_ != nullptr) << "suite setup failed (see above)";
  }
  static Tokenizer* tok_;
  static ToolCatalog* catalog_;
  static Vocab* vocab_;
  static std::vector<char>* closing_;  // ClosingPieces(*tok_)
};
std::vector<char>* CallGrammarReal::closing_ = nullptr;
Vocab* CallGrammarReal::vocab_ = nullptr;
Tokenizer* CallGrammarReal::tok_ = nullptr;
ToolCatalog* CallGrammarReal::catalog_ = nullptr;

TEST_F(CallGrammarReal, SmartHomeOfficial) {
  GrammarOptions o;
  o.max_calls = 2;
  const auto t0 = Clock::now();
  FG_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CallGrammar> g, CallGrammar::Create(*catalog_, *tok_, o));
  const auto t1 = Clock::now();
  std::printf("vocab %d tokens; Create %.1f ms\n", tok_->size(), Ms(t0, t1));

  // First Allowed() at every step of one call: a fresh grammar computes each state once
  // (the string body walks the whole trie; most other states prune at the root).
  const std::string call = RenderCall(
      "set_light", {{"room", "kitchen"}, {"brightness", 40}, {"state", "on"}, {"color", "warm"}});
  const std::vector<int32_t> ids = tok_->Encode(call, false, true);
  CallGrammar::State s = g->Start();
  std::string prefix;
  auto first = [&]() {
    const auto a = Clock::now();
    const size_t n = g->Allowed(s).size();
    const auto b = Clock::now();
    std::printf("first Allowed %8.3f ms %7zu tokens after \"%s\"\n", Ms(a, b), n,
                prefix.c_str());
  };
  first();
  for (size_t i = 0; i < ids.size(); ++i) {
    FG_ASSERT_OK(g->Advance(&s, ids[i])) << i;
    prefix += tok_->TokenToPiece(ids[i], true);
    first();
  }
  EXPECT_TRUE(g->CanStop(s));

  // Memoized cost.
  CallGrammar::State probe = g->Start();
  FG_ASSERT_OK(g->Advance(&probe, ids[0]));
  const int kReps = 200000;
  size_t sink = 0;
  const auto a = Clock::now();
  for (int i = 0; i < kReps; ++i) sink += g->Allowed(probe).size();
  const auto b = Clock::now();
  std::printf("memoized Allowed: %.0f ns per call (%zu)\n", Ms(a, b) * 1e6 / kReps, sink % 7);

  // (a) random valid calls.
  std::mt19937 rng(42);
  const auto a0 = Clock::now();
  for (int i = 0; i < 40; ++i) {
    const Tool& tool = catalog_->tools[rng() % catalog_->tools.size()];
    std::string text = RenderCall(tool.name, RandomArguments(tool.parameters, rng));
    if (i % 2) {
      const Tool& t2 = catalog_->tools[rng() % catalog_->tools.size()];
      text += RenderCall(t2.name, RandomArguments(t2.parameters, rng));
    }
    // As the caller does: the allowed set at every step, then the token.
    CallGrammar::State v = g->Start();
    for (int32_t id : tok_->Encode(text, false, true)) {
      std::span<const int32_t> allowed = g->Allowed(v);
      ASSERT_TRUE(std::binary_search(allowed.begin(), allowed.end(), id)) << text;
      FG_ASSERT_OK(g->Advance(&v, id)) << text;
    }
    EXPECT_TRUE(g->CanStop(v)) << text;
  }
  std::printf("after 41 requests (random valid calls): %zu memoized states, %.0f ms\n",
              g->memoized_states(), Ms(a0, Clock::now()));

  // (b) random walks.
  const auto w0 = Clock::now();
  int calls = 0;
  const int kWalks = 200;
  for (int i = 0; i < kWalks; ++i) {
    std::vector<int32_t> walk;
    ASSERT_TRUE(RandomWalk(*g, *tok_, *closing_, rng, &walk)) << tok_->Decode(walk, true);
    const std::string text = tok_->Decode(walk, true);
    FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out, ParseModelOutput(text, catalog_));
    EXPECT_GE(out.calls.size(), 1u) << text;
    EXPECT_LE(out.calls.size(), 2u) << text;
    for (const Call& c : out.calls) {
      const Tool* tool = catalog_->Find(c.name);
      ASSERT_NE(tool, nullptr) << text;
      EXPECT_NE(text.find("call:" + c.name + "{"), std::string::npos) << text;
      FG_EXPECT_OK(ValidateCall(*tool, c.arguments)) << text;
      ++calls;
    }
    if (i < 3) std::printf("walk %d: %s\n", i, text.c_str());
  }
  std::printf("%d random walks, %d calls, %.0f ms; %zu memoized states\n", kWalks, calls,
              Ms(w0, Clock::now()), g->memoized_states());
}

TEST_F(CallGrammarReal, SmartHomeAuto) {
  GrammarOptions o;
  o.mode = ConstrainMode::kAuto;
  FG_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CallGrammar> g, CallGrammar::Create(*catalog_, *tok_, o));
  CallGrammar::State s = g->Start();
  const auto a = Clock::now();
  const size_t n = g->Allowed(s).size();
  std::printf("kAuto first Allowed (free text): %.2f ms, %zu tokens\n", Ms(a, Clock::now()), n);
  EXPECT_GT(n, 200000u);
  // Free text or a call may start: the call marker is among the first choices.
  const std::span<const int32_t> first = g->Allowed(s);
  EXPECT_TRUE(std::binary_search(first.begin(), first.end(), *tok_->Find(kStartCall)));
  std::mt19937 rng(5);
  int calls = 0;
  for (int i = 0; i < 50; ++i) {
    std::vector<int32_t> walk;
    ASSERT_TRUE(RandomWalk(*g, *tok_, *closing_, rng, &walk));
    const std::string text = tok_->Decode(walk, true);
    FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out, ParseModelOutput(text, catalog_));
    for (const Call& c : out.calls) {
      ASSERT_NE(catalog_->Find(c.name), nullptr) << text;
      FG_EXPECT_OK(ValidateCall(*catalog_->Find(c.name), c.arguments)) << text;
      ++calls;
    }
  }
  // The walks pick control tokens 1 step in 5, so some take the call path.
  EXPECT_GT(calls, 0);
  std::printf("kAuto: %d calls in 50 walks, %zu memoized states\n", calls, g->memoized_states());
}

// The seed fine-tune's vocabulary is this one plus 9 tokens, <tool_0> at 262146 and <end> at
// 262152; its golden for "turn the light on" walks through the compact grammar id for id.
TEST_F(CallGrammarReal, CompactSeedGolden) {
  Vocab v = *vocab_;
  auto add = [&](const std::string& text, TokenType type) {
    v.tokens.push_back(text);
    v.types.push_back(static_cast<int32_t>(type));
    if (!v.scores.empty()) v.scores.push_back(0);
  };
  add("<extra_a>", TokenType::kUnused);
  add("<extra_b>", TokenType::kUnused);
  for (int n = 0; n < 6; ++n) add("<tool_" + std::to_string(n) + ">", TokenType::kUserDefined);
  add("<end>", TokenType::kUserDefined);
  FG_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Tokenizer> tok, Tokenizer::Create(std::move(v)));
  ASSERT_EQ(tok->size(), 262153);
  // The seed's catalog and its toolMap (examples/): <tool_0> .. <tool_5>.
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog c,
                          LoadToolCatalog(std::string(FG_SOURCE_DIR) + "/examples/seed_home.json"));
  GrammarOptions o;
  o.dialect = Dialect::kCompact;
  o.max_calls = 2;
  FG_ASSERT_OK_AND_ASSIGN(
      o.tool_map, LoadToolMap(std::string(FG_SOURCE_DIR) + "/examples/seed_home_toolmap.json"));
  ASSERT_EQ(o.tool_map.size(), 6u);
  const auto t0 = Clock::now();
  FG_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CallGrammar> g, CallGrammar::Create(c, *tok, o));
  std::printf("compact Create %.1f ms\n", Ms(t0, Clock::now()));
  const std::vector<int32_t> golden = {262146, 236769, 3255, 718, 498, 1373, 262152, 106};
  CallGrammar::State s = g->Start();
  for (size_t i = 0; i < golden.size(); ++i) {
    const auto a = Clock::now();
    std::span<const int32_t> allowed = g->Allowed(s);
    std::printf("compact first Allowed %8.3f ms %7zu tokens before %d\n", Ms(a, Clock::now()),
                allowed.size(), golden[i]);
    EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), golden[i])) << i;
    FG_ASSERT_OK(g->Advance(&s, golden[i])) << i;
  }
  EXPECT_TRUE(g->Done(s));
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out,
                          ParseCompactOutput(tok->Decode(golden, true), &c, o.tool_map));
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "set_lights");
  EXPECT_EQ(out.calls[0].arguments, nlohmann::json({{"state", "on"}}));
  // A free string in two contexts: the first computes the string's own part (whole trie), the
  // second only walks the tokens that contain '"'.
  for (const char* prefix : {"<tool_0>(room=\"", "<tool_0>(state=\"on\", room=\"",
                             "<tool_2>(locked=true, door=\"", "<tool_3>(query=\""}) {
    CallGrammar::State t = g->Start();
    FG_ASSERT_OK(Walk(*g, &t, tok->Encode(prefix, false, true))) << prefix;
    const auto a = Clock::now();
    const size_t n = g->Allowed(t).size();
    std::printf("compact first Allowed %8.3f ms %7zu tokens after %s\n", Ms(a, Clock::now()), n,
                prefix);
    EXPECT_GT(n, 200000u);
  }
  // Random walks in the compact dialect parse and validate.
  const std::vector<char> closing = ClosingPieces(*tok);
  std::mt19937 rng(9);
  for (int i = 0; i < 40; ++i) {
    std::vector<int32_t> walk;
    ASSERT_TRUE(RandomWalk(*g, *tok, closing, rng, &walk));
    const std::string text = tok->Decode(walk, true);
    FG_ASSERT_OK_AND_ASSIGN(ParsedOutput p, ParseCompactOutput(text, &c, o.tool_map));
    EXPECT_GE(p.calls.size(), 1u) << text;
    for (const Call& call : p.calls) {
      FG_EXPECT_OK(ValidateCall(*c.Find(call.name), call.arguments)) << text;
    }
    if (i < 3) std::printf("compact walk %d: %s\n", i, text.c_str());
  }
  std::printf("compact: %zu memoized states after 40 walks\n", g->memoized_states());
}

}  // namespace
}  // namespace fg::text
