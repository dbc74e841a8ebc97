#include "src/text/tool_catalog.h"

#include <fstream>
#include <cstdio>
#include <ostream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"

namespace fg::text {
namespace {

using ::fg::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kWeatherFunction[] = R"({
  "name": "get_weather", "description": "Gets the weather.",
  "parameters": {"type": "object",
                 "properties": {"city": {"type": "string", "description": "City name"}},
                 "required": ["city"]}})";

void ExpectWeather(const ToolCatalog& c) {
  ASSERT_EQ(c.tools.size(), 1u);
  const Tool& t = c.tools[0];
  EXPECT_EQ(t.name, "get_weather");
  EXPECT_EQ(t.description, "Gets the weather.");
  EXPECT_TRUE(t.has_parameters);
  EXPECT_EQ(t.parameters.type, "OBJECT");
  ASSERT_EQ(t.parameters.properties.count("city"), 1u);
  EXPECT_EQ(t.parameters.properties.at("city").type, "STRING");
  EXPECT_EQ(t.parameters.properties.at("city").description, "City name");
  EXPECT_EQ(t.parameters.required, std::vector<std::string>{"city"});
  EXPECT_EQ(c.Find("get_weather"), &t);
  EXPECT_EQ(c.Find("get_weathe"), nullptr);
}

TEST(ToolCatalog, OpenAiArray) {
  FG_ASSERT_OK_AND_ASSIGN(
      ToolCatalog c,
      ParseToolCatalog(std::string(R"([{"type":"function","function":)") + kWeatherFunction + "}]"));
  ExpectWeather(c);
  EXPECT_EQ(c.id, "");
}

TEST(ToolCatalog, OpenAiToolsObject) {
  FG_ASSERT_OK_AND_ASSIGN(
      ToolCatalog c, ParseToolCatalog(std::string(R"({"tools":[{"type":"function","function":)") +
                                      kWeatherFunction + "}]}"));
  ExpectWeather(c);
}

TEST(ToolCatalog, BareList) {
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog c,
                          ParseToolCatalog(std::string("[") + kWeatherFunction + "]"));
  ExpectWeather(c);
}

TEST(ToolCatalog, SeedShape) {
  FG_ASSERT_OK_AND_ASSIGN(
      ToolCatalog c,
      ParseToolCatalog(std::string(R"({"id":"home-v1","functions":[)") + kWeatherFunction + "]}"));
  ExpectWeather(c);
  EXPECT_EQ(c.id, "home-v1");
}

TEST(ToolCatalog, TypesAreUpperCasedAndNested) {
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog c, ParseToolCatalog(R"([{"name":"f","parameters":{
      "type":"OBJECT","properties":{
        "n":{"type":"Number"},"i":{"type":"integer","enum":[1,2,3]},"b":{"type":"boolean"},
        "s":{"type":["string","null"],"enum":["x","y"]},
        "a":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}},
                                      "required":["k"]},"maxItems":4},
        "o":{"properties":{"z":{"type":"string"}}}}}}])"));
  const Schema& p = c.tools[0].parameters;
  EXPECT_EQ(p.properties.at("n").type, "NUMBER");
  EXPECT_EQ(p.properties.at("i").type, "INTEGER");
  EXPECT_EQ(p.properties.at("i").enum_values.size(), 3u);
  EXPECT_EQ(p.properties.at("i").enum_values[1], 2);
  EXPECT_EQ(p.properties.at("b").type, "BOOLEAN");
  EXPECT_EQ(p.properties.at("s").type, "STRING");
  EXPECT_EQ(p.properties.at("s").enum_values[0], "x");
  const Schema& a = p.properties.at("a");
  EXPECT_EQ(a.type, "ARRAY");
  ASSERT_NE(a.items, nullptr);
  EXPECT_EQ(a.items->type, "OBJECT");
  EXPECT_EQ(a.items->required, std::vector<std::string>{"k"});
  EXPECT_EQ(a.max_items, 4);
  EXPECT_EQ(p.properties.at("n").max_items, -1);
  EXPECT_EQ(p.properties.at("o").type, "OBJECT");  // inferred from "properties"
  // Sorted keys.
  std::string keys;
  for (const auto& [k, v] : p.properties) keys += k;
  EXPECT_EQ(keys, "abinos");
}

TEST(ToolCatalog, MissingParametersAndDescription) {
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog c, ParseToolCatalog(R"([{"name":"ping"}])"));
  EXPECT_FALSE(c.tools[0].has_parameters);
  EXPECT_EQ(c.tools[0].description, "");
  EXPECT_EQ(c.tools[0].parameters.type, "OBJECT");
}

// fgemma's "examples" beside "name" (bare or in OpenAI's "function"): requests for the tool.
TEST(ToolCatalog, ExamplesAreRequestsForTheTool) {
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog c,
                          ParseToolCatalog(R"([{"type":"function","function":{"name":"ping",
          "examples":["ping the router","is the NAS up?"]}}, {"name":"pong","examples":[]},
          {"name":"echo"}])"));
  EXPECT_THAT(c.tools[0].examples, ElementsAre("ping the router", "is the NAS up?"));
  EXPECT_TRUE(c.tools[1].examples.empty());
  EXPECT_TRUE(c.tools[2].examples.empty());
}

struct BadCase {
  const char* json;
  const char* message;
};

// A stable, CTest-safe, unique name for the case (the default printer shows the struct's pointer
// bytes, which change from run to run): the expected message's letters and digits, then a hash
// of the input.
void PrintTo(const BadCase& c, std::ostream* os) {
  std::string name;
  for (const char* p = c.message; *p != '\0' && name.size() < 48; ++p) {
    const char ch = *p;
    const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    name += keep ? ch : '_';
  }
  uint32_t h = 2166136261u;  // FNV-1a
  for (const char* p = c.json; *p != '\0'; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", h);
  *os << name << '_' << hex;
}

class ToolCatalogErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ToolCatalogErrors, PointsAtTheEntry) {
  EXPECT_THAT(ParseToolCatalog(GetParam().json),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    All, ToolCatalogErrors,
    ::testing::Values(
        BadCase{R"([{"name":"a"},{"name":"b"},{"description":"x"}])",
                R"(tools[2]: missing "name")"},
        BadCase{R"([{"name":"a","examples":"ping"}])",
                R"(tools[0] ("a"): "examples" must be an array of strings)"},
        BadCase{R"([{"name":"a","examples":["ping",3]}])",
                R"(tools[0] ("a"): "examples" must be an array of non-empty strings)"},
        BadCase{R"([{"name":"a","examples":[""]}])",
                R"(tools[0] ("a"): "examples" must be an array of non-empty strings)"},
        BadCase{R"([{"name":"a","examples":["say <escape>"]}])",
                R"(tools[0] ("a"): "examples" contains the control token text)"},
        BadCase{R"([{"name":"get"},{"name":"set_light"},{"name":"set_light"}])",
                R"(tools[2] ("set_light"): duplicate name)"},
        BadCase{R"([{"name":"f","parameters":{"type":"object","properties":{
                   "room":{"type":"date"}}}}])",
                R"(tools[0].parameters.properties.room: unsupported type "date")"},
        BadCase{R"([{"name":"a"},{"name":"b"},{"name":"c"},{"name":"d","parameters":"x"}])",
                "tools[3]: parameters must be an object schema"},
        BadCase{R"([{"name":"d","parameters":{"type":"string"}}])",
                "tools[0]: parameters must be an object schema"},
        BadCase{R"([{"name":"f","parameters":{"type":"object","properties":{
                   "a":{"type":"string"}},"required":["b"]}}])",
                R"(tools[0].parameters: required key "b" is not in properties)"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"description":"x"}}}}])",
                R"(tools[0].parameters.properties.a: missing "type")"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"string",
                   "enum":[1]}}}}])",
                "tools[0].parameters.properties.a: enum[0] does not match type STRING"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"string","enum":[]}}}}])",
                "\"enum\" must be a non-empty array"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a b":{"type":"string"}}}}])",
                "tools[0].parameters.properties.a b: invalid property name"},
        BadCase{R"([{"name":"has space"}])", R"(tools[0] ("has space"): invalid name)"},
        BadCase{R"([{"name":42}])", R"(tools[0]: "name" must be a string)"},
        BadCase{R"([{"type":"retrieval","function":{"name":"x"}}])",
                "tools[0]: unsupported tool type"},
        BadCase{R"({"functions":[{"name":"a"},{"nam":"b"}]})", R"(functions[1]: missing "name")"},
        BadCase{R"({"tools":[]})", "the catalog has no tools"},
        BadCase{R"({"something":[]})", "expected an array of tools"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":["string","number"]}}}}])",
                "union types are not supported"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"string",
                   "items":{"type":"string"}}}}}])",
                "\"items\" on a non-array type STRING"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"string",
                   "maxItems":2}}}}])",
                "\"maxItems\" on a non-array type STRING"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"array",
                   "maxItems":-1}}}}])",
                "\"maxItems\" must be a non-negative integer"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"array",
                   "maxItems":"3"}}}}])",
                "\"maxItems\" must be a non-negative integer"},
        BadCase{R"([{"name":"f","description":"a<escape>b"}])",
                R"(tools[0] ("f"): "description" contains the control token text "<escape>")"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"string",
                   "description":"x<end_of_turn>"}}}}])",
                "tools[0].parameters.properties.a: \"description\" contains the control token"},
        BadCase{R"([{"name":"f","parameters":{"properties":{"a":{"type":"string",
                   "enum":["<start_function_call>"]}}}}])",
                "enum member contains the control token text"},
        BadCase{R"([{"name": "f",)", "invalid JSON at byte"}, BadCase{"", "invalid JSON at byte"},
        BadCase{"  555E525", "invalid JSON: number overflow"},
        BadCase{
            R"([{"name":"f","parameters":{"properties":{"a":{"type":"number","enum":[1e999]}}}}])",
            "invalid JSON: number overflow"}));

TEST(ToolCatalog, InvalidJsonReportsPosition) {
  EXPECT_THAT(ParseToolCatalog(R"([{"name": "f"} oops])"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("invalid JSON at byte 16")));
}

// A model or other binary file given as catalog is named as such, not as deep nesting.
TEST(ToolCatalog, BinaryDataIsNotJson) {
  EXPECT_THAT(ParseToolCatalog(std::string("GGUF\x03\0\0\0[[[[", 12)),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("tool catalog: a GGUF file (a model?), not JSON")));
  EXPECT_THAT(ParseToolCatalog(std::string("[{\"name\": \"f\"}\0]", 16)),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("binary data (byte 0 at offset 14), not JSON text")));
  FG_EXPECT_OK(ParseToolCatalog("[\r\n\t{\"name\": \"f\"}]"));
}

TEST(ToolCatalog, DeepNestingIsRefusedBeforeParsing) {
  std::string deep(100000, '[');
  EXPECT_THAT(ParseToolCatalog(deep),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("nested deeper than 64")));
  // Brackets inside strings do not count.
  std::string in_string = R"([{"name":"f","description":")" + std::string(1000, '[') + "\"}]";
  FG_EXPECT_OK(ParseToolCatalog(in_string));
}

TEST(ToolCatalog, DeepSchemaIsRefused) {
  std::string schema = R"({"type":"string"})";
  for (int i = 0; i < 20; ++i) schema = R"({"type":"array","items":)" + schema + "}";
  const std::string doc =
      R"([{"name":"f","parameters":{"properties":{"a":)" + schema + "}}}]";
  EXPECT_THAT(ParseToolCatalog(doc),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("schema nested deeper than 16")));
}

TEST(ToolCatalog, LoadErrors) {
  const Status missing = LoadToolCatalog("/nonexistent/tools.json").status();
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("/nonexistent/tools.json"));
  const std::string bad = ::testing::TempDir() + "/fg_bad_catalog.json";
  {
    std::ofstream out(bad);
    out << R"([{"nam":"x"}])";
  }
  EXPECT_THAT(LoadToolCatalog(bad),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr(bad + ": tools[0]: missing \"name\"")));
}

TEST(ToolCatalog, SmartHomeExample) {
  FG_ASSERT_OK_AND_ASSIGN(ToolCatalog c,
                          LoadToolCatalog(std::string(FG_SOURCE_DIR) + "/examples/smart_home.json"));
  ASSERT_EQ(c.tools.size(), 6u);
  for (const char* name : {"set_light", "set_thermostat", "set_timer", "cancel_timer",
                           "play_media", "control_media"}) {
    EXPECT_NE(c.Find(name), nullptr) << name;
  }
  const Schema& speakers = c.Find("play_media")->parameters.properties.at("speakers");
  EXPECT_EQ(speakers.type, "ARRAY");
  ASSERT_NE(speakers.items, nullptr);
  EXPECT_EQ(speakers.items->type, "STRING");
  EXPECT_EQ(c.Find("set_light")->parameters.properties.at("state").enum_values.size(), 2u);
}

TEST(ToolCatalog, NameAndKeyRules) {
  EXPECT_TRUE(IsValidToolName("set_light.v2-x"));
  EXPECT_FALSE(IsValidToolName(""));
  EXPECT_FALSE(IsValidToolName(std::string(65, 'a')));
  EXPECT_FALSE(IsValidToolName("a{b"));
  EXPECT_TRUE(IsValidPropertyKey("duration_seconds"));
  EXPECT_FALSE(IsValidPropertyKey("a:b"));
  EXPECT_FALSE(IsValidPropertyKey("a\tb"));
  EXPECT_FALSE(IsValidPropertyKey(""));
}

}  // namespace
}  // namespace fg::text
