#include "src/text/function_prompt.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/text/tokenizer.h"

namespace fg::text {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using nlohmann::json;

ToolCatalog Parse(const std::string& text) {
  StatusOr<ToolCatalog> c = ParseToolCatalog(text);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *std::move(c) : ToolCatalog{};
}

const char kWeatherCatalog[] = R"([{"type":"function","function":{
  "name":"get_weather","description":"Gets the weather.",
  "parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"}},
                "required":["city"]}}}])";

// docs/model.md "FunctionGemma prompt and output", byte for byte (without the <bos> token and
// without the model's answer).
TEST(FunctionPrompt, ModelMdExampleByteExact) {
  const std::string golden =
      "<start_of_turn>developer\n"
      "You are a model that can do function calling with the following functions"
      "<start_function_declaration>declaration:get_weather{description:<escape>Gets the "
      "weather.<escape>,parameters:{properties:{city:{description:<escape>City "
      "name<escape>,type:<escape>STRING<escape>}},required:[<escape>city<escape>],type:<escape>"
      "OBJECT<escape>}}<end_function_declaration><end_of_turn>\n"
      "<start_of_turn>user\n"
      "What's the weather in Tokyo?<end_of_turn>\n"
      "<start_of_turn>model\n";
  EXPECT_EQ(RenderPrompt(Parse(kWeatherCatalog), "What's the weather in Tokyo?"), golden);
  // And the model's answer in the example, rendered from its JSON form.
  EXPECT_EQ(RenderCall("get_weather", json{{"city", "Tokyo"}}),
            "<start_function_call>call:get_weather{city:<escape>Tokyo<escape>}"
            "<end_function_call>");
}

// Google's "full function calling sequence" declaration (its processor output without the
// doc's display spaces before closing braces): enum after description, before type.
TEST(FunctionPrompt, EnumGolden) {
  const ToolCatalog c = Parse(R"([{"type":"function","function":{
    "name":"get_current_weather","description":"Gets the current weather in a given location.",
    "parameters":{"type":"object","properties":{
      "location":{"type":"string","description":"The city and state, e.g. \"San Francisco, CA\" or \"Tokyo, JP\""},
      "unit":{"type":"string","enum":["celsius","fahrenheit"],
              "description":"The unit to return the temperature in."}},
      "required":["location"]}}}])");
  EXPECT_EQ(RenderDeclarations(c),
            "<start_function_declaration>declaration:get_current_weather{description:<escape>"
            "Gets the current weather in a given location.<escape>,parameters:{properties:{"
            "location:{description:<escape>The city and state, e.g. \"San Francisco, CA\" or "
            "\"Tokyo, JP\"<escape>,type:<escape>STRING<escape>},unit:{description:<escape>The "
            "unit to return the temperature in.<escape>,enum:[<escape>celsius<escape>,<escape>"
            "fahrenheit<escape>],type:<escape>STRING<escape>}},required:[<escape>location"
            "<escape>],type:<escape>OBJECT<escape>}}<end_function_declaration>");
}

TEST(FunctionPrompt, NumericEnumIsBare) {
  const ToolCatalog c = Parse(R"([{"name":"f","parameters":{"properties":{
      "level":{"type":"integer","enum":[1,2,3]}}}}])");
  EXPECT_EQ(RenderDeclarations(c),
            "<start_function_declaration>declaration:f{description:<escape><escape>,parameters:{"
            "properties:{level:{enum:[1,2,3],type:<escape>INTEGER<escape>}},type:<escape>OBJECT"
            "<escape>}}<end_function_declaration>");
}

TEST(FunctionPrompt, NestedObjectGolden) {
  const ToolCatalog c = Parse(R"([{"name":"create_event","description":"Creates an event.",
    "parameters":{"type":"object","properties":{
      "when":{"type":"object","description":"Start time","properties":{
         "hour":{"type":"integer"},"minute":{"type":"integer","description":"0-59"}},
         "required":["hour"]},
      "title":{"type":"string"}},"required":["title","when"]}}])");
  EXPECT_EQ(RenderDeclarations(c),
            "<start_function_declaration>declaration:create_event{description:<escape>Creates an "
            "event.<escape>,parameters:{properties:{title:{type:<escape>STRING<escape>},when:{"
            "description:<escape>Start time<escape>,properties:{hour:{type:<escape>INTEGER"
            "<escape>},minute:{description:<escape>0-59<escape>,type:<escape>INTEGER<escape>}},"
            "required:[<escape>hour<escape>],type:<escape>OBJECT<escape>}},required:[<escape>"
            "title<escape>,<escape>when<escape>],type:<escape>OBJECT<escape>}}"
            "<end_function_declaration>");
}

TEST(FunctionPrompt, ArrayGolden) {
  const ToolCatalog c = Parse(R"([{"name":"play","description":"Plays.",
    "parameters":{"type":"object","properties":{
      "speakers":{"type":"array","description":"Where","items":{"type":"string",
                  "enum":["kitchen","den"]}},
      "tags":{"type":"array"}}}}])");
  EXPECT_EQ(RenderDeclarations(c),
            "<start_function_declaration>declaration:play{description:<escape>Plays.<escape>,"
            "parameters:{properties:{speakers:{description:<escape>Where<escape>,items:{enum:["
            "<escape>kitchen<escape>,<escape>den<escape>],type:<escape>STRING<escape>},type:"
            "<escape>ARRAY<escape>},tags:{type:<escape>ARRAY<escape>}},type:<escape>OBJECT"
            "<escape>}}<end_function_declaration>");
}

// Empty descriptions: the tool's is always written (the template writes it unconditionally),
// a property's is omitted (the template tests it). Empty required lists are omitted.
TEST(FunctionPrompt, EmptyDescriptionsGolden) {
  const ToolCatalog c = Parse(R"([{"name":"f","description":"","parameters":{"type":"object",
      "properties":{"a":{"type":"string","description":""}},"required":[]}}])");
  EXPECT_EQ(RenderDeclarations(c),
            "<start_function_declaration>declaration:f{description:<escape><escape>,parameters:{"
            "properties:{a:{type:<escape>STRING<escape>}},type:<escape>OBJECT<escape>}}"
            "<end_function_declaration>");
}

TEST(FunctionPrompt, NoParametersAndEmptyParameters) {
  const ToolCatalog c =
      Parse(R"([{"name":"ping","description":"Pings."},
                {"name":"pwd","description":"Dir.","parameters":{"type":"object","properties":{}}}])");
  // Several tools: no separator. Absent parameters: no block; empty object schema: type only.
  EXPECT_EQ(RenderDeclarations(c),
            "<start_function_declaration>declaration:ping{description:<escape>Pings.<escape>}"
            "<end_function_declaration><start_function_declaration>declaration:pwd{description:"
            "<escape>Dir.<escape>,parameters:{type:<escape>OBJECT<escape>}}"
            "<end_function_declaration>");
}

TEST(FunctionPrompt, CatalogOrderIsKept) {
  const ToolCatalog c = Parse(R"([{"name":"zeta"},{"name":"alpha"}])");
  const std::string d = RenderDeclarations(c);
  EXPECT_LT(d.find("zeta"), d.find("alpha"));
}

TEST(FunctionPrompt, CustomDeveloperMessage) {
  PromptOptions o;
  o.developer_message = "Today is Monday.\nYou are a model that can do function calling with "
                        "the following functions";
  const std::string p = RenderPrompt(Parse(R"([{"name":"ping"}])"), "hi", o);
  EXPECT_EQ(p.rfind("<start_of_turn>developer\nToday is Monday.\nYou are", 0), 0u);
  EXPECT_NE(p.find("functions<start_function_declaration>declaration:ping{"), std::string::npos);
}

TEST(FunctionPrompt, ValuesAndCalls) {
  EXPECT_EQ(RenderValue(json("a,b}")), "<escape>a,b}<escape>");
  EXPECT_EQ(RenderValue(json(15)), "15");
  EXPECT_EQ(RenderValue(json(-2.5)), "-2.5");
  EXPECT_EQ(RenderValue(json(true)), "true");
  EXPECT_EQ(RenderValue(json(nullptr)), "null");
  EXPECT_EQ(RenderValue(json::parse(R"({"b":[1,"x"],"a":{"c":false}})")),
            "{a:{c:false},b:[1,<escape>x<escape>]}");
  EXPECT_EQ(RenderCall("f", json::array()), "<start_function_call>call:f{}<end_function_call>");
}

// Google's sequence: call, then the response in the same model turn, then the answer.
TEST(FunctionPrompt, ToolResponseGolden) {
  EXPECT_EQ(RenderResponseBody("get_current_weather",
                               json{{"temperature", 15}, {"weather", "sunny"}}),
            "response:get_current_weather{temperature:15,weather:<escape>sunny<escape>}"
            "<end_function_response>");
  EXPECT_EQ(RenderResponse("f", json("done")),
            "<start_function_response>response:f{value:<escape>done<escape>}"
            "<end_function_response>");
}

TEST(FunctionPrompt, ConversationWithResponseGolden) {
  const ToolCatalog c = Parse(kWeatherCatalog);
  std::vector<Message> m(3);
  m[0].text = "Weather in Tokyo?";
  m[1].role = Message::Role::kModel;
  m[1].exchanges.push_back({"get_weather", json{{"city", "Tokyo"}},
                            json{{"temperature", 15}, {"weather", "sunny"}}});
  m[1].text = "It is sunny, 15 degrees.";
  m[2].text = "And in Paris?";
  FG_ASSERT_OK_AND_ASSIGN(std::string p, RenderConversation(c, m, true));
  const std::string tail =
      "<start_of_turn>user\nWeather in Tokyo?<end_of_turn>\n"
      "<start_of_turn>model\n<start_function_call>call:get_weather{city:<escape>Tokyo<escape>}"
      "<end_function_call><start_function_response>response:get_weather{temperature:15,weather:"
      "<escape>sunny<escape>}<end_function_response>It is sunny, 15 degrees.<end_of_turn>\n"
      "<start_of_turn>user\nAnd in Paris?<end_of_turn>\n<start_of_turn>model\n";
  EXPECT_EQ(p, RenderDeveloperTurn(c) + tail);
  // A conversation of one user message is RenderPrompt.
  FG_ASSERT_OK_AND_ASSIGN(std::string single, RenderConversation(c, {m[0]}, true));
  EXPECT_EQ(single, RenderPrompt(c, "Weather in Tokyo?"));
}

TEST(FunctionPrompt, ConversationPendingCallsEndWithResponseStart) {
  const ToolCatalog c = Parse(kWeatherCatalog);
  std::vector<Message> m(2);
  m[0].text = "Tokyo and Paris?";
  m[1].role = Message::Role::kModel;
  m[1].exchanges.push_back({"get_weather", json{{"city", "Tokyo"}}, std::nullopt});
  m[1].exchanges.push_back({"get_weather", json{{"city", "Paris"}}, std::nullopt});
  FG_ASSERT_OK_AND_ASSIGN(std::string p, RenderConversation(c, m, true));
  EXPECT_TRUE(p.ends_with("<end_function_call><start_function_response>"));
  EXPECT_NE(p.find("{city:<escape>Tokyo<escape>}<end_function_call><start_function_call>"),
            std::string::npos);
  // Pending calls must be last.
  m.push_back(Message{});
  EXPECT_THAT(RenderConversation(c, m, true),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("must end the conversation")));
  // Half-answered calls are refused.
  m.pop_back();
  m[1].exchanges[0].response = json{{"t", 1}};
  EXPECT_THAT(RenderConversation(c, m, true),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("some calls have responses")));
}

// The rendered prompt tokenized as fgemma will: special tokens atomic, exactly one BOS (the
// token, not text). The vocabulary is the real Gemma 3 one with ids 46..52 renamed to the
// FunctionGemma control tokens, which is where FunctionGemma keeps them (docs/model.md).
TEST(FunctionPrompt, TokenizesWithAtomicControlTokensAndOneBos) {
  const char* path = std::getenv("FGEMMA_MODEL");
  if (path == nullptr || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "FGEMMA_MODEL unset or missing: needs a Gemma 3 GGUF for its vocabulary";
  }
  FG_ASSERT_OK_AND_ASSIGN(auto file, gguf::File::Open(path));
  FG_ASSERT_OK_AND_ASSIGN(Vocab vocab, LoadVocab(*file));
  const char* kControl[] = {"<start_function_declaration>", "<end_function_declaration>",
                            "<start_function_call>",        "<end_function_call>",
                            "<start_function_response>",    "<end_function_response>",
                            "<escape>"};
  ASSERT_GT(vocab.tokens.size(), 106u);
  for (int i = 0; i < 7; ++i) {
    vocab.tokens[46 + i] = kControl[i];
    vocab.types[46 + i] = static_cast<int32_t>(TokenType::kControl);
  }
  FG_ASSERT_OK_AND_ASSIGN(auto tok, Tokenizer::Create(std::move(vocab)));
  const std::string prompt = RenderPrompt(Parse(kWeatherCatalog), "What's the weather in Tokyo?");
  const std::vector<int32_t> ids = tok->Encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
  const auto count = [&](int32_t id) { return std::count(ids.begin(), ids.end(), id); };
  EXPECT_EQ(count(46), 1);  // one declaration
  EXPECT_EQ(count(47), 1);
  EXPECT_EQ(count(52), 10);  // five escaped strings: 2 descriptions, STRING, city, OBJECT
  EXPECT_EQ(count(105), 3);  // developer, user, model turns
  EXPECT_EQ(count(106), 2);
  EXPECT_EQ(tok->Decode(std::span<const int32_t>(ids).subspan(1), /*special=*/true), prompt);
}

}  // namespace
}  // namespace fg::text
