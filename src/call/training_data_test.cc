// Training examples: both JSONL forms parse, every call is validated, errors name the line, and
// the rendered prompt is the one inference renders (text::RenderPrompt, tokenized with special
// tokens atomic) followed by the calls' tokens.
#include "src/call/training_data.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/gguf/synthetic.h"
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

}  // namespace
}  // namespace fg::call
