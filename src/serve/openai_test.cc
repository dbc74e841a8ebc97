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
#include "src/text/tokenizer.h"
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

// ---- Tool calls streamed while decoding ----

constexpr char kRichTools[] = R"([
  {"type": "function", "function": {"name": "send_message", "description": "Sends a message.",
   "parameters": {"type": "object",
     "properties": {"to": {"type": "string"}, "body": {"type": "string"},
                    "urgent": {"type": "boolean"}, "count": {"type": "integer"},
                    "level": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "meta": {"type": "object", "properties": {"a": {"type": "string"},
                                                              "b": {"type": "integer"}}},
                    "extra": {"type": "object"},
                    "points": {"type": "array", "items": {"type": "object",
                      "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}}},
     "required": ["to", "body"]}}},
  {"type": "function", "function": {"name": "set_light", "description": "Light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "enum": ["kitchen", "hall"]},
                    "state": {"type": "string", "enum": ["on", "off"]}},
     "required": ["room", "state"]}}},
  {"type": "function", "function": {"name": "stop_music", "description": "Stops the music."}}
])";

// What FunctionCaller makes of an output (its Parse and Finish): the calls parsed and validated
// against the catalog, else no calls and no content (the answer is then the raw text).
CallResult Decoded(const std::string& out, const text::ToolCatalog& catalog, ConstrainMode mode,
                   StopReason stop) {
  CallResult r;
  r.text = out;
  r.stop_reason = stop;
  r.stats.prompt_tokens = 20;
  r.stats.generated_tokens = 9;
  auto parsed = text::ParseModelOutput(out, &catalog);
  if (parsed.ok()) {
    r.content = parsed->content;
    for (text::Call& c : parsed->calls) r.calls.push_back({c.name, c.arguments});
    for (const FunctionCall& c : r.calls) {
      const text::Tool* tool = catalog.Find(c.name);
      Status s = tool == nullptr ? InvalidArgumentError("unknown")
                                 : text::ValidateCall(*tool, c.arguments);
      if (!s.ok()) r.validity = s;
    }
    if (mode == ConstrainMode::kCall && r.calls.empty()) {
      r.validity = InvalidArgumentError("no function call in the output");
    }
  } else {
    r.validity = parsed.status();
  }
  if (!r.validity.ok()) {
    r.calls.clear();
    r.content.clear();
  }
  return r;
}

// A client's view of a stream, with the checks of its shape: role first and once, [DONE] last,
// per call index/id/type/name once (in index order) and only arguments after; what of each call
// came before Finish.
struct Streamed {
  std::string content, finish;
  bool content_null = true;  // no content delta with a string
  struct Call {
    std::string id, name, args, args_while_decoding;
  };
  std::vector<Call> calls;
  bool error = false;  // an error event instead of the end
};
Streamed Read(const std::vector<std::string>& ev, size_t while_decoding) {
  Streamed s;
  EXPECT_FALSE(ev.empty());
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].rfind("data: ", 0), 0u) << ev[i];
    EXPECT_EQ(ev[i].substr(ev[i].size() - 2), "\n\n");
    if (ev[i] == "data: [DONE]\n\n") {
      EXPECT_EQ(i + 1, ev.size()) << "[DONE] is last";
      continue;
    }
    const json j = json::parse(ev[i].substr(6, ev[i].size() - 8));
    if (j.contains("error")) {
      s.error = true;
      EXPECT_EQ(i + 1, ev.size()) << "an error event ends the stream";
      continue;
    }
    if (i + 1 == ev.size()) ADD_FAILURE() << "the stream does not end with [DONE]";
    if (j["choices"].empty()) continue;  // usage
    const json& d = j["choices"][0]["delta"];
    EXPECT_EQ(d.contains("role"), i == 0) << ev[i];
    if (d.contains("content") && d["content"].is_string()) {
      s.content += d["content"].get<std::string>();
      if (!d["content"].get<std::string>().empty() || i > 0) s.content_null = false;
    }
    if (d.contains("tool_calls")) {
      EXPECT_EQ(d["tool_calls"].size(), 1u);
      const json& tc = d["tool_calls"][0];
      const size_t k = tc["index"];
      if (tc.contains("id")) {
        EXPECT_EQ(k, s.calls.size()) << "a call's header comes once, in index order";
        EXPECT_EQ(tc["type"], "function");
        EXPECT_EQ(tc["function"]["arguments"], "");
        s.calls.push_back({tc["id"], tc["function"]["name"], "", ""});
      } else {
        EXPECT_FALSE(tc.contains("type"));
        EXPECT_FALSE(tc["function"].contains("name")) << "the name is sent once";
      }
      EXPECT_LT(k, s.calls.size()) << "arguments before the call's header";
      if (k >= s.calls.size()) continue;
      const std::string piece = tc["function"]["arguments"];
      EXPECT_TRUE(text::IsValidUtf8(piece));
      s.calls[k].args += piece;
      if (i < while_decoding) s.calls[k].args_while_decoding += piece;
    }
    if (!j["choices"][0]["finish_reason"].is_null()) s.finish = j["choices"][0]["finish_reason"];
  }
  return s;
}

// Feeds `out` as `cuts` split it (each Update with the output so far), then Finish with the
// answer FunctionCaller and MakeChatAnswer give for it. Returns the events and how many came
// before Finish.
std::vector<std::string> Feed(const ChatRequest& req, int64_t budget, const std::string& out,
                              const std::vector<size_t>& cuts, StopReason stop,
                              const text::ToolCatalog& catalog, ChatAnswer* answer,
                              size_t* while_decoding) {
  ChatStream stream(req, "chatcmpl-42", 1, "m", budget);
  std::vector<std::string> ev;
  for (size_t cut : cuts) {
    for (std::string& e : stream.Update(std::string_view(out).substr(0, cut))) {
      ev.push_back(std::move(e));
    }
  }
  for (std::string& e : stream.Update(out)) ev.push_back(std::move(e));
  *while_decoding = ev.size();
  *answer = MakeChatAnswer(Decoded(out, catalog, req.constrain, stop), req, "42");
  for (std::string& e : stream.Finish(*answer)) ev.push_back(std::move(e));
  return ev;
}

// The stream adds up to the non-streamed answer, exactly (ChatCompletionJson's message).
void ExpectSameAnswer(const Streamed& s, const ChatAnswer& a, const std::string& where) {
  const json whole = ChatCompletionJson(a, "chatcmpl-42", 1, "m")["choices"][0];
  const json& msg = whole["message"];
  EXPECT_FALSE(s.error) << where;
  EXPECT_EQ(s.finish, whole["finish_reason"]) << where;
  if (msg["content"].is_null()) {
    EXPECT_EQ(s.content, "") << where;
  } else {
    EXPECT_EQ(s.content, msg["content"].get<std::string>()) << where;
  }
  const size_t n = msg.contains("tool_calls") ? msg["tool_calls"].size() : 0;
  ASSERT_EQ(s.calls.size(), n) << where;
  for (size_t i = 0; i < n; ++i) {
    const json& c = msg["tool_calls"][i];
    EXPECT_EQ(s.calls[i].id, c["id"]) << where;
    EXPECT_EQ(s.calls[i].name, c["function"]["name"]) << where;
    EXPECT_EQ(s.calls[i].args, c["function"]["arguments"]) << where;
  }
}

// Real outputs (FunctionGemma's syntax, as the call grammar lets the model write them, and some
// it would not), fed at every split point and byte by byte: the streamed answer is the whole
// answer, and with tool_choice auto (or required with room in the budget) a call's arguments
// are all sent before Finish once the output holds the whole call.
TEST(StreamCalls, EverySplitAddsUpToTheWholeAnswer) {
  const json tools = json::parse(kRichTools);
  auto catalog = text::ParseToolCatalog(json{{"tools", tools}}.dump());
  ASSERT_TRUE(catalog.ok());
  struct Case {
    std::string out;
    StopReason stop = StopReason::kGrammarDone;
  };
  const std::vector<Case> cases = {
      // Keys out of sorted order, escapes JSON must write, unicode, every value kind.
      {"<start_function_call>call:send_message{to:<escape>Bob \"B\" <b>\\o/<escape>,"
       "body:<escape>Hi\n\tthere: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 {x:[1]}<escape>,"
       "urgent:true,count:3,level:2.50,tags:[<escape>a<escape>,<escape>b,c<escape>],"
       "meta:{b:7,a:<escape>x<escape>},extra:{k:<escape>v<escape>,n:-1.5e3},"
       "points:[{y:2,x:1},{x:-0.5,y:1e2}]}<end_function_call>"},
      // Typed by the schema: an escaped number, a float integer, an escaped boolean, an
      // <escape>d key, a bare word as a string.
      {"<start_function_call>call:send_message{<escape>to<escape>:ann,body:<escape><escape>,"
       "count:<escape> 12 <escape>,level:<escape>7<escape>,urgent:<escape>False<escape>,"
       "meta:{b:4.0},tags:[]}<end_function_call>"},
      {"<start_function_call>call:send_message{body:<escape>b<escape>,count:4.0,"
       "to:<escape>t<escape>,extra:{},points:[{}]}<end_function_call>"},
      // Text before the call; two calls; a call with no arguments.
      {"Sure, doing it now. <start_function_call>call:set_light{state:<escape>off<escape>,"
       "room:<escape>kitchen<escape>}<end_function_call>"},
      {"<start_function_call>call:set_light{room:<escape>hall<escape>,state:<escape>on<escape>}"
       "<end_function_call><start_function_call>call:stop_music{}<end_function_call>"},
      {"<start_function_call>call:stop_music{}<end_function_call>"},
      // Ended by the budget right after the closing brace (no <end_function_call>).
      {"<start_function_call>call:send_message{to:<escape>x<escape>,body:<escape>y<escape>}",
       StopReason::kMaxTokens},
      // Text only.
      {"I cannot do that \xe2\x82\xac.", StopReason::kStopToken},
  };
  // Outputs that do not make a call answer: cut by the budget, an unknown function, a value
  // outside the enum, a missing required key, a broken syntax.
  const std::vector<Case> invalid = {
      {"<start_function_call>call:send_message{to:<escape>Bo", StopReason::kMaxTokens},
      {"<start_function_call>call:send_message{to:<escape>x<escape>,body:<escape>y<escape>,"
       "count:1", StopReason::kMaxTokens},
      {"<start_function_call>call:dance{}<end_function_call>"},
      {"<start_function_call>call:set_light{room:<escape>garage<escape>,state:<escape>on<escape>}"
       "<end_function_call>"},
      {"<start_function_call>call:send_message{to:<escape>x<escape>}<end_function_call>"},
      {"<start_function_call>call:send_message{to:<escape>x<escape>,,}<end_function_call>"},
      {"ok <start_function_call>call:stop_music{}", StopReason::kMaxTokens},
  };
  struct Mode {
    const char* choice;
    int max_calls;
    int64_t budget;
    bool eager;  // calls streamed while decoding
  };
  const std::vector<Mode> modes = {
      {"auto", 2, -1, true},      {"required", 2, 4096, true}, {"required", 2, -1, false},
      {"required", 2, 12, false},  {"none", 2, -1, false},
  };
  int checked = 0;
  for (const Mode& mode : modes) {
    for (bool valid : {true, false}) {
      // An output the grammar would not let through is only fed where calls are held back.
      if (!valid && mode.eager) continue;
      for (const Case& c : valid ? cases : invalid) {
        json b = Body();
        b["tools"] = tools;
        b["tool_choice"] = mode.choice;
        Limits l;
        l.max_calls = mode.max_calls;
        const ChatRequest req = MustParse(b, l);
        ASSERT_EQ(ChatStream(req, "chatcmpl-42", 1, "m", mode.budget).streams_calls(), mode.eager)
            << mode.choice << " " << mode.budget;
        std::vector<std::vector<size_t>> splits;
        std::vector<size_t> bytes;
        for (size_t k = 1; k < c.out.size(); ++k) {
          splits.push_back({k});
          bytes.push_back(k);
        }
        splits.push_back(bytes);
        splits.push_back({});
        for (const std::vector<size_t>& cuts : splits) {
          ChatAnswer a;
          size_t while_decoding = 0;
          const std::vector<std::string> ev =
              Feed(req, mode.budget, c.out, cuts, c.stop, *catalog, &a, &while_decoding);
          const std::string where = std::string(mode.choice) + " budget " +
                                    std::to_string(mode.budget) + " cuts " +
                                    std::to_string(cuts.size()) + " | " + c.out;
          const Streamed s = Read(ev, while_decoding);
          ExpectSameAnswer(s, a, where);
          ++checked;
          for (size_t i = 0; i < s.calls.size(); ++i) {
            // (a) the whole call is written: all its arguments came while decoding, or none
            // did where calls are held back.
            EXPECT_EQ(s.calls[i].args_while_decoding, mode.eager ? s.calls[i].args : "")
                << where;
          }
          if (HasFailure()) return;
        }
      }
    }
  }
  EXPECT_GT(checked, 3000);
}

// What is sent while a call is written: the name once it is complete, then the arguments as
// far as no later token can change them.
TEST(StreamCalls, SettledArgumentsWhileWriting) {
  json b = Body();
  b["tools"] = json::parse(kRichTools);
  const ChatRequest req = MustParse(b);  // auto
  struct Step {
    std::string output;  // the output so far
    std::string name;    // "" until the header is sent
    std::string args;    // the arguments sent so far
  };
  const std::string call = "<start_function_call>call:send_message{";
  const std::vector<Step> steps = {
      {"<start_function_call>call:send_mess", "", ""},
      {call, "send_message", "{"},
      // "to" sorts after "body", which is still to come: held.
      {call + "to:<escape>Bo", "send_message", "{"},
      {call + "to:<escape>Bob<escape>,body:<escape>Hi \"you", "send_message",
       "{\"body\":\"Hi \\\"you"},
      // A character cut short, a tail that may be the closing <escape>: held.
      {call + "to:<escape>Bob<escape>,body:<escape>Hi \"you \xe2\x82", "send_message",
       "{\"body\":\"Hi \\\"you "},
      {call + "to:<escape>Bob<escape>,body:<escape>Hi \"you \xe2\x82\xac<esc", "send_message",
       "{\"body\":\"Hi \\\"you \xe2\x82\xac"},
      // body is closed: count, extra, level, meta, points, tags could still come before "to".
      {call + "to:<escape>Bob<escape>,body:<escape>Hi \"you \xe2\x82\xac<escape>", "send_message",
       "{\"body\":\"Hi \\\"you \xe2\x82\xac\""},
      {call + "to:<escape>Bob<escape>,body:<escape>Hi \"you \xe2\x82\xac<escape>,count:1",
       "send_message", "{\"body\":\"Hi \\\"you \xe2\x82\xac\",\"count\":"},
      // A number is settled once it ends.
      {call + "to:<escape>Bob<escape>,body:<escape>Hi \"you \xe2\x82\xac<escape>,count:12,",
       "send_message", "{\"body\":\"Hi \\\"you \xe2\x82\xac\",\"count\":12"},
      // Closed: the rest at once, keys sorted.
      {call + "to:<escape>Bob<escape>,body:<escape>Hi \"you \xe2\x82\xac<escape>,count:12}",
       "send_message", "{\"body\":\"Hi \\\"you \xe2\x82\xac\",\"count\":12,\"to\":\"Bob\"}"},
  };
  ChatStream stream(req, "chatcmpl-7", 1, "m");
  Streamed s;
  std::vector<std::string> ev;
  for (const Step& st : steps) {
    for (std::string& e : stream.Update(st.output)) ev.push_back(std::move(e));
    std::vector<std::string> so_far = ev;
    so_far.push_back("data: [DONE]\n\n");
    s = Read(so_far, ev.size());
    if (st.name.empty()) {
      EXPECT_TRUE(s.calls.empty()) << st.output;
      continue;
    }
    ASSERT_EQ(s.calls.size(), 1u) << st.output;
    EXPECT_EQ(s.calls[0].id, "call_7_0");
    EXPECT_EQ(s.calls[0].name, st.name);
    EXPECT_EQ(s.calls[0].args, st.args) << st.output;
  }
}

// Where the output cannot be trusted to end as a call (required with a budget that may cut it),
// the call waits for Finish; with room in the budget, or auto, it does not.
TEST(StreamCalls, WhenCallsAreStreamed) {
  json b = Body();
  for (const char* choice : {"auto", "required", "none"}) {
    b["tool_choice"] = choice;
    const ChatRequest req = MustParse(b);
    const bool required = std::string(choice) == "required";
    EXPECT_EQ(ChatStream(req, "chatcmpl-1", 1, "m").streams_calls(), choice[0] == 'a') << choice;
    EXPECT_EQ(ChatStream(req, "chatcmpl-1", 1, "m", 256).streams_calls(),
              choice[0] == 'a' || required)
        << choice;
    // stop_music{} takes ~10 tokens: a budget of 8 may cut any call.
    EXPECT_EQ(ChatStream(req, "chatcmpl-1", 1, "m", 8).streams_calls(), choice[0] == 'a')
        << choice;
  }
  b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "set_light"}}}};
  const ChatRequest named = MustParse(b);
  EXPECT_TRUE(ChatStream(named, "chatcmpl-1", 1, "m", 256).streams_calls());
  EXPECT_FALSE(ChatStream(named, "chatcmpl-1", 1, "m", 20).streams_calls());
}

// An output the grammar would never give where calls are streamed (a call cut, or invalid,
// after its name was sent): the stream ends with an error event, not with an answer that
// disagrees with what was sent.
TEST(StreamCalls, AnAnswerThatDisagreesEndsInAnError) {
  json b = Body();
  b["tools"] = json::parse(kRichTools);
  const ChatRequest req = MustParse(b);  // auto
  auto catalog = text::ParseToolCatalog(json{{"tools", b["tools"]}}.dump());
  ASSERT_TRUE(catalog.ok());
  for (const std::string& out :
       {std::string("<start_function_call>call:send_message{to:<escape>Bo"),
        std::string("<start_function_call>call:set_light{room:<escape>garage<escape>,"
                    "state:<escape>on<escape>}<end_function_call>")}) {
    ChatAnswer a;
    size_t while_decoding = 0;
    std::vector<size_t> cuts;
    for (size_t k = 1; k < out.size(); ++k) cuts.push_back(k);
    const std::vector<std::string> ev =
        Feed(req, -1, out, cuts, StopReason::kMaxTokens, *catalog, &a, &while_decoding);
    EXPECT_TRUE(a.tool_calls.empty());
    const Streamed s = Read(ev, while_decoding);
    EXPECT_TRUE(s.error) << out;
  }
  // An unknown name is never sent: the text answer streams as usual.
  const std::string out = "<start_function_call>call:dance{}<end_function_call>";
  ChatAnswer a;
  size_t while_decoding = 0;
  const std::vector<std::string> ev =
      Feed(req, -1, out, {5, 30, 40}, StopReason::kStopToken, *catalog, &a, &while_decoding);
  ExpectSameAnswer(Read(ev, while_decoding), a, out);
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
