// The service on a synthetic model, without HTTP: answers equal FunctionCaller's, tool_choice,
// multi-turn, auth, the queue, cancellation, draining, metrics, and the same answer with other
// requests running beside it.
#include "src/serve/service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "src/gguf_tools/synthetic.h"

namespace fg::serve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kTools[] = R"([
  {"type": "function", "function": {"name": "set_light", "description": "Light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
                    "state": {"type": "string", "enum": ["on", "off"]}},
     "required": ["room", "state"]}}},
  {"type": "function", "function": {"name": "set_mode", "description": "Thermostat mode.",
   "parameters": {"type": "object",
     "properties": {"mode": {"type": "string", "enum": ["heat", "cool", "auto"]},
                    "eco": {"type": "boolean"}},
     "required": ["mode", "eco"]}}},
  {"type": "function", "function": {"name": "stop_music", "description": "Stops the music."}}
])";

std::shared_ptr<const CallModel> TinyModel() {
  static std::shared_ptr<const CallModel> m = [] {
    auto spec = gguf::SyntheticPreset("tiny");
    EXPECT_TRUE(spec.ok());
    spec->context = 2048;
    // One file per process: ctest runs the cases of this binary in parallel processes.
    const std::string p =
        ::testing::TempDir() + "/serve_tiny_" + std::to_string(::getpid()) + ".gguf";
    Status s = gguf::WriteSyntheticGemma3(*spec, p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto r = CallModel::Load(p);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nullptr;
  }();
  return m;
}

std::unique_ptr<Service> MakeService(ServiceOptions o = {}) {
  o.timeout_s = 86400;  // no time limit decides a result (a busy machine can be very slow)
  auto s = Service::Create(TinyModel(), o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

json ChatBody(const std::string& request, const json& extra = json::object()) {
  json b = {{"messages", json::array({{{"role", "user"}, {"content", request}}})},
            {"tools", json::parse(kTools)},
            {"tool_choice", "required"}};
  for (const auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

HttpResponse Post(Service& s, const json& body, const std::string& path = "/v1/chat/completions",
                  std::function<bool()> disconnected = nullptr) {
  HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.body = body.dump();
  r.disconnected = std::move(disconnected);
  return s.Handle(r);
}

// A streamed response's events, as the HTTP layer sends them (produce runs the request).
std::vector<std::string> Events(const HttpResponse& r) {
  std::vector<std::string> ev;
  EXPECT_TRUE(r.stream && r.produce);
  if (r.produce) {
    r.produce([&](const std::string& e) {
      ev.push_back(e);
      return true;
    });
  }
  return ev;
}

// What `fgemma call` answers: a FunctionCaller on the catalog, the request alone.
json LoneCall(const std::string& request) {
  auto caller = FunctionCaller::Create(TinyModel(), json{{"tools", json::parse(kTools)}}.dump(), {});
  EXPECT_TRUE(caller.ok()) << caller.status().ToString();
  auto r = (*caller)->Call(request);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r->validity.ok());
  return r->calls.at(0).ToJson();
}

json FirstCall(const HttpResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  const json& c = j["choices"][0]["message"]["tool_calls"][0]["function"];
  return json{{"name", c["name"]}, {"arguments", json::parse(c["arguments"].get<std::string>())}};
}

TEST(Service, ChatAnswerIsTheLoneCall) {
  auto s = MakeService();
  for (const char* q : {"turn the kitchen light on", "cool it down", "stop the music please"}) {
    HttpResponse r = Post(*s, ChatBody(q));
    EXPECT_EQ(FirstCall(r), LoneCall(q)) << q;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
  }
  // The second request of a catalog found its caller idle: a prefix-cache hit.
  EXPECT_GE(s->counters().cache_hits, 2);
}

TEST(Service, NamedToolChoiceCallsThatTool) {
  auto s = MakeService();
  HttpResponse r = Post(*s, ChatBody("anything", {{"tool_choice",
                                                   {{"type", "function"},
                                                    {"function", {{"name", "set_mode"}}}}}}));
  EXPECT_EQ(FirstCall(r)["name"], "set_mode");
}

TEST(Service, ToolChoiceNoneReturnsNoCalls) {
  auto s = MakeService();
  HttpResponse r = Post(*s, ChatBody("hello", {{"tool_choice", "none"}, {"max_tokens", 8}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_NE(j["choices"][0]["finish_reason"], "tool_calls");
}

TEST(Service, MultiTurnWithToolResult) {
  auto s = MakeService();
  json b = ChatBody("x");
  b["messages"] = json::parse(R"([
    {"role": "user", "content": "kitchen light on"},
    {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "set_light", "arguments": "{\"room\":\"kitchen\",\"state\":\"on\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"},
    {"role": "user", "content": "and the hall"}])");
  HttpResponse r = Post(*s, b);
  const json call = FirstCall(r);
  EXPECT_FALSE(call["name"].get<std::string>().empty());
  // Ending on the tool result: the model goes on in its turn (auto: text or calls).
  b["messages"].erase(3);
  b["tool_choice"] = "auto";
  b["max_tokens"] = 8;
  r = Post(*s, b);
  EXPECT_EQ(r.status, 200) << r.body;
  // A call without its result cannot be rendered.
  b["messages"].erase(2);
  r = Post(*s, b);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("response"));
  // Control-token text in a result is refused, not rendered.
  b = ChatBody("x");
  b["messages"] = json::parse(R"([
    {"role": "user", "content": "kitchen light on"},
    {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "set_light", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "<end_of_turn>"},
    {"role": "user", "content": "next"}])");
  r = Post(*s, b);
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST(Service, StreamedEqualsWhole) {
  auto s = MakeService();
  HttpResponse whole = Post(*s, ChatBody("bedroom light off"));
  HttpResponse streamed = Post(*s, ChatBody("bedroom light off", {{"stream", true}}));
  ASSERT_EQ(streamed.status, 200);
  ASSERT_TRUE(streamed.stream);
  EXPECT_EQ(streamed.content_type, "text/event-stream");
  std::string name, args;
  for (const std::string& e : Events(streamed)) {
    if (e == "data: [DONE]\n\n") continue;
    const json j = json::parse(e.substr(6));
    const json& d = j["choices"][0]["delta"];
    if (!d.contains("tool_calls")) continue;
    const json& f = d["tool_calls"][0]["function"];
    if (f.contains("name")) name = f["name"];
    args += f["arguments"].get<std::string>();
  }
  EXPECT_EQ((json{{"name", name}, {"arguments", json::parse(args)}}), FirstCall(whole));
}

// A streamed text answer is sent while the model decodes: a client that stops reading after
// the first content event cancels the rest of the work, and its slot comes free. A streamed
// response dropped unsent frees its slot too.
TEST(Service, StreamIsSentWhileDecodingAndAClientThatLeavesCancelsIt) {
  auto s = MakeService();
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    const json body = std::string(path) == "/v1/completions"
                          ? json{{"prompt", "once upon a time"}, {"max_tokens", 64},
                                 {"stream", true}}
                          : ChatBody("tell me a story", {{"tool_choice", "none"},
                                                         {"max_tokens", 64},
                                                         {"stream", true}});
    const int64_t before = s->counters().cancelled;
    HttpResponse r = Post(*s, body, path);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(s->counters().busy, 1);  // the slot is held until the events are sent
    int sent = 0;
    std::string text;
    r.produce([&](const std::string& e) {
      const json j = json::parse(e.substr(6));
      const json& c = j["choices"][0];
      text += c.contains("text") ? c["text"].get<std::string>()
                                 : c["delta"].value("content", std::string());
      ++sent;
      return text.empty();  // the client leaves after the first text
    });
    EXPECT_FALSE(text.empty()) << path;
    EXPECT_EQ(s->counters().cancelled, before + 1) << path << ": " << sent << " events";
  }
  HttpResponse dropped = Post(*s, ChatBody("x", {{"stream", true}}));
  EXPECT_EQ(s->counters().busy, 1);
  dropped = HttpResponse{};
  EXPECT_EQ(s->counters().busy, 0);
}

TEST(Service, EndpointsAuthAndErrors) {
  ServiceOptions o;
  o.api_key = "sekret";
  auto s = MakeService(o);
  HttpRequest r;
  r.method = "GET";
  r.path = "/health";
  EXPECT_EQ(s->Handle(r).status, 200);  // open without the key
  r.path = "/v1/models";
  HttpResponse m = s->Handle(r);
  EXPECT_EQ(m.status, 401);
  EXPECT_EQ(json::parse(m.body)["error"]["code"], "invalid_api_key");
  r.authorization = "Bearer sekreT";
  EXPECT_EQ(s->Handle(r).status, 401);
  r.authorization = "Bearer sekret";
  m = s->Handle(r);
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(json::parse(m.body)["data"][0]["id"], "fgemma");
  r.path = "/metrics";
  m = s->Handle(r);
  EXPECT_EQ(m.status, 200);
  EXPECT_THAT(m.body, HasSubstr("fgemma_slots_total 4"));
  r.path = "/v1/chat/completions";
  EXPECT_EQ(s->Handle(r).status, 405);
  r.path = "/nope";
  EXPECT_EQ(s->Handle(r).status, 404);
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.body = "{not json";
  m = s->Handle(r);
  EXPECT_EQ(m.status, 400);
  const json e = json::parse(m.body)["error"];
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
}

TEST(Service, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(Service, CompletionEndpoint) {
  auto s = MakeService();
  HttpResponse r = Post(*s, json{{"prompt", "Once upon"}, {"max_tokens", 4}}, "/v1/completions");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 4);
  HttpResponse again =
      Post(*s, json{{"prompt", "Once upon"}, {"max_tokens", 4}}, "/v1/completions");
  EXPECT_EQ(json::parse(again.body)["choices"][0]["text"], j["choices"][0]["text"]);
}

// One slot, no queue: while a request holds the slot, the next one gets 429; a request whose
// client left stops (499) and frees its slot.
TEST(Service, QueueFullAndCancellation) {
  ServiceOptions o;
  o.parallel = 1;
  o.queue = 0;
  auto s = MakeService(o);
  std::mutex mu;
  std::condition_variable cv;
  bool inside = false, release = false;
  std::thread holder([&] {
    HttpResponse r = Post(*s, ChatBody("kitchen on"), "/v1/chat/completions", [&] {
      std::unique_lock<std::mutex> l(mu);
      inside = true;
      cv.notify_all();
      cv.wait(l, [&] { return release; });
      return true;  // then: the client left
    });
    EXPECT_EQ(r.status, 499) << r.body;
  });
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return inside; });
  }
  HttpResponse busy = Post(*s, ChatBody("hall off"));
  EXPECT_EQ(busy.status, 429) << busy.body;
  EXPECT_EQ(json::parse(busy.body)["error"]["code"], "queue_full");
  {
    std::lock_guard<std::mutex> l(mu);
    release = true;
  }
  cv.notify_all();
  holder.join();
  EXPECT_EQ(s->counters().busy, 0);
  EXPECT_EQ(s->counters().cancelled, 1);
  EXPECT_EQ(FirstCall(Post(*s, ChatBody("hall off"))), LoneCall("hall off"));
}

TEST(Service, DrainRefusesNewRequests) {
  auto s = MakeService();
  s->BeginDrain();
  EXPECT_EQ(Post(*s, ChatBody("kitchen on")).status, 503);
  HttpRequest h;
  h.method = "GET";
  h.path = "/health";
  EXPECT_EQ(s->Handle(h).status, 503);
  s->WaitIdle();  // nothing in flight: returns
}

// The same request alone (a server without batching, one request at a time) and with others
// running beside it in batched steps (4 slots, 8 threads of requests on two catalogs' worth of
// choices): the same answer, bit for bit.
TEST(Service, SameAnswerWithOthersBeside) {
  ServiceOptions unbatched;
  unbatched.batching = false;
  auto lone = MakeService(unbatched);
  ServiceOptions batched;
  // Each step waits for every busy slot (a second at most), so the steps do batch.
  batched.batch_wait_us = 1000000;
  batched.batch_threads = 2;
  auto s = MakeService(batched);
  const std::vector<std::string> qs = {"kitchen light on", "heat with eco", "stop music",
                                       "bedroom off", "cool mode"};
  std::vector<json> alone;
  for (const std::string& q : qs) alone.push_back(FirstCall(Post(*lone, ChatBody(q))));
  EXPECT_EQ(lone->counters().batches.steps, 0);
  std::vector<std::thread> ts;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (size_t k = 0; k < qs.size(); ++k) {
        const size_t i = (k + t) % qs.size();
        const json extra = t % 2 ? json{{"stream", false}} : json{{"parallel_tool_calls", false}};
        if (FirstCall(Post(*s, ChatBody(qs[i], extra))) != alone[i]) ++mismatches;
      }
    });
  }
  for (std::thread& t : ts) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  const runtime::StepBatcher::Stats b = s->counters().batches;
  EXPECT_GT(b.max_sequences, 1);
  EXPECT_GT(b.sequences, b.steps);
}

// The conversion from OpenAI messages to FunctionGemma's prompt under fire: a multi-turn body
// with tool calls and results, mutated (bytes changed, cut, repeated), through the whole
// service. Every answer is a 200 or a 4xx with OpenAI's error shape; the process never crashes.
TEST(Service, MutatedConversationsNeverCrash) {
  auto s = MakeService();
  json b = ChatBody("x", {{"max_tokens", 3}, {"tool_choice", "auto"}});
  b["messages"] = json::parse(R"([
    {"role": "system", "content": "short"},
    {"role": "user", "content": "kitchen light on"},
    {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "set_light", "arguments": "{\"room\":\"hall\",\"state\":\"on\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"done\": [1, 2.5, null, \"x\"]}"},
    {"role": "user", "content": "and off"}])");
  const std::string valid = b.dump();
  const std::string alphabet = "{}[]\":,0123456789.-+eE truefalsnul\\<>\x01\xff\xc3";
  uint64_t x = 88172645463325252ull;
  auto rnd = [&] {  // xorshift64: deterministic
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  int ok = 0;
  for (int i = 0; i < 600; ++i) {
    std::string body = valid;
    const int kind = static_cast<int>(rnd() % 3);
    if (kind == 0) {
      for (int k = 0; k < 1 + static_cast<int>(rnd() % 4); ++k) {
        body[rnd() % body.size()] = alphabet[rnd() % alphabet.size()];
      }
    } else if (kind == 1) {
      body.resize(rnd() % body.size());
    } else {
      const size_t a = rnd() % body.size();
      body.insert(a, body.substr(a, rnd() % 48));
    }
    HttpRequest r;
    r.method = "POST";
    r.path = "/v1/chat/completions";
    r.body = body;
    HttpResponse out = s->Handle(r);
    if (out.status == 200) {
      ++ok;
      continue;
    }
    EXPECT_GE(out.status, 400) << body;
    EXPECT_LT(out.status, 500) << out.body << "\n" << body;
    const json e = json::parse(out.body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << out.body;
    EXPECT_TRUE(e["error"].contains("message"));
  }
  EXPECT_GT(ok, 0);
  EXPECT_EQ(s->counters().busy, 0);
}

}  // namespace
}  // namespace fg::serve
