// Training examples: both JSONL forms parse, every call is validated, errors name the line, and
// the rendered prompt is the one inference renders (text::RenderPrompt, tokenized with special
// tokens atomic) followed by the calls' tokens.
#include "src/call/training_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/call/tool_channel.h"
#include "src/gguf_tools/synthetic.h"
#include "src/text/call_parser.h"

namespace fg::call {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;

constexpr const char* kTools =
    R"([{"type":"function","function":{"name":"set_light","description":"Switch a light",)"
    R"("parameters":{"type":"object","properties":{"state":{"type":"string","enum":["on","off"]},)"
    R"("room":{"type":"string"},"level":{"type":"integer"}},"required":["state"]}}}])";

std::string TrlLine(const std::string& args, const std::string& extra_message = "") {
  return std::string(R"({"tools":)") + kTools +
         R"(,"messages":[{"role":"developer","content":"You are a model that can do function calling with the following functions"},)" +
         extra_message + R"({"role":"user","content":"lights on in the hall"},)" +
         R"({"role":"assistant","tool_calls":[{"type":"function","function":{"name":"set_light","arguments":)" +
         args + "}}]}]}";
}

// The synthetic models' vocabulary (it has FunctionGemma's control tokens).
std::unique_ptr<text::Tokenizer> SyntheticTokenizer() {
  auto spec = gguf::SyntheticPreset("tiny");
  EXPECT_TRUE(spec.ok());
  auto w = gguf::BuildSyntheticGemma3(*spec);
  EXPECT_TRUE(w.ok());
  static std::vector<uint8_t> bytes;
  bytes = *w->ToBytes();
  auto f = gguf::File::FromBytes(bytes);
  EXPECT_TRUE(f.ok());
  auto tk = text::Tokenizer::FromGguf(**f);
  EXPECT_TRUE(tk.ok()) << tk.status().ToString();
  return std::move(*tk);
}

TEST(TrainingData, TrlAndShortFormsParseAndRenderAsInference) {
  const std::string jsonl = TrlLine(R"({"state":"on","room":"hall"})") + "\n\n" +
                            TrlLine(R"("{\"state\":\"off\",\"level\":3}")") + "\n";
  auto ex = ParseTrainingData(jsonl, "train.jsonl");
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  ASSERT_EQ(ex->size(), 2u);
  EXPECT_EQ((*ex)[1].line, 3);
  EXPECT_EQ((*ex)[0].catalog, (*ex)[1].catalog);  // one parse per distinct tool list
  EXPECT_EQ((*ex)[0].catalog_key, (*ex)[1].catalog_key);
  EXPECT_EQ((*ex)[1].calls[0].second, nlohmann::json({{"state", "off"}, {"level", 3}}));

  auto tk = SyntheticTokenizer();
  auto t = RenderTrainingExample(*tk, (*ex)[0]);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string prompt = text::RenderPrompt(*(*ex)[0].catalog, "lights on in the hall");
  std::vector<int32_t> want = {tk->vocab().bos};
  // The request is user text (special text not parsed); the template's is.
  const size_t user = prompt.find("lights on in the hall");
  for (int32_t id : tk->Encode(prompt.substr(0, user), false, true)) want.push_back(id);
  for (int32_t id : tk->Encode("lights on in the hall", false, false)) want.push_back(id);
  for (int32_t id : tk->Encode(prompt.substr(user + 21), false, true)) want.push_back(id);
  ASSERT_EQ(t->target_start, static_cast<int64_t>(want.size()));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), t->tokens.begin()));
  EXPECT_LT(t->prefix_len, t->target_start);
  std::string target;
  for (size_t i = t->target_start; i < t->tokens.size(); ++i) target += tk->TokenToPiece(t->tokens[i], true);
  EXPECT_EQ(target, text::RenderCall("set_light", {{"state", "on"}, {"room", "hall"}}));
  EXPECT_EQ(tk->TokenToPiece(t->tokens.back(), true), "<end_function_call>");

  // The short form with a catalog renders the same tokens.
  auto catalog = text::ParseToolCatalog(kTools);
  ASSERT_TRUE(catalog.ok());
  auto shared = std::make_shared<const text::ToolCatalog>(std::move(*catalog));
  auto s = ParseTrainingData(
      R"({"request":"lights on in the hall","calls":[{"name":"set_light","arguments":{"state":"on","room":"hall"}}]})",
      "short.jsonl", shared);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto ts = RenderTrainingExample(*tk, (*s)[0]);
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->tokens, t->tokens);
}

TEST(TrainingData, BadLinesAreErrorsNamingTheLine) {
  auto err = [](const std::string& jsonl) { return ParseTrainingData(jsonl, "d.jsonl").status(); };
  EXPECT_THAT(err(TrlLine(R"({"state":"on"})") + "\nnot json\n"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("d.jsonl line 2: not a JSON object")));
  EXPECT_THAT(err(TrlLine(R"({"state":"dim"})")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("line 1: call to 'set_light' does not validate")));
  EXPECT_THAT(err(TrlLine(R"({"room":"hall"})")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("does not validate")));
  EXPECT_THAT(err(TrlLine(R"({"state":"on"})", R"({"role":"tool","content":"x"},)")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unsupported message role 'tool'")));
  EXPECT_THAT(err(TrlLine(R"("{not json")")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("call arguments are not JSON")));
  EXPECT_THAT(err(R"({"request":"x","calls":[{"name":"set_light","arguments":{"state":"on"}}]})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("needs a catalog")));
  std::string unknown = TrlLine(R"({"state":"on"})");
  unknown.replace(unknown.rfind("set_light"), 9, "set_lamp");
  EXPECT_THAT(err(unknown), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not among its tools")));
  EXPECT_THAT(err("\n \n"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("no example")));
  // Messages of the wrong shape (found by fuzz/call_training_data_fuzz.cc: they threw a JSON
  // type error, which `fgemma tune` reported as an internal error without the line).
  EXPECT_THAT(err(TrlLine(R"({"state":"on"})") + "\n" + TrlLine(R"({"state":"on"})", R"(7,)")),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("d.jsonl line 2: a message that is not an object")));
  EXPECT_THAT(err(TrlLine(R"({"state":"on"})", R"({"role":["user"],"content":"x"},)")),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("line 1: a message without a \"role\" string")));
  EXPECT_THAT(err(TrlLine(R"({"state":"on"})", R"({"content":"x"},)")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("without a \"role\" string")));
}

// The project's corpus (data/calls) parses with every call valid under the C++ validator.
TEST(TrainingData, ProjectCorpusParses) {
  for (const char* name : {"train.jsonl", "eval.jsonl"}) {
    SCOPED_TRACE(name);
    std::ifstream in(std::string(FG_SOURCE_DIR) + "/data/calls/" + name);
    ASSERT_TRUE(in) << "data/calls/" << name;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto ex = ParseTrainingData(text, name);
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    EXPECT_GT(ex->size(), 700u);
  }
}

// Short-form lines for the augmentation tests: a catalog with a string, an integer and an enum.
std::shared_ptr<const text::ToolCatalog> PayCatalog() {
  auto c = text::ParseToolCatalog(
      R"({"tools":[{"type":"function","function":{"name":"pay","description":"Pay someone",)"
      R"("parameters":{"type":"object","properties":{"payee":{"type":"string"},)"
      R"("amount":{"type":"integer","maximum":500},"speed":{"type":"string","enum":["fast","slow"]}},)"
      R"("required":["payee","amount"]}}}]})");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::make_shared<const text::ToolCatalog>(std::move(*c));
}

TEST(TrainingData, AugmentSwapsValuesInRequestAndCallTogether) {
  const std::string jsonl =
      R"({"request":"send 25 dollars to Anna","calls":[{"name":"pay","arguments":{"payee":"Anna","amount":25}}]})"
      "\n"
      R"({"request":"Pay Tom 12 bucks, fast","calls":[{"name":"pay","arguments":{"payee":"Tom","amount":12,"speed":"fast"}}]})"
      "\n"
      R"({"request":"give John 400 slow","calls":[{"name":"pay","arguments":{"payee":"John","amount":400,"speed":"slow"}}]})"
      "\n"
      R"({"request":"pay 7 to 7eleven","calls":[{"name":"pay","arguments":{"payee":"7eleven","amount":7}}]})"
      "\n";
  auto ex = ParseTrainingData(jsonl, "app.jsonl", PayCatalog());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const std::vector<TrainingExample> aug = AugmentSwappingValues(*ex, 3, 5);
  ASSERT_GT(aug.size(), ex->size());
  // The originals first, unchanged.
  for (size_t i = 0; i < ex->size(); ++i) {
    EXPECT_EQ(aug[i].request, (*ex)[i].request);
    EXPECT_EQ(aug[i].calls, (*ex)[i].calls);
  }
  std::set<std::string> requests;
  for (const TrainingExample& e : aug) {
    EXPECT_TRUE(requests.insert(e.request).second) << "twice: " << e.request;
    ASSERT_EQ(e.calls.size(), 1u);
    const nlohmann::json& args = e.calls[0].second;
    // Every swapped value is in the request, where the original's was.
    EXPECT_NE(e.request.find(args["payee"].get<std::string>()), std::string::npos) << e.request;
    EXPECT_NE(e.request.find(std::to_string(args["amount"].get<int64_t>())), std::string::npos)
        << e.request;
    EXPECT_TRUE(text::ValidateCall(*e.catalog->Find("pay"), args).ok()) << args.dump();
    EXPECT_EQ(e.catalog_key, (*ex)[0].catalog_key);
  }
  // The 4th line: "7" occurs once on word boundaries (the 7 of "7eleven" is not one), so both
  // of its values can be swapped.
  bool varied_fourth = false;
  for (size_t i = ex->size(); i < aug.size(); ++i) {
    if (aug[i].line == 4) varied_fourth = true;
  }
  EXPECT_TRUE(varied_fourth);
  // Deterministic for a seed; another seed draws other variants.
  const std::vector<TrainingExample> again = AugmentSwappingValues(*ex, 3, 5);
  ASSERT_EQ(again.size(), aug.size());
  for (size_t i = 0; i < aug.size(); ++i) EXPECT_EQ(again[i].request, aug[i].request);
  EXPECT_EQ(AugmentSwappingValues(*ex, 0, 5).size(), ex->size());
}

// An app's examples (one catalog) record the keys their calls give per tool, every tool of the
// catalog named; examples of several catalogs (the corpus) record nothing.
TEST(TrainingData, GivenArgumentsNameTheKeysAnAppsExamplesGive) {
  auto cat = text::ParseToolCatalog(
      R"({"tools":[{"type":"function","function":{"name":"pay","description":"Pay someone",)"
      R"("parameters":{"type":"object","properties":{"payee":{"type":"string"},)"
      R"("amount":{"type":"integer"},"note":{"type":"string"},"speed":{"type":"string"}},)"
      R"("required":["payee"]}}},{"type":"function","function":{"name":"balance"}}]})");
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  const auto catalog = std::make_shared<const text::ToolCatalog>(std::move(*cat));
  const std::string jsonl =
      R"({"request":"send 25 dollars to Anna","calls":[{"name":"pay","arguments":{"payee":"Anna","amount":25}}]})"
      "\n"
      R"({"request":"Pay Tom, fast","calls":[{"name":"pay","arguments":{"payee":"Tom","speed":"fast"}}]})"
      "\n";
  auto ex = ParseTrainingData(jsonl, "app.jsonl", catalog);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(GivenArguments(*ex), R"({"balance":[],"pay":["amount","payee","speed"]})");
  EXPECT_EQ(GivenArguments({}), "");
  // The tool prior's examples (keyed by their tool's text) are not looked at: beside the calls
  // the same record, alone none.
  const std::vector<TrainingExample> prior = ChannelExamples(*ex);
  ASSERT_FALSE(prior.empty());
  std::vector<TrainingExample> both = *ex;
  both.insert(both.end(), prior.begin(), prior.end());
  EXPECT_EQ(GivenArguments(both), GivenArguments(*ex));
  EXPECT_EQ(GivenArguments(prior), "");
  // A TRL line declares its own catalog: with the app's lines, two catalogs.
  auto trl = ParseTrainingData(TrlLine(R"({"state":"on"})"), "trl.jsonl");
  ASSERT_TRUE(trl.ok()) << trl.status().ToString();
  EXPECT_EQ(GivenArguments(*trl), R"({"set_light":["state"]})");
  std::vector<TrainingExample> mixed = *ex;
  mixed.push_back((*trl)[0]);
  EXPECT_EQ(GivenArguments(mixed), "");
}

// Whole numbers written as fractions swap as integers; ones past int64's range are left alone
// (converting them was undefined behaviour, which clang's UBSan reports).
TEST(TrainingData, AugmentTakesWholeFractionsAndLeavesHugeOnesAlone) {
  auto c = text::ParseToolCatalog(
      R"({"tools":[{"type":"function","function":{"name":"wait","description":"Wait",)"
      R"("parameters":{"type":"object","properties":{"seconds":{"type":"number"}},)"
      R"("required":["seconds"]}}}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto catalog = std::make_shared<const text::ToolCatalog>(std::move(*c));
  const std::string jsonl =
      R"({"request":"wait 5 seconds","calls":[{"name":"wait","arguments":{"seconds":5.0}}]})"
      "\n"
      R"({"request":"pause for 9 seconds","calls":[{"name":"wait","arguments":{"seconds":9.0}}]})"
      "\n"
      R"({"request":"wait 1e300 seconds","calls":[{"name":"wait","arguments":{"seconds":1e300}}]})"
      "\n"
      R"({"request":"wait -9.5e18 seconds","calls":[{"name":"wait","arguments":{"seconds":-9.5e18}}]})"
      "\n";
  auto ex = ParseTrainingData(jsonl, "app.jsonl", catalog);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const std::vector<TrainingExample> aug = AugmentSwappingValues(*ex, 2, 3);
  std::set<std::string> requests;
  for (const TrainingExample& e : aug) requests.insert(e.request);
  EXPECT_TRUE(requests.count("wait 9 seconds") && requests.count("pause for 5 seconds"));
  EXPECT_EQ(aug.size(), ex->size() + 2) << "5 and 9 swap with each other, the huge ones with none";
}

TEST(TrainingData, AugmentLeavesValuesNotInTheRequestAlone) {
  // "twenty five" is not written as digits and "Anna" is the only payee: nothing to swap.
  const std::string jsonl =
      R"({"request":"send twenty five dollars to Anna","calls":[{"name":"pay","arguments":{"payee":"Anna","amount":25}}]})"
      "\n"
      R"({"request":"send Anna 30","calls":[{"name":"pay","arguments":{"payee":"Anna","amount":30}}]})"
      "\n";
  auto ex = ParseTrainingData(jsonl, "app.jsonl", PayCatalog());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const std::vector<TrainingExample> aug = AugmentSwappingValues(*ex, 4, 1);
  // Pools hold only values seen verbatim: payee {Anna}, amount {30} (25 is not in its line's
  // request). One value per pool: nothing to swap to.
  EXPECT_EQ(aug.size(), ex->size());
}

TEST(TrainingData, ChannelExamplesRenderAsTheToolPriorAsks) {
  constexpr const char* kTwo =
      R"([{"name":"set_light","description":"Switch a light","parameters":{"type":"object",)"
      R"("properties":{"room":{"type":"string"}}}},)"
      R"({"name":"stop","description":"Stop","parameters":{"type":"object","properties":{}}}])";
  auto cat = text::ParseToolCatalog(kTwo);
  ASSERT_TRUE(cat.ok());
  auto catalog = std::make_shared<const text::ToolCatalog>(std::move(*cat));
  const std::string jsonl =
      R"({"request":"lights on in the hall","calls":[{"name":"set_light","arguments":{"room":"hall"}}]})"
      "\n"
      R"({"request":"lights on in the hall","calls":[{"name":"set_light","arguments":{}}]})"
      "\n"
      R"({"request":"stop it","calls":[{"name":"stop","arguments":{}}]})"
      "\n"
      R"({"request":"both","calls":[{"name":"stop","arguments":{}},{"name":"set_light","arguments":{}}]})"
      "\n";
  auto ex = ParseTrainingData(jsonl, "train.jsonl", catalog);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const std::vector<TrainingExample> prior = ChannelExamples(*ex);
  // The same request to the same tool once; a two-call example gives none.
  ASSERT_EQ(prior.size(), 2u);
  EXPECT_TRUE(prior[0].channel && prior[1].channel);
  EXPECT_EQ(prior[0].request, "lights on in the hall");
  EXPECT_EQ(prior[1].request, "stop it");
  EXPECT_EQ(prior[0].catalog_key, "channel\n" + ChannelToolText(catalog->tools[0]));
  EXPECT_NE(prior[0].catalog_key, prior[1].catalog_key);

  auto tk = SyntheticTokenizer();
  auto t = RenderTrainingExample(*tk, prior[1]);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::vector<int32_t> prompt = ChannelPromptTokens(*tk, catalog->tools[1]);
  auto req = ChannelRequestTokens(*tk, "stop it");
  ASSERT_TRUE(req.ok());
  std::vector<int32_t> want = prompt;
  want.insert(want.end(), req->begin(), req->end());
  EXPECT_EQ(t->tokens, want);
  EXPECT_EQ(t->tokens[0], tk->vocab().bos);
  // The prompt's last token is the first adapted row: its row predicts the request's first token.
  EXPECT_EQ(t->prefix_len, static_cast<int64_t>(prompt.size()) - 1);
  EXPECT_EQ(t->target_start, static_cast<int64_t>(prompt.size()));
}

// A catalog with examples (text::Tool::examples): a tool prior example sees its tool's examples
// but its own request, in its prompt and its key; so does a negative (the other tool's
// examples but the request).
TEST(TrainingData, ChannelExamplesLeaveTheirOwnRequestOutOfTheExamples) {
  auto cat = text::ParseToolCatalog(
      R"([{"name":"set_light","examples":["lights on in the hall","kitchen light off"]},)"
      R"({"name":"stop","examples":["stop it","lights on in the hall"]}])");
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  auto catalog = std::make_shared<const text::ToolCatalog>(std::move(*cat));
  const std::string jsonl =
      R"({"request":"lights on in the hall","calls":[{"name":"set_light","arguments":{}}]})"
      "\n"
      R"({"request":"kitchen light off","calls":[{"name":"set_light","arguments":{}}]})"
      "\n";
  auto ex = ParseTrainingData(jsonl, "train.jsonl", catalog);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const std::vector<TrainingExample> prior = ChannelExamples(*ex, /*negatives=*/1, 1);
  ASSERT_EQ(prior.size(), 2u);
  auto tk = SyntheticTokenizer();
  auto without = [&](const text::Tool& tool, const std::string& request) {
    text::Tool t = tool;
    std::erase(t.examples, request);
    return t;
  };
  const text::Tool& light = catalog->tools[0];
  const text::Tool& stop = catalog->tools[1];
  for (size_t i = 0; i < 2; ++i) {
    const std::string& req = prior[i].request;
    auto t = RenderTrainingExample(*tk, prior[i]);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const std::vector<int32_t> prompt = ChannelPromptTokens(*tk, without(light, req));
    EXPECT_EQ(std::vector<int32_t>(t->tokens.begin(), t->tokens.begin() + prompt.size()), prompt);
    EXPECT_NE(prompt, ChannelPromptTokens(*tk, light)) << req;  // its request was listed
    ASSERT_EQ(prior[i].channel_negatives, std::vector<std::string>{"stop"});
    const TrainingExample n = ChannelNegative(prior[i], "stop");
    auto nt = RenderTrainingExample(*tk, n);
    ASSERT_TRUE(nt.ok());
    const std::vector<int32_t> nprompt = ChannelPromptTokens(*tk, without(stop, req));
    EXPECT_EQ(std::vector<int32_t>(nt->tokens.begin(), nt->tokens.begin() + nprompt.size()),
              nprompt);
  }
  // Each example's prompt differs, and so do the keys that share a prefix.
  EXPECT_NE(prior[0].catalog_key, prior[1].catalog_key);
  EXPECT_NE(ChannelNegative(prior[0], "stop").catalog_key,
            ChannelNegative(prior[1], "stop").catalog_key);
}

// LeaveOuts: a key chosen past optional keys of its tool, and a '}' closing the arguments while
// optional keys could follow, with the keys each leaves out; keys are read at the top level
// only, strings (with their commas and braces) skipped, and each call of several found.
TEST(TrainingData, LeaveOutsFindKeysPastOptionalOnesAndEarlyCloses) {
  auto cat = text::ParseToolCatalog(
      R"([{"name":"set_light","parameters":{"type":"object","properties":{)"
      R"("state":{"type":"string","enum":["on","off"]},"room":{"type":"string"},)"
      R"("level":{"type":"integer"}},"required":["state"]}},)"
      R"({"name":"order_ink","parameters":{"type":"object","properties":{)"
      R"("cartridge":{"type":"string"},"quantity":{"type":"integer"},)"
      R"("colors":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},)"
      R"("alpha":{"type":"integer"}}}}},"required":["cartridge"]}}])");
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  using Keys = std::vector<std::string>;
  auto found = [&](const std::string& calls) {
    std::vector<std::tuple<size_t, std::string, Keys>> out;
    for (const LeaveOut& l : LeaveOuts(calls, *cat)) out.emplace_back(l.offset, l.tool, l.keys);
    return out;
  };
  using Want = std::vector<std::tuple<size_t, std::string, Keys>>;
  // level and room (optional) sort before state: choosing state leaves them out; nothing
  // optional sorts after state.
  std::string c = text::RenderCall("set_light", {{"state", "on"}});
  EXPECT_EQ(found(c), (Want{{c.find("state"), "set_light", {"level", "room"}}}));
  // level given: state leaves room out.
  c = text::RenderCall("set_light", {{"state", "on"}, {"level", 3}});
  EXPECT_EQ(found(c), (Want{{c.find("state"), "set_light", {"room"}}}));
  c = text::RenderCall("set_light", {{"state", "on"}, {"level", 3}, {"room", "hall, {kitchen}"}});
  EXPECT_THAT(found(c), ::testing::IsEmpty());
  // cartridge then '}': colors and quantity could follow.
  c = text::RenderCall("order_ink", {{"cartridge", "cyan"}});
  EXPECT_EQ(found(c), (Want{{c.rfind('}'), "order_ink", {"colors", "quantity"}}}));
  // The nested objects' keys and braces are not the call's.
  c = text::RenderCall("order_ink",
                       {{"colors", {{{"name", "red"}}}}, {"cartridge", "cyan"}, {"quantity", 2}});
  EXPECT_THAT(found(c), ::testing::IsEmpty());
  // Two calls, and a tool the catalog lacks (nothing of its own).
  const std::string two = text::RenderCall("set_light", {{"state", "on"}}) +
                          text::RenderCall("nope", {{"b", 1}}) +
                          text::RenderCall("order_ink", {{"cartridge", "cyan"}});
  EXPECT_EQ(found(two), (Want{{two.find("state"), "set_light", {"level", "room"}},
                              {two.rfind('}'), "order_ink", {"colors", "quantity"}}}));
}

// RenderTrainingExample's leave_out: the target tokens that hold LeaveOuts' characters.
TEST(TrainingData, LeaveOutTokensHoldTheLeaveOutCharacters) {
  auto catalog = text::ParseToolCatalog(kTools);
  ASSERT_TRUE(catalog.ok());
  auto shared = std::make_shared<const text::ToolCatalog>(std::move(*catalog));
  auto tk = SyntheticTokenizer();
  for (const char* args : {R"({"state":"on"})", R"({"state":"on","level":3})",
                           R"({"state":"on","level":3,"room":"hall"})"}) {
    auto ex = ParseTrainingData(std::string(R"({"request":"lights on in the hall","calls":[)") +
                                    R"({"name":"set_light","arguments":)" + args + "}]}",
                                "t.jsonl", shared);
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    auto t = RenderTrainingExample(*tk, (*ex)[0]);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    std::string spelled;
    std::vector<std::pair<int64_t, std::vector<std::string>>> want, got;
    const std::vector<LeaveOut> outs =
        LeaveOuts(text::RenderCall("set_light", (*ex)[0].calls[0].second), *shared);
    for (size_t i = t->target_start; i < t->tokens.size(); ++i) {
      const size_t begin = spelled.size();
      spelled += tk->TokenToPiece(t->tokens[i], true);
      for (const LeaveOut& l : outs) {
        if (l.offset >= begin && l.offset < spelled.size()) want.emplace_back(i, l.keys);
      }
    }
    for (const auto& l : t->leave_out) {
      EXPECT_EQ(l.tool, "set_light");
      got.emplace_back(l.index, l.keys);
    }
    EXPECT_EQ(got, want) << args;
    EXPECT_EQ(got.size(), std::string(args).find("room") == std::string::npos ? 1u : 0u) << args;
  }
}

}  // namespace
}  // namespace fg::call
