#include "src/text/call_parser.h"

#include <random>
#include <cstdio>
#include <ostream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/text/function_prompt.h"

namespace fg::text {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using nlohmann::json;

const char kCatalog[] = R"([
  {"name":"set_light","description":"Light.","parameters":{"type":"object","properties":{
     "room":{"type":"string"},"state":{"type":"string","enum":["on","off"]},
     "brightness":{"type":"integer"},"level":{"type":"number"},"dim":{"type":"boolean"},
     "zip":{"type":"string"},
     "rooms":{"type":"array","items":{"type":"integer"}},
     "color":{"type":"object","properties":{"r":{"type":"integer"},"name":{"type":"string"}},
              "required":["r"]}},
     "required":["room","state"]}},
  {"name":"set_timer","parameters":{"type":"object","properties":{
     "seconds":{"type":"integer"}},"required":["seconds"]}},
  {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
  {"name":"set_alarm"}])";

class CallParserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<ToolCatalog> c = ParseToolCatalog(kCatalog);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = *std::move(c);
  }
  StatusOr<ParsedOutput> Parse(std::string_view text) { return ParseModelOutput(text, &catalog_); }
  ToolCatalog catalog_;
};

TEST(CallParser, UntypedValues) {
  FG_ASSERT_OK_AND_ASSIGN(
      ParsedOutput out,
      ParseModelOutput("<start_function_call>call:f{s:<escape>a, {b}: c<escape>,i:-12,x:2.5e3,"
                       "t:true,f:false,n:null,o:{k:<escape>v<escape>,<escape>e k<escape>:[]},"
                       "a:[1,<escape>two<escape>,[false]],w:hello}<end_function_call>"));
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "f");
  EXPECT_EQ(out.calls[0].arguments,
            json::parse(R"({"s":"a, {b}: c","i":-12,"x":2500.0,"t":true,"f":false,"n":null,
                            "o":{"k":"v","e k":[]},"a":[1,"two",[false]],"w":"hello"})"));
  EXPECT_TRUE(out.calls[0].arguments["i"].is_number_integer());
  EXPECT_EQ(out.content, "");
}

TEST(CallParser, RoundTripsRenderedCalls) {
  const json args = json::parse(R"({"a":[1,2.5,"x",{"k":true}],"b":{"c":null},"s":"a:b,c"})");
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out, ParseModelOutput(RenderCall("my_fn", args)));
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, args);
}

TEST_F(CallParserTest, ModelMdExample) {
  FG_ASSERT_OK_AND_ASSIGN(
      ParsedOutput out,
      Parse("<start_function_call>call:get_weather{city:<escape>Tokyo<escape>}"
            "<end_function_call><start_function_response>"));
  EXPECT_EQ(out.ToJson(), json::parse(R"({"name":"get_weather","arguments":{"city":"Tokyo"}})"));
  EXPECT_EQ(out.content, "");
}

TEST_F(CallParserTest, TypedBySchema) {
  FG_ASSERT_OK_AND_ASSIGN(
      ParsedOutput out,
      Parse("<start_function_call>call:set_light{brightness:<escape>40<escape>,"
            "level:<escape> 0.5 <escape>,dim:<escape>True<escape>,zip:007,room:12,"
            "state:<escape>on<escape>,rooms:[<escape>1<escape>,2.0],"
            "color:{r:<escape>255<escape>,name:7}}<end_function_call>"));
  const json& a = out.calls[0].arguments;
  EXPECT_EQ(a, json::parse(R"({"brightness":40,"level":0.5,"dim":true,"zip":"007","room":"12",
                                "state":"on","rooms":[1,2],"color":{"r":255,"name":"7"}})"));
  EXPECT_TRUE(a["brightness"].is_number_integer());
  EXPECT_TRUE(a["rooms"][1].is_number_integer());
  FG_EXPECT_OK(ValidateCall(*catalog_.Find("set_light"), a));
}

TEST_F(CallParserTest, StringsThatAreNotNumbersStayStrings) {
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out,
                          Parse("<start_function_call>call:set_timer{seconds:<escape>ten<escape>}"
                                "<end_function_call>"));
  EXPECT_EQ(out.calls[0].arguments["seconds"], "ten");
  EXPECT_THAT(ValidateCall(*catalog_.Find("set_timer"), out.calls[0].arguments),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expected INTEGER, got STRING")));
}

TEST_F(CallParserTest, SeveralCallsAndContent) {
  FG_ASSERT_OK_AND_ASSIGN(
      ParsedOutput out,
      Parse("Sure. <start_function_call>call:set_timer{seconds:60}<end_function_call>"
            "<start_function_call>call:get_weather{city:<escape>Paris<escape>}"
            "<end_function_call> Done.<end_of_turn>"));
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.content, "Sure.  Done.");
  EXPECT_EQ(out.ToJson(), json::parse(R"([{"name":"set_timer","arguments":{"seconds":60}},
                                          {"name":"get_weather","arguments":{"city":"Paris"}}])"));
}

TEST_F(CallParserTest, TextOnly) {
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out, Parse("I cannot do that.<end_of_turn>"));
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, "I cannot do that.");
  EXPECT_EQ(out.ToJson(), json::array());
}

TEST_F(CallParserTest, MissingEndTokenAtEndOfText) {
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out,
                          Parse("<start_function_call>call:set_alarm{}"));
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, json::object());
}

TEST_F(CallParserTest, ToleratesSpaces) {
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out,
                          Parse("<start_function_call>call:set_timer { seconds : 5 } "
                                "<end_function_call>"));
  EXPECT_EQ(out.calls[0].arguments["seconds"], 5);
}

TEST_F(CallParserTest, NameSnapping) {
  struct Case {
    const char* written;
    const char* snapped;
  };
  for (const Case& c : {Case{"set_light", "set_light"}, Case{"SetLight", "set_light"},
                        Case{"set-light", "set_light"}, Case{"set_ligth", "set_light"},
                        Case{"get_wether", "get_weather"}, Case{"settimer", "set_timer"}}) {
    FG_ASSERT_OK_AND_ASSIGN(const Tool* t, SnapToolName(catalog_, c.written));
    EXPECT_EQ(t->name, c.snapped) << c.written;
  }
  EXPECT_THAT(SnapToolName(catalog_, "turn_on_tv"),
              StatusIs(StatusCode::kNotFound, HasSubstr("unknown function")));
  // set_alarm / set_light... "set_al" is 3 edits from set_alarm: unknown.
  EXPECT_THAT(SnapToolName(catalog_, "set_al"), StatusIs(StatusCode::kNotFound, HasSubstr("")));
  // Equidistant from two names: ambiguous.
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog two, ParseToolCatalog(R"([{"name":"abcd"},{"name":"abce"}])"));
  EXPECT_THAT(SnapToolName(two, "abcf"), StatusIs(StatusCode::kNotFound, HasSubstr("ambiguous")));
  EXPECT_THAT(Parse("<start_function_call>call:turn_on_tv{}<end_function_call>"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("offset 26: unknown function")));
}

TEST_F(CallParserTest, ValidateCall) {
  const Tool& light = *catalog_.Find("set_light");
  FG_EXPECT_OK(ValidateCall(light, json{{"room", "den"}, {"state", "off"}}));
  EXPECT_THAT(ValidateCall(light, json{{"room", "den"}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing required key \"state\"")));
  EXPECT_THAT(ValidateCall(light, json{{"room", "den"}, {"state", "dim"}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("set_light.state: \"dim\" is not")));
  EXPECT_THAT(ValidateCall(light, json{{"room", "den"}, {"state", "on"}, {"x", 1}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("set_light.x: unknown key")));
  EXPECT_THAT(
      ValidateCall(light, json::parse(R"({"room":"d","state":"on","rooms":[1,"a"]})")),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("set_light.rooms[1]: expected INTEGER")));
  EXPECT_THAT(ValidateCall(light, json::parse(R"({"room":"d","state":"on","color":{}})")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing required key \"r\"")));
  FG_EXPECT_OK(ValidateCall(light, json::parse(R"({"room":"d","state":"on","level":3})")));
  EXPECT_THAT(ValidateCall(light, json::array()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("must be an object")));
}

struct Malformed {
  const char* text;
  const char* message;
};

// A stable, CTest-safe, unique name for the case (the default printer shows the struct's pointer
// bytes, which change from run to run): the expected message's letters and digits, then a hash
// of the input.
void PrintTo(const Malformed& c, std::ostream* os) {
  std::string name;
  for (const char* p = c.message; *p != '\0' && name.size() < 48; ++p) {
    const char ch = *p;
    const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    name += keep ? ch : '_';
  }
  uint32_t h = 2166136261u;  // FNV-1a
  for (const char* p = c.text; *p != '\0'; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", h);
  *os << name << '_' << hex;
}

class CallParserMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(CallParserMalformed, StructuredError) {
  EXPECT_THAT(ParseModelOutput(GetParam().text),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    All, CallParserMalformed,
    ::testing::Values(
        Malformed{"<start_function_call>call:f{a:<escape>open}<end_function_call>",
                  "offset 30: unterminated <escape> string"},
        Malformed{"<start_function_call>call:f{a:1<end_function_call>", "expected ',' or '}'"},
        Malformed{"<start_function_call>call:f{a:1", "unexpected end of text, expected ',' or '}'"},
        Malformed{"<start_function_call>call:f{a:[1,2}<end_function_call>",
                  "expected ',' or ']'"},
        Malformed{"<start_function_call>call:f{a:}", "offset 30: expected a value"},
        Malformed{"<start_function_call>call:f{:1}", "empty key"},
        Malformed{"<start_function_call>call:f{a}", "expected ':' after key"},
        Malformed{"<start_function_call>call:f{a:1,a:2}", "duplicate key \"a\""},
        Malformed{"<start_function_call>f{a:1}", "offset 21: expected \"call:\""},
        Malformed{"<start_function_call>call:{a:1}", "empty function name"},
        Malformed{"<start_function_call>call:f<end_function_call>", "expected '{' after name"},
        Malformed{"<start_function_call>call:f", "unexpected end of text"},
        Malformed{"<start_function_call>call:f{}junk", "expected <end_function_call>"},
        Malformed{"<start_function_call>call:f{a:<escape>\xff<escape>}",
                  "offset 38: string is not valid UTF-8"},
        Malformed{"<start_function_call>call:f{<escape>k", "unterminated <escape> key"}));

TEST(CallParser, DepthIsBounded) {
  std::string deep = "<start_function_call>call:f{a:";
  for (int i = 0; i < 100000; ++i) deep += '[';
  EXPECT_THAT(ParseModelOutput(deep),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("nested too deeply")));
  std::string ok = "<start_function_call>call:f{a:";
  for (int i = 0; i < kMaxValueDepth - 2; ++i) ok += '[';
  for (int i = 0; i < kMaxValueDepth - 2; ++i) ok += ']';
  ok += '}';
  FG_EXPECT_OK(ParseModelOutput(ok));
}

TEST(CallParser, InvalidUtf8InContentIsReplaced) {
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput out, ParseModelOutput("ab\xc3"));
  EXPECT_EQ(out.content, "ab\xEF\xBF\xBD");
}

// The example catalog end to end: its prompt declares every tool, and a typical answer parses,
// snaps and validates.
TEST(CallParser, SmartHomeExample) {
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog c,
                          LoadToolCatalog(std::string(FG_SOURCE_DIR) + "/examples/smart_home.json"));
  const std::string prompt = RenderPrompt(c, "turn the kitchen light on");
  size_t declarations = 0;
  for (size_t at = 0; (at = prompt.find(kStartDeclaration, at)) != std::string::npos; ++at) {
    ++declarations;
  }
  EXPECT_EQ(declarations, c.tools.size());
  FG_ASSERT_OK_AND_ASSIGN(
      ParsedOutput out,
      ParseModelOutput("<start_function_call>call:SetLight{room:<escape>kitchen<escape>,"
                       "state:<escape>on<escape>,brightness:<escape>80<escape>}"
                       "<end_function_call><start_function_call>call:play_media{query:"
                       "<escape>jazz<escape>,speakers:[<escape>den<escape>],shuffle:true}",
                       &c));
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].ToJson(), json::parse(R"({"name":"set_light","arguments":
      {"room":"kitchen","state":"on","brightness":80}})"));
  for (const Call& call : out.calls) FG_EXPECT_OK(ValidateCall(*c.Find(call.name), call.arguments));
}

// Bounded randomized mutation loop: every outcome is a value or a Status, and every value can
// be dumped as JSON (valid UTF-8, finite numbers).
TEST_F(CallParserTest, MutatedInputsNeverCrash) {
  const std::vector<std::string> seeds = {
      "<start_function_call>call:set_light{room:<escape>den<escape>,state:<escape>on<escape>,"
      "rooms:[1,2],color:{r:3,name:<escape>x<escape>}}<end_function_call>",
      "Ok <start_function_call>call:set_timer{seconds:60}<end_function_call>"
      "<start_function_call>call:get_weather{city:<escape>P<escape>}<end_function_call>",
  };
  const std::vector<std::string> pieces = {"<escape>", "{", "}", "[", "]", ",", ":", "call:",
                                           "<start_function_call>", "<end_function_call>",
                                           "1e999", "-", "\xff", "true", " ", "set_lihgt"};
  std::mt19937 rng(1234);
  int ok = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + rng() % 4;
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: s.erase(std::min(at, s.size() - 1), 1 + rng() % 8); break;
        case 1: s.insert(at, pieces[rng() % pieces.size()]); break;
        case 2: s.insert(at, 1, static_cast<char>(rng() % 256)); break;
        default: s.resize(at); break;
      }
    }
    for (const ToolCatalog* c : std::vector<const ToolCatalog*>{nullptr, &catalog_}) {
      StatusOr<ParsedOutput> out = ParseModelOutput(s, c);
      if (out.ok()) {
        ++ok;
        EXPECT_NO_THROW((void)out->ToJson().dump()) << s;
      } else {
        ++errors;
        EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << s;
      }
    }
  }
  // Both outcomes occur: the loop exercises the error paths and the success paths.
  EXPECT_GT(ok, 1000);
  EXPECT_GT(errors, 1000);
}

// The tools the compact dialect's test names (set_light's nested color has an rgb array).
const char kCompactCatalog[] = R"([
  {"name":"set_light","parameters":{"type":"object","properties":{
     "room":{"type":"string"},"state":{"type":"string","enum":["on","off"]},
     "brightness":{"type":"integer"},"dim":{"type":"boolean"},
     "rooms":{"type":"array","items":{"type":"integer"}},
     "color":{"type":"object","properties":{"r":{"type":"integer"},
              "rgb":{"type":"array","items":{"type":"number"}}},"required":["r"]}},
     "required":["room","state"]}},
  {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},
     "days":{"type":"integer"}}}}])";

TEST(CompactParser, ParsesCallsAndReportsErrors) {
  StatusOr<ToolCatalog> parsed = ParseToolCatalog(kCompactCatalog);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ToolCatalog c = *std::move(parsed);
  const std::vector<std::string> map = {"set_light", "get_weather"};
  FG_ASSERT_OK_AND_ASSIGN(
      ParsedOutput out,
      ParseCompactOutput(
          R"(ok <tool_0>(room="a \"b\" \\", state="on", brightness=3, dim=true, rooms=[1, 2], color={r=1, rgb=[0.5]})<end><tool_1>(days=2)<end><end_of_turn>)",
          &c, map));
  EXPECT_EQ(out.content, "ok ");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].arguments,
            json::parse(R"({"room":"a \"b\" \\","state":"on","brightness":3,"dim":true,
                            "rooms":[1,2],"color":{"r":1,"rgb":[0.5]}})"));
  EXPECT_EQ(out.calls[1].ToJson(), json::parse(R"({"name":"get_weather","arguments":{"days":2}})"));
  // The final <end> may be missing.
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput tail, ParseCompactOutput("<tool_1>(days=2)", &c, map));
  EXPECT_EQ(tail.calls.size(), 1u);
  EXPECT_THAT(ParseCompactOutput("<tool_5>()", &c, map),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not in the tool map")));
  EXPECT_THAT(ParseCompactOutput("<tool_0>(room=\"x)", &c, map),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unterminated")));
  EXPECT_THAT(ParseCompactOutput("<tool_0>(room=\"\\n\")", &c, map),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("escape")));
  EXPECT_THAT(ParseCompactOutput("<tool_0>(a=1, a=2)", &c, map),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  EXPECT_THAT(ParseCompactOutput("<tool_1>(days=2) x", &c, map),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expected <end>")));
  EXPECT_THAT(ParseCompactOutput("<tool_x>", &c, map),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("malformed")));
  const std::vector<std::string> bad_map = {"nope"};
  EXPECT_THAT(ParseCompactOutput("<tool_0>()", &c, bad_map),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not in the catalog")));
  // Without a catalog the names and values are kept as written.
  FG_ASSERT_OK_AND_ASSIGN(ParsedOutput raw, ParseCompactOutput("<tool_0>(x=1.5)", nullptr, bad_map));
  EXPECT_EQ(raw.calls[0].ToJson(), json::parse(R"({"name":"nope","arguments":{"x":1.5}})"));
}

}  // namespace
}  // namespace fg::text
