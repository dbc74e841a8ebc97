// The logit processors on their own: the chain's order around the sampler, and the base-model
// string and digit guards on a small vocabulary and a real grammar state.
#include "src/call/logit_processors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/text/call_grammar.h"
#include "src/text/grammar_test_util.h"
#include "src/text/tool_catalog.h"

namespace fg::call {
namespace {

using ::testing::ElementsAre;
using namespace text::grammar_test;  // NOLINT

constexpr char kCatalog[] = R"([{"name":"f","parameters":{"type":"object","properties":{
  "s":{"type":"string"},"n":{"type":"integer"}},"required":["s","n"]}}])";

class Recorder : public LogitProcessor {
 public:
  Recorder(std::string name, std::vector<std::string>* log) : name_(std::move(name)), log_(log) {}
  void Restrict(const SampleStep&, std::span<float>) override { log_->push_back(name_ + "R"); }
  int32_t Replace(const SampleStep&, int32_t tok, CallStats*) override {
    log_->push_back(name_ + "P" + std::to_string(tok));
    return tok + 1;
  }
  void Forced(int32_t) override { log_->push_back(name_ + "F"); }
  void Written(int32_t) override { log_->push_back(name_ + "W"); }

 private:
  std::string name_;
  std::vector<std::string>* log_;
};

class LogitProcessorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = SmallTokenizer({"call:f{", "s:", "n:", "abc"}, 0);
    auto cat = text::ParseToolCatalog(kCatalog);
    FG_ASSERT_OK(cat.status());
    auto g = text::CallGrammar::Create(*cat, *tok_, text::GrammarOptions{});
    FG_ASSERT_OK(g.status());
    grammar_ = std::move(*g);
    // As CallModel builds them.
    structural_.assign(tok_->size(), false);
    digits_.assign(tok_->size(), false);
    for (int32_t id = 0; id < tok_->size(); ++id) {
      const std::string piece = tok_->TokenToPiece(id, true);
      structural_[id] =
          !piece.empty() && std::string_view(",{}\n").find(piece[0]) != std::string_view::npos;
      digits_[id] = !piece.empty() && piece.find_first_not_of("0123456789") == std::string::npos;
    }
    escape_ = Id(*tok_, "<escape>");
  }

  text::CallGrammar::State After(const std::vector<std::string>& texts) {
    text::CallGrammar::State s = grammar_->Start();
    EXPECT_EQ(RejectedAt(*grammar_, &s, Ids(*tok_, texts)), -1);
    return s;
  }
  // Greedy over the allowed set with `hi` (token text -> logit) above every other token.
  int32_t Pick(LogitProcessorChain& chain, const text::CallGrammar::State& s,
               const std::vector<std::pair<std::string, float>>& hi, CallStats* stats) {
    std::span<const int32_t> allowed = grammar_->Allowed(s);
    std::vector<float> cand(allowed.size(), 0.0f);
    for (const auto& [text, logit] : hi) {
      const int32_t id = Id(*tok_, text);
      for (size_t j = 0; j < allowed.size(); ++j) {
        if (allowed[j] == id) cand[j] = logit;
      }
    }
    runtime::Sampler greedy(runtime::SamplingParams{});
    return chain.Sample({*grammar_, s, allowed}, cand, greedy, stats);
  }

  std::unique_ptr<text::Tokenizer> tok_;
  std::unique_ptr<text::CallGrammar> grammar_;
  std::vector<bool> structural_, digits_;
  int32_t escape_ = -1;
};

TEST_F(LogitProcessorsTest, ChainRunsInOrderAroundTheSampler) {
  std::vector<std::string> log;
  LogitProcessorChain chain;
  EXPECT_TRUE(chain.empty());
  chain.Add(std::make_unique<Recorder>("a", &log));
  chain.Add(std::make_unique<Recorder>("b", &log));
  const text::CallGrammar::State s = After({"<start_function_call>", "call:f{"});
  CallStats stats;
  const int32_t s_key = Id(*tok_, "s:");
  EXPECT_EQ(Pick(chain, s, {{"s:", 9}}, &stats), s_key + 2);  // each Replace adds one
  chain.Forced(7);
  chain.Written(7);
  EXPECT_THAT(log, ElementsAre("aR", "bR", "aP" + std::to_string(s_key),
                               "bP" + std::to_string(s_key + 1), "aF", "bF", "aW", "bW"));
}

TEST_F(LogitProcessorsTest, StringGuardKeepsTheFirstTokenAndClosesTheString) {
  LogitProcessorChain none, guard;
  guard.Add(MakeStringGuard(3, &structural_, escape_));
  CallStats stats;
  text::CallGrammar::State s = After({"<start_function_call>", "call:f{", "s:", "<escape>"});
  ASSERT_TRUE(grammar_->InFreeString(s));
  const std::vector<std::pair<std::string, float>> hi = {{",", 5}, {"<escape>", 4}, {"abc", 3}};
  // Unguarded, the model would close the string at once (or write structure into it).
  EXPECT_EQ(Pick(none, s, hi, &stats), Id(*tok_, ","));
  // The first token may be neither.
  const int32_t first = Pick(guard, s, hi, &stats);
  EXPECT_EQ(first, Id(*tok_, "abc"));
  guard.Written(first);
  FG_ASSERT_OK(grammar_->Advance(&s, first));
  // After it, structure closes the string instead.
  EXPECT_EQ(Pick(guard, s, hi, &stats), escape_);
  EXPECT_EQ(stats.guarded_strings, 1);

  // A fresh string: past the budget (3 tokens), the next token closes it.
  guard = LogitProcessorChain();
  guard.Add(MakeStringGuard(3, &structural_, escape_));
  s = After({"<start_function_call>", "call:f{", "s:", "<escape>"});
  stats = CallStats();
  for (int i = 0; i < 3; ++i) {
    const int32_t t = Pick(guard, s, {{"abc", 9}}, &stats);
    ASSERT_EQ(t, Id(*tok_, "abc")) << i;
    FG_ASSERT_OK(grammar_->Advance(&s, t));
  }
  EXPECT_EQ(Pick(guard, s, {{"abc", 9}}, &stats), escape_);
  EXPECT_EQ(stats.guarded_strings, 1);
}

// Each side is log-softmax normalized over the candidates, then weighted: the result is the log
// of the normalized weighted product p_own^(1-w) p_other^w (up to a constant), whatever either
// side's offset.
TEST(BlendLogProbs, IsTheWeightedProductOfTheTwoDistributions) {
  const std::vector<float> own0 = {2.0f, 0.5f, -1.0f, 0.0f};
  const std::vector<float> other = {1000.0f, 1003.0f, 990.0f, 1001.0f};  // large: log-sum-exp
  auto log_softmax = [](std::vector<double> v) {
    double hi = *std::max_element(v.begin(), v.end()), z = 0;
    for (double x : v) z += std::exp(x - hi);
    for (double& x : v) x -= hi + std::log(z);
    return v;
  };
  const std::vector<double> lo = log_softmax({own0.begin(), own0.end()});
  const std::vector<double> lt = log_softmax({other.begin(), other.end()});
  for (double w : {0.0, 0.25, 0.6, 0.999}) {
    std::vector<float> own = own0;
    BlendLogProbs(own, LogSumExp(own), other, w);
    for (size_t j = 0; j < own.size(); ++j) {
      EXPECT_NEAR(own[j], (1 - w) * lo[j] + w * lt[j], 1e-5) << w << " " << j;
    }
  }
  // The choice moves from the own favourite (0) to the other's (1) as the weight grows.
  std::vector<float> a = own0, b = own0;
  BlendLogProbs(a, LogSumExp(a), other, 0.1);
  BlendLogProbs(b, LogSumExp(b), other, 0.9);
  EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(), 0);
  EXPECT_EQ(std::max_element(b.begin(), b.end()) - b.begin(), 1);
  // Shifting either side changes nothing.
  std::vector<float> shifted = own0, base = own0;
  for (float& x : shifted) x += 50.0f;
  BlendLogProbs(shifted, LogSumExp(shifted), other, 0.4);
  BlendLogProbs(base, LogSumExp(base), other, 0.4);
  for (size_t j = 0; j < base.size(); ++j) EXPECT_NEAR(shifted[j], base[j], 1e-4);
  // An empty vocabulary reads nothing (ASan would catch a read past the end).
  std::vector<float> empty;
  BlendLogProbs(empty, LogSumExp(empty), {}, 0.4);
}

// The softmax's normalizer, in double: no overflow where the logits run to a thousand.
TEST(LogSumExp, IsTheLogOfTheSumOfExponentials) {
  const std::vector<float> v = {2.0f, 0.5f, -1.0f, 0.0f};
  EXPECT_NEAR(LogSumExp(v), std::log(std::exp(2.0) + std::exp(0.5) + std::exp(-1.0) + 1), 1e-9);
  const std::vector<float> large = {1000.0f, 1003.0f, 990.0f, 1001.0f};
  EXPECT_NEAR(LogSumExp(large),
              1003 + std::log(std::exp(-3.0) + 1 + std::exp(-13.0) + std::exp(-2.0)), 1e-9);
  EXPECT_DOUBLE_EQ(LogSumExp(std::vector<float>{5.0f}), 5.0);
  EXPECT_EQ(LogSumExp(std::vector<float>{}), -std::numeric_limits<double>::infinity());
}

// FunctionCallerOptions::blend_sure's measure: the softmax probability of the first choice.
TEST(TopProbability, IsTheSoftmaxOfTheLargestLogit) {
  auto top = [](std::span<const float> v) { return TopProbability(v, LogSumExp(v)); };
  const std::vector<float> own0 = {2.0f, 0.5f, -1.0f, 0.0f};
  const double z = std::exp(2.0) + std::exp(0.5) + std::exp(-1.0) + std::exp(0.0);
  EXPECT_NEAR(top(own0), std::exp(2.0) / z, 1e-9);                       // 0.710
  const std::vector<float> large = {1000.0f, 1003.0f, 990.0f, 1001.0f};  // no overflow
  EXPECT_NEAR(top(large), 1 / (std::exp(-3.0) + 1 + std::exp(-13.0) + std::exp(-2.0)), 1e-9);
  EXPECT_DOUBLE_EQ(top(std::vector<float>{5.0f}), 1.0);
  EXPECT_DOUBLE_EQ(top(std::vector<float>{}), 0.0);
}

TEST_F(LogitProcessorsTest, DigitGuardEndsLongNumbers) {
  LogitProcessorChain guard;
  guard.Add(MakeDigitGuard(&digits_));
  CallStats stats;
  text::CallGrammar::State s = After({"<start_function_call>", "call:f{", "n:"});
  const int32_t one = Id(*tok_, "1");
  for (int i = 0; i < 12; ++i) {
    const int32_t t = Pick(guard, s, {{"1", 9}, {",", 1}}, &stats);
    ASSERT_EQ(t, one) << i;
    guard.Written(t);
    FG_ASSERT_OK(grammar_->Advance(&s, t));
  }
  // Twelve digits in a row: the number's end is preferred.
  EXPECT_EQ(Pick(guard, s, {{"1", 9}, {",", 1}}, &stats), Id(*tok_, ","));
  // Any other token written resets the run.
  guard.Written(Id(*tok_, ","));
  s = After({"<start_function_call>", "call:f{", "n:"});
  EXPECT_EQ(Pick(guard, s, {{"1", 9}, {",", 1}}, &stats), one);
  EXPECT_EQ(stats.guarded_strings, 0);
}

// The copy prior adds its bias to exactly the tokens that continue a span of the request: at a
// string's start, a word's start; after that, what follows the string so far; nothing outside
// a string.
TEST(CopyPrior, BiasesTheTokensThatContinueTheRequestsText) {
  auto tok = SmallTokenizer(
      {"call:f{", "s:", "n:", "abc", "ab", "c", "xyz", "the", SpaceToPiece(" xy")}, 0);
  auto cat = text::ParseToolCatalog(kCatalog);
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  auto prior = MakeCopyPrior("say abc xyz", 5.0, tok.get());
  // The bias each named token gets in state `s`.
  auto biases = [&](const text::CallGrammar::State& s, const std::vector<std::string>& names) {
    std::span<const int32_t> allowed = (*g)->Allowed(s);
    std::vector<float> cand(allowed.size(), 1.0f);
    prior->Restrict({**g, s, allowed}, cand);
    std::vector<float> out;
    for (const std::string& n : names) {
      const int32_t id = Id(*tok, n);
      const auto it = std::lower_bound(allowed.begin(), allowed.end(), id);
      out.push_back(it != allowed.end() && *it == id ? cand[it - allowed.begin()] - 1.0f : -1.0f);
    }
    return out;
  };
  text::CallGrammar::State s = (*g)->Start();
  for (const char* t : {"<start_function_call>", "call:f{", "s:"}) {
    const int32_t id = Id(*tok, t);
    EXPECT_THAT(biases(s, {t}), ElementsAre(0.0f)) << t;  // not in a string: no bias
    prior->Written(id);
    FG_ASSERT_OK((*g)->Advance(&s, id));
  }
  prior->Written(Id(*tok, "<escape>"));
  FG_ASSERT_OK((*g)->Advance(&s, Id(*tok, "<escape>")));
  ASSERT_TRUE((*g)->InFreeString(s));
  const std::vector<std::string> names = {"abc", "ab", "c", "xyz", " xy", "the"};
  EXPECT_THAT(biases(s, names), ElementsAre(5, 5, 0, 5, 0, 0));
  prior->Written(Id(*tok, "ab"));
  FG_ASSERT_OK((*g)->Advance(&s, Id(*tok, "ab")));
  // "ab" stops inside the request's "abc": only "c" may follow (the word-end guard, below).
  EXPECT_THAT(biases(s, names),
              ElementsAre(-INFINITY, -INFINITY, 5, -INFINITY, -INFINITY, -INFINITY));
  prior->Written(Id(*tok, "c"));
  FG_ASSERT_OK((*g)->Advance(&s, Id(*tok, "c")));
  EXPECT_THAT(biases(s, names), ElementsAre(0, 0, 0, 0, 5, 0));
}

// The word guard: a word of a free string that begins as a request's word does (3 bytes, case-
// sensitive) must go on as that word or end; among the likeliest candidates, the others are
// ruled out, unless every candidate is.
TEST(CopyPrior, WordGuardRulesOutWordsThatGarbleTheRequests) {
  auto tok = SmallTokenizer({"call:f{", "s:", "n:", "Milano", "Milo", "Mil", "ano", "o", "Mi",
                             "DIS", "xyz", SpaceToPiece(" Milo"), SpaceToPiece(" Milky")},
                            0);
  auto cat = text::ParseToolCatalog(kCatalog);
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  auto prior = MakeCopyPrior("book Milo at Disney", 5.0, tok.get());
  text::CallGrammar::State s = (*g)->Start();
  auto write = [&](const char* t) {
    prior->Written(Id(*tok, t));
    FG_ASSERT_OK((*g)->Advance(&s, Id(*tok, t)));
  };
  for (const char* t : {"<start_function_call>", "call:f{", "s:", "<escape>"}) write(t);
  ASSERT_TRUE((*g)->InFreeString(s));
  // The named tokens ruled out when `hi` (text -> logit) are above every other token's 0.
  auto ruled_out = [&](const std::vector<std::pair<std::string, float>>& hi) {
    std::span<const int32_t> allowed = (*g)->Allowed(s);
    std::vector<float> cand(allowed.size(), 0.0f);
    for (const auto& [text, logit] : hi) {
      const auto it = std::lower_bound(allowed.begin(), allowed.end(), Id(*tok, text));
      cand[static_cast<size_t>(it - allowed.begin())] = logit;
    }
    prior->Restrict({**g, s, allowed}, cand);
    std::vector<std::string> out;
    for (const auto& [text, logit] : hi) {
      const auto it = std::lower_bound(allowed.begin(), allowed.end(), Id(*tok, text));
      if (std::isinf(cand[static_cast<size_t>(it - allowed.begin())])) out.push_back(text);
    }
    return out;
  };
  // "Milano" begins as "Milo" and is no start of it; "DIS" is not "Dis" (case); "Mi" is too
  // short to tell; "xyz" is no request word's.
  EXPECT_THAT(ruled_out({{"Milano", 30}, {"Milo", 20}, {"DIS", 19}, {"Mi", 18}, {"xyz", 17}}),
              ElementsAre("Milano"));
  // Below the pick too, among the likeliest looked at (a sampler may draw it).
  EXPECT_THAT(ruled_out({{"Milo", 30}, {"Milano", 20}}), ElementsAre("Milano"));
  write("Mil");
  // " Milo" is not garbled, but leaves "Mil" inside the request's "Milo" (the word-end guard).
  EXPECT_THAT(ruled_out({{"ano", 30}, {" Milky", 25}, {"o", 20}, {" Milo", 10}}),
              ElementsAre("ano", " Milky", " Milo"));
  // Every candidate garbles: none is ruled out.
  std::span<const int32_t> allowed = (*g)->Allowed(s);
  std::vector<float> all(allowed.size(), -INFINITY);
  const size_t ano = static_cast<size_t>(
      std::lower_bound(allowed.begin(), allowed.end(), Id(*tok, "ano")) - allowed.begin());
  all[ano] = 1.0f;
  prior->Restrict({**g, s, allowed}, all);
  EXPECT_EQ(all[ano], 1.0f);
}

// The word-end guard: a copy of the request stopped inside one of its words ("maria" of
// "maria.g@example.net") may only go on copying, unless no candidate does; at a word's end but
// for closing punctuation, a plural's or a possessive's ending, the string may close.
TEST(CopyPrior, WordEndGuardMakesACopyGoOnToItsWordsEnd) {
  auto tok = SmallTokenizer({"call:f{", "s:", "n:", "maria", ".g", "@example", ".net", "Milo",
                             "sprinkler", SpaceToPiece(" to")},
                            0);
  auto cat = text::ParseToolCatalog(kCatalog);
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  auto prior = MakeCopyPrior("mail Milo's sprinklers to maria.g@example.net.", 5.0, tok.get());
  text::CallGrammar::State s = (*g)->Start();
  auto write = [&](const char* t) {  // as the decode loop samples it: Restrict, then Written
    std::span<const int32_t> allowed = (*g)->Allowed(s);
    std::vector<float> cand(allowed.size(), 0.0f);
    prior->Restrict({**g, s, allowed}, cand);
    prior->Written(Id(*tok, t));
    FG_ASSERT_OK((*g)->Advance(&s, Id(*tok, t)));
  };
  auto open = [&]() {
    s = (*g)->Start();
    for (const char* t : {"<start_function_call>", "call:f{", "s:", "<escape>"}) write(t);
    ASSERT_TRUE((*g)->InFreeString(s));
  };
  // Of `names`, those ruled out when each has logit 1 and every other token `others`.
  auto ruled_out = [&](const std::vector<std::string>& names, float others) {
    std::span<const int32_t> allowed = (*g)->Allowed(s);
    std::vector<float> cand(allowed.size(), others);
    auto at = [&](const std::string& t) {
      const auto it = std::lower_bound(allowed.begin(), allowed.end(), Id(*tok, t));
      EXPECT_TRUE(it != allowed.end() && *it == Id(*tok, t)) << t;
      return static_cast<size_t>(it - allowed.begin());
    };
    for (const std::string& n : names) cand[at(n)] = 1.0f;
    prior->Restrict({**g, s, allowed}, cand);
    std::vector<std::string> out;
    for (const std::string& n : names) {
      if (std::isinf(cand[at(n)])) out.push_back(n);
    }
    return out;
  };
  const std::vector<std::string> names = {"<escape>", " to"};
  open();
  write("maria");
  EXPECT_THAT(ruled_out({"<escape>", ".g", " to"}, 0.0f), ElementsAre("<escape>", " to"));
  // No candidate goes on copying (".g" ruled out by the grammar's state or a -inf): none ruled
  // out by this guard.
  EXPECT_THAT(ruled_out({"<escape>", " to"}, -INFINITY), ElementsAre());
  write(".g");
  write("@example");
  EXPECT_THAT(ruled_out({"<escape>", ".net", " to"}, 0.0f), ElementsAre("<escape>", " to"));
  write(".net");  // then only "." of the request's word is left: the copy may close
  EXPECT_THAT(ruled_out(names, 0.0f), ElementsAre());
  open();
  write("Milo");  // "'s" left
  EXPECT_THAT(ruled_out(names, 0.0f), ElementsAre());
  open();
  write("sprinkler");  // "s" left
  EXPECT_THAT(ruled_out(names, 0.0f), ElementsAre());
}

TEST(RequestNumbers, DigitsAndNumberWords) {
  EXPECT_THAT(RequestNumbers("send 50 bucks"), ElementsAre("50"));
  EXPECT_THAT(RequestNumbers("move $1,200 to savings, then $50.75"), ElementsAre("1200", "50.75"));
  EXPECT_THAT(RequestNumbers("2.5 km in 60 mins at 4:30"), ElementsAre("2.5", "60", "4", "30"));
  EXPECT_THAT(RequestNumbers("room 007 or b12 or 0.5"), ElementsAre("0.5"));
  EXPECT_THAT(RequestNumbers("transfer one hundred and twenty dollars"), ElementsAre("120"));
  EXPECT_THAT(RequestNumbers("Two hundred and fifty bucks"), ElementsAre("250"));
  EXPECT_THAT(RequestNumbers("the last fifty one days"), ElementsAre("51"));
  EXPECT_THAT(RequestNumbers("twenty-one, two thousand five hundred"), ElementsAre("21", "2500"));
  EXPECT_THAT(RequestNumbers("a hundred pages, a thousand times"), ElementsAre("100", "1000"));
  EXPECT_THAT(RequestNumbers("one two three"), ElementsAre("1", "2", "3"));
  EXPECT_THAT(RequestNumbers("five and six, ten twelve"), ElementsAre("5", "6", "10", "12"));
  EXPECT_THAT(RequestNumbers("someone and a dog, a quarter hour"), ElementsAre());
  EXPECT_THAT(RequestNumbers("page one, 3 copies, three copies"), ElementsAre("3", "1"));
}

TEST(RequestNumbers, WithTheWordAfterEach) {
  EXPECT_THAT(RequestNumbersWithWords("water 5 Minutes, then forty five mins at 4:30"),
              ElementsAre(SaidNumber{"5", "minutes"}, SaidNumber{"4", ""}, SaidNumber{"30", ""},
                          SaidNumber{"45", "mins"}));
  EXPECT_THAT(RequestNumbersWithWords("run 5 km, 5 miles and 5"),
              ElementsAre(SaidNumber{"5", "km"}, SaidNumber{"5", "miles"}, SaidNumber{"5", ""}));
  EXPECT_THAT(RequestNumbers("run 5 km, 5 miles and 5"), ElementsAre("5"));
}

// Measures said in one unit, as the numbers they are in the units up to two steps away in their
// family (whole numbers only), and in the said unit as said (a fraction too).
TEST(RequestConversions, ConvertsSaidMeasuresToTheNeighbouringUnits) {
  auto in = [](std::string_view request, std::string_view unit) {
    std::vector<std::string> out;
    for (const SaidNumber& n : RequestConversions(request)) {
      if (n.next_word == unit) out.push_back(n.text);
    }
    return out;
  };
  EXPECT_THAT(in("Water the front lawn for two hours", "minutes"), ElementsAre("120"));
  EXPECT_THAT(in("Water the front lawn for two hours", "seconds"), ElementsAre("7200"));
  EXPECT_THAT(in("Water the front lawn for two hours", "hours"), ElementsAre("2"));
  EXPECT_THAT(in("Water the front lawn for two hours", "days"), ElementsAre());  // not whole
  EXPECT_THAT(in("run 3 hrs at 4:30 pm", "minutes"), ElementsAre("180"));
  EXPECT_THAT(in("for 1.5 hours", "minutes"), ElementsAre("90"));
  EXPECT_THAT(in("track my swim for an hour", "minutes"), ElementsAre("60"));
  EXPECT_THAT(in("track my swim for an hour", "hours"), ElementsAre("1"));
  EXPECT_THAT(in("for an hour and a half", "minutes"), ElementsAre("90"));
  EXPECT_THAT(in("for 2 hours and a half", "minutes"), ElementsAre("150"));
  EXPECT_THAT(in("for one and a half hours", "minutes"), ElementsAre("90"));
  EXPECT_THAT(in("Tarck my cycling for half an hour", "minutes"), ElementsAre("30"));
  EXPECT_THAT(in("a half hour, then a quarter hour", "minutes"), ElementsAre("30", "15"));
  EXPECT_THAT(in("for a quarter of an hour at 3 am", "minutes"), ElementsAre("15"));
  EXPECT_THAT(in("three quarters of an hour", "minutes"), ElementsAre("45"));
  EXPECT_THAT(in("ninety minutes", "hours"), ElementsAre());  // 1.5: not whole
  EXPECT_THAT(in("ninety minutes", "seconds"), ElementsAre("5400"));
  EXPECT_THAT(in("skip it for two weeks", "days"), ElementsAre("14"));
  EXPECT_THAT(in("twenty-one days", "weeks"), ElementsAre("3"));
  // No measure: a clock time, a rate, a unit with no quantity.
  EXPECT_THAT(RequestConversions("at 4:30 pm every day"), ElementsAre());
  EXPECT_THAT(RequestConversions("three times a day, twice a week"), ElementsAre());
  EXPECT_THAT(RequestConversions("10000 steps a day"), ElementsAre());
  EXPECT_THAT(in("skip watering for a day", "hours"), ElementsAre("24"));
  // Volume, mass and length, in both the plural and the short form a key may use.
  EXPECT_THAT(in("I drank 2 liters of water", "ml"), ElementsAre("2000"));
  EXPECT_THAT(in("I drank two litres of water", "milliliters"), ElementsAre("2000"));
  EXPECT_THAT(in("log a liter of water", "ml"), ElementsAre("1000"));
  EXPECT_THAT(in("half a liter", "ml"), ElementsAre("500"));
  EXPECT_THAT(in("250 ml", "liters"), ElementsAre());  // 0.25: not whole
  EXPECT_THAT(in("it weighs 1.5 kg", "grams"), ElementsAre("1500"));
  EXPECT_THAT(in("it weighs 1.5 kg", "kg"), ElementsAre("1.5"));
  EXPECT_THAT(in("Max 6.2 kilograms", "kilograms"), ElementsAre("6.2"));
  EXPECT_THAT(in("for 1.5 hours", "hours"), ElementsAre("1.5"));
  EXPECT_THAT(in("for half an hour", "hours"), ElementsAre("0.5"));
  EXPECT_THAT(in("3 kilometers", "meters"), ElementsAre("3000"));
  EXPECT_THAT(in("3 kilometers", "cm"), ElementsAre("300000"));
  EXPECT_THAT(in("skip it for two weeks", "minutes"), ElementsAre());  // three steps away
  EXPECT_THAT(in("3 kilometers", "minutes"), ElementsAre());           // another family
  EXPECT_THAT(RequestConversions("how many minutes are left"), ElementsAre());
}

TEST(WordNamesKey, UnitsOfKeys) {
  EXPECT_TRUE(WordNamesKey("minutes", "minutes"));
  EXPECT_TRUE(WordNamesKey("minute", "minutes"));
  EXPECT_TRUE(WordNamesKey("mins", "minutes"));
  EXPECT_TRUE(WordNamesKey("km", "distance_km"));
  EXPECT_TRUE(WordNamesKey("degrees", "degrees"));
  EXPECT_FALSE(WordNamesKey("hours", "minutes"));
  EXPECT_FALSE(WordNamesKey("m", "minutes"));  // too short to be an abbreviation
  EXPECT_FALSE(WordNamesKey("bucks", "amount"));
  EXPECT_FALSE(WordNamesKey("", "minutes"));
  EXPECT_FALSE(WordNamesKey("minutes", ""));
}

// A copy prior walked along a grammar: Bias(t) is what Restrict adds to token t's logit in
// the current state (-1 when the grammar does not allow t there), Write(t) writes t.
class PriorWalk {
 public:
  PriorWalk(const text::CallGrammar& g, const text::Tokenizer& tok, LogitProcessor& prior)
      : g_(g), tok_(tok), prior_(prior), s_(g.Start()) {}
  float Bias(const std::string& name) {
    std::span<const int32_t> allowed = g_.Allowed(s_);
    std::vector<float> cand(allowed.size(), 0.0f);
    prior_.Restrict({g_, s_, allowed}, cand);
    const int32_t id = Id(tok_, name);
    const auto it = std::lower_bound(allowed.begin(), allowed.end(), id);
    return it != allowed.end() && *it == id ? cand[it - allowed.begin()] : -1.0f;
  }
  void Write(const std::string& name) {
    prior_.Written(Id(tok_, name));
    FG_ASSERT_OK(g_.Advance(&s_, Id(tok_, name)));
  }

 private:
  const text::CallGrammar& g_;
  const text::Tokenizer& tok_;
  LogitProcessor& prior_;
  text::CallGrammar::State s_;
};

// The list guard: an array of free strings whose items so far (two at least) are a list of the
// request, in its order, does not close while the request's list goes on; it may once the list
// has ended or when it goes on with thanks. An enum array, a single item, items out of the
// request's order and items not apart by a list's separators are left alone.
TEST(CopyPrior, ListGuardKeepsAnArrayOpenWhileTheRequestsListGoesOn) {
  auto tok = SmallTokenizer({"call:f{", "rooms:", "modes:", "hall", "den", "attic"}, 0);
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "rooms":{"type":"array","items":{"type":"string"}},
    "modes":{"type":"array","items":{"type":"string","enum":["hall","den","attic"]}}}}}])");
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  struct Case {
    const char* request;
    const char* key;
    std::vector<const char*> items;
    bool kept_open;
  };
  const Case cases[] = {
      {"clean the hall, den and attic", "rooms:", {"hall", "den"}, true},
      {"clean the Hall, den, and attic", "rooms:", {"hall", "den"}, true},  // case aside
      {"clean the hall & den, attic", "rooms:", {"hall", "den"}, true},
      {"clean the hall, den and attic", "rooms:", {"hall", "den", "attic"}, false},  // ended
      {"clean the hall, den, thank you", "rooms:", {"hall", "den"}, false},
      {"clean the hall, den and please hurry", "rooms:", {"hall", "den"}, false},
      {"clean the hall, den and attic", "rooms:", {"hall"}, false},             // one item
      {"clean the den, hall and attic", "rooms:", {"hall", "den"}, false},      // not in order
      {"clean the hall then den and attic", "rooms:", {"hall", "den"}, false},  // no list
      {"clean the hall, den and attic", "modes:", {"hall", "den"}, false},      // enum items
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.request) + " " + c.key + std::to_string(c.items.size()));
    auto prior = MakeCopyPrior(c.request, 5.0, tok.get(), &*cat);
    PriorWalk walk(**g, *tok, *prior);
    for (const char* t : {"<start_function_call>", "call:f{", c.key, "["}) walk.Write(t);
    for (size_t i = 0; i < c.items.size(); ++i) {
      if (i > 0) walk.Write(",");
      for (const char* t : {"<escape>", c.items[i], "<escape>"}) walk.Write(t);
    }
    EXPECT_EQ(walk.Bias("]"), c.kept_open ? -INFINITY : 0.0f);
    EXPECT_EQ(walk.Bias(","), 0.0f);
  }
}

// At the first digit, the numbers the request says with the key's own unit are favoured ("5
// minutes" for `minutes`), by the key prior's bias, to their end; numbers said with another
// word are not (a conversion may follow).
TEST(CopyPrior, BiasesTheFirstDigitOfANumberSaidInTheKeysUnit) {
  auto tok = SmallTokenizer({"call:f{", "s:", "n:"}, 0);
  auto cat = text::ParseToolCatalog(kCatalog);
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  for (const char* request : {"wait 50 n then 7 bucks", "wait fifty n then seven bucks"}) {
    SCOPED_TRACE(request);
    auto prior = MakeCopyPrior(request, 5.0, tok.get());
    PriorWalk walk(**g, *tok, *prior);
    for (const char* t : {"<start_function_call>", "call:f{", "n:"}) walk.Write(t);
    EXPECT_EQ(walk.Bias("5"), kKeyPriorBias);
    EXPECT_EQ(walk.Bias("7"), 0.0f);
    EXPECT_EQ(walk.Bias("1"), 0.0f);
    // The value is the number said with the unit: its next digit, then its end, as strongly.
    walk.Write("5");
    EXPECT_EQ(walk.Bias("0"), kKeyPriorBias);
    EXPECT_EQ(walk.Bias("5"), 0.0f);
    walk.Write("0");
    EXPECT_EQ(walk.Bias("0"), 0.0f);
    EXPECT_EQ(walk.Bias(","), kKeyPriorBias);  // the end: on to `s`
  }
}

// The key prior: a number parameter whose unit the request says ("50 n" for `n`) and that the
// call has not written yet: its key's tokens, and after a value the tokens that go on to
// another key; nothing for a unit said of no parameter.
TEST(CopyPrior, KeyPriorFavoursANumberKeyWhoseUnitTheRequestSays) {
  auto tok = SmallTokenizer({"call:f{", "s:", "n:", "abc"}, 0);
  auto cat = text::ParseToolCatalog(kCatalog);
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  for (const char* request : {"wait 50 n for abc", "wait 50 bucks for abc"}) {
    SCOPED_TRACE(request);
    const bool said = std::string_view(request).find(" n ") != std::string_view::npos;
    auto prior = MakeCopyPrior(request, 5.0, tok.get(), &*cat);
    PriorWalk walk(**g, *tok, *prior);
    for (const char* t : {"<start_function_call>", "call:f{"}) walk.Write(t);
    EXPECT_EQ(walk.Bias("n:"), said ? kKeyPriorBias : 0.0f);
    EXPECT_EQ(walk.Bias("s:"), 0.0f);
    for (const char* t : {"s:", "<escape>", "abc", "<escape>"}) walk.Write(t);
    EXPECT_EQ(walk.Bias(","), said ? kKeyPriorBias : 0.0f);  // on to `n` rather than close
  }
}

// SaidEnumMember: the one string member the request says as whole words, case-insensitive,
// '_' read as a space; none when two members are said, a member only inside a word, or the
// schema is not a string enum.
TEST(CopyPrior, SaidEnumMemberFindsTheOneMemberTheRequestSays) {
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "k":{"type":"string","enum":["live","resting","brake_check"]},"s":{"type":"string"}}}}])");
  FG_ASSERT_OK(cat.status());
  const text::Schema& k = cat->tools[0].parameters.properties.at("k");
  EXPECT_EQ(SaidEnumMember("what's my resting heart rate", k), 1);
  EXPECT_EQ(SaidEnumMember("Resting rate, please", k), 1);
  EXPECT_EQ(SaidEnumMember("list every brake check", k), 2);
  EXPECT_EQ(SaidEnumMember("list every brake inspection", k), -1);
  EXPECT_EQ(SaidEnumMember("my heart rate", k), -1);
  EXPECT_EQ(SaidEnumMember("my livery rate", k), -1);   // inside a word
  EXPECT_EQ(SaidEnumMember("live or resting", k), -1);  // two members: no choice
  EXPECT_EQ(SaidEnumMember("resting", cat->tools[0].parameters.properties.at("s")), -1);
}

// SaidArguments: a number parameter whose unit is said with a number, in that unit or converted
// from another, a string enum one of whose members is said, with their values; a boolean whose
// key is said, with no value.
TEST(CopyPrior, SaidArgumentsAreTheParametersTheRequestNamesWithTheirValues) {
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "minutes":{"type":"integer"},"days":{"type":"number"},"kind":{"type":"string",
    "enum":["live","resting"]},"note":{"type":"string"},"count":{"type":"integer"},
    "mute":{"type":"boolean"},"all_rooms":{"type":"boolean"},
    "frozen":{"type":"boolean","description":"True to freeze"}}}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& f = cat->tools[0];
  EXPECT_THAT(SaidArguments("resting for two hours, 3 weeks", f),
              ElementsAre(SaidArgument{"days", 21}, SaidArgument{"kind", "resting"},
                          SaidArgument{"minutes", 120}));
  EXPECT_THAT(SaidArguments("5 minutes or 10 mins", f),
              ElementsAre(SaidArgument{"minutes", 5}, SaidArgument{"minutes", 10}));
  EXPECT_THAT(SaidArguments("a note about 4 things, live or resting", f), ElementsAre());
  EXPECT_THAT(SaidArguments("Mute it in all rooms", f),
              ElementsAre(SaidArgument{"all_rooms", nullptr}, SaidArgument{"mute", nullptr}));
  // "un" and a word of the key or its description: the key, with the value false.
  EXPECT_THAT(SaidArguments("unmute it, muted", f), ElementsAre(SaidArgument{"mute", false}));
  EXPECT_THAT(SaidArguments("Unfreeze the card", f), ElementsAre(SaidArgument{"frozen", false}));
  EXPECT_THAT(SaidArguments("freeze it, I understand, until noon, unmuted", f), ElementsAre());
  EXPECT_THAT(SaidArguments("mute, then unmute", f), ElementsAre(SaidArgument{"mute", nullptr}));
  // SaidFactsOf: the same arguments, and every number said, converted ones included.
  const SaidFacts facts = SaidFactsOf("resting for two hours, 3 weeks", f);
  EXPECT_EQ(facts.arguments, SaidArguments("resting for two hours, 3 weeks", f));
  EXPECT_EQ(facts.numbers, SaidNumberValues("resting for two hours, 3 weeks"));
  EXPECT_THAT(facts.numbers, ::testing::IsSupersetOf({2.0, 3.0, 120.0, 7200.0, 21.0}));
}

TEST(RequestAmounts, SumsSaidWithACurrencyWordOrSign) {
  auto texts = [](std::string_view request) {
    std::vector<std::string> out;
    for (const SaidNumber& n : RequestAmounts(request)) {
      EXPECT_EQ(n.next_word, kMoneyWord);
      out.push_back(n.text);
    }
    return out;
  };
  EXPECT_THAT(texts("Pay $60 on the gas bill"), ElementsAre("60"));
  EXPECT_THAT(texts("pay the gym $1,200 or $ 5.50 today"), ElementsAre("1200", "5.50"));
  EXPECT_THAT(texts("transfer one hundred and twenty dollars, thirty bucks"),
              ElementsAre("120", "30"));
  EXPECT_THAT(texts("50 euros or \u20ac20 or \u00a37, 9 USD"), ElementsAre("50", "9", "20", "7"));
  // Not money: a bare number, a sign with no number, pounds (a weight too).
  EXPECT_THAT(texts("3 apples, $ and 4 pounds, 10 dollar-ish"), ElementsAre("10"));
  EXPECT_THAT(texts("send money to Anna"), ElementsAre());
}

TEST(MoneyKey, TheToolsOneNumberParameterForMoney) {
  auto key = [](const char* properties) {
    auto cat = text::ParseToolCatalog(std::string(R"([{"name":"f","parameters":{"type":"object",
      "properties":)") + properties + "}}]");
    EXPECT_TRUE(cat.ok()) << cat.status().ToString();
    return cat.ok() ? MoneyKey(cat->tools[0]) : "?";
  };
  EXPECT_EQ(key(R"({"biller":{"type":"string"},"amount":{"type":"number",
      "description":"Amount, the full bill when not given"}})"),
            "amount");
  EXPECT_EQ(key(R"({"total":{"type":"number","description":"Total price paid"},
      "liters":{"type":"number"}})"),
            "total");
  EXPECT_EQ(key(R"({"bill":{"type":"number","description":"Bill amount"},
      "percent":{"type":"integer","description":"Tip percent"}})"),
            "bill");
  // A percent is not money; two money parameters leave it unsaid which one a sum is; a string
  // is not a number.
  EXPECT_EQ(key(R"({"open":{"type":"integer","description":"Open amount in percent"}})"), "");
  EXPECT_EQ(key(R"({"min_price":{"type":"number"},"max_price":{"type":"number"}})"), "");
  EXPECT_EQ(key(R"({"amount":{"type":"string"},"count":{"type":"integer"}})"), "");
}

// A sum said as money names the tool's money parameter: the key prior writes it, and its digits
// are favoured from the first on, as a number said in the key's unit is.
TEST(CopyPrior, KeyPriorWritesTheMoneyKeyOfASaidSum) {
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "amount":{"type":"number","description":"Amount in dollars"},"biller":{"type":"string"},
    "count":{"type":"integer"}},"required":["biller"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& f = cat->tools[0];
  EXPECT_THAT(SaidArguments("Pay $60 on the gas bill, 2 times", f),
              ElementsAre(SaidArgument{"amount", 60}));
  EXPECT_THAT(SaidArguments("pay one hundred and twenty dollars", f),
              ElementsAre(SaidArgument{"amount", 120}));
  EXPECT_THAT(SaidArguments("pay 120 for gas", f), ElementsAre());

  auto tok = SmallTokenizer({"call:f{", "amount:", "biller:", "count:", "1", "2", "0"}, 0);
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  auto prior = MakeCopyPrior("pay one hundred and twenty dollars", 5.0, tok.get(), &*cat);
  PriorWalk walk(**g, *tok, *prior);
  for (const char* t : {"<start_function_call>", "call:f{"}) walk.Write(t);
  EXPECT_EQ(walk.Bias("amount:"), kKeyPriorBias);
  EXPECT_EQ(walk.Bias("count:"), 0.0f);
  walk.Write("amount:");
  EXPECT_EQ(walk.Bias("1"), kKeyPriorBias);  // from the first digit
  EXPECT_EQ(walk.Bias("2"), 0.0f);
  for (const char* t : {"1", "2"}) walk.Write(t);
  EXPECT_EQ(walk.Bias("0"), kKeyPriorBias);  // not 12: the sum is 120
}

// A duration said in another unit ("two hours" for `minutes`) names the key, and its converted
// value is favoured as the unit's own number is, from the first digit; the number said is not.
TEST(CopyPrior, KeyPriorConvertsADurationToTheKeysUnit) {
  auto tok = SmallTokenizer({"call:f{", "minutes:", "s:", "abc"}, 0);
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "minutes":{"type":"integer"},"s":{"type":"string"}},"required":["s"]}}])");
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  auto prior = MakeCopyPrior("abc for two hours", 5.0, tok.get(), &*cat);
  PriorWalk walk(**g, *tok, *prior);
  for (const char* t : {"<start_function_call>", "call:f{"}) walk.Write(t);
  EXPECT_EQ(walk.Bias("minutes:"), kKeyPriorBias);
  walk.Write("minutes:");
  EXPECT_EQ(walk.Bias("1"), kKeyPriorBias);
  EXPECT_EQ(walk.Bias("2"), 0.0f);
  for (const char* t : {"1", "2"}) walk.Write(t);
  EXPECT_EQ(walk.Bias("0"), kKeyPriorBias);
  walk.Write("0");
  EXPECT_EQ(walk.Bias(","), kKeyPriorBias);  // 120 is complete: its end
}

// A boolean parameter whose key the request says ("mute it" for `mute`) is a key the request
// names: its key is favoured, and after a number value that does not spell a said number, so
// is ',' (on to `mute` rather than close the call); not while the number may still become a
// said one ("1" of "120").
TEST(CopyPrior, KeyPriorFavoursASaidBooleanKeyAfterANumberValue) {
  auto tok = SmallTokenizer({"call:f{", "level:", "mute:", "true"}, 0);
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "level":{"type":"integer"},"mute":{"type":"boolean"}}}}])");
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  for (const char* request : {"mute it, 120 then", "turn it down, 120 then"}) {
    SCOPED_TRACE(request);
    const bool said = std::string_view(request).starts_with("mute");
    auto prior = MakeCopyPrior(request, 5.0, tok.get(), &*cat);
    PriorWalk walk(**g, *tok, *prior);
    for (const char* t : {"<start_function_call>", "call:f{"}) walk.Write(t);
    EXPECT_EQ(walk.Bias("mute:"), said ? kKeyPriorBias : 0.0f);
    EXPECT_EQ(walk.Bias("level:"), said ? kKeyPriorBias : 0.0f);  // sorts before `mute`
    walk.Write("level:");
    EXPECT_EQ(walk.Bias("1"), 0.0f);  // (Restrict sees the number begin)
    walk.Write("1");
    EXPECT_EQ(walk.Bias(","), 0.0f);  // 120 may follow
    EXPECT_EQ(walk.Bias("2"), 5.0f);  // the copy bias: on to 120
    walk.Write("0");
    EXPECT_EQ(walk.Bias(","), said ? kKeyPriorBias : 0.0f);  // "10" is no said number
    walk.Write(",");
    EXPECT_EQ(walk.Bias("mute:"), said ? kKeyPriorBias : 0.0f);
  }
}

// A boolean the request undoes ("unmute" for `mute`): its key is favoured, then the tokens of
// false, not true; a request that says the key ("mute it") favours the key and leaves the value
// to the model.
TEST(CopyPrior, KeyPriorWritesFalseForABooleanTheRequestUndoes) {
  auto tok = SmallTokenizer({"call:f{", "level:", "mute:", "true", "false", "fa", "lse"}, 0);
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "level":{"type":"integer"},"mute":{"type":"boolean"}}}}])");
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  for (const char* request : {"unmute the tv", "mute the tv"}) {
    SCOPED_TRACE(request);
    const bool undone = std::string_view(request).starts_with("un");
    auto prior = MakeCopyPrior(request, 5.0, tok.get(), &*cat);
    PriorWalk walk(**g, *tok, *prior);
    for (const char* t : {"<start_function_call>", "call:f{"}) walk.Write(t);
    EXPECT_EQ(walk.Bias("mute:"), kKeyPriorBias);
    walk.Write("mute:");
    EXPECT_EQ(walk.Bias("false"), undone ? kKeyPriorBias : 0.0f);
    EXPECT_EQ(walk.Bias("fa"), undone ? kKeyPriorBias : 0.0f);
    EXPECT_EQ(walk.Bias("true"), 0.0f);
    if (!undone) continue;
    walk.Write("fa");
    EXPECT_EQ(walk.Bias("lse"), kKeyPriorBias);
  }
}

// The key prior for a string enum: a member said ("the resting one") favours the key of the
// enum's parameter (and the keys that sort before it), then that member's tokens in its value,
// and nothing once it is written; a request that says no member favours nothing.
TEST(CopyPrior, KeyPriorFavoursAnEnumKeyOneOfWhoseMembersTheRequestSays) {
  auto tok = SmallTokenizer({"call:f{", "s:", "k:", "a:", "abc", "resting"}, 0);
  auto cat = text::ParseToolCatalog(R"([{"name":"f","parameters":{"type":"object","properties":{
    "s":{"type":"string"},"k":{"type":"string","enum":["live","resting"]},"a":{"type":"string"}},
    "required":["s"]}}])");
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  for (const char* request : {"the resting one for abc", "the other one for abc"}) {
    SCOPED_TRACE(request);
    const bool said = std::string_view(request).find("resting") != std::string_view::npos;
    auto prior = MakeCopyPrior(request, 5.0, tok.get(), &*cat);
    PriorWalk walk(**g, *tok, *prior);
    for (const char* t : {"<start_function_call>", "call:f{"}) walk.Write(t);
    EXPECT_EQ(walk.Bias("k:"), said ? kKeyPriorBias : 0.0f);
    // A key that sorts before `k` may come first (the model writes keys in sorted order); one
    // after it may not (`k` would be skipped).
    EXPECT_EQ(walk.Bias("a:"), said ? kKeyPriorBias : 0.0f);
    EXPECT_EQ(walk.Bias("s:"), 0.0f);
    for (const char* t : {"k:", "<escape>"}) walk.Write(t);
    EXPECT_EQ(walk.Bias("resting"), said ? kKeyPriorBias : 0.0f);  // the member said
    EXPECT_EQ(walk.Bias("l"), 0.0f);                               // not `live`
    for (const char* t : {"resting", "<escape>"}) walk.Write(t);
    EXPECT_EQ(walk.Bias(","), 0.0f);  // `k` written: nothing more to favour
  }
}

// A tool whose arguments are all optional: the key prior favours the '{' that opens its object
// over the "{}" that closes it at once, but only once the name is complete (no longer tool's
// name may continue it: then no bias at all).
TEST(CopyPrior, KeyPriorOpensTheObjectOnlyAfterACompleteName) {
  auto tok = SmallTokenizer({"call:", "f", "g", "{", "{}", "k:"}, 0);
  const std::string f = R"({"name":"f","parameters":{"type":"object","properties":{
    "k":{"type":"string","enum":["live","resting"]}}}})";
  const std::string fg = R"({"name":"fg","parameters":{"type":"object","properties":{}}})";
  for (const std::string& tools : {"[" + f + "]", "[" + f + "," + fg + "]"}) {
    SCOPED_TRACE(tools);
    const bool complete = tools.find("\"fg\"") == std::string::npos;
    auto cat = text::ParseToolCatalog(tools);
    FG_ASSERT_OK(cat.status());
    auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
    FG_ASSERT_OK(g.status());
    auto prior = MakeCopyPrior("the resting one", 5.0, tok.get(), &*cat);
    PriorWalk walk(**g, *tok, *prior);
    for (const char* t : {"<start_function_call>", "call:", "f"}) walk.Write(t);
    EXPECT_EQ(walk.Bias("{"), complete ? kKeyPriorBias : 0.0f);
    EXPECT_EQ(walk.Bias("{}"), 0.0f);
    if (!complete) {
      EXPECT_EQ(walk.Bias("g"), 0.0f);
    }
  }
}

// In a number value that has begun as a number the request says, the copy prior favours the
// tokens that go on spelling it, and once the number so far is one of them, the tokens that end
// it; nothing at the first digit (the value may be a conversion), nothing for other numbers.
TEST(CopyPrior, BiasesTheDigitsOfTheRequestsNumbersAndTheirEnd) {
  auto tok = SmallTokenizer({"call:f{", "s:", "n:"}, 0);
  auto cat = text::ParseToolCatalog(kCatalog);
  FG_ASSERT_OK(cat.status());
  auto g = text::CallGrammar::Create(*cat, *tok, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  for (const char* request : {"send 50 bucks and 7", "send fifty bucks and seven"}) {
    SCOPED_TRACE(request);
    auto prior = MakeCopyPrior(request, 5.0, tok.get());
    auto bias = [&](const text::CallGrammar::State& s, const std::string& name) {
      std::span<const int32_t> allowed = (*g)->Allowed(s);
      std::vector<float> cand(allowed.size(), 1.0f);
      prior->Restrict({**g, s, allowed}, cand);
      const int32_t id = Id(*tok, name);
      const auto it = std::lower_bound(allowed.begin(), allowed.end(), id);
      return it != allowed.end() && *it == id ? cand[it - allowed.begin()] - 1.0f : -1.0f;
    };
    auto write = [&](text::CallGrammar::State* s, const std::string& name) {
      const int32_t id = Id(*tok, name);
      prior->Written(id);
      FG_ASSERT_OK((*g)->Advance(s, id));
    };
    text::CallGrammar::State s = (*g)->Start();
    for (const char* t : {"<start_function_call>", "call:f{"}) write(&s, t);
    EXPECT_EQ(bias(s, "n:"), 0.0f);
    write(&s, "n:");
    ASSERT_TRUE((*g)->InNumber(s));
    EXPECT_EQ(bias(s, "5"), 0.0f);
    EXPECT_EQ(bias(s, "1"), 0.0f);
    write(&s, "5");
    EXPECT_EQ(bias(s, "0"), 5.0f);
    EXPECT_EQ(bias(s, ","), 0.0f);  // 5 is not a number of the request
    write(&s, "0");
    EXPECT_EQ(bias(s, "0"), 0.0f);  // no 500
    EXPECT_EQ(bias(s, ","), 5.0f);  // 50 is complete: its end
    write(&s, ",");
    EXPECT_FALSE((*g)->InNumber(s));
    s = (*g)->Start();
    for (const char* t : {"<start_function_call>", "call:f{", "n:", "7"}) write(&s, t);
    EXPECT_EQ(bias(s, ","), 5.0f);  // 7 is complete
    EXPECT_EQ(bias(s, "0"), 0.0f);
    // A number that is no prefix of the request's: no bias at all.
    s = (*g)->Start();
    for (const char* t : {"<start_function_call>", "call:f{", "n:", "9"}) write(&s, t);
    EXPECT_EQ(bias(s, "0"), 0.0f);
    EXPECT_EQ(bias(s, ","), 0.0f);
  }
}

}  // namespace
}  // namespace fg::call
