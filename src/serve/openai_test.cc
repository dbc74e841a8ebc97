// The OpenAI request parser and response builders: every field's mapping, every limit, and
// thousands of malformed and mutated bodies that must give a request or a 4xx, never a crash.
#include "src/serve/openai.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "src/text/call_parser.h"
#include "src/text/tool_catalog.h"

namespace fg::serve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kTools[] = R"([
  {"type": "function", "function": {"name": "set_light", "description": "Light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "enum": ["kitchen", "hall"]},
                    "state": {"type": "string", "enum": ["on", "off"]}},
     "required": ["room", "state"]}}},
  {"type": "function", "function": {"name": "stop_music", "description": "Stops the music."}}
])";

json Body() {
  return json{{"model", "m"},
              {"messages", json::array({{{"role", "user"}, {"content", "lights on"}}})},
              {"tools", json::parse(kTools)}};
}

ChatRequest MustParse(const json& body, const Limits& limits = {}) {
  ChatRequest r;
  auto e = ParseChatRequest(body.dump(), limits, &r);
  EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
  return r;
}

ApiError MustFail(const json& body, const Limits& limits = {}) {
  ChatRequest r;
  auto e = ParseChatRequest(body.dump(), limits, &r);
  EXPECT_TRUE(e.has_value()) << body.dump();
  return e.value_or(ApiError{});
}

TEST(ParseChat, DefaultsAreFgemmaCalls) {
  ChatRequest r = MustParse(Body());
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.turns.size(), 1u);
  EXPECT_TRUE(r.single_request());
  EXPECT_EQ(r.turns[0].text, "lights on");
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(r.constrain, ConstrainMode::kAuto);
  EXPECT_EQ(r.max_calls, 1);
  EXPECT_EQ(r.control.temperature.value_or(-1), 0.0);  // greedy unless asked
  EXPECT_EQ(r.control.max_tokens.value_or(-1), 256);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(json::parse(r.catalog_json)["tools"], json::parse(kTools));
  EXPECT_TRUE(r.developer_message.empty());
}

TEST(ParseChat, ToolChoices) {
  json b = Body();
  b["tool_choice"] = "required";
  EXPECT_EQ(MustParse(b).constrain, ConstrainMode::kCall);
  b["tool_choice"] = "none";
  EXPECT_EQ(MustParse(b).constrain, ConstrainMode::kOff);
  b["tool_choice"] = "auto";
  EXPECT_EQ(MustParse(b).constrain, ConstrainMode::kAuto);
  b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "stop_music"}}}};
  ChatRequest r = MustParse(b);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.constrain, ConstrainMode::kCall);
  EXPECT_EQ(r.named_tool, "stop_music");
  // The prompt keeps every tool; only the grammar is narrowed (service.cc).
  EXPECT_EQ(json::parse(r.catalog_json)["tools"].size(), Body()["tools"].size());
  b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(MustFail(b).param, "tool_choice");
  b["tool_choice"] = "sometimes";
  EXPECT_EQ(MustFail(b).param, "tool_choice");
  b["tool_choice"] = 3;
  EXPECT_EQ(MustFail(b).param, "tool_choice");
}

TEST(ParseChat, ParallelCallsAndSampling) {
  Limits l;
  l.max_calls = 3;
  json b = Body();
  EXPECT_EQ(MustParse(b, l).max_calls, 3);
  b["parallel_tool_calls"] = false;
  EXPECT_EQ(MustParse(b, l).max_calls, 1);
  b["temperature"] = 0.7;
  b["top_p"] = 0.5;
  b["seed"] = 42;
  b["max_completion_tokens"] = 10;
  b["stop"] = "x";
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  ChatRequest r = MustParse(b, l);
  EXPECT_EQ(*r.control.temperature, 0.7);
  EXPECT_EQ(*r.control.top_p, 0.5);
  EXPECT_EQ(*r.control.seed, 42u);
  EXPECT_EQ(*r.control.max_tokens, 10);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(ParseChat, MultiTurnWithToolResults) {
  json b = Body();
  b["messages"] = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "kitchen light on"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function",
       "function": {"name": "set_light", "arguments": "{\"room\":\"kitchen\",\"state\":\"on\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "off"}]}
  ])");
  ChatRequest r = MustParse(b);
  EXPECT_EQ(r.developer_message, "Be brief.");
  ASSERT_EQ(r.turns.size(), 4u);
  EXPECT_FALSE(r.single_request());
  EXPECT_EQ(r.turns[1].role, ChatTurn::Role::kModel);
  ASSERT_EQ(r.turns[1].exchanges.size(), 1u);
  EXPECT_EQ(r.turns[1].exchanges[0].name, "set_light");
  EXPECT_EQ(r.turns[1].exchanges[0].arguments["room"], "kitchen");
  ASSERT_TRUE(r.turns[1].exchanges[0].response.has_value());
  EXPECT_EQ((*r.turns[1].exchanges[0].response)["ok"], true);
  EXPECT_EQ(r.turns[2].text, "Done.");
  EXPECT_EQ(r.turns[3].text, "and off");
}

TEST(ParseChat, BadMessages) {
  json b = Body();
  b["messages"] = json::array();
  EXPECT_EQ(MustFail(b).param, "messages");
  b["messages"] = {{{"role", "wizard"}, {"content", "x"}}};
  EXPECT_THAT(MustFail(b).message, HasSubstr("unsupported role"));
  b["messages"] = {{{"role", "assistant"}, {"content", "x"}}};
  EXPECT_THAT(MustFail(b).message, HasSubstr("must be a user message"));
  b["messages"] = {{{"role", "user"}, {"content", "  "}}};
  EXPECT_THAT(MustFail(b).message, HasSubstr("empty"));
  b["messages"] = {{{"role", "user"}, {"content", "x"}},
                   {{"role", "tool"}, {"tool_call_id", "zz"}, {"content", "1"}}};
  EXPECT_EQ(MustFail(b).param, "messages[1].tool_call_id");
  b["messages"] = {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}};
  EXPECT_THAT(MustFail(b).message, HasSubstr("only text"));
  b["messages"] = {{{"role", "user"}, {"content", "x"}},
                   {{"role", "assistant"},
                    {"tool_calls", {{{"id", "a"}, {"function", {{"name", "f"},
                                                                {"arguments", "[1]"}}}}}}}};
  EXPECT_THAT(MustFail(b).message, HasSubstr("JSON object"));
}

TEST(ParseChat, LimitsNameThemselves) {
  Limits l;
  l.max_messages = 1;
  l.max_tools = 1;
  l.max_tokens = 5;
  json b = Body();
  EXPECT_THAT(MustFail(b, l).message, HasSubstr("--max-tools"));
  l.max_tools = 8;
  b["messages"].push_back({{"role", "user"}, {"content", "again"}});
  EXPECT_THAT(MustFail(b, l).message, HasSubstr("--max-messages"));
  b = Body();
  b["max_tokens"] = 6;
  EXPECT_THAT(MustFail(b, l).message, HasSubstr("--max-tokens"));
  b["max_tokens"] = 0;
  EXPECT_EQ(MustFail(b, l).param, "max_tokens");
  b = Body();
  b["stop"] = {"a", "b", "c", "d", "e"};
  EXPECT_EQ(MustFail(b).param, "stop");
  b = Body();
  b["n"] = 2;
  EXPECT_EQ(MustFail(b).param, "n");
  b = Body();
  b["temperature"] = -1;
  EXPECT_EQ(MustFail(b).param, "temperature");
  b = Body();
  b["tools"] = json::array();
  EXPECT_EQ(MustFail(b).param, "tools");
  b["tools"] = {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}};
  EXPECT_EQ(MustFail(b).param, "tools");
}

TEST(ParseChat, NotJsonOrTooDeep) {
  ChatRequest r;
  for (std::string body : {std::string(""), std::string("{"), std::string("[]"),
                           std::string("null"), std::string("\"x\""), std::string(100000, '['),
                           std::string("{\"a\":") + std::string(5000, '{')}) {
    auto e = ParseChatRequest(body, {}, &r);
    ASSERT_TRUE(e.has_value()) << body.substr(0, 20);
    EXPECT_EQ(e->http_status, 400);
    const json j = e->ToJson();
    EXPECT_TRUE(j["error"].contains("message"));
    EXPECT_TRUE(j["error"].contains("type"));
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
  }
}

TEST(ParseCompletion, Prompt) {
  CompletionRequest r;
  EXPECT_FALSE(ParseCompletionRequest(R"({"prompt": "hi", "max_tokens": 3})", {}, &r));
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(*r.control.max_tokens, 3);
  EXPECT_FALSE(ParseCompletionRequest(R"({"prompt": ["hi"]})", {}, &r));
  EXPECT_TRUE(ParseCompletionRequest(R"({"prompt": ["a", "b"]})", {}, &r));
  EXPECT_TRUE(ParseCompletionRequest(R"({"prompt": ""})", {}, &r));
  EXPECT_TRUE(ParseCompletionRequest(R"({"prompt": 5})", {}, &r));
  EXPECT_TRUE(ParseCompletionRequest("{\"prompt\": \"\xff\"}", {}, &r));
}

CallResult Result(std::vector<FunctionCall> calls, std::string text, StopReason stop) {
  CallResult r;
  r.content = calls.empty() ? text : "";
  r.calls = std::move(calls);
  r.text = text;
  r.stop_reason = stop;
  r.stats.prompt_tokens = 10;
  r.stats.generated_tokens = 4;
  return r;
}

TEST(Answer, ToolCallsAndFinishReasons) {
  ChatRequest req = MustParse(Body());
  FunctionCall c{"set_light", json{{"room", "hall"}, {"state", "on"}}};
  ChatAnswer a = MakeChatAnswer(Result({c}, "", StopReason::kGrammarDone), req, "7");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, "call_7_0");
  EXPECT_EQ(json::parse(a.tool_calls[0].arguments), c.arguments);
  EXPECT_EQ(a.finish_reason, "tool_calls");
  const json j = ChatCompletionJson(a, "chatcmpl-7", 1, "m");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "set_light");
  EXPECT_EQ(j["usage"]["total_tokens"], 14);

  ChatAnswer t = MakeChatAnswer(Result({}, "hello there", StopReason::kMaxTokens), req, "8");
  EXPECT_TRUE(t.tool_calls.empty());
  EXPECT_EQ(t.content, "hello there");
  EXPECT_EQ(t.finish_reason, "length");
  req.stop = {" th"};
  t = MakeChatAnswer(Result({}, "hello there", StopReason::kMaxTokens), req, "8");
  EXPECT_EQ(t.content, "hello");
  EXPECT_EQ(t.finish_reason, "stop");

  req.tool_choice = ToolChoice::kNone;
  req.stop.clear();
  t = MakeChatAnswer(Result({c}, "ok <start_function_call>call:x{}", StopReason::kStopToken), req, "9");
  EXPECT_TRUE(t.tool_calls.empty());
  EXPECT_EQ(t.content, "ok ");
}

TEST(Answer, StreamEvents) {
  ChatAnswer a;
  a.tool_calls.push_back({"call_1_0", "set_light", R"({"room":"kitchen","state":"on"})"});
  a.finish_reason = "tool_calls";
  a.prompt_tokens = 3;
  a.completion_tokens = 2;
  std::vector<std::string> ev = ChatCompletionEvents(a, "id", 1, "m", true);
  ASSERT_GE(ev.size(), 5u);
  EXPECT_EQ(ev.back(), "data: [DONE]\n\n");
  std::string args;
  int with_id = 0;
  bool finished = false, usage = false;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    ASSERT_EQ(ev[i].rfind("data: ", 0), 0u);
    const json j = json::parse(ev[i].substr(6));
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    if (j.contains("usage")) {
      usage = true;
      EXPECT_EQ(j["usage"]["total_tokens"], 5);
      continue;
    }
    const json& d = j["choices"][0]["delta"];
    if (d.contains("tool_calls")) {
      const json& tc = d["tool_calls"][0];
      EXPECT_EQ(tc["index"], 0);
      if (tc.contains("id")) {
        ++with_id;
        EXPECT_EQ(tc["type"], "function");
        EXPECT_EQ(tc["function"]["name"], "set_light");
      }
      args += tc["function"]["arguments"].get<std::string>();
    }
    if (!j["choices"][0]["finish_reason"].is_null()) {
      finished = true;
      EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    }
  }
  EXPECT_EQ(with_id, 1);
  EXPECT_EQ(args, a.tool_calls[0].arguments);
  EXPECT_TRUE(finished);
  EXPECT_TRUE(usage);
}

// What a client makes of a stream: the content deltas joined, the tool calls by index, the
// finish_reason; checks the shape on the way (one role chunk first, [DONE] last).
struct Collected {
  std::string content, finish;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};
Collected Collect(const std::vector<std::string>& ev) {
  Collected c;
  EXPECT_FALSE(ev.empty());
  if (ev.empty()) return c;
  EXPECT_EQ(ev.back(), "data: [DONE]\n\n");
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    const json j = json::parse(ev[i].substr(6));
    if (j["choices"].empty()) continue;  // usage
    const json& d = j["choices"][0]["delta"];
    EXPECT_EQ(d.contains("role"), i == 0) << ev[i];
    if (d.contains("content") && d["content"].is_string()) c.content += d["content"];
    if (d.contains("tool_calls")) {
      const json& tc = d["tool_calls"][0];
      const size_t k = tc["index"];
      if (tc.contains("id")) {
        EXPECT_EQ(k, c.calls.size());
        c.calls.push_back({tc["function"]["name"], ""});
      }
      if (k < c.calls.size()) c.calls[k].second += tc["function"]["arguments"].get<std::string>();
    }
    if (!j["choices"][0]["finish_reason"].is_null()) c.finish = j["choices"][0]["finish_reason"];
  }
  return c;
}

// A streamed answer, fed piece by piece as the model writes it, adds up to the whole answer of
// the same output: content (before, between and after calls, cut at a stop string split over
// pieces, UTF-8 split inside a character), tool calls, finish_reason; and text before any call
// is sent while decoding, not only at the end.
TEST(Answer, StreamedPiecesAddUpToTheWholeAnswer) {
  auto catalog = text::ParseToolCatalog(json{{"tools", json::parse(kTools)}}.dump());
  ASSERT_TRUE(catalog.ok());
  const std::vector<std::vector<std::string>> outputs = {
      {"Hello wor", "ld, h\xc3", "\xa9llo", " there"},
      {"Sure", ", ", "<start_function_call>",
       "call:set_light{room:<escape>hall<escape>,state:<escape>on<escape>}",
       "<end_function_call>"},
      {"ok <", "start_function", "_call>call:stop_music{}<end_function_call>", " after"},
      {"a", "X", "Yb and more"},
      {"<start_function_call>", "call:stop_music{}", "<end_function_call>"},
  };
  for (const char* choice : {"auto", "none"}) {
    for (const std::vector<std::string>& stop : {std::vector<std::string>{},
                                                 std::vector<std::string>{"XY", " th"}}) {
      for (const std::vector<std::string>& pieces : outputs) {
        json b = Body();
        b["tool_choice"] = choice;
        if (!stop.empty()) b["stop"] = stop;
        const ChatRequest req = MustParse(b);
        ChatStream stream(req, "chatcmpl-5", 1, "m");
        std::vector<std::string> ev;
        std::string out;
        for (const std::string& p : pieces) {
          out += p;
          for (std::string& e : stream.Update(out)) ev.push_back(std::move(e));
        }
        const size_t while_decoding = ev.size();
        CallResult r;
        r.text = out;
        r.stop_reason = StopReason::kStopToken;
        auto parsed = text::ParseModelOutput(out, &*catalog);
        ASSERT_TRUE(parsed.ok()) << out;
        r.content = parsed->content;
        for (text::Call& c : parsed->calls) r.calls.push_back({c.name, c.arguments});
        const ChatAnswer a = MakeChatAnswer(r, req, "5");
        for (std::string& e : stream.Finish(a)) ev.push_back(std::move(e));
        const Collected c = Collect(ev);
        const std::string where = std::string(choice) + " | " + out;
        EXPECT_EQ(c.content, a.content) << where;
        EXPECT_EQ(c.finish, a.finish_reason) << where;
        ASSERT_EQ(c.calls.size(), a.tool_calls.size()) << where;
        for (size_t i = 0; i < c.calls.size(); ++i) {
          EXPECT_EQ(c.calls[i].first, a.tool_calls[i].name);
          EXPECT_EQ(c.calls[i].second, a.tool_calls[i].arguments);
        }
        if (pieces[0] == "Hello wor") {
          EXPECT_GE(while_decoding, 3u) << where;
        }
        if (pieces[0] == "<start_function_call>") {
          // tool_choice auto: the call (role, name, arguments) is sent as it is written;
          // none: no call, and no text before it.
          EXPECT_EQ(while_decoding, std::string(choice) == "auto" ? 3u : 0u) << where;
        }
      }
    }
  }
}

TEST(Answer, SettledPrefixHoldsBackWhatCouldStillChange) {
  const std::vector<std::string> stop = {"STOP"};
  const std::vector<std::string_view> holds = {"<start_function_call>"};
  EXPECT_EQ(SettledPrefix("hello", stop, holds), "hello");
  EXPECT_EQ(SettledPrefix("hello ST", stop, holds), "hello ");
  EXPECT_EQ(SettledPrefix("hello STOP and on", stop, holds), "hello ");
  EXPECT_EQ(SettledPrefix("hi <start_fun", stop, holds), "hi ");
  EXPECT_EQ(SettledPrefix("h\xc3\xa9", stop, holds), "h\xc3\xa9");
  EXPECT_EQ(SettledPrefix("h\xc3", stop, holds), "h");
  EXPECT_EQ(SettledPrefix("h\xe2\x82", stop, holds), "h");
  EXPECT_EQ(SettledPrefix("h\xe2\x82\xac", stop, holds), "h\xe2\x82\xac");
}

TEST(Answer, TextStreamAddsUpToTheCompletion) {
  for (const std::vector<std::string>& stop :
       {std::vector<std::string>{}, std::vector<std::string>{"lo w"}}) {
    TextStream stream(stop, true, "cmpl-1", 1, "m");
    std::vector<std::string> ev;
    std::string text;
    for (const char* p : {"hel", "lo", " w", "or\xc3", "\xa9ld"}) {
      text += p;
      for (std::string& e : stream.Update(text)) ev.push_back(std::move(e));
    }
    TextAnswer a;
    a.text = text;
    a.finish_reason = CutAtStop(&a.text, stop) ? "stop" : "length";
    for (std::string& e : stream.Finish(a)) ev.push_back(std::move(e));
    std::string joined, finish;
    ASSERT_EQ(ev.back(), "data: [DONE]\n\n");
    for (size_t i = 0; i + 1 < ev.size(); ++i) {
      const json j = json::parse(ev[i].substr(6));
      if (j["choices"].empty()) continue;
      joined += j["choices"][0]["text"].get<std::string>();
      if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(joined, stop.empty() ? "hello wor\xc3\xa9ld" : "hel");
    EXPECT_EQ(finish, a.finish_reason);
  }
}

TEST(Answer, FragmentsKeepCharacters) {
  const std::string s = "h\xc3\xa9llo w\xe2\x82\xacrld";
  for (size_t n = 1; n < 8; ++n) {
    std::string joined;
    for (const std::string& f : Fragments(s, n)) {
      ASSERT_FALSE(f.empty());
      EXPECT_NE(static_cast<unsigned char>(f[0]) & 0xC0, 0x80u) << n;
      joined += f;
    }
    EXPECT_EQ(joined, s);
  }
}

// No body crashes the parser: random bytes, and a valid body with bytes changed, cut, or
// repeated. Each gives a request or an error with a 4xx status.
TEST(ParseChat, RandomAndMutatedBodiesNeverCrash) {
  std::mt19937_64 rng(1234);
  const std::string valid = [] {
    json b = Body();
    b["messages"] = json::parse(R"([
      {"role": "system", "content": "s"},
      {"role": "user", "content": "kitchen light on"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "set_light", "arguments": "{\"room\":\"kitchen\",\"state\":\"on\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "done"},
      {"role": "user", "content": "thanks"}])");
    b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "set_light"}}}};
    b["stop"] = {"a"};
    b["max_tokens"] = 5;
    return b.dump();
  }();
  const std::string alphabet = "{}[]\":,0123456789.-+eE truefalsnul\\\x01\xff\xc3";
  int parsed = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string body = valid;
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0) {
      body.assign(rng() % 200, ' ');
      for (char& c : body) c = alphabet[rng() % alphabet.size()];
    } else if (kind == 1) {
      for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k) {
        body[rng() % body.size()] = alphabet[rng() % alphabet.size()];
      }
    } else if (kind == 2) {
      body.resize(rng() % body.size());
    } else {
      const size_t a = rng() % body.size(), n = rng() % 64;
      body.insert(a, body.substr(a, n));
    }
    ChatRequest r;
    auto e = ParseChatRequest(body, {}, &r);
    if (e) {
      EXPECT_GE(e->http_status, 400);
      EXPECT_LT(e->http_status, 500);
      (void)e->ToJson().dump();
    } else {
      ++parsed;
      (void)MakeChatAnswer(Result({}, "x", StopReason::kMaxTokens), r, "1");
    }
    CompletionRequest c;
    (void)ParseCompletionRequest(body, {}, &c);
  }
  EXPECT_GT(parsed, 0);  // some mutations still parse (a changed letter inside a string)
}

}  // namespace
}  // namespace fg::serve
