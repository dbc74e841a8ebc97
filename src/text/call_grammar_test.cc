#include "src/text/call_grammar.h"

#include <algorithm>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/text/call_parser.h"
#include "src/text/function_prompt.h"
#include "src/text/grammar_test_util.h"

namespace fg::text {
namespace {

using ::fg::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using nlohmann::json;
using namespace grammar_test;  // NOLINT

// Enums (string, integer, number), nested objects with required keys, arrays with and without
// items, a free object, booleans, keys and tool names that are prefixes of each other, a tool
// without parameters.
const char kCatalogA[] = R"([
  {"name":"set_light","parameters":{"type":"object","properties":{
     "room":{"type":"string"},"state":{"type":"string","enum":["on","off","o\"dd"]},
     "brightness":{"type":"integer"},"level":{"type":"number"},"dim":{"type":"boolean"},
     "mode":{"type":"integer","enum":[1,12,3]},"model":{"type":"number","enum":[0.5,2]},
     "rooms":{"type":"array","items":{"type":"integer"}},
     "tags":{"type":"array"},
     "extra":{"type":"object"},
     "color":{"type":"object","properties":{"r":{"type":"integer"},"name":{"type":"string"},
              "rgb":{"type":"array","items":{"type":"number"}}},
              "required":["r"]}},
     "required":["room","state"]}},
  {"name":"set_light_color","parameters":{"type":"object","properties":{
     "hue":{"type":"number"}},"required":["hue"]}},
  {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},
     "days":{"type":"integer"}}}},
  {"name":"set_alarm"}])";

// Many tools, deep nesting, arrays of objects.
std::string CatalogB() {
  json tools = json::array();
  for (int i = 0; i < 40; ++i) {
    json props = {{"id", {{"type", "integer"}}},
                  {"name", {{"type", "string"}}},
                  {"on", {{"type", "boolean"}}}};
    if (i % 3 == 0) {
      props["items"] = {{"type", "array"},
                        {"items",
                         {{"type", "object"},
                          {"properties",
                           {{"k", {{"type", "string"}, {"enum", {"a", "b", "ab"}}}},
                            {"v", {{"type", "number"}}}}},
                          {"required", {"k"}}}}};
    }
    tools.push_back({{"name", "tool" + std::to_string(i)},
                     {"parameters",
                      {{"type", "object"}, {"properties", props}, {"required", {"id"}}}}});
  }
  return tools.dump();
}

ToolCatalog Catalog(std::string_view text) {
  StatusOr<ToolCatalog> c = ParseToolCatalog(text);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *std::move(c) : ToolCatalog{};
}

std::unique_ptr<CallGrammar> MakeGrammar(const ToolCatalog& c, const Tokenizer& tok,
                                         GrammarOptions o) {
  StatusOr<std::unique_ptr<CallGrammar>> g = CallGrammar::Create(c, tok, o);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *std::move(g) : nullptr;
}

class CallGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = SmallTokenizer({"call:", "set_light", "set_light_color", "get_weather", "set_alarm",
                           "{city", "},", "}", "room", "state", "brightness", "level", "mode",
                           "model", "rooms", "tags", "extra", "color", "dim", "true", "false",
                           "tru", "on", "off", "12", "3.", "0.5", "e+", "\":", "],", "[1",
                           "town", "escape", "get_", "=\"", "\")", "\",", "(", "tool", "hue",
                           "Tokyo", "light", "days", "hello world", "<start", "_function", "_call>",
                           "<tool_"},
                          /*compact_tools=*/3);
    closing_ = ClosingPieces(*tok_);
    a_ = Catalog(kCatalogA);
  }
  std::unique_ptr<Tokenizer> tok_;
  std::vector<char> closing_;  // ClosingPieces(*tok_)
  ToolCatalog a_;
};

TEST(GrammarNames, ParseDialectAndMode) {
  EXPECT_EQ(*ParseDialect("official"), Dialect::kOfficial);
  EXPECT_EQ(*ParseDialect("compact"), Dialect::kCompact);
  EXPECT_THAT(ParseDialect("x"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_EQ(*ParseConstrainMode("call"), ConstrainMode::kCall);
  EXPECT_EQ(*ParseConstrainMode("auto"), ConstrainMode::kAuto);
  EXPECT_EQ(*ParseConstrainMode("off"), ConstrainMode::kOff);
  EXPECT_THAT(ParseConstrainMode("on"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST_F(CallGrammarTest, CreateErrors) {
  GrammarOptions o;
  o.mode = ConstrainMode::kOff;
  EXPECT_THAT(CallGrammar::Create(a_, *tok_, o), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  o.mode = ConstrainMode::kCall;
  o.max_calls = 0;
  EXPECT_THAT(CallGrammar::Create(a_, *tok_, o), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  o.max_calls = 1;
  EXPECT_THAT(CallGrammar::Create(ToolCatalog{}, *tok_, o),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no tools")));
  o.dialect = Dialect::kCompact;
  EXPECT_THAT(CallGrammar::Create(a_, *tok_, o),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("tool map")));
  o.tool_map = {"set_light", "nope"};
  EXPECT_THAT(CallGrammar::Create(a_, *tok_, o),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("nope")));
  o.tool_map = {"set_light", "get_weather", "set_alarm", "set_light_color"};  // no <tool_3>
  EXPECT_THAT(CallGrammar::Create(a_, *tok_, o),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("<tool_3>")));
  // A vocabulary without the FunctionGemma control tokens.
  std::unique_ptr<Tokenizer> plain = SmallTokenizer({}, 0, /*function_tokens=*/false);
  EXPECT_THAT(CallGrammar::Create(a_, *plain, GrammarOptions{}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("<start_function_call>")));
  o.tool_map = {"set_light"};
  EXPECT_THAT(CallGrammar::Create(a_, *plain, o),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("<end>")));
}

TEST_F(CallGrammarTest, CallModeStartsWithCallAndEndsAfterMaxCalls) {
  auto g = MakeGrammar(a_, *tok_, GrammarOptions{});
  ASSERT_NE(g, nullptr);
  CallGrammar::State s = g->Start();
  EXPECT_THAT(g->Allowed(s), ElementsAre(Id(*tok_, "<start_function_call>")));
  EXPECT_FALSE(g->CanStop(s));
  const std::vector<int32_t> ids =
      Ids(*tok_, {"<start_function_call>", "call:", "get_weather", "{city", ":", "<escape>",
                  "Tokyo", "<escape>", "}", "<end_function_call>"});
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_FALSE(g->Done(s));
    FG_ASSERT_OK(g->Advance(&s, ids[i])) << i;
  }
  EXPECT_TRUE(g->Done(s));
  EXPECT_TRUE(g->CanStop(s));
  EXPECT_TRUE(g->Allowed(s).empty());
  EXPECT_THAT(g->Advance(&s, Id(*tok_, "<end_of_turn>")), StatusIs(StatusCode::kInvalidArgument, ::testing::_));

  // Two calls allowed: after the first, another call or a stop token.
  GrammarOptions two;
  two.max_calls = 2;
  auto g2 = MakeGrammar(a_, *tok_, two);
  CallGrammar::State s2 = g2->Start();
  for (int32_t id : ids) FG_ASSERT_OK(g2->Advance(&s2, id));
  EXPECT_FALSE(g2->Done(s2));
  EXPECT_TRUE(g2->CanStop(s2));
  EXPECT_THAT(g2->Allowed(s2),
              UnorderedElementsAre(Id(*tok_, "<eos>"), Id(*tok_, "<start_function_call>"),
                          Id(*tok_, "<start_function_response>"), Id(*tok_, "<end_of_turn>")));
  for (int32_t id : ids) FG_ASSERT_OK(g2->Advance(&s2, id));
  EXPECT_TRUE(g2->Done(s2));
  // A stop token ends the output.
  CallGrammar::State s3 = g2->Start();
  for (int32_t id : ids) FG_ASSERT_OK(g2->Advance(&s3, id));
  FG_ASSERT_OK(g2->Advance(&s3, Id(*tok_, "<start_function_response>")));
  EXPECT_TRUE(g2->Done(s3));
}

TEST_F(CallGrammarTest, AutoModeAllowsTextThenConstrainedCall) {
  GrammarOptions o;
  o.mode = ConstrainMode::kAuto;
  o.max_calls = 2;
  auto g = MakeGrammar(a_, *tok_, o);
  ASSERT_NE(g, nullptr);
  CallGrammar::State s = g->Start();
  EXPECT_TRUE(g->CanStop(s));
  std::span<const int32_t> first = g->Allowed(s);
  const auto has = [](std::span<const int32_t> set, int32_t id) {
    return std::binary_search(set.begin(), set.end(), id);
  };
  EXPECT_TRUE(has(first, Id(*tok_, "hello world")));
  EXPECT_TRUE(has(first, Id(*tok_, "<end_of_turn>")));
  EXPECT_TRUE(has(first, Id(*tok_, "<start_function_call>")));
  EXPECT_FALSE(has(first, Id(*tok_, "<escape>")));
  EXPECT_FALSE(has(first, Id(*tok_, "<bos>")));
  EXPECT_FALSE(has(first, Id(*tok_, "<unused0>")));
  FG_ASSERT_OK(g->Advance(&s, Id(*tok_, "hello world")));
  FG_ASSERT_OK(g->Advance(&s, Id(*tok_, "<start_function_call>")));
  EXPECT_FALSE(g->CanStop(s));
  for (int32_t id : Ids(*tok_, {"call:", "get_weather", "{", "}", "<end_function_call>"})) {
    FG_ASSERT_OK(g->Advance(&s, id));
  }
  EXPECT_TRUE(g->CanStop(s));
  FG_ASSERT_OK(g->Advance(&s, Id(*tok_, "<end_of_turn>")));
  EXPECT_TRUE(g->Done(s));

  // Free text cannot spell the call marker with ordinary tokens (the parser would read it).
  CallGrammar::State t = g->Start();
  EXPECT_EQ(RejectedAt(*g, &t, Ids(*tok_, {"<start", "_function", "_call>"})), 2);
  // The same for kAuto's compact form.
  GrammarOptions oc = o;
  oc.dialect = Dialect::kCompact;
  oc.tool_map = {"set_light"};
  auto gc = MakeGrammar(a_, *tok_, oc);
  CallGrammar::State u = gc->Start();
  EXPECT_EQ(RejectedAt(*gc, &u, Ids(*tok_, {"hello world", "<tool_"})), 1);
}

TEST_F(CallGrammarTest, InvalidCallsAreRejectedAtTheRightToken) {
  auto g = MakeGrammar(a_, *tok_, GrammarOptions{});
  ASSERT_NE(g, nullptr);
  const std::vector<std::string> head = {"<start_function_call>", "call:", "set_light", "{"};
  auto with_head = [&](std::vector<std::string> rest) {
    std::vector<std::string> all = head;
    all.insert(all.end(), rest.begin(), rest.end());
    return Ids(*tok_, all);
  };
  auto reject = [&](const std::vector<int32_t>& ids) {
    CallGrammar::State s = g->Start();
    return RejectedAt(*g, &s, ids);
  };
  // Unknown tool.
  EXPECT_EQ(reject(Ids(*tok_, {"<start_function_call>", "call:", "get_", "x"})), 3);
  EXPECT_EQ(reject(Ids(*tok_, {"<start_function_call>", "call:", "tool"})), 2);
  // Unknown key.
  EXPECT_EQ(reject(with_head({"town"})), 4);
  // Missing required key (state) before '}'.
  EXPECT_EQ(reject(with_head({"room", ":", "<escape>", "a", "<escape>", "}"})), 9);
  // Enum violation, in the middle of a string.
  EXPECT_EQ(reject(with_head({"state", ":", "<escape>", "o", "x"})), 8);
  EXPECT_EQ(reject(with_head({"state", ":", "<escape>", "on", "n"})), 8);
  // Wrong types.
  EXPECT_EQ(reject(with_head({"brightness", ":", "<escape>"})), 6);
  EXPECT_EQ(reject(with_head({"brightness", ":", "12", "."})), 7);
  EXPECT_EQ(reject(with_head({"dim", ":", "tru", "x"})), 7);
  EXPECT_EQ(reject(with_head({"dim", ":", "1"})), 6);
  EXPECT_EQ(reject(with_head({"room", ":", "1"})), 6);
  EXPECT_EQ(reject(with_head({"mode", ":", "2"})), 6);  // integer enum {1, 12, 3}
  EXPECT_EQ(reject(with_head({"rooms", ":", "[1", "."})), 7);
  // Duplicate key.
  EXPECT_EQ(reject(with_head({"state", ":", "<escape>", "on", "<escape>", ",", "state"})), 10);
  // Leading zero, null, whitespace.
  EXPECT_EQ(reject(with_head({"brightness", ":", "0", "1"})), 7);
  EXPECT_EQ(reject(with_head({"room", ":", "n"})), 6);
  EXPECT_EQ(reject(with_head({" "})), 4);
  // The text "<escape>" spelled inside a string would end it for the parser.
  EXPECT_EQ(reject(with_head({"room", ":", "<escape>", "<", "escape", ">"})), 9);
  // Controls never appear inside a call; stop tokens only when complete.
  EXPECT_EQ(reject(with_head({"<bos>"})), 4);
  EXPECT_EQ(reject(with_head({"room", ":", "<escape>", "<pad>"})), 7);
  EXPECT_EQ(reject(with_head({"room", ":", "<escape>", "<unused0>"})), 7);
  EXPECT_EQ(reject(with_head({"<end_of_turn>"})), 4);
  EXPECT_EQ(reject(with_head({"<end_function_call>"})), 4);
  // Nested required key.
  EXPECT_EQ(reject(with_head({"color", ":", "{", "}"})), 7);
  // Valid prefixes are not rejected.
  EXPECT_EQ(reject(with_head({"room", ":", "<escape>", "<escape>", ",", "state", ":", "<escape>",
                              "off", "<escape>", ",", "mode", ":", "12", ",", "model", ":", "0.5",
                              "},"})),
            22);  // "}," closes the arguments, and ',' cannot follow
  EXPECT_EQ(reject(with_head({"state", ":", "<escape>", "off", "<escape>", ",", "room", ":",
                              "<escape>", "<escape>", "}", "<end_function_call>"})),
            -1);
}

TEST_F(CallGrammarTest, AllowedMatchesAdvanceOnEveryToken) {
  // For states along random walks: token t is in Allowed(s) iff Advance(s, t) succeeds.
  for (Dialect d : {Dialect::kOfficial, Dialect::kCompact}) {
    GrammarOptions o;
    o.dialect = d;
    o.mode = ConstrainMode::kAuto;
    o.max_calls = 2;
    if (d == Dialect::kCompact) o.tool_map = {"set_light", "get_weather", "set_light_color"};
    auto g = MakeGrammar(a_, *tok_, o);
    ASSERT_NE(g, nullptr);
    std::mt19937 rng(7);
    for (int walk = 0; walk < 6; ++walk) {
      CallGrammar::State s = g->Start();
      for (int step = 0; step < 60 && !g->Done(s); ++step) {
        std::span<const int32_t> allowed = g->Allowed(s);
        ASSERT_FALSE(allowed.empty());
        ASSERT_TRUE(std::is_sorted(allowed.begin(), allowed.end()));
        for (int32_t t = 0; t < tok_->size(); ++t) {
          CallGrammar::State c = s;
          const bool ok = g->Advance(&c, t).ok();
          ASSERT_EQ(ok, std::binary_search(allowed.begin(), allowed.end(), t))
              << "token " << t << " '" << tok_->text(t) << "' step " << step;
        }
        FG_ASSERT_OK(g->Advance(&s, PickToken(*tok_, closing_, allowed, rng)));
      }
    }
  }
}

TEST_F(CallGrammarTest, AllowedIsMemoizedAndThreadSafe) {
  auto g = MakeGrammar(a_, *tok_, GrammarOptions{});
  CallGrammar::State s = g->Start();
  EXPECT_EQ(g->memoized_states(), 0u);
  std::span<const int32_t> a = g->Allowed(s);
  EXPECT_EQ(g->memoized_states(), 1u);
  EXPECT_EQ(g->Allowed(s).data(), a.data());
  EXPECT_EQ(g->memoized_states(), 1u);
  // Official strings share one entry whatever encloses them.
  FG_ASSERT_OK(Walk(*g, &s, Ids(*tok_, {"<start_function_call>", "call:", "get_weather", "{city",
                                     ":", "<escape>"})));
  CallGrammar::State t = g->Start();
  FG_ASSERT_OK(Walk(*g, &t, Ids(*tok_, {"<start_function_call>", "call:", "set_light", "{",
                                     "room", ":", "<escape>"})));
  EXPECT_EQ(g->Allowed(s).data(), g->Allowed(t).data());
  // Threads sharing the grammar see the sets a lone walk sees: the expected draw is computed
  // first, single-threaded, on a fresh grammar (nothing memoized shared with the threads), and
  // every refused token counts as a failure.
  const auto draw = [&](const CallGrammar& gr, std::vector<int32_t>* seq) {
    std::mt19937 rng(11);
    int failures = 0;
    CallGrammar::State u = gr.Start();
    while (!gr.Done(u)) {
      const int32_t id = PickToken(*tok_, closing_, gr.Allowed(u), rng);
      seq->push_back(id);
      if (!gr.Advance(&u, id).ok()) {
        ++failures;
        break;
      }
    }
    return failures;
  };
  std::vector<int32_t> expected;
  ASSERT_EQ(draw(*MakeGrammar(a_, *tok_, GrammarOptions{}), &expected), 0);
  ASSERT_FALSE(expected.empty());
  std::vector<std::vector<int32_t>> seen(4);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { failures[i] = draw(*g, &seen[i]); });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(failures[i], 0) << "thread " << i;
    EXPECT_EQ(seen[i], expected) << "thread " << i;
  }
}

struct Case {
  const char* name;
  Dialect dialect;
  ConstrainMode mode;
  int max_calls;
  bool many;  // CatalogB instead of A
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

class GrammarLanguageTest : public CallGrammarTest, public ::testing::WithParamInterface<Case> {
 protected:
  // The case's options; the compact tool map names the catalog's tools 0, 2 and 1 (those it has).
  static GrammarOptions Options(const Case& c, const ToolCatalog& catalog) {
    GrammarOptions o;
    o.dialect = c.dialect;
    o.mode = c.mode;
    o.max_calls = c.max_calls;
    if (c.dialect == Dialect::kCompact) {
      for (size_t k : {0, 2, 1}) {
        if (k < catalog.tools.size()) o.tool_map.push_back(catalog.tools[k].name);
      }
    }
    return o;
  }
  // Parses `text` as the case's output and validates its calls: the number of calls, or -1
  // (with a failure recorded) when it does not parse.
  int ExpectValidOutput(const std::string& text, const ToolCatalog& catalog,
                        const GrammarOptions& o) const {
    StatusOr<ParsedOutput> out = o.dialect == Dialect::kCompact
                                     ? ParseCompactOutput(text, &catalog, o.tool_map)
                                     : ParseModelOutput(text, &catalog);
    EXPECT_TRUE(out.ok()) << out.status().ToString() << "\n" << text;
    if (!out.ok()) return -1;
    if (o.mode == ConstrainMode::kCall) {
      EXPECT_GE(out->calls.size(), 1u) << text;
      EXPECT_TRUE(out->content.empty()) << text;
    }
    EXPECT_LE(out->calls.size(), static_cast<size_t>(o.max_calls)) << text;
    for (const Call& call : out->calls) {
      const Tool* tool = catalog.Find(call.name);
      EXPECT_NE(tool, nullptr) << text;
      if (tool == nullptr) continue;
      if (o.dialect == Dialect::kOfficial) {
        EXPECT_NE(text.find("call:" + call.name + "{"), std::string::npos) << text;
      }
      FG_EXPECT_OK(ValidateCall(*tool, call.arguments)) << text;
    }
    return static_cast<int>(out->calls.size());
  }
};

// (a) random valid calls, rendered and tokenized, are accepted token by token;
// (b) random walks over Allowed() parse and validate with the exact tool names.
TEST_P(GrammarLanguageTest, ValidCallsAcceptedAndRandomWalksParse) {
  const Case& c = GetParam();
  const ToolCatalog catalog = c.many ? Catalog(CatalogB()) : a_;
  const GrammarOptions o = Options(c, catalog);
  auto g = MakeGrammar(catalog, *tok_, o);
  ASSERT_NE(g, nullptr);
  std::mt19937 rng(1234);
  // (a)
  for (int i = 0; i < 60; ++i) {
    std::string text;
    const int calls = 1 + static_cast<int>(rng() % c.max_calls);
    if (c.mode == ConstrainMode::kAuto && rng() % 2) text += "hello world ";
    for (int k = 0; k < calls; ++k) {
      int tool;
      if (c.dialect == Dialect::kCompact) {
        const int n = static_cast<int>(rng() % o.tool_map.size());
        tool = static_cast<int>(catalog.Find(o.tool_map[n]) - catalog.tools.data());
        text += RenderCompact(n, RandomArguments(catalog.tools[tool].parameters, rng));
      } else {
        tool = static_cast<int>(rng() % catalog.tools.size());
        text += RenderCall(catalog.tools[tool].name,
                           RandomArguments(catalog.tools[tool].parameters, rng));
      }
    }
    const std::vector<int32_t> ids = tok_->Encode(text, false, true);
    CallGrammar::State s = g->Start();
    ASSERT_EQ(RejectedAt(*g, &s, ids), -1) << text;
    EXPECT_TRUE(g->CanStop(s)) << text;
    EXPECT_EQ(g->Done(s), calls == c.max_calls) << text;
  }
  // (b)
  int with_calls = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(RandomWalk(*g, *tok_, closing_, rng, &ids)) << tok_->Decode(ids, true);
    with_calls += ExpectValidOutput(tok_->Decode(ids, /*special=*/true), catalog, o) > 0;
  }
  EXPECT_GT(with_calls, 20);
}

// Walks under a budget (-n) from the fewest tokens a call needs up to 30 more, over the case's
// catalog and every schema shape: each ends complete within the budget, parses and validates.
// The same walks without the budget, cut at the same length, mostly did not.
TEST_P(GrammarLanguageTest, BudgetedWalksAlwaysEndValid) {
  const Case& c = GetParam();
  const ToolCatalog base = c.many ? Catalog(CatalogB()) : a_;
  const ToolCatalog shapes = Catalog(kEveryShapeCatalog);
  int walks = 0, complete = 0, cut_complete = 0;
  for (const ToolCatalog* catalog : {&base, &shapes}) {
    GrammarOptions o = Options(c, *catalog);
    auto g = MakeGrammar(*catalog, *tok_, o);
    ASSERT_NE(g, nullptr);
    // The fewest tokens of one call (kAuto could stop at once).
    GrammarOptions one = o;
    one.mode = ConstrainMode::kCall;
    auto g1 = MakeGrammar(*catalog, *tok_, one);
    const int need = g1->MinTokensToFinish(g1->Start());
    ASSERT_GT(need, 3);
    ASSERT_LT(need, 200);
    std::mt19937 rng(99);
    for (int extra : {0, 1, 2, 3, 5, 8, 13, 21, 30}) {
      const int budget = need + extra;
      for (int i = 0; i < 10; ++i) {
        std::vector<int32_t> ids;
        ++walks;
        const bool ok = RandomWalk(*g, *tok_, closing_, rng, &ids, 0, budget);
        const std::string text = tok_->Decode(ids, /*special=*/true);
        EXPECT_TRUE(ok) << "budget " << budget << ": " << text;
        EXPECT_LE(ids.size(), static_cast<size_t>(budget));
        if (ok) complete += ExpectValidOutput(text, *catalog, o) >= 0;
        // Without the budget: the walk cut after as many tokens.
        std::vector<int32_t> cut;
        (void)RandomWalk(*g, *tok_, closing_, rng, &cut, budget);
        CallGrammar::State s = g->Start();
        ASSERT_EQ(RejectedAt(*g, &s, cut), -1);
        cut_complete += g->CanStop(s);
      }
    }
  }
  EXPECT_EQ(complete, walks);
  std::printf("%s: %d/%d budgeted walks end valid; cut without the budget: %d/%d\n", c.name,
              complete, walks, cut_complete, walks);
}

// The cheapest call of catalog A is get_weather or set_alarm without arguments:
// <start_function_call> "call:" "set_alarm" "{" "}" <end_function_call>. With the budget for
// exactly that, only those two tools stay open; and a budget that is not binding leaves the
// allowed set as it is.
TEST_F(CallGrammarTest, MinTokensToFinishCountsTheCheapestCall) {
  auto g = MakeGrammar(a_, *tok_, GrammarOptions{});
  ASSERT_NE(g, nullptr);
  CallGrammar::State s = g->Start();
  EXPECT_EQ(g->MinTokensToFinish(s), 6);
  EXPECT_EQ(g->Allowed(s, 6).data(), g->Allowed(s).data());
  EXPECT_TRUE(g->Allowed(s, 100000).data() == g->Allowed(s).data());
  FG_ASSERT_OK(Walk(*g, &s, Ids(*tok_, {"<start_function_call>", "call:"})));
  EXPECT_EQ(g->MinTokensToFinish(s), 4);
  EXPECT_THAT(g->Allowed(s, 4), UnorderedElementsAre(Id(*tok_, "get_weather"),
                                                     Id(*tok_, "set_alarm")));
  EXPECT_GT(g->Allowed(s, 40).size(), 2u);
  // No completion fits: the budget changes nothing (the output is cut, as without it).
  EXPECT_EQ(g->Allowed(s, 3).data(), g->Allowed(s).data());
  // Inside a string with one token left for the string and two for the call's end: <escape>.
  FG_ASSERT_OK(Walk(*g, &s, Ids(*tok_, {"get_weather", "{city", ":", "<escape>", "Tokyo"})));
  EXPECT_EQ(g->MinTokensToFinish(s), 3);
  EXPECT_THAT(g->Allowed(s, 3), ElementsAre(Id(*tok_, "<escape>")));
  EXPECT_GT(g->Allowed(s, 4).size(), 100u);
  FG_ASSERT_OK(Walk(*g, &s, Ids(*tok_, {"<escape>", "}", "<end_function_call>"})));
  EXPECT_EQ(g->MinTokensToFinish(s), 0);
  // The compact dialect: <tool_N> "(" ")" <end>.
  GrammarOptions c;
  c.dialect = Dialect::kCompact;
  c.tool_map = {"set_light", "get_weather"};
  auto gc = MakeGrammar(a_, *tok_, c);
  ASSERT_NE(gc, nullptr);
  CallGrammar::State t = gc->Start();
  EXPECT_EQ(gc->MinTokensToFinish(t), 4);
  EXPECT_THAT(gc->Allowed(t, 4), ElementsAre(Id(*tok_, "<tool_1>")));
  EXPECT_THAT(gc->Allowed(t, 40), ElementsAre(Id(*tok_, "<tool_0>"), Id(*tok_, "<tool_1>")));
}

// Along random walks over every shape: the count is 0 exactly where the output may stop, and
// from every other state some allowed token lowers it by one (so a budget that fits it can
// always be met).
TEST_F(CallGrammarTest, MinTokensToFinishIsReachedOneTokenAtATime) {
  const ToolCatalog shapes = Catalog(kEveryShapeCatalog);
  for (const ToolCatalog* catalog : {static_cast<const ToolCatalog*>(&a_), &shapes}) {
    for (Dialect d : {Dialect::kOfficial, Dialect::kCompact}) {
      GrammarOptions o;
      o.dialect = d;
      o.mode = ConstrainMode::kAuto;
      o.max_calls = 2;
      if (d == Dialect::kCompact) {  // the vocabulary has <tool_0..2>
        for (size_t k = 0; k < std::min<size_t>(3, catalog->tools.size()); ++k) {
          o.tool_map.push_back(catalog->tools[k].name);
        }
      }
      auto g = MakeGrammar(*catalog, *tok_, o);
      ASSERT_NE(g, nullptr);
      std::mt19937 rng(5);
      for (int walk = 0; walk < 20; ++walk) {
        CallGrammar::State s = g->Start();
        for (int step = 0; step < 200 && !g->Done(s); ++step) {
          const int need = g->MinTokensToFinish(s);
          ASSERT_LT(need, CallGrammar::kNoFinish);
          ASSERT_EQ(need == 0, g->CanStop(s)) << step;
          std::span<const int32_t> allowed = g->Allowed(s);
          if (need > 0) {
            bool closer = false;
            for (int32_t t : allowed) {
              CallGrammar::State n = s;
              FG_ASSERT_OK(g->Advance(&n, t));
              closer |= g->MinTokensToFinish(n) <= need - 1;
            }
            ASSERT_TRUE(closer) << "step " << step << " needs " << need;
          }
          FG_ASSERT_OK(g->Advance(&s, PickToken(*tok_, closing_, allowed, rng)));
        }
      }
    }
  }
}

// Threads sharing a grammar under budgets get what a lone walk on a fresh grammar gets (the
// per-key deltas and cut sets are memoized under the grammar's lock).
TEST_F(CallGrammarTest, BudgetedAllowedIsThreadSafe) {
  const ToolCatalog shapes = Catalog(kEveryShapeCatalog);
  const auto walks = [&](const CallGrammar& g) {
    std::mt19937 rng(21);
    std::vector<std::vector<int32_t>> out;
    const int need = g.MinTokensToFinish(g.Start());
    for (int budget = need; budget < need + 24; ++budget) {
      out.emplace_back();
      EXPECT_TRUE(RandomWalk(g, *tok_, closing_, rng, &out.back(), 0, budget));
    }
    return out;
  };
  const auto expected = walks(*MakeGrammar(shapes, *tok_, GrammarOptions{}));
  auto shared = MakeGrammar(shapes, *tok_, GrammarOptions{});
  std::vector<std::vector<std::vector<int32_t>>> seen(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { seen[i] = walks(*shared); });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(seen[i], expected) << "thread " << i;
}

TEST_F(CallGrammarTest, ArraysTakeAtMostMaxItems) {
  const ToolCatalog c = Catalog(R"([{"name":"f","parameters":{"type":"object","properties":{
      "two":{"type":"array","items":{"type":"integer"},"maxItems":2},
      "none":{"type":"array","items":{"type":"integer"},"maxItems":0},
      "free":{"type":"array"},"ints":{"type":"array","items":{"type":"integer"}}}}}])");
  GrammarOptions o;
  o.max_array_items = 3;
  auto g = MakeGrammar(c, *tok_, o);
  ASSERT_NE(g, nullptr);
  const std::vector<std::string> head = {"<start_function_call>", "call:", "f", "{"};
  auto reject = [&](const CallGrammar& gr, std::vector<std::string> rest) {
    std::vector<std::string> all = head;
    all.insert(all.end(), rest.begin(), rest.end());
    CallGrammar::State s = gr.Start();
    return RejectedAt(gr, &s, Ids(*tok_, all));
  };
  EXPECT_EQ(reject(*g, {"t", "w", "o", ":", "[", "1", ",", "2", "]", "}"}), -1);
  EXPECT_EQ(reject(*g, {"t", "w", "o", ":", "[", "1", ",", "2", ","}), 12);
  EXPECT_EQ(reject(*g, {"n", "o", "n", "e", ":", "[", "1"}), 10);
  EXPECT_EQ(reject(*g, {"n", "o", "n", "e", ":", "[", "]", "}"}), -1);
  // No maxItems: the option's limit (3 here), for typed and untyped arrays alike.
  EXPECT_EQ(reject(*g, {"i", "n", "t", "s", ":", "[", "1", ",", "2", ",", "3", ","}), 15);
  EXPECT_EQ(reject(*g, {"f", "r", "e", "e", ":", "[", "1", ",", "2", ",", "3", ","}), 15);
  EXPECT_EQ(reject(*g, {"f", "r", "e", "e", ":", "[", "[", "1", ",", "2", ",", "3", "]", ",",
                        "4", ",", "5", "]", "}"}),
            -1);
  // The default: kDefaultMaxArrayItems.
  auto d = MakeGrammar(c, *tok_, GrammarOptions{});
  std::vector<std::string> items = {"i", "n", "t", "s", ":", "["};
  for (int i = 0; i < kDefaultMaxArrayItems; ++i) {
    items.push_back("1");
    items.push_back(",");
  }
  EXPECT_EQ(reject(*d, items), static_cast<int>(head.size() + items.size()) - 1);
  o.max_array_items = -1;
  EXPECT_THAT(CallGrammar::Create(c, *tok_, o),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_array_items")));
}

INSTANTIATE_TEST_SUITE_P(
    Modes, GrammarLanguageTest,
    ::testing::Values(Case{"OfficialCall1", Dialect::kOfficial, ConstrainMode::kCall, 1, false},
                      Case{"OfficialCall3", Dialect::kOfficial, ConstrainMode::kCall, 3, false},
                      Case{"OfficialAuto2", Dialect::kOfficial, ConstrainMode::kAuto, 2, false},
                      Case{"OfficialManyTools", Dialect::kOfficial, ConstrainMode::kCall, 2, true},
                      Case{"CompactCall1", Dialect::kCompact, ConstrainMode::kCall, 1, false},
                      Case{"CompactAuto2", Dialect::kCompact, ConstrainMode::kAuto, 2, false},
                      Case{"CompactManyTools", Dialect::kCompact, ConstrainMode::kCall, 2, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// The seed fine-tune's golden "turn the light on": <tool_0> ( state =" on ") <end> <end_of_turn>
// (ids 262146 236769 3255 718 498 1373 262152 106 in its 262153-token vocabulary).
TEST_F(CallGrammarTest, CompactGoldenWalk) {
  const ToolCatalog c = Catalog(R"([{"name":"light","parameters":{"type":"object","properties":{
      "state":{"type":"string","enum":["on","off"]}},"required":["state"]}}])");
  GrammarOptions o;
  o.dialect = Dialect::kCompact;
  o.max_calls = 2;
  o.tool_map = {"light"};
  auto g = MakeGrammar(c, *tok_, o);
  ASSERT_NE(g, nullptr);
  const std::vector<int32_t> ids =
      Ids(*tok_, {"<tool_0>", "(", "state", "=\"", "on", "\")", "<end>", "<end_of_turn>"});
  CallGrammar::State s = g->Start();
  EXPECT_THAT(g->Allowed(s), ElementsAre(Id(*tok_, "<tool_0>")));
  ASSERT_EQ(RejectedAt(*g, &s, ids), -1);
  EXPECT_TRUE(g->Done(s));
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out,
                          ParseCompactOutput(tok_->Decode(ids, true), &c, o.tool_map));
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].ToJson(), json::parse(R"({"name":"light","arguments":{"state":"on"}})"));
  // One call wanted: done at <end>.
  o.max_calls = 1;
  auto g1 = MakeGrammar(c, *tok_, o);
  CallGrammar::State s1 = g1->Start();
  ASSERT_EQ(RejectedAt(*g1, &s1, std::vector<int32_t>(ids.begin(), ids.end() - 1)), -1);
  EXPECT_TRUE(g1->Done(s1));
  // Enum violations and a second space are refused.
  CallGrammar::State s2 = g1->Start();
  EXPECT_EQ(RejectedAt(*g1, &s2, Ids(*tok_, {"<tool_0>", "(", "state", "=\"", "o", "x"})), 5);
  auto gm = MakeGrammar(a_, *tok_, [] {
    GrammarOptions m;
    m.dialect = Dialect::kCompact;
    m.tool_map = {"get_weather"};
    return m;
  }());
  CallGrammar::State s3 = gm->Start();
  EXPECT_EQ(RejectedAt(*gm, &s3, Ids(*tok_, {"<tool_0>", "(", "days", "=", "1", ",", " ", " "})),
            7);
  CallGrammar::State s4 = gm->Start();
  EXPECT_EQ(RejectedAt(*gm, &s4, Ids(*tok_, {"<tool_0>", "(", "days", "=", "1", ",", "days"})),
            6);
}

}  // namespace
}  // namespace fg::text
