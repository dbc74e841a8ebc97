// fgemma serve end to end on a synthetic model (fgemma mkmodel), on a free loopback port: the
// API's shapes, answers equal to `fgemma call`'s, streaming, errors in OpenAI's shape, the API
// key, the body limit, a client that leaves, SIGTERM, and bad flags.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/cli_runner.h"

#if defined(FG_HAVE_SERVE)
#include <httplib.h>
#endif

namespace fg {
namespace {

using json = nlohmann::json;
using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;
using ::testing::HasSubstr;

#if defined(FG_HAVE_SERVE)

constexpr char kTools[] = R"([
  {"type": "function", "function": {"name": "set_light", "description": "Light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
                    "state": {"type": "string", "enum": ["on", "off"]}},
     "required": ["room", "state"]}}},
  {"type": "function", "function": {"name": "stop_music", "description": "Stops the music."}}
])";

const std::string& Model() {
  static const std::string p = [] {
    const std::string path = TempPath("serve_tiny_" + std::to_string(::getpid()) + ".gguf");
    auto r = RunFgemma("mkmodel -o " + path + " --context 4096");
    EXPECT_EQ(r.rc, 0) << r.out;
    return path;
  }();
  return p;
}

// `fgemma serve` in a child process; the port is read from its first stdout line.
class Server {
 public:
  explicit Server(const std::string& flags) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      const std::string cmd = std::string("exec ") + FG_CLI_PATH + " serve -m " + Model() +
                              " --port 0 --timeout 86400 " + flags;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
    char line[512] = {0};
    if (std::fgets(line, sizeof(line), out_) != nullptr) {
      const std::string s = line;
      const size_t colon = s.find("127.0.0.1:");
      if (colon != std::string::npos) port_ = std::stoi(s.substr(colon + 10));
    }
  }
  ~Server() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) std::fclose(out_);
  }
  int port() const { return port_; }
  // SIGTERM, then the exit code (-1: killed by a signal).
  int Terminate() {
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    exited_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(86400, 0);  // no time limit decides a result: ctest's bounds the test
    return c;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  int port_ = -1;
  bool exited_ = false;
};

json ChatBody(const std::string& request) {
  return json{{"messages", json::array({{{"role", "user"}, {"content", request}}})},
              {"tools", json::parse(kTools)},
              {"tool_choice", "required"}};
}

std::string WriteCatalog() {
  const std::string p = TempPath("serve_catalog_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << json{{"tools", json::parse(kTools)}}.dump();
  return p;
}

TEST(CliServe, ApiShapesAndTheLoneCallsAnswer) {
  Server s("--parallel 2");
  ASSERT_GT(s.port(), 0);
  httplib::Client c = s.Client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->body)["object"], "list");

  const std::string q = "turn the hall light off";
  auto r = c.Post("/v1/chat/completions", ChatBody(q).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("application/json"));
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  const json& tc = j["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(tc["type"], "function");
  EXPECT_TRUE(tc["id"].is_string());
  const json got = {{"name", tc["function"]["name"]},
                    {"arguments", json::parse(tc["function"]["arguments"].get<std::string>())}};
  auto lone = RunFgemma("call -m " + Model() + " --tools " + WriteCatalog() + " '" + q + "'",
                        /*with_stderr=*/false);
  ASSERT_EQ(lone.rc, 0) << lone.out;
  EXPECT_EQ(got, json::parse(lone.out));

  // Streamed: SSE, the call's id and type once, the arguments in fragments, then [DONE].
  json sb = ChatBody(q);
  sb["stream"] = true;
  auto st = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(st);
  ASSERT_EQ(st->status, 200);
  EXPECT_THAT(st->get_header_value("Content-Type"), HasSubstr("text/event-stream"));
  std::string args;
  int ids = 0;
  size_t pos = 0;
  bool done = false;
  while ((pos = st->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = st->body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    const std::string data = st->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const json e = json::parse(data);
    const json& d = e["choices"][0]["delta"];
    if (!d.contains("tool_calls")) continue;
    if (d["tool_calls"][0].contains("id")) ++ids;
    args += d["tool_calls"][0]["function"]["arguments"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(ids, 1);
  EXPECT_EQ(json::parse(args), got["arguments"]);

  auto comp = c.Post("/v1/completions", R"({"prompt": "Hello", "max_tokens": 3})",
                     "application/json");
  ASSERT_TRUE(comp);
  EXPECT_EQ(comp->status, 200) << comp->body;
  EXPECT_EQ(json::parse(comp->body)["object"], "text_completion");

  // A streamed request counts as done once the server has sent its last event, which can be
  // just after the client read [DONE]: wait (a bounded 5 s) until it is counted and its slot
  // is free again.
  const std::string counted =
      "fgemma_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2";
  auto metrics = c.Get("/metrics");
  for (int i = 0; i < 250 && metrics &&
                  (metrics->body.find(counted) == std::string::npos ||
                   metrics->body.find("fgemma_slots_busy 0\n") == std::string::npos);
       ++i) {
    ::usleep(20000);
    metrics = c.Get("/metrics");
  }
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr(counted));
  EXPECT_THAT(metrics->body, HasSubstr("fgemma_slots_busy 0"));
  EXPECT_EQ(s.Terminate(), 0);
}

TEST(CliServe, ErrorsInOpenAisShape) {
  Server s("--max-body 4096 --api-key k3y");
  ASSERT_GT(s.port(), 0);
  httplib::Client c = s.Client();
  auto expect_error = [](const httplib::Result& r, int status) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r->body;
    for (const char* k : {"message", "type", "param", "code"}) {
      EXPECT_TRUE(j["error"].contains(k)) << k << ": " << r->body;
    }
  };
  expect_error(c.Get("/v1/models"), 401);
  EXPECT_EQ(c.Get("/health")->status, 200);
  httplib::Headers auth = {{"Authorization", "Bearer k3y"}};
  EXPECT_EQ(c.Get("/v1/models", auth)->status, 200);
  expect_error(c.Get("/v1/nothing", auth), 404);
  expect_error(c.Get("/v1/chat/completions", auth), 405);
  expect_error(c.Post("/v1/chat/completions", auth, "{", "application/json"), 400);
  expect_error(c.Post("/v1/chat/completions", auth, std::string(5000, ' '), "application/json"),
               413);
  auto big = c.Post("/v1/chat/completions", auth, std::string(5000, ' '), "application/json");
  EXPECT_THAT(big->body, HasSubstr("--max-body"));
  json b = ChatBody("x");
  b["max_tokens"] = 100000;
  auto r = c.Post("/v1/chat/completions", auth, b.dump(), "application/json");
  expect_error(r, 400);
  EXPECT_THAT(r->body, HasSubstr("--max-tokens"));
  EXPECT_EQ(s.Terminate(), 0);
}

// A client that sends a request and leaves at once: its slot comes back (one slot: the next
// request is answered, and no slot stays busy).
TEST(CliServe, LeavingClientsLeakNoSlot) {
  Server s("--parallel 1 --queue 2");
  ASSERT_GT(s.port(), 0);
  for (int i = 0; i < 5; ++i) {
    httplib::Client quick("127.0.0.1", s.port());
    quick.set_read_timeout(0, 1000);  // gives up after 1 ms: closes mid-request
    (void)quick.Post("/v1/chat/completions", ChatBody("kitchen on").dump(), "application/json");
  }
  httplib::Client c = s.Client();
  // The server notices each departure at its next check (between decoding steps, or while
  // queued): wait until it has, then the slot must be free (no deadline: ctest's limit).
  auto settled = [&] {
    auto m = c.Get("/metrics");
    return m && m->body.find("fgemma_slots_busy 0\n") != std::string::npos &&
           m->body.find("fgemma_queue_waiting 0\n") != std::string::npos;
  };
  while (!settled()) ::usleep(20000);
  auto r = c.Post("/v1/chat/completions", ChatBody("kitchen on").dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(settled());
  EXPECT_EQ(s.Terminate(), 0);
}

TEST(CliServe, BadFlagsAreUsageErrors) {
  for (const char* f : {"--port 70000", "--parallel 0", "--queue -1", "--max-body 10",
                        "--api-key ''", "--timeout 0", "-t 0", "--bogus", "--batch-wait -1",
                        "--batch-wait 2000000"}) {
    auto r = RunFgemma(std::string("serve -m ") + Model() + " " + f);
    EXPECT_EQ(r.rc, 2) << f << ": " << r.out;
  }
  auto r = RunFgemma("serve -m " + TempPath("no_such_model.gguf") + " --port 0");
  EXPECT_EQ(r.rc, 1) << r.out;
  auto h = RunFgemma("serve --help");
  EXPECT_EQ(h.rc, 0);
  EXPECT_THAT(h.out, HasSubstr("--parallel"));
  EXPECT_THAT(h.out, HasSubstr("--no-batching"));
  EXPECT_THAT(h.out, HasSubstr("--no-prepack"));
}

#else

TEST(CliServe, NotBuilt) { GTEST_SKIP() << "built without libcpp-httplib-dev: no fgemma serve"; }

#endif

}  // namespace
}  // namespace fg
