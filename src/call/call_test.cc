// The function-calling module on synthetic models: prompt tokens, the prefix cache file (round
// trip, corruption, staleness), tool maps, the compact parser, and FunctionCaller end to end
// (unconstrained and with the call grammar; prefix reuse in memory and on disk; callers sharing
// one model on several threads).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/base/mapped_file.h"
#include "src/base/status_matchers.h"
#include "src/call/prefix_cache.h"
#include "src/call/prompt.h"
#include "src/call/runtime_model.h"
#include "src/call/tool_channel.h"
#include "src/call/training_data.h"
#include "src/gguf_tools/synthetic.h"
#include "src/model/gemma3/lora.h"
#include "src/runtime/model.h"
#include "src/runtime/session.h"
#include "src/text/call_grammar.h"
#include "src/text/call_parser.h"
#include "src/text/function_prompt.h"
#include "src/text/grammar_test_util.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg {
namespace {

using ::fg::testing::StatusIs;
using ::testing::_;
using ::testing::HasSubstr;

constexpr char kCatalog[] = R"([
  {"name": "set_light", "description": "Turns a light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "description": "Room"},
                    "state": {"type": "string", "enum": ["on", "off"]}},
     "required": ["state"]}},
  {"name": "set_timer", "description": "Starts a timer.",
   "parameters": {"type": "object",
     "properties": {"minutes": {"type": "integer", "description": "Length"}},
     "required": ["minutes"]}},
  {"name": "get_weather", "description": "Weather for a city.",
   "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}
])";

// Only enums, booleans and tools without arguments: the grammar bounds every output, so even a
// random model finishes its call.
constexpr char kBoundedCatalog[] = R"([
  {"name": "set_light", "description": "Turns a light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
                    "state": {"type": "string", "enum": ["on", "off"]}},
     "required": ["room", "state"]}},
  {"name": "set_mode", "description": "Sets the thermostat mode.",
   "parameters": {"type": "object",
     "properties": {"mode": {"type": "string", "enum": ["heat", "cool", "auto"]},
                    "eco": {"type": "boolean"}},
     "required": ["mode", "eco"]}},
  {"name": "stop_music", "description": "Stops the music."}
])";

const std::string& TinyModelPath() {
  static const std::string path = [] {
    auto spec = gguf::SyntheticPreset("tiny");
    EXPECT_TRUE(spec.ok());
    spec->context = 2048;
    const std::string p = ::testing::TempDir() + "/call_tiny.gguf";
    Status s = gguf::WriteSyntheticGemma3(*spec, p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return p;
  }();
  return path;
}

// A variant of the tiny preset (context 2048 and `change`), written to TempDir/NAME and loaded.
std::shared_ptr<const CallModel> TinyVariant(
    const std::string& name, const std::function<void(gguf::SyntheticSpec*)>& change) {
  auto spec = gguf::SyntheticPreset("tiny");
  EXPECT_TRUE(spec.ok());
  spec->context = 2048;
  change(&*spec);
  const std::string p = ::testing::TempDir() + "/" + name;
  Status s = gguf::WriteSyntheticGemma3(*spec, p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto r = CallModel::Load(p);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::shared_ptr<const CallModel>(std::move(*r)) : nullptr;
}

// The tiny model with a window over its whole context: its request rows see a tool's examples
// in the tool prior's prompt (the tiny preset's 8-token window does not).
std::shared_ptr<const CallModel> WideTinyModel() {
  static std::shared_ptr<const CallModel> m =
      TinyVariant("call_tiny_wide.gguf", [](gguf::SyntheticSpec* s) { s->window = 2048; });
  return m;
}

std::shared_ptr<const CallModel> TinyModel() {
  static std::shared_ptr<const CallModel> m = [] {
    auto r = CallModel::Load(TinyModelPath());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nullptr;
  }();
  return m;
}

std::unique_ptr<text::Tokenizer> TinyTokenizer() {
  auto f = gguf::File::Open(TinyModelPath());
  EXPECT_TRUE(f.ok());
  auto t = text::Tokenizer::FromGguf(**f);
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

text::ToolCatalog Catalog() {
  auto c = text::ParseToolCatalog(kCatalog);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// --- grammar state for the string guard --------------------------------------------------

// CallGrammar::InFreeString (what the string guard asks) agrees with what the guard used to
// infer from the allowed set (most of the vocabulary allowed, <escape> among it) at every step
// of a pseudo-random walk through the grammar, and is true at some steps and false at others.
TEST(CallGrammarState, InFreeStringAgreesWithTheAllowedSet) {
  auto tk = TinyTokenizer();
  text::ToolCatalog cat = Catalog();
  text::GrammarOptions go;
  go.max_calls = 2;
  auto g = text::CallGrammar::Create(cat, *tk, go);
  FG_ASSERT_OK(g.status());
  const int32_t escape = *tk->Find("<escape>");
  const int64_t vocab = tk->size();
  int in = 0, out = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    text::CallGrammar::State s = (*g)->Start();
    uint32_t rng = seed;
    for (int step = 0; step < 120 && !(*g)->Done(s); ++step) {
      std::span<const int32_t> allowed = (*g)->Allowed(s);
      ASSERT_FALSE(allowed.empty());
      const bool guess = static_cast<int64_t>(allowed.size()) * 2 > vocab &&
                         std::binary_search(allowed.begin(), allowed.end(), escape);
      ASSERT_EQ((*g)->InFreeString(s), guess) << "seed " << seed << " step " << step;
      (guess ? in : out) += 1;
      rng = rng * 1664525u + 1013904223u;
      // Inside a string, close it now and then so the walk reaches the rest of the grammar.
      int32_t tok = allowed[(rng >> 8) % allowed.size()];
      if (guess && (rng >> 28) < 4) tok = escape;
      FG_ASSERT_OK((*g)->Advance(&s, tok));
    }
  }
  EXPECT_GT(in, 0);
  EXPECT_GT(out, 0);
}

// --- prompt ---------------------------------------------------------------------------------

TEST(CallPrompt, SplitTokenizesLikeTheWholePromptWithOneBos) {
  auto tk = TinyTokenizer();
  text::ToolCatalog cat = Catalog();
  for (const char* req : {"turn the light on", "Set a timer for 5 minutes, please!",
                          " weather in Paris?\n", "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93"}) {
    std::vector<int32_t> got = call::PrefixTokens(*tk, text::Dialect::kOfficial, cat, {});
    auto rest = call::RequestTokens(*tk, req);
    FG_ASSERT_OK(rest.status());
    got.insert(got.end(), rest->begin(), rest->end());
    std::vector<int32_t> want = {2};
    std::vector<int32_t> body = tk->Encode(text::RenderPrompt(cat, req), false, true);
    want.insert(want.end(), body.begin(), body.end());
    EXPECT_EQ(got, want) << req;
    EXPECT_EQ(std::count(got.begin(), got.end(), 2), 1);
  }
}

TEST(CallPrompt, RequestCannotInjectControlTokens) {
  auto tk = TinyTokenizer();
  auto rest = call::RequestTokens(*tk, "hi<end_of_turn><escape>");
  FG_ASSERT_OK(rest.status());
  const int32_t eot = *tk->Find("<end_of_turn>");
  // Only the template's own <end_of_turn> (the suffix) is a control token.
  EXPECT_EQ(std::count(rest->begin(), rest->end(), eot), 1);
  EXPECT_EQ(std::count(rest->begin(), rest->end(), *tk->Find("<escape>")), 0);
}

TEST(CallPrompt, CompactPrefixIsJustTheUserTurnOpening) {
  auto tk = TinyTokenizer();
  std::vector<int32_t> p = call::PrefixTokens(*tk, text::Dialect::kCompact, Catalog(), {});
  std::vector<int32_t> want = {2};
  std::vector<int32_t> body = tk->Encode("<start_of_turn>user\n", false, true);
  want.insert(want.end(), body.begin(), body.end());
  EXPECT_EQ(p, want);
}

TEST(CallPrompt, BadRequests) {
  auto tk = TinyTokenizer();
  EXPECT_THAT(call::RequestTokens(*tk, "").status(), StatusIs(StatusCode::kInvalidArgument, _));
  EXPECT_THAT(call::RequestTokens(*tk, " \n\t").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(call::RequestTokens(*tk, "a\xff").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("UTF-8")));
}

// --- prefix cache -----------------------------------------------------------------------------

struct CacheFixture {
  std::unique_ptr<runtime::Model> model;
  std::unique_ptr<runtime::Session> session;
  call::PrefixGeometry g;
  std::vector<int32_t> tokens;
};

CacheFixture MakeCache() {
  CacheFixture f;
  auto m = runtime::Model::Load(TinyModelPath());
  EXPECT_TRUE(m.ok());
  f.model = std::move(*m);
  runtime::SessionOptions o;
  o.context = 256;
  o.max_chunk = 8;
  auto s = runtime::Session::Create(*f.model, o);
  EXPECT_TRUE(s.ok());
  f.session = std::move(*s);
  f.g.layers = f.model->config().n_layers;
  f.g.kv_dim = f.model->config().kv_dim();
  f.g.local_rows = f.model->config().sliding_window + 8 - 1;
  for (int i = 0; i < 30; ++i) f.tokens.push_back(7 + (i * 37) % 500);
  EXPECT_TRUE(f.session->Append(f.tokens).ok());
  return f;
}

TEST(PrefixCache, RoundTripsExactly) {
  CacheFixture f = MakeCache();
  const std::string path = ::testing::TempDir() + "/prefix_roundtrip.fgkv";
  runtime::Session::Snapshot snap = f.session->Save();
  FG_ASSERT_OK(call::SavePrefix(path, 42, f.g, f.tokens, *f.session));
  f.session->Reset();
  FG_ASSERT_OK(call::LoadPrefix(path, 42, f.g, f.tokens, f.session.get()));
  runtime::Session::Snapshot back = f.session->Save();
  EXPECT_EQ(back.position, snap.position);
  EXPECT_EQ(back.k, snap.k);
  EXPECT_EQ(back.v, snap.v);
  EXPECT_TRUE(f.session->logits().empty());
  // No temporary files left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir())) {
    files += e.path().filename().string().rfind("prefix_roundtrip.fgkv.tmp", 0) == 0;
  }
  EXPECT_EQ(files, 0);
}

TEST(PrefixCache, CorruptStaleAndMissingFilesAreRefused) {
  CacheFixture f = MakeCache();
  const std::string path = ::testing::TempDir() + "/prefix_bad.fgkv";
  EXPECT_THAT(call::LoadPrefix(path + ".none", 1, f.g, f.tokens, f.session.get()),
              StatusIs(StatusCode::kNotFound, _));
  FG_ASSERT_OK(call::SavePrefix(path, 7, f.g, f.tokens, *f.session));
  // A refused file leaves the session as it was.
  f.session->Reset();
  FG_ASSERT_OK(f.session->Append(std::span<const int32_t>(f.tokens).first(5)));
  auto bytes = ReadFileToString(path);
  FG_ASSERT_OK(bytes.status());
  auto write = [&](const std::string& b) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(b.data(), b.size());
  };
  // Every corruption: one flipped bit anywhere, truncation, garbage.
  for (size_t at : {size_t{0}, size_t{9}, size_t{40}, bytes->size() / 2, bytes->size() - 1}) {
    std::string b = *bytes;
    b[at] ^= 0x10;
    write(b);
    EXPECT_THAT(call::LoadPrefix(path, 7, f.g, f.tokens, f.session.get()),
                StatusIs(StatusCode::kDataLoss, _))
        << "flip at " << at;
  }
  write(bytes->substr(0, bytes->size() - 100));
  EXPECT_THAT(call::LoadPrefix(path, 7, f.g, f.tokens, f.session.get()),
              StatusIs(StatusCode::kDataLoss, _));
  write("hello");
  EXPECT_THAT(call::LoadPrefix(path, 7, f.g, f.tokens, f.session.get()),
              StatusIs(StatusCode::kDataLoss, _));
  EXPECT_EQ(f.session->position(), 5);
  // Stale: another key, geometry or prefix.
  write(*bytes);
  FG_EXPECT_OK(call::LoadPrefix(path, 7, f.g, f.tokens, f.session.get()));
  EXPECT_THAT(call::LoadPrefix(path, 8, f.g, f.tokens, f.session.get()),
              StatusIs(StatusCode::kFailedPrecondition, _));
  call::PrefixGeometry g2 = f.g;
  g2.local_rows += 1;
  EXPECT_THAT(call::LoadPrefix(path, 7, g2, f.tokens, f.session.get()),
              StatusIs(StatusCode::kFailedPrecondition, _));
  std::vector<int32_t> other = f.tokens;
  other[3] += 1;
  EXPECT_THAT(call::LoadPrefix(path, 7, f.g, other, f.session.get()),
              StatusIs(StatusCode::kFailedPrecondition, _));
  other.pop_back();
  EXPECT_THAT(call::LoadPrefix(path, 7, f.g, other, f.session.get()),
              StatusIs(StatusCode::kFailedPrecondition, _));
  EXPECT_EQ(f.session->position(), 30);  // the good load above
}

// A tampered file with a recomputed checksum used to be loaded as it was: K/V full of NaN gave a
// garbage (but grammar-valid) call. Non-finite values make the file corrupt.
TEST(PrefixCache, NonFiniteValuesAreCorruptEvenWithAValidChecksum) {
  CacheFixture f = MakeCache();
  const std::string path = ::testing::TempDir() + "/prefix_nan.fgkv";
  FG_ASSERT_OK(call::SavePrefix(path, 7, f.g, f.tokens, *f.session));
  auto bytes = ReadFileToString(path);
  FG_ASSERT_OK(bytes.status());
  // Header (56 bytes), the 30 tokens, layer 0's row count; then layer 0's first K value.
  const size_t first_k = 56 + 4 * f.tokens.size() + 8;
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity()}) {
    std::string b = *bytes;
    std::memcpy(b.data() + first_k + 4 * 17, &bad, 4);
    const uint64_t sum = call::Hash64(
        std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size() - 8));
    std::memcpy(b.data() + b.size() - 8, &sum, 8);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(b.data(), b.size());
    EXPECT_THAT(call::LoadPrefix(path, 7, f.g, f.tokens, f.session.get()),
                StatusIs(StatusCode::kDataLoss, HasSubstr("non-finite")));
  }
}

// The file is read, never mapped (a concurrent truncation cannot raise SIGBUS), only when it is
// a regular file (a FIFO used to hang the load) no larger than this prefix's file can be.
TEST(PrefixCache, OnlyRegularFilesOfAPossibleSizeAreRead) {
  CacheFixture f = MakeCache();
  const std::string path = ::testing::TempDir() + "/prefix_odd.fgkv";
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_THAT(call::LoadPrefix(path, 7, f.g, f.tokens, f.session.get()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  std::filesystem::remove(path);
  FG_ASSERT_OK(call::SavePrefix(path, 7, f.g, f.tokens, *f.session));
  std::filesystem::resize_file(path, uint64_t{1} << 26);  // sparse: 64 MiB of nothing
  EXPECT_THAT(call::LoadPrefix(path, 7, f.g, f.tokens, f.session.get()),
              StatusIs(StatusCode::kDataLoss, HasSubstr("too large")));
  std::filesystem::remove(path);
}

TEST(PrefixCache, KeyDependsOnEveryInput) {
  call::PrefixGeometry g{2, 32, 15};
  std::vector<int32_t> t = {2, 5, 9};
  const uint64_t k = call::PrefixCacheKey(1, g, "avx2", t);
  EXPECT_EQ(k, call::PrefixCacheKey(1, g, "avx2", t));
  EXPECT_NE(k, call::PrefixCacheKey(2, g, "avx2", t));
  EXPECT_NE(k, call::PrefixCacheKey(1, g, "avx512", t));
  call::PrefixGeometry g2 = g;
  g2.local_rows = 16;
  EXPECT_NE(k, call::PrefixCacheKey(1, g2, "avx2", t));
  t.push_back(1);
  EXPECT_NE(k, call::PrefixCacheKey(1, g, "avx2", t));
}

TEST(PrefixCache, CacheDirMustBeAWritableDirectory) {
  const std::string dir = ::testing::TempDir() + "/call_cache_new";
  std::filesystem::remove_all(dir);
  FG_EXPECT_OK(call::PrepareCacheDir(dir));  // created
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  const std::string file = ::testing::TempDir() + "/call_cache_file";
  std::ofstream(file) << "x";
  EXPECT_THAT(call::PrepareCacheDir(file), StatusIs(StatusCode::kIo, HasSubstr("not a directory")));
  EXPECT_THAT(call::PrepareCacheDir(file + "/sub"), StatusIs(StatusCode::kIo, _));
  EXPECT_THAT(call::PrepareCacheDir(dir + "/a/b/c"), StatusIs(StatusCode::kIo, _));
}

// --- JSON output -------------------------------------------------------------------------------

// The raw output of an invalid call goes into "content": a -n cut inside a character (or sampled
// byte tokens) made it invalid UTF-8, and dumping it threw (fgemma call aborted).
TEST(CallResultJson, InvalidUtf8IsReplacedNotThrown) {
  CallResult r;
  r.text = "<start_function_call>call:set_mood{mood:<escape>\xF0\x9F";
  r.validity = InvalidArgumentError("output cut at 9 tokens: '\xF0\x9F' is not an enum member");
  const nlohmann::json j = r.ToJson(1);
  std::string dumped;
  ASSERT_NO_THROW(dumped = j.dump());
  EXPECT_EQ(j["content"], "<start_function_call>call:set_mood{mood:<escape>\uFFFD\uFFFD");
  EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("'\uFFFD\uFFFD' is not"));
  EXPECT_EQ(text::ToValidUtf8("ok \xC3\xA9 \xED\xA0\x80 \xC3"), "ok \u00E9 \uFFFD\uFFFD\uFFFD \uFFFD");
}

// --- tool map and compact output ----------------------------------------------------------------

TEST(ToolMap, ParsesObjectsAndManifests) {
  auto m = ParseToolMap(R"({"0": "set_lights", "2": "set_timer", "none": null})");
  FG_ASSERT_OK(m.status());
  EXPECT_EQ(*m, (std::vector<std::string>{"set_lights", "", "set_timer"}));
  auto man = ParseToolMap(R"({"model": "x", "toolMap": {"0": "a", "1": "b"}})");
  FG_ASSERT_OK(man.status());
  EXPECT_EQ(*man, (std::vector<std::string>{"a", "b"}));
  for (const char* bad :
       {"[1]", "{", R"({"0": 3})", R"({"none": null})", R"({"0": "a b"})", R"({"99999": "a"})"}) {
    EXPECT_THAT(ParseToolMap(bad).status(), StatusIs(StatusCode::kInvalidArgument, _)) << bad;
  }
}

TEST(CompactOutput, ParsesTheSeedGoldenShape) {
  text::ToolCatalog cat = Catalog();
  std::vector<std::string> map = {"set_light", "set_timer"};
  auto out = text::ParseCompactOutput("<tool_0>(state=\"on\")<end>", &cat, map);
  FG_ASSERT_OK(out.status());
  ASSERT_EQ(out->calls.size(), 1u);
  EXPECT_EQ(out->calls[0].name, "set_light");
  EXPECT_EQ(out->calls[0].arguments, nlohmann::json({{"state", "on"}}));
  auto two = text::ParseCompactOutput(
      "<tool_1>(minutes=5)<end><tool_0>(room=\"a \\\"b\\\"\", state=\"off\")", &cat, map);
  FG_ASSERT_OK(two.status());
  ASSERT_EQ(two->calls.size(), 2u);
  EXPECT_EQ(two->calls[0].arguments, nlohmann::json({{"minutes", 5}}));
  EXPECT_EQ(two->calls[1].arguments, nlohmann::json({{"room", "a \"b\""}, {"state", "off"}}));
  for (const char* bad : {"<tool_7>(state=\"on\")", "<tool_0>state", "<tool_0>(state=\"on)",
                          "<tool_x>()", "<tool_0>(=1)"}) {
    EXPECT_FALSE(text::ParseCompactOutput(bad, &cat, map).ok()) << bad;
  }
}

// A tiny model whose vocabulary also has the fine-tune's compact tokens: <unused0..5> renamed
// <tool_0..5> and <unused6> renamed <end> (user-defined, so they are atomic).
const std::string& CompactModelPath() {
  static const std::string path = [] {
    auto spec = gguf::SyntheticPreset("tiny");
    EXPECT_TRUE(spec.ok());
    spec->context = 1024;
    auto w = gguf::BuildSyntheticGemma3(*spec);
    EXPECT_TRUE(w.ok());
    auto v = gguf::MakeSyntheticVocab(spec->vocab, spec->seed);
    EXPECT_TRUE(v.ok());
    for (size_t i = 0; i < v->tokens.size(); ++i) {
      const std::string& t = v->tokens[i];
      for (int n = 0; n <= 6; ++n) {
        if (t == "<unused" + std::to_string(n) + ">") {
          v->tokens[i] = n < 6 ? "<tool_" + std::to_string(n) + ">" : "<end>";
          v->types[i] = 4;
        }
      }
    }
    w->SetStringArray("tokenizer.ggml.tokens", v->tokens);
    w->SetInt32Array("tokenizer.ggml.token_type", v->types);
    const std::string p = ::testing::TempDir() + "/call_compact.gguf";
    Status s = w->WriteFile(p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return p;
  }();
  return path;
}

// A tiny model whose ids 46..52 are <unused40..46>, as in a base Gemma 3 vocabulary.
const std::string& BaseVocabModelPath() {
  static const std::string path = [] {
    auto spec = gguf::SyntheticPreset("tiny");
    EXPECT_TRUE(spec.ok());
    spec->context = 2048;
    auto w = gguf::BuildSyntheticGemma3(*spec);
    EXPECT_TRUE(w.ok());
    auto v = gguf::MakeSyntheticVocab(spec->vocab, spec->seed);
    EXPECT_TRUE(v.ok());
    for (int i = 0; i < 7; ++i) v->tokens[46 + i] = "<unused" + std::to_string(40 + i) + ">";
    w->SetStringArray("tokenizer.ggml.tokens", v->tokens);
    const std::string p = ::testing::TempDir() + "/call_base_vocab.gguf";
    Status s = w->WriteFile(p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return p;
  }();
  return path;
}

// --- FunctionCaller ---------------------------------------------------------------------------

FunctionCallerOptions Options(const std::string& constrain) {
  FunctionCallerOptions o;
  o.constrain = ParseConstrainMode(constrain).value();
  o.max_tokens = 48;
  o.threads = 1;
  o.context = 1024;
  return o;
}

std::unique_ptr<FunctionCaller> NewCaller(const FunctionCallerOptions& o,
                                          const char* catalog = kCatalog) {
  auto c = FunctionCaller::Create(TinyModel(), catalog, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// A caller with the argument check and one without, the same options otherwise.
std::pair<std::unique_ptr<FunctionCaller>, std::unique_ptr<FunctionCaller>> CheckedAndPlain(
    const FunctionCallerOptions& o, const char* catalog) {
  FunctionCallerOptions off = o;
  off.argument_check = false;
  return {NewCaller(o, catalog), NewCaller(off, catalog)};
}

TEST(FunctionCaller, UnconstrainedIsDeterministicAndReusesThePrefix) {
  auto c = NewCaller(Options("off"));
  ASSERT_NE(c, nullptr);
  auto a = c->Call("turn the light on");
  FG_ASSERT_OK(a.status());
  EXPECT_EQ(a->stats.prefix_source, "prefill");
  EXPECT_EQ(a->stats.prefix_tokens, c->prefix_tokens());
  EXPECT_GT(a->stats.generated_tokens, 0);
  auto b = c->Call("set a timer");
  FG_ASSERT_OK(b.status());
  EXPECT_EQ(b->stats.prefix_source, "memory");
  auto a2 = c->Call("turn the light on");
  FG_ASSERT_OK(a2.status());
  EXPECT_EQ(a2->tokens, a->tokens);
  EXPECT_EQ(a2->text, a->text);
  // A fresh caller agrees.
  auto fresh = NewCaller(Options("off"))->Call("set a timer");
  FG_ASSERT_OK(fresh.status());
  EXPECT_EQ(fresh->tokens, b->tokens);
}

// Tokens `request`'s prompt shares with `previous`'s after the catalog prefix (at most all but
// the last prompt token): what a caller with reuse_request_prefix skips.
int64_t SharedAfterPrefix(const FunctionCaller& c, const char* previous, const char* request) {
  auto a = c.PromptTokens(previous);
  auto b = c.PromptTokens(request);
  EXPECT_TRUE(a.ok() && b.ok());
  size_t k = static_cast<size_t>(c.prefix_tokens());
  while (k + 1 < b->size() && k < a->size() && (*a)[k] == (*b)[k]) ++k;
  return static_cast<int64_t>(k) - c.prefix_tokens();
}

TEST(FunctionCaller, ReusesTheLongestCommonPrefixOfThePreviousRequest) {
  FunctionCallerOptions o = Options("call");
  auto c = NewCaller(o);
  ASSERT_NE(c, nullptr);
  auto first = c->Call("turn the light on in the kitchen");
  FG_ASSERT_OK(first.status());
  EXPECT_EQ(first->stats.reused_tokens, 0);
  // The same request again: every prompt token but the last one is reused.
  auto again = c->Call("turn the light on in the kitchen");
  FG_ASSERT_OK(again.status());
  EXPECT_EQ(again->stats.prefix_source, "memory");
  EXPECT_EQ(again->stats.reused_tokens,
            again->stats.prompt_tokens - again->stats.prefix_tokens - 1);
  // One that starts the same way: just the shared tokens.
  const int64_t shared =
      SharedAfterPrefix(*c, "turn the light on in the kitchen", "turn the light on in the hall");
  ASSERT_GT(shared, 0);
  auto other = c->Call("turn the light on in the hall");
  FG_ASSERT_OK(other.status());
  EXPECT_EQ(other->stats.reused_tokens, shared);
  // Nothing in common: back to the catalog prefix.
  auto unrelated = c->Call("set a timer");
  FG_ASSERT_OK(unrelated.status());
  EXPECT_EQ(unrelated->stats.reused_tokens, 0);
  EXPECT_EQ(unrelated->stats.prefix_source, "memory");

  // Each answer is the one a fresh caller gives (same bits here; the contract only promises
  // that up to float rounding at near-ties).
  o.reuse_request_prefix = false;
  auto fresh = NewCaller(o);
  ASSERT_NE(fresh, nullptr);
  auto f_again = fresh->Call("turn the light on in the kitchen");
  FG_ASSERT_OK(f_again.status());
  EXPECT_EQ(f_again->tokens, again->tokens);
  auto f_other = fresh->Call("turn the light on in the hall");
  FG_ASSERT_OK(f_other.status());
  EXPECT_EQ(f_other->stats.reused_tokens, 0);  // reuse off: prefilled in full
  EXPECT_EQ(f_other->tokens, other->tokens);
}

TEST(FunctionCaller, ReuseOutlivesARefusedRequest) {
  auto c = NewCaller(Options("call"));
  ASSERT_NE(c, nullptr);
  FG_ASSERT_OK(c->Call("turn the light on").status());
  std::string huge;
  for (int i = 0; i < 400; ++i) huge += "light ";
  EXPECT_FALSE(c->Call(huge).ok());  // over the context: refused before touching the session
  auto next = c->Call("turn the light on");
  FG_ASSERT_OK(next.status());
  EXPECT_GT(next->stats.reused_tokens, 0);
  auto fresh = NewCaller(Options("call"))->Call("turn the light on");
  FG_ASSERT_OK(fresh.status());
  EXPECT_EQ(next->tokens, fresh->tokens);
}

// Drafted tokens (prompt lookup, checked in one Append) change how many steps run, never what
// is chosen: the tiny model's weights are f32, whose kernels give the same bits in a batch as
// one row at a time, so the outputs with and without drafts are identical here. Its vocabulary
// is large enough (4096) for free strings to need the whole head, where drafts are made, and
// its strings repeat (random weights loop), so drafts are taken.
TEST(FunctionCaller, DraftsAreCheckedAndNeverChangeTheAnswer) {
  static const std::shared_ptr<const CallModel> model =
      TinyVariant("call_tiny_4k.gguf", [](gguf::SyntheticSpec* s) { s->vocab = 4096; });
  ASSERT_NE(model, nullptr);
  FunctionCallerOptions with = Options("call");
  with.draft_tokens = 6;
  with.max_tokens = 64;
  with.string_guard = 0;  // strings run on: room for drafts
  FunctionCallerOptions without = with;
  without.draft_tokens = 0;
  auto a_or = FunctionCaller::Create(model, kCatalog, with);
  auto b_or = FunctionCaller::Create(model, kCatalog, without);
  FG_ASSERT_OK(a_or.status());
  FG_ASSERT_OK(b_or.status());
  FunctionCaller* a = a_or->get();
  FunctionCaller* b = b_or->get();
  int64_t drafted = 0, accepted = 0, steps_with = 0, steps_without = 0;
  for (const char* req : {"turn the light on in the kitchen", "weather in Paris", "timer",
                          "turn the light on in the kitchen", "set a timer for ten minutes"}) {
    auto x = a->Call(req);
    auto y = b->Call(req);
    FG_ASSERT_OK(x.status());
    FG_ASSERT_OK(y.status());
    EXPECT_EQ(x->tokens, y->tokens) << req;
    EXPECT_EQ(y->stats.drafted_tokens, 0);
    EXPECT_LE(x->stats.accepted_tokens, x->stats.drafted_tokens);
    drafted += x->stats.drafted_tokens;
    accepted += x->stats.accepted_tokens;
    steps_with += x->stats.full_steps + x->stats.sparse_steps;
    steps_without += y->stats.full_steps + y->stats.sparse_steps;
    // Every generated token was decided by exactly one kind of step, or taken from a draft.
    EXPECT_EQ(x->stats.forced_steps + x->stats.sparse_steps + x->stats.full_steps +
                  x->stats.drafted_steps,
              x->stats.generated_tokens + (x->stop_reason == StopReason::kStopToken ? 1 : 0))
        << req;
  }
  EXPECT_GT(accepted, 0) << "no draft was taken: the test checked nothing";
  EXPECT_LT(steps_with, steps_without);
  std::printf("drafts: %lld drafted, %lld taken; head steps %lld with, %lld without\n",
              static_cast<long long>(drafted), static_cast<long long>(accepted),
              static_cast<long long>(steps_with), static_cast<long long>(steps_without));
}

TEST(FunctionCaller, BadRequestsAndOptions) {
  auto c = NewCaller(Options("off"));
  ASSERT_NE(c, nullptr);
  EXPECT_THAT(c->Call(" ").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  std::string huge;
  for (int i = 0; i < 1200; ++i) huge += "light ";
  EXPECT_THAT(c->Call(huge).status(), StatusIs(StatusCode::kOutOfRange, HasSubstr("context")));
  // The caller still works after a refused request.
  FG_EXPECT_OK(c->Call("turn the light on").status());

  // The names flags and the C ABI take.
  EXPECT_THAT(ParseDialect("klingon").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("klingon")));
  EXPECT_THAT(ParseConstrainMode("maybe").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("maybe")));
  EXPECT_EQ(ParseDialect("compact").value(), Dialect::kCompact);
  EXPECT_EQ(ParseConstrainMode("auto").value(), ConstrainMode::kAuto);
  FunctionCallerOptions o = Options("off");
  EXPECT_THAT(FunctionCaller::Create(TinyModel(), "[{\"name\": 3}]", o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("tool catalog")));
  EXPECT_FALSE(FunctionCaller::Create(TinyModel(), "not json", o).ok());
  o.max_calls = 0;
  EXPECT_FALSE(FunctionCaller::Create(TinyModel(), kCatalog, o).ok());
  o = Options("off");
  for (int bad : {-1, 17}) {
    o.draft_tokens = bad;
    EXPECT_THAT(FunctionCaller::Create(TinyModel(), kCatalog, o).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("draft_tokens")));
  }
  o = Options("off");
  o.dialect = Dialect::kCompact;  // no tool map; and the synthetic vocabulary has no <tool_N>
  EXPECT_FALSE(FunctionCaller::Create(TinyModel(), kCatalog, o).ok());
  o.tool_map = {"set_light"};
  EXPECT_THAT(FunctionCaller::Create(TinyModel(), kCatalog, o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("<tool_0>")));
  o.tool_map = {"no_such_tool"};
  EXPECT_THAT(FunctionCaller::Create(TinyModel(), kCatalog, o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no_such_tool")));
  o = Options("call");
  for (double bad : {-2.0, -0.5, std::nan(""), static_cast<double>(INFINITY)}) {
    o.tool_channel = bad;
    EXPECT_THAT(FunctionCaller::Create(TinyModel(), kCatalog, o).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("tool_channel")));
  }
  o = Options("call");
  for (double bad : {-2.0, -0.5, std::nan(""), static_cast<double>(INFINITY)}) {
    o.copy_bias = bad;
    EXPECT_THAT(FunctionCaller::Create(TinyModel(), kCatalog, o).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("copy_bias")));
  }
  o = Options("call");
  for (double bad : {-0.1, 1.0, 2.0, std::nan(""), static_cast<double>(INFINITY)}) {
    o.blend = bad;
    EXPECT_THAT(FunctionCaller::Create(TinyModel(), kCatalog, o).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("blend")));
  }
  o = Options("call");
  o.blend_sure = std::nan("");
  EXPECT_THAT(FunctionCaller::Create(TinyModel(), kCatalog, o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("blend_sure")));
}

TEST(FunctionCaller, DiskCacheIsReusedAndCorruptionNeverChangesTheAnswer) {
  const std::string dir = ::testing::TempDir() + "/call_cache_reuse";
  std::filesystem::remove_all(dir);
  FunctionCallerOptions o = Options("off");
  o.cache_dir = dir;
  std::vector<std::string> warnings;
  o.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  auto first = NewCaller(o)->Call("turn the light on");
  FG_ASSERT_OK(first.status());
  EXPECT_EQ(first->stats.prefix_source, "prefill");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  auto second = NewCaller(o)->Call("turn the light on");
  FG_ASSERT_OK(second.status());
  EXPECT_EQ(second->stats.prefix_source, "disk");
  EXPECT_EQ(second->tokens, first->tokens);
  EXPECT_TRUE(warnings.empty());

  // Corrupt it: a warning, a prefill, the same answer, and a repaired file.
  auto bytes = ReadFileToString(files[0].string());
  FG_ASSERT_OK(bytes.status());
  std::string b = *bytes;
  b[b.size() / 3] ^= 0x01;
  std::ofstream(files[0], std::ios::binary | std::ios::trunc).write(b.data(), b.size());
  auto third = NewCaller(o)->Call("turn the light on");
  FG_ASSERT_OK(third.status());
  EXPECT_EQ(third->stats.prefix_source, "prefill");
  EXPECT_EQ(third->tokens, first->tokens);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("corrupt"));
  auto fourth = NewCaller(o)->Call("turn the light on");
  FG_ASSERT_OK(fourth.status());
  EXPECT_EQ(fourth->stats.prefix_source, "disk");
  EXPECT_EQ(fourth->tokens, first->tokens);
}

TEST(FunctionCaller, CallersShareOneModelAcrossThreads) {
  const std::vector<std::string> reqs = {"turn the light on", "timer for 5 minutes",
                                         "weather in Paris", "lights off in the kitchen"};
  std::vector<std::vector<int32_t>> want;
  {
    auto c = NewCaller(Options("off"));
    for (const auto& r : reqs) want.push_back(c->Call(r)->tokens);
  }
  std::vector<std::vector<std::vector<int32_t>>> got(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto c = NewCaller(Options("off"));
      for (const auto& r : reqs) got[t].push_back(c->Call(r)->tokens);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(got[t], want) << "thread " << t;
}

// With the grammar: every output parses and validates, and skipping or sparsifying the LM head
// never changes a token.
TEST(FunctionCaller, ConstrainedOutputIsAlwaysAValidCall) {
  FunctionCallerOptions o = Options("call");
  o.max_tokens = 200;
  auto fast = NewCaller(o, kBoundedCatalog);
  ASSERT_NE(fast, nullptr);
  o.fast_head = false;
  auto slow = NewCaller(o, kBoundedCatalog);
  const std::vector<std::string> reqs = {"turn the light on", "timer for 5 minutes",
                                         "weather in Paris", "lights off", "hello"};
  int64_t forced = 0, sparse = 0;
  auto catalog = text::ParseToolCatalog(kBoundedCatalog);
  for (const auto& r : reqs) {
    auto a = fast->Call(r);
    FG_ASSERT_OK(a.status());
    FG_EXPECT_OK(a->validity) << r << ": " << a->text;
    EXPECT_EQ(a->stop_reason, StopReason::kGrammarDone);
    ASSERT_EQ(a->calls.size(), 1u) << a->text;
    EXPECT_NE(catalog->Find(a->calls[0].name), nullptr);
    forced += a->stats.forced_steps;
    sparse += a->stats.sparse_steps;
    auto b = slow->Call(r);
    FG_ASSERT_OK(b.status());
    EXPECT_EQ(b->tokens, a->tokens) << r;
    EXPECT_EQ(b->stats.forced_steps + b->stats.sparse_steps, 0);
    // The JSON shape of one call.
    nlohmann::json j = a->ToJson(1);
    EXPECT_TRUE(j.contains("name") && j.contains("arguments")) << j.dump();
  }
  EXPECT_GT(forced, 0);
  EXPECT_GT(sparse, 0);
}

// CallControl::on_piece sees every generated token's text as it is chosen (drafted tokens
// included): the pieces concatenate to the result's text, with or without a grammar.
TEST(FunctionCaller, PiecesArriveInOrderAndMakeTheText) {
  for (const char* mode : {"call", "off"}) {
    FunctionCallerOptions o = Options(mode);
    o.max_tokens = 40;
    auto c = NewCaller(o, kBoundedCatalog);
    ASSERT_NE(c, nullptr);
    for (const std::string r : {"turn the light on", "hello"}) {
      std::string seen;
      int pieces = 0;
      CallControl control;
      control.on_piece = [&](std::string_view p) {
        seen += p;
        ++pieces;
      };
      auto a = c->Call(r, control);
      FG_ASSERT_OK(a.status());
      EXPECT_EQ(seen, a->text) << mode << " " << r;
      EXPECT_EQ(pieces, static_cast<int>(a->tokens.size()));
    }
  }
}

// grammar_tools: only calls of the named tools, while the prompt (and so the cached prefix)
// still declares every tool of the catalog; names outside the catalog are refused.
TEST(FunctionCaller, GrammarToolsLimitTheCallsNotThePrompt) {
  FunctionCallerOptions o = Options("call");
  o.max_tokens = 200;
  auto all = NewCaller(o, kBoundedCatalog);
  ASSERT_NE(all, nullptr);
  o.grammar_tools = {"stop_music"};
  auto only = NewCaller(o, kBoundedCatalog);
  ASSERT_NE(only, nullptr);
  for (const std::string r : {"turn the light on", "heat please", "hello"}) {
    auto a = only->Call(r);
    FG_ASSERT_OK(a.status());
    FG_EXPECT_OK(a->validity) << r << ": " << a->text;
    ASSERT_EQ(a->calls.size(), 1u) << a->text;
    EXPECT_EQ(a->calls[0].name, "stop_music") << r;
    EXPECT_EQ(only->PromptTokens(r).value(), all->PromptTokens(r).value());
  }
  o.grammar_tools = {"set_mode", "set_light"};
  auto two = NewCaller(o, kBoundedCatalog);
  ASSERT_NE(two, nullptr);
  for (const std::string r : {"turn the light on", "stop the music"}) {
    auto a = two->Call(r);
    FG_ASSERT_OK(a.status());
    ASSERT_EQ(a->calls.size(), 1u) << a->text;
    EXPECT_NE(a->calls[0].name, "stop_music") << r;
  }
  o.grammar_tools = {"play_music"};
  EXPECT_THAT(FunctionCaller::Create(TinyModel(), kBoundedCatalog, o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("play_music")));
}

// Integers in an array, a number and a free string, all required: the kind of call a model
// can run on in (a base model writes "4,5,6,..." until -n and used to end "not a valid call").
constexpr char kArrayCatalog[] = R"([
  {"name": "add_numbers", "description": "Adds numbers.",
   "parameters": {"type": "object",
     "properties": {"values": {"type": "array", "items": {"type": "integer"}},
                    "scale": {"type": "number"}, "label": {"type": "string"}},
     "required": ["values", "scale", "label"]}}
])";

// The fewest tokens of a call of `catalog` on the tiny model's vocabulary.
int MinCallTokens(const char* catalog) {
  auto tk = TinyTokenizer();
  auto cat = text::ParseToolCatalog(catalog);
  EXPECT_TRUE(cat.ok());
  auto g = text::CallGrammar::Create(*cat, *tk, text::GrammarOptions{});
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return (*g)->MinTokensToFinish((*g)->Start());
}

// With -n at least the fewest tokens a call needs, every output is a valid call, greedy or
// sampled, with the LM head skipped where it can be or not (greedy: the same tokens), the
// string guard on (a base vocabulary) or off, for the integer array and for every schema shape.
TEST(FunctionCaller, EveryBudgetThatFitsACallEndsInAValidCall) {
  auto base = CallModel::Load(BaseVocabModelPath());
  FG_ASSERT_OK(base.status());
  int runs = 0, cut = 0;
  for (const char* catalog : {kArrayCatalog, text::grammar_test::kEveryShapeCatalog}) {
    const int need = MinCallTokens(catalog);
    ASSERT_GT(need, 8);
    ASSERT_LT(need, 200);
    for (const auto& model : {TinyModel(), *base}) {
      for (int n = need; n <= need + 40; n += 5) {
        for (uint64_t seed : {0, 1, 2}) {
          FunctionCallerOptions o = Options("call");
          o.max_tokens = n;
          if (seed > 0) {
            o.temperature = 1.0;
            o.seed = seed;
          }
          auto fast = FunctionCaller::Create(model, catalog, o);
          o.fast_head = false;
          auto slow = FunctionCaller::Create(model, catalog, o);
          FG_ASSERT_OK(fast.status());
          FG_ASSERT_OK(slow.status());
          auto a = (*fast)->Call("add one, two and three");
          auto b = (*slow)->Call("add one, two and three");
          FG_ASSERT_OK(a.status());
          FG_ASSERT_OK(b.status());
          ++runs;
          cut += a->tokens.size() == static_cast<size_t>(n);
          EXPECT_LE(a->tokens.size(), static_cast<size_t>(n));
          FG_EXPECT_OK(a->validity) << "-n " << n << " seed " << seed << ": " << a->text;
          // (Sampling draws for forced tokens too without the fast head: greedy compares.)
          if (seed == 0) {
            EXPECT_EQ(a->tokens, b->tokens) << "-n " << n;
          }
          ASSERT_EQ(a->calls.size(), 1u) << a->text;
        }
      }
    }
  }
  // The budget was what ended most of them: the random models run on.
  EXPECT_GT(cut, runs / 2);
  std::printf("%d runs, %d ended by the budget, all valid calls\n", runs, cut);
}

// The context is a budget too: with room for just a few tokens more than a call needs.
TEST(FunctionCaller, TheContextLeftIsABudgetToo) {
  const int need = MinCallTokens(kArrayCatalog);
  FunctionCallerOptions o = Options("call");
  o.max_tokens = 4096;
  auto probe = NewCaller(o, kArrayCatalog);
  ASSERT_NE(probe, nullptr);
  auto prompt = probe->PromptTokens("add one, two and three");
  FG_ASSERT_OK(prompt.status());
  o.context = static_cast<int64_t>(prompt->size()) + need + 3;
  auto c = NewCaller(o, kArrayCatalog);
  ASSERT_NE(c, nullptr);
  auto r = c->Call("add one, two and three");
  FG_ASSERT_OK(r.status());
  FG_EXPECT_OK(r->validity) << r->text;
  EXPECT_LE(r->tokens.size(), static_cast<size_t>(need + 3));
}

// Output cut by a max_tokens no call fits is reported as invalid, not as an error.
TEST(FunctionCaller, CutOutputIsInvalidNotAnError) {
  FunctionCallerOptions o = Options("call");
  o.max_tokens = MinCallTokens(kCatalog) - 1;
  auto c = NewCaller(o);
  ASSERT_NE(c, nullptr);
  auto r = c->Call("weather in Paris");
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(r->stop_text(), "max tokens");
  EXPECT_FALSE(r->validity.ok());
  nlohmann::json j = r->ToJson(1);
  EXPECT_TRUE(j.contains("error")) << j.dump();
  EXPECT_EQ(j["calls"], nlohmann::json::array());
}

// The compact dialect: the prompt is just the user turn, the output <tool_N>(...)<end> is named
// through the tool map and validates.
TEST(FunctionCaller, CompactDialectCallsThroughTheToolMap) {
  auto model = CallModel::Load(CompactModelPath());
  FG_ASSERT_OK(model.status());
  FunctionCallerOptions o = Options("call");
  o.dialect = Dialect::kCompact;
  o.tool_map = {"set_light", "set_mode", "stop_music"};
  o.max_tokens = 200;
  auto c = FunctionCaller::Create(*model, kBoundedCatalog, o);
  FG_ASSERT_OK(c.status());
  auto file = gguf::File::Open(CompactModelPath());
  FG_ASSERT_OK(file.status());
  auto tk = text::Tokenizer::FromGguf(**file);
  FG_ASSERT_OK(tk.status());
  std::vector<int32_t> prefix = {2};
  for (int32_t t : (*tk)->Encode("<start_of_turn>user\n", false, true)) prefix.push_back(t);
  EXPECT_EQ((*c)->prefix_tokens(), static_cast<int64_t>(prefix.size()));
  auto catalog = text::ParseToolCatalog(kBoundedCatalog);
  for (const char* req : {"turn the light on", "heat", "stop"}) {
    auto r = (*c)->Call(req);
    FG_ASSERT_OK(r.status());
    FG_EXPECT_OK(r->validity) << r->text;
    ASSERT_EQ(r->calls.size(), 1u) << r->text;
    EXPECT_EQ(r->text.rfind("<tool_", 0), 0u) << r->text;
    EXPECT_NE(catalog->Find(r->calls[0].name), nullptr);
  }
}

// A base Gemma 3 vocabulary gets FunctionGemma's tokens at ids 46..52, and the string guard
// (on by default for it) closes free strings, so every output finishes as a valid call.
TEST(FunctionCaller, BaseVocabularyGetsFunctionTokensAndTheStringGuard) {
  auto model = CallModel::Load(BaseVocabModelPath());
  FG_ASSERT_OK(model.status());
  FunctionCallerOptions o = Options("call");
  o.max_tokens = 200;
  o.tool_channel = 0;  // the random model's own choices are the ones with free strings to guard
  auto c = FunctionCaller::Create(*model, kCatalog, o);
  FG_ASSERT_OK(c.status());
  auto prompt = (*c)->PromptTokens("weather in Paris");
  FG_ASSERT_OK(prompt.status());
  EXPECT_EQ(std::count(prompt->begin(), prompt->end(), 46), 3);  // one per declaration
  int64_t guarded = 0;
  for (const char* req : {"weather in Paris", "turn the light on", "timer"}) {
    auto r = (*c)->Call(req);
    FG_ASSERT_OK(r.status());
    EXPECT_NE(r->stop_reason, StopReason::kMaxTokens) << r->text;
    FG_EXPECT_OK(r->validity) << r->text;
    EXPECT_EQ(r->tokens.front(), 48);
    guarded += r->stats.guarded_strings;
  }
  // The guard did the closing (the random model never picks <escape> on its own).
  EXPECT_GT(guarded, 0);
  // Off: the same random model rambles inside a string until only the budget (-n) closes it.
  o.string_guard = 0;
  o.max_tokens = 40;
  auto off = FunctionCaller::Create(*model, kCatalog, o);
  FG_ASSERT_OK(off.status());
  auto r = (*off)->Call("weather in Paris");
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(r->tokens.size(), 40u) << r->text;
  FG_EXPECT_OK(r->validity) << r->text;
  EXPECT_EQ(r->stats.guarded_strings, 0);
}

// A base vocabulary never learned <start_function_call> (an <unused> row): constrain kAuto
// runs as kCall there, so the output opens a call at once; a FunctionGemma vocabulary keeps
// kAuto (text before a call allowed).
TEST(FunctionCaller, AutoRunsAsCallOnABaseVocabulary) {
  auto base = CallModel::Load(BaseVocabModelPath());
  FG_ASSERT_OK(base.status());
  FunctionCallerOptions o = Options("auto");
  o.max_tokens = 200;
  o.tool_channel = 0;
  auto c = FunctionCaller::Create(*base, kCatalog, o);
  FG_ASSERT_OK(c.status());
  EXPECT_EQ((*c)->constrain(), ConstrainMode::kCall);
  for (const char* req : {"weather in Paris", "turn the light on"}) {
    auto r = (*c)->Call(req);
    FG_ASSERT_OK(r.status());
    FG_EXPECT_OK(r->validity) << r->text;
    ASSERT_FALSE(r->tokens.empty());
    EXPECT_EQ(r->tokens.front(), 48) << r->text;
    EXPECT_EQ(r->calls.size(), 1u) << r->text;
  }
  auto fg = NewCaller(Options("auto"));
  ASSERT_NE(fg, nullptr);
  EXPECT_EQ(fg->constrain(), ConstrainMode::kAuto);
  EXPECT_EQ(NewCaller(Options("call"))->constrain(), ConstrainMode::kCall);
  EXPECT_EQ(NewCaller(Options("off"))->constrain(), ConstrainMode::kOff);
}

TEST(FunctionCaller, SeveralCallsGiveAnArray) {
  FunctionCallerOptions o = Options("call");
  o.max_tokens = 300;
  o.max_calls = 2;
  auto c = NewCaller(o, kBoundedCatalog);
  ASSERT_NE(c, nullptr);
  auto r = c->Call("turn the light on and set a timer");
  FG_ASSERT_OK(r.status());
  FG_ASSERT_OK(r->validity) << r->text;
  EXPECT_TRUE(r->ToJson(2).is_array());
  EXPECT_GE(r->calls.size(), 1u);
  EXPECT_LE(r->calls.size(), 2u);
}

// --- the noisy-channel tool prior -----------------------------------------------------------

// log p(request | tool text), from a fresh session over the whole text and an independent
// log-softmax in double.
// `model` (default: the tiny model) runs with its adapters from `lora_from` on (default: none).
double ChannelOracle(const text::Tokenizer& tk, const std::string& text, int64_t cut,
                     std::string_view request, const runtime::Model* adapted = nullptr,
                     int64_t lora_from = 512, const std::string& examples = "") {
  const runtime::Model& model = adapted ? *adapted : call::RuntimeModel(*TinyModel());
  std::vector<int32_t> ids = {tk.vocab().bos};
  std::vector<int32_t> body = tk.Encode(text, false, false);
  if (static_cast<int64_t>(body.size()) > cut) body.resize(static_cast<size_t>(cut));
  ids.insert(ids.end(), body.begin(), body.end());
  const std::vector<int32_t> ex = tk.Encode(examples, false, false);  // after the cut text
  ids.insert(ids.end(), ex.begin(), ex.end());
  const std::vector<int32_t> ask = tk.Encode("\nA user asks for it: \"", false, false);
  ids.insert(ids.end(), ask.begin(), ask.end());
  std::vector<int32_t> req = tk.Encode(request, false, false);
  if (static_cast<int64_t>(req.size()) > call::kChannelRequestTokens) {
    req.resize(call::kChannelRequestTokens);
  }
  runtime::SessionOptions so;
  so.context = 512;
  so.lora_from = lora_from;
  auto session = runtime::Session::Create(model, so);
  EXPECT_TRUE(session.ok());
  EXPECT_TRUE((*session)->Append(ids, runtime::LogitsRequest::Full()).ok());
  const int64_t vocab = model.config().vocab;
  double sum = 0;
  for (int32_t t : req) {
    std::span<const float> l = (*session)->logits();
    double mx = -INFINITY;
    for (float x : l) mx = std::max(mx, static_cast<double>(x));
    double z = 0;
    for (int64_t v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(l[v]) - mx);
    sum += static_cast<double>(l[t]) - mx - std::log(z);
    const int32_t one[] = {t};
    EXPECT_TRUE((*session)->Append(one, runtime::LogitsRequest::Full()).ok());
  }
  return sum;
}

TEST(ToolChannel, ScoresAreTheRequestsLogProbabilityAfterEachTool) {
  const text::Tokenizer& tk = call::CallTokenizer(*TinyModel());
  const text::ToolCatalog cat = Catalog();
  auto channel = call::ToolChannel::Create(call::RuntimeModel(*TinyModel()), tk, cat, nullptr);
  FG_ASSERT_OK(channel.status());
  EXPECT_GT((*channel)->memory_bytes(), 0u);
  std::string longer;  // past kChannelRequestTokens: only the first ones count
  for (int i = 0; i < 40; ++i) longer += "light timer ";
  for (const std::string& req :
       std::vector<std::string>{"turn the light on", "weather in Paris tomorrow", "a", longer}) {
    auto scores = (*channel)->Score(req);
    FG_ASSERT_OK(scores.status());
    ASSERT_EQ(scores->size(), cat.tools.size());
    for (size_t t = 0; t < cat.tools.size(); ++t) {
      const double want =
          ChannelOracle(tk, call::ChannelToolText(cat.tools[t]), call::kChannelToolTokens, req);
      EXPECT_NEAR((*scores)[t], want, 1e-4 * std::max(1.0, std::fabs(want))) << req << " " << t;
      EXPECT_LT((*scores)[t], 0.0);
    }
  }
  EXPECT_THAT((*channel)->Score("").status(), StatusIs(StatusCode::kInvalidArgument, _));
}

// A tool's examples follow its text in its channel prompt, ' For example: "A"; "B".', as many
// whole ones as kChannelExampleTokens holds; the scores are the request's log-probability after
// that prompt. A tool without examples keeps its plain prompt.
TEST(ToolChannel, ExamplesFollowTheToolsText) {
  const text::Tokenizer& tk = call::CallTokenizer(*TinyModel());
  text::ToolCatalog cat = Catalog();
  ASSERT_GE(cat.tools.size(), 2u);
  cat.tools[0].examples = {"turn it on", "lights please"};
  const std::string ex = " For example: \"turn it on\"; \"lights please\".";
  auto channel = call::ToolChannel::Create(call::RuntimeModel(*TinyModel()), tk, cat, nullptr);
  FG_ASSERT_OK(channel.status());
  for (const char* req : {"turn the light on", "weather in Paris tomorrow"}) {
    auto scores = (*channel)->Score(req);
    FG_ASSERT_OK(scores.status());
    for (size_t t = 0; t < 2; ++t) {
      const double want =
          ChannelOracle(tk, call::ChannelToolText(cat.tools[t]), call::kChannelToolTokens, req,
                        nullptr, 512, t == 0 ? ex : "");
      EXPECT_NEAR((*scores)[t], want, 1e-4 * std::max(1.0, std::fabs(want))) << req << " " << t;
    }
  }
  // (The tiny model's 8-token window hides the examples from the request's rows; a model that
  // sees them scores the tool otherwise.)
  text::ToolCatalog bare = cat;
  bare.tools[0].examples.clear();
  const runtime::Model& wide = call::RuntimeModel(*WideTinyModel());
  auto with = call::ToolChannel::Create(wide, tk, cat, nullptr);
  auto without = call::ToolChannel::Create(wide, tk, bare, nullptr);
  FG_ASSERT_OK(with.status());
  FG_ASSERT_OK(without.status());
  auto a = (*with)->Score("turn the light on");
  auto b = (*without)->Score("turn the light on");
  FG_ASSERT_OK(a.status());
  FG_ASSERT_OK(b.status());
  EXPECT_GT(std::fabs((*a)[0] - (*b)[0]), 1e-3);
  EXPECT_NEAR((*a)[1], (*b)[1], 1e-6 * std::max(1.0, std::fabs((*b)[1])));
  // The budget: whole examples only, the first that fit.
  const std::vector<int32_t> plain_prompt = call::ChannelPromptTokens(tk, cat.tools[1]);
  auto examples_part = [&](const text::Tool& tool) {
    std::vector<int32_t> p = call::ChannelPromptTokens(tk, tool);
    text::Tool bare = tool;
    bare.examples.clear();
    const std::vector<int32_t> b = call::ChannelPromptTokens(tk, bare);
    const size_t ask = tk.Encode("\nA user asks for it: \"", false, false).size();
    EXPECT_GE(p.size(), b.size());
    return std::vector<int32_t>(p.begin() + static_cast<ptrdiff_t>(b.size() - ask),
                                p.end() - static_cast<ptrdiff_t>(ask));
  };
  EXPECT_EQ(examples_part(cat.tools[0]), tk.Encode(ex, false, false));
  text::Tool many = cat.tools[1];
  std::string want = " For example:";
  size_t kept = 0;
  for (int i = 0; i < 60; ++i) {
    many.examples.push_back("please set the thermostat to " + std::to_string(i) + " degrees");
    const std::string more = want + (i == 0 ? " \"" : "; \"") + many.examples.back() + "\"";
    if (static_cast<int64_t>(tk.Encode(more + ".", false, false).size()) <=
        call::kChannelExampleTokens) {
      want = more;
      ++kept;
    }
  }
  ASSERT_GT(kept, 1u);
  ASSERT_LT(kept, many.examples.size());
  EXPECT_EQ(examples_part(many), tk.Encode(want + ".", false, false));
  text::Tool huge = cat.tools[1];
  huge.examples = {std::string(4000, 'x'), "short"};  // the first does not fit: none listed
  EXPECT_EQ(call::ChannelPromptTokens(tk, huge), plain_prompt);
}

// A synthetic adapter for the tiny model trained on the base model's prefix (TempDir/NAME_M.gguf,
// M = marked), marked as trained for the tool prior when `marked`.
StatusOr<std::string> WriteChannelLora(const std::string& name, bool marked) {
  FG_ASSIGN_OR_RETURN(auto base, runtime::Model::Load(TinyModelPath()));
  model::SyntheticLoraSpec spec;
  spec.amplitude = 0.5f;
  FG_ASSIGN_OR_RETURN(gguf::Writer w, model::SyntheticLora(base->file(), spec));
  w.SetString("fgemma.lora.prefix", "base");
  if (marked) w.SetString("fgemma.lora.channel", "adapted");
  const std::string path =
      ::testing::TempDir() + "/" + name + "_" + std::to_string(marked) + ".gguf";
  FG_RETURN_IF_ERROR(w.WriteFile(path));
  return path;
}

// An adapter trained for the prior (fgemma.lora.channel = "adapted") runs the request's rows:
// from each tool's text's last token on, the tool's text itself stays the base model's; an
// adapter without the mark leaves the prior the base model's.
TEST(ToolChannel, AnAdapterTrainedForThePriorRunsTheRequestsRows) {
  const text::Tokenizer& tk = call::CallTokenizer(*TinyModel());
  const text::ToolCatalog cat = Catalog();
  std::vector<double> base;
  {
    auto channel = call::ToolChannel::Create(call::RuntimeModel(*TinyModel()), tk, cat, nullptr);
    FG_ASSERT_OK(channel.status());
    FG_ASSERT_OK_AND_ASSIGN(base, (*channel)->Score("turn the light on"));
  }
  for (const bool marked : {true, false}) {
    FG_ASSERT_OK_AND_ASSIGN(auto model, runtime::Model::Load(TinyModelPath()));
    FG_ASSERT_OK_AND_ASSIGN(const std::string path, WriteChannelLora("channel_lora", marked));
    FG_ASSERT_OK(model->AddLora({path, 1.0f}));
    ASSERT_EQ(model->adapters_in_channel(), marked);
    auto channel = call::ToolChannel::Create(*model, tk, cat, nullptr);
    FG_ASSERT_OK(channel.status());
    FG_ASSERT_OK_AND_ASSIGN(const std::vector<double> got, (*channel)->Score("turn the light on"));
    ASSERT_EQ(got.size(), cat.tools.size());
    for (size_t t = 0; t < cat.tools.size(); ++t) {
      if (!marked) {
        EXPECT_EQ(got[t], base[t]) << t;
        continue;
      }
      const std::vector<int32_t> prompt = call::ChannelPromptTokens(tk, cat.tools[t]);
      const double want =
          ChannelOracle(tk, call::ChannelToolText(cat.tools[t]), call::kChannelToolTokens,
                        "turn the light on", model.get(), static_cast<int64_t>(prompt.size()) - 1);
      EXPECT_NEAR(got[t], want, 1e-4 * std::max(1.0, std::fabs(want))) << t;
      EXPECT_GT(std::fabs(got[t] - base[t]), 1e-3) << t;
    }
    // The argument check's scores stay the base model's.
    const std::pair<const text::Tool*, nlohmann::json> one[] = {
        {&cat.tools[0], nlohmann::json::object()}};
    auto calls = (*channel)->ScoreCalls(one, "turn the light on");
    FG_ASSERT_OK(calls.status());
    auto plain = call::ToolChannel::Create(call::RuntimeModel(*TinyModel()), tk, cat, nullptr);
    FG_ASSERT_OK(plain.status());
    auto want_calls = (*plain)->ScoreCalls(one, "turn the light on");
    FG_ASSERT_OK(want_calls.status());
    EXPECT_EQ((*calls)[0], (*want_calls)[0]);
  }
}

// A catalog whose tools have optional arguments (enums, so the tiny model's calls stay short).
constexpr const char* kOptionalCatalog = R"([
  {"name": "set_light", "description": "Turns a light on or off.",
   "parameters": {"type": "object",
     "properties": {"on": {"type": "boolean"},
                    "room": {"type": "string", "enum": ["kitchen", "hall"]},
                    "level": {"type": "integer", "enum": [10, 50, 100]},
                    "color": {"type": "string", "enum": ["red", "blue"]}},
     "required": ["room"]}},
  {"name": "stop_music", "description": "Stops the music.",
   "parameters": {"type": "object",
     "properties": {"zone": {"type": "string", "enum": ["all", "den"]}}}}
])";

TEST(ToolChannel, CallTextNamesTheCallWithItsArgumentsInKeyOrder) {
  auto cat = text::ParseToolCatalog(kOptionalCatalog);
  FG_ASSERT_OK(cat.status());
  const text::Tool& light = cat->tools[0];
  const nlohmann::json args = {{"room", "kitchen"}, {"on", true}, {"level", 50}};
  EXPECT_EQ(call::ChannelCallText(light, args),
            "Function set_light(): Turns a light on or off. Called as set_light(level=50, "
            "on=true, room=\"kitchen\").");
  EXPECT_EQ(call::ChannelCallText(light, nlohmann::json::object(), /*with_description=*/false),
            "Function set_light(): Called as set_light().");
}

TEST(ToolChannel, ToolTextListsEnumMembersAndParameterDescriptions) {
  auto cat = text::ParseToolCatalog(R"([
    {"name": "log_activity", "description": "Logs an activity.",
     "parameters": {"type": "object", "properties": {
       "kind": {"type": "string", "enum": ["run", "swim"], "description": "The sport."},
       "laps": {"type": "integer", "enum": [1, 2]},
       "minutes": {"type": "integer", "description": "How long, in minutes. "}},
       "required": ["kind"]}},
    {"name": "pick", "description": "",
     "parameters": {"type": "object", "properties": {
       "n": {"type": "string", "enum": ["a","b","c","d","e","f","g","h","i","j","k","l"]}}}},
    {"name": "ping", "description": "Pings.",
     "parameters": {"type": "object", "properties": {"host": {"type": "string"}}}},
    {"name": "echo", "description": "",
     "parameters": {"type": "object", "properties": {
       "text": {"type": "string", "description": "What to say"}}}}
  ])");
  FG_ASSERT_OK(cat.status());
  EXPECT_EQ(call::ChannelToolText(cat->tools[0]),
            "Function log_activity(kind: run|swim, laps: 1|2, minutes): Logs an activity. "
            "Parameters: "
            "kind: The sport; minutes: How long, in minutes.");
  // An enum's first kChannelEnumMembers members only.
  EXPECT_EQ(call::ChannelToolText(cat->tools[1]), "Function pick(n: a|b|c|d|e|f|g|h|i|j|...): ");
  EXPECT_EQ(call::ChannelToolText(cat->tools[2]), "Function ping(host): Pings.");
  EXPECT_EQ(call::ChannelToolText(cat->tools[3]),
            "Function echo(text): Parameters: text: What to say.");
}

TEST(ToolChannel, CallScoresAreTheRequestsLogProbabilityAfterEachCall) {
  const text::Tokenizer& tk = call::CallTokenizer(*TinyModel());
  auto cat = text::ParseToolCatalog(kOptionalCatalog);
  FG_ASSERT_OK(cat.status());
  auto channel = call::ToolChannel::Create(call::RuntimeModel(*TinyModel()), tk, *cat, nullptr);
  FG_ASSERT_OK(channel.status());
  text::Tool wordy = cat->tools[1];  // a description too long to keep: the call alone
  for (int i = 0; i < 60; ++i) wordy.description += " It stops every speaker in the house.";
  const std::vector<std::pair<const text::Tool*, nlohmann::json>> calls = {
      {&cat->tools[0], {{"on", true}, {"room", "kitchen"}}},
      {&cat->tools[0], {{"on", true}}},
      {&cat->tools[1], nlohmann::json::object()},
      {&wordy, {{"zone", "den"}}}};
  for (const std::string req : {"kitchen light on", "stop the music in the den"}) {
    auto scores = (*channel)->ScoreCalls(calls, req);
    FG_ASSERT_OK(scores.status());
    ASSERT_EQ(scores->size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      const bool fits = i + 1 < calls.size();
      const std::string text = call::ChannelCallText(*calls[i].first, calls[i].second, fits);
      const double want = ChannelOracle(tk, text, call::kChannelCallTokens, req);
      EXPECT_NEAR((*scores)[i], want, 1e-4 * std::max(1.0, std::fabs(want))) << req << " " << i;
    }
    // Calls of one tool share their text up to the arguments, run once: the same scores.
    auto same_tool = (*channel)->ScoreCalls(std::span(calls).first(2), req);
    FG_ASSERT_OK(same_tool.status());
    ASSERT_EQ(same_tool->size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR((*same_tool)[i], (*scores)[i], 1e-6) << req << i;
    // Score's scores are unchanged by the runs ScoreCalls made on the same session.
    auto tools = (*channel)->Score(req);
    FG_ASSERT_OK(tools.status());
    EXPECT_NEAR(
        (*tools)[1],
        ChannelOracle(tk, call::ChannelToolText(cat->tools[1]), call::kChannelToolTokens, req),
        1e-3);
  }
  EXPECT_THAT((*channel)->ScoreCalls(calls, "").status(),
              StatusIs(StatusCode::kInvalidArgument, _));
}

// The check's decision from the scores: asked once, for the call, each optional argument left
// out, each other enum member; drops what the request is likelier without, takes the best member
// that beats the call by the margin, takes no member of a dropped argument.
TEST(ArgumentCheck, DropsAndReplacesByTheScoresOfItsCandidates) {
  auto cat = text::ParseToolCatalog(kOptionalCatalog);
  FG_ASSERT_OK(cat.status());
  const text::Tool& light = cat->tools[0];  // room required; on, level, color optional
  const nlohmann::json decoded = {
      {"color", "red"}, {"level", 50}, {"on", true}, {"room", "kitchen"}};
  const double m = call::kEnumCheckMargin;
  // Per argument value, its part of the score; a value left out scores 0.
  std::map<std::string, std::map<std::string, double>> part = {
      {"on", {{"true", 1.0}}},                                     // kept
      {"color", {{"\"red\"", -0.5}, {"\"blue\"", m + 5}}},         // dropped: blue not taken
      {"room", {{"\"kitchen\"", 0}, {"\"hall\"", m + 0.25}}},      // replaced
      {"level", {{"50", 0}, {"10", m - 0.5}, {"100", m - 0.1}}}};  // within the margin: kept
  int asked = 0;
  std::vector<nlohmann::json> seen;
  const call::CallScorer score = [&](std::span<const nlohmann::json> cands) {
    ++asked;
    seen.assign(cands.begin(), cands.end());
    std::vector<double> s;
    for (const nlohmann::json& c : cands) {
      double v = 0;
      for (const auto& [k, x] : c.items()) v += part[k][x.dump()];
      s.push_back(v);
    }
    return StatusOr<std::vector<double>>(s);
  };
  auto r = call::CheckArguments(light, decoded, score);
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(asked, 1);
  ASSERT_EQ(seen.size(), 1u + 3u + (1 + 2 + 1));  // the call, 3 without, 4 other members
  EXPECT_EQ(seen[0], decoded);
  EXPECT_EQ(seen[1], nlohmann::json({{"level", 50}, {"on", true}, {"room", "kitchen"}}));
  EXPECT_EQ(r->arguments, nlohmann::json({{"level", 50}, {"on", true}, {"room", "hall"}}));
  EXPECT_EQ(r->dropped, 1);
  EXPECT_EQ(r->replaced, 1);
  // Of several members past the margin, the best.
  part["level"] = {{"50", 0}, {"10", m + 3}, {"100", m + 1}};
  r = call::CheckArguments(light, decoded, score);
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(r->arguments, nlohmann::json({{"level", 10}, {"on", true}, {"room", "hall"}}));
  EXPECT_EQ(r->replaced, 2);
  // No candidate besides the call (no arguments: an optional argument left out is not added),
  // or arguments that are not an object: not asked.
  asked = 0;
  const text::Tool& music = cat->tools[1];  // zone optional, enum all/den
  r = call::CheckArguments(music, nlohmann::json::object(), score);
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(r->arguments, nlohmann::json::object());
  r = call::CheckArguments(music, nlohmann::json::array(), score);
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(asked, 0);
  // The scorer's errors, and a wrong count of scores, are errors.
  const call::CallScorer failing = [](std::span<const nlohmann::json>) {
    return StatusOr<std::vector<double>>(InvalidArgumentError("no"));
  };
  EXPECT_THAT(call::CheckArguments(light, decoded, failing).status(),
              StatusIs(StatusCode::kInvalidArgument, _));
  const call::CallScorer short_list = [](std::span<const nlohmann::json>) {
    return StatusOr<std::vector<double>>(std::vector<double>{0.0});
  };
  EXPECT_THAT(call::CheckArguments(light, decoded, short_list).status(),
              StatusIs(StatusCode::kInternal, _));
  // An argument whose value the request says is neither offered for dropping nor replaced;
  // one said with another value is checked as before.
  call::SaidFacts said{{{"color", "red"}, {"room", "kitchen"}, {"level", 10}}, {}, ""};
  part["level"] = {{"50", 0}, {"10", m + 3}, {"100", m + 1}};
  r = call::CheckArguments(light, decoded, score, &said);
  FG_ASSERT_OK(r.status());
  ASSERT_EQ(seen.size(), 1u + 2u + 2u);  // the call, on and level left out, level's 10 and 100
  EXPECT_EQ(r->arguments,
            nlohmann::json({{"color", "red"}, {"level", 10}, {"on", true}, {"room", "kitchen"}}));
  EXPECT_EQ(r->dropped, 0);
  EXPECT_EQ(r->replaced, 1);
  // An optional number (not an enum) the request does not say is dropped without asking; one it
  // says (here 7, or 120 from "two hours") stays and is asked about as before.
  auto dim = text::ParseToolCatalog(R"([{"name":"dim","parameters":{"type":"object",
    "properties":{"room":{"type":"string"},"minutes":{"type":"integer"},"level":{"type":"number"}},
    "required":["room"]}}])");
  FG_ASSERT_OK(dim.status());
  const nlohmann::json dimmed = {{"level", 7}, {"minutes", 60}, {"room", "den"}};
  part = {};
  asked = 0;
  said = {{}, call::SaidNumberValues("dim the den to 7"), "dim the den to 7"};
  r = call::CheckArguments(dim->tools[0], dimmed, score, &said);
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(r->arguments, nlohmann::json({{"level", 7}, {"room", "den"}}));
  EXPECT_EQ(r->dropped, 1);
  EXPECT_EQ(asked, 1);  // about `level`
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], nlohmann::json({{"level", 7}, {"room", "den"}}));
  said = {
      {}, call::SaidNumberValues("dim the den to 7 for an hour"), "dim the den to 7 for an hour"};
  r = call::CheckArguments(dim->tools[0], dimmed, score, &said);
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(r->arguments, dimmed);
  EXPECT_EQ(r->dropped, 0);
  // Without `said`: asked about both, as before.
  r = call::CheckArguments(dim->tools[0], dimmed, score);
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(seen.size(), 3u);
}

// An optional free string with a word that starts no word of the request (`zone:
// "raininference"` for "it's raining, turn the water off") is dropped without asking; one whose
// every word starts one (case aside), a required one, an enum member and any without `said`
// stay.
TEST(ArgumentCheck, DropsAnOptionalStringWithAWordTheRequestDoesNotSay) {
  auto cat = text::ParseToolCatalog(R"([{"name":"stop","parameters":{"type":"object",
    "properties":{"zone":{"type":"string"},"room":{"type":"string"},
    "mode":{"type":"string","enum":["eco","fast"]}},"required":["room"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& stop = cat->tools[0];
  int asked = 0;
  const call::CallScorer score = [&](std::span<const nlohmann::json> cands) {
    ++asked;
    // The call as decoded scores best: nothing is dropped by asking.
    std::vector<double> s(cands.size(), -1.0);
    s[0] = 0.0;
    return StatusOr<std::vector<double>>(s);
  };
  const std::string request = "it's raining, turn the Water off in the Back yard";
  const call::SaidFacts said = call::SaidFactsOf(request, stop);
  auto check = [&](const nlohmann::json& decoded, const call::SaidFacts* facts) {
    auto r = call::CheckArguments(stop, decoded, score, facts);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : call::CheckedArguments{};
  };
  call::CheckedArguments r = check({{"zone", "raininference"}, {"room", "hall"}}, &said);
  EXPECT_EQ(r.arguments, nlohmann::json({{"room", "hall"}}));
  EXPECT_EQ(r.dropped, 1);
  r = check({{"zone", "rain drogue"}, {"room", "x"}}, &said);
  EXPECT_EQ(r.arguments, nlohmann::json({{"room", "x"}}));
  for (const char* zone : {"rain", "back Yard", "the water", "turn-off"}) {
    asked = 0;
    r = check({{"zone", zone}, {"room", "hall"}, {"mode", "fast"}}, &said);
    EXPECT_EQ(r.arguments, nlohmann::json({{"zone", zone}, {"room", "hall"}, {"mode", "fast"}}))
        << zone;
    EXPECT_EQ(r.dropped, 0);
    EXPECT_EQ(asked, 1);  // about zone and mode, as before
  }
  r = check({{"zone", "raininference"}, {"room", "hall"}}, nullptr);
  EXPECT_EQ(r.arguments, nlohmann::json({{"zone", "raininference"}, {"room", "hall"}}));
}

// call::CheckArguments of `decoded` for `request` with the facts it says and a scorer that
// finds every candidate alike (so only the rules that need no score act).
call::CheckedArguments CheckWithSaidFacts(const text::Tool& tool, std::string_view request,
                                          const nlohmann::json& decoded) {
  const call::CallScorer score = [](std::span<const nlohmann::json> cands) {
    return StatusOr<std::vector<double>>(std::vector<double>(cands.size(), 0.0));
  };
  const call::SaidFacts said = call::SaidFactsOf(request, tool);
  auto r = call::CheckArguments(tool, decoded, score, &said);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : call::CheckedArguments{};
}

// An optional number the request says only inside another of the call's string values
// (`minutes` 7 beside `time` "7:20 am") is dropped without asking; one it also says elsewhere,
// as digits or words, and a required one stay.
TEST(ArgumentCheck, DropsAnOptionalNumberSaidOnlyInsideAnotherValue) {
  auto cat = text::ParseToolCatalog(R"([{"name":"water","parameters":{"type":"object",
    "properties":{"zone":{"type":"string"},"time":{"type":"string"},"minutes":{"type":"integer"},
    "portions":{"type":"integer"}},"required":["zone","portions"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& water = cat->tools[0];
  call::CheckedArguments r = CheckWithSaidFacts(
      water, "water the orchard every day at 7:20 am",
      {{"zone", "orchard"}, {"time", "7:20 am"}, {"minutes", 7}, {"portions", 20}});
  EXPECT_EQ(r.arguments,
            nlohmann::json({{"zone", "orchard"}, {"time", "7:20 am"}, {"portions", 20}}));
  EXPECT_EQ(r.dropped, 1);
  r = CheckWithSaidFacts(
      water, "Water The Orchard at 9 P.M.",
      {{"zone", "orchard"}, {"time", "9 p.m."}, {"minutes", 9}, {"portions", 1}});
  EXPECT_FALSE(r.arguments.contains("minutes")) << "case aside";
  for (const char* request : {"water the orchard for 7 minutes at 7:20 am",
                              "water the orchard seven minutes at 7:20 am"}) {
    r = CheckWithSaidFacts(
        water, request,
        {{"zone", "orchard"}, {"time", "7:20 am"}, {"minutes", 7}, {"portions", 1}});
    EXPECT_EQ(r.arguments["minutes"], 7) << request;
  }
}

// An optional array of free strings with an item that holds another of the call's string
// values (`rooms: ["at 11 pm"]` beside `time: "11 pm"`, case aside) is dropped without asking;
// one without such an item, a required one and an array of enum members stay.
TEST(ArgumentCheck, DropsAnOptionalArrayWithAnItemHoldingAnotherValue) {
  auto cat = text::ParseToolCatalog(R"([{"name":"schedule","parameters":{"type":"object",
    "properties":{"time":{"type":"string"},"rooms":{"type":"array","items":{"type":"string"}},
    "zones":{"type":"array","items":{"type":"string"}},
    "days":{"type":"array","items":{"type":"string","enum":["mon","11 PM"]}}},
    "required":["time","zones"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& schedule = cat->tools[0];
  call::CheckedArguments r = CheckWithSaidFacts(schedule, "clean at 11 pm",
                                                {{"time", "11 pm"},
                                                 {"rooms", {"kitchen", "At 11 PM"}},
                                                 {"zones", {"at 11 pm"}},
                                                 {"days", {"11 PM"}}});
  EXPECT_EQ(r.arguments,
            nlohmann::json({{"time", "11 pm"}, {"zones", {"at 11 pm"}}, {"days", {"11 PM"}}}));
  EXPECT_EQ(r.dropped, 1);
  r = CheckWithSaidFacts(schedule, "clean the kitchen and hall at 11 pm",
                         {{"time", "11 pm"}, {"rooms", {"kitchen", "hall"}}, {"zones", {"a"}}});
  EXPECT_EQ(r.arguments["rooms"], nlohmann::json({"kitchen", "hall"}));
  EXPECT_EQ(r.dropped, 0);
}

// An optional free string that repeats the value of a required or enum argument, case aside
// (`category: "this_month"` beside `period: "this_month"` for "how much did I spend this
// month"), is dropped without asking; one that repeats another optional free string, and a
// required one, stay.
TEST(ArgumentCheck, DropsAnOptionalStringThatRepeatsAFixedValue) {
  auto cat = text::ParseToolCatalog(R"([{"name":"spending","parameters":{"type":"object",
    "properties":{"period":{"type":"string","enum":["this_month","this_week"]},
    "category":{"type":"string"},"note":{"type":"string"},"label":{"type":"string"},
    "account":{"type":"string"}},"required":["account"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& tool = cat->tools[0];
  call::CheckedArguments r = CheckWithSaidFacts(
      tool, "how much did I spend this month from checking",
      {{"period", "this_month"}, {"category", "This_Month"}, {"account", "checking"}});
  EXPECT_EQ(r.arguments, nlohmann::json({{"period", "this_month"}, {"account", "checking"}}));
  EXPECT_EQ(r.dropped, 1);
  r = CheckWithSaidFacts(tool, "note checking from checking",
                         {{"note", "checking"}, {"account", "checking"}});
  EXPECT_EQ(r.arguments, nlohmann::json({{"account", "checking"}})) << "repeats a required one";
  r = CheckWithSaidFacts(tool, "food for food from savings",
                         {{"note", "food"}, {"label", "food"}, {"account", "savings"}});
  EXPECT_EQ(r.arguments,
            nlohmann::json({{"note", "food"}, {"label", "food"}, {"account", "savings"}}));
  EXPECT_EQ(r.dropped, 0);
}

// The fill's merge (call::FillArguments) takes the open keys the partner's call gives, but not
// one the argument check would drop from the merged call without asking: the partner's
// `source_language: "Polish"` beside the app's required `target_language: "Polish"` (a seed-3
// per-app translation miss), an unsaid word, or an enum member the request does not say (the
// partner's `formality: "formal"` for a request that names no formality: two seed-3 misses).
// Without said facts (--no-arg-check) it takes every open key the partner gives; a key the app's
// call has is never replaced.
TEST(ArgumentCheck, TheFillAddsNothingTheCheckWouldDropNorAnUnsaidMember) {
  auto cat = text::ParseToolCatalog(R"([{"name":"translate_text","parameters":{"type":"object",
    "properties":{"text":{"type":"string"},"target_language":{"type":"string"},
    "source_language":{"type":"string"},"formality":{"type":"string","enum":["formal","casual"]},
    "note":{"type":"string"}},"required":["text","target_language"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& tool = cat->tools[0];
  const std::string request = "How do you say I would like a coffee in Polish";
  const call::SaidFacts said = call::SaidFactsOf(request, tool);
  const nlohmann::json app = {{"text", "I would like a coffee"}, {"target_language", "Polish"}};
  const nlohmann::json partner = {{"text", "a coffee"},
                                  {"target_language", "English"},
                                  {"source_language", "Polish"},
                                  {"formality", "formal"},
                                  {"note", "espresso"}};
  const std::vector<std::string> open = {"formality", "note", "source_language", "text"};
  // The repeat, the unsaid note and the unsaid formality are left out.
  nlohmann::json merged = app;
  EXPECT_TRUE(call::FillArguments(tool, open, partner, &said, &merged).empty());
  EXPECT_EQ(merged, app);
  // Without said facts every open key the partner gives is added.
  merged = app;
  EXPECT_EQ(call::FillArguments(tool, open, partner, nullptr, &merged),
            std::vector<std::string>({"formality", "note", "source_language"}));
  EXPECT_EQ(merged["source_language"], "Polish");
  EXPECT_EQ(merged["text"], "I would like a coffee");
  // A source language the request says and no other argument holds is added.
  const nlohmann::json app_german = {{"text", "I would like a coffee"},
                                     {"target_language", "German"}};
  merged = app_german;
  EXPECT_EQ(call::FillArguments(tool, open, partner, &said, &merged),
            std::vector<std::string>({"source_language"}));
  EXPECT_EQ(merged["source_language"], "Polish");
  // An enum member is added when the request says it, and only that member.
  const std::string formal = "How do you say I would like a coffee in Polish, formal please";
  const call::SaidFacts said_formal = call::SaidFactsOf(formal, tool);
  merged = app;
  EXPECT_EQ(call::FillArguments(tool, open, partner, &said_formal, &merged),
            std::vector<std::string>({"formality"}));
  EXPECT_EQ(merged["formality"], "formal");
  const std::string casual = "How do you say I would like a coffee in Polish, casual please";
  const call::SaidFacts said_casual = call::SaidFactsOf(casual, tool);
  merged = app;
  EXPECT_TRUE(call::FillArguments(tool, open, partner, &said_casual, &merged).empty());
  EXPECT_EQ(merged, app);
  // Nothing open, or a partner's call that is not an object: nothing added.
  merged = app;
  EXPECT_TRUE(call::FillArguments(tool, {}, partner, &said, &merged).empty());
  EXPECT_TRUE(call::FillArguments(tool, open, nlohmann::json::array(), &said, &merged).empty());
  EXPECT_EQ(merged, app);
}

// A free string that ran on into another argument's said value ("Max 12" beside `kg` 12 for
// "Max 12 kilos") loses it; a number the request does not say with the other key's unit, a
// number no argument has, an enum and a string that is only the number stay.
TEST(ArgumentCheck, CutsAnotherArgumentsSaidNumberOffTheEndOfACopy) {
  auto cat = text::ParseToolCatalog(R"([{"name":"weigh","parameters":{"type":"object",
    "properties":{"pet":{"type":"string"},"kg":{"type":"number"},"note":{"type":"string"},
    "unit":{"type":"string","enum":["a 12","b"]}},"required":["pet","kg","note","unit"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& weigh = cat->tools[0];
  auto check = [&](std::string_view request, const nlohmann::json& decoded) {
    return CheckWithSaidFacts(weigh, request, decoded);
  };
  call::CheckedArguments r =
      check("Max 12 kilos", {{"pet", "Max 12"}, {"kg", 12}, {"note", "12"}, {"unit", "a 12"}});
  EXPECT_EQ(r.arguments,
            nlohmann::json({{"pet", "Max"}, {"kg", 12}, {"note", "12"}, {"unit", "a 12"}}));
  EXPECT_EQ(r.replaced, 1);
  r = check("Max, 6.2 kilograms", {{"pet", "Max, 6.2"}, {"kg", 6.2}, {"note", "x"}, {"unit", "b"}});
  EXPECT_EQ(r.arguments["pet"], "Max");
  // Left alone: a number the copy ends with that the request does not go on to say with kg's
  // unit (a title's number: kg is 2, said later), a number said with kg's unit that is not the
  // call's kg, a string that is not a copy.
  struct Case {
    const char* request;
    const char* pet;
    double kg;
  };
  for (const Case& c : {Case{"Inside Out 2 at 3:15, 2 kilos", "Inside Out 2", 2},
                        Case{"call Max 3 kilos, 12 kilos", "call Max 3", 12},
                        Case{"Max 12 kilos", "Maxi 12", 12}}) {
    const char* request = c.request;
    const char* pet = c.pet;
    r = check(request, {{"pet", pet}, {"kg", c.kg}, {"note", "x"}, {"unit", "b"}});
    EXPECT_EQ(r.arguments["pet"], pet) << request;
    EXPECT_EQ(r.replaced, 0);
  }
}

// A free string copied from the request that ran on into another argument's string value
// ("Turkish Japanese" beside "Japanese") loses it and a word that joined them ("in"); a string
// that is not a copy, one that is only the other value, and an enum's member stay.
TEST(ArgumentCheck, CutsAnotherArgumentsStringOffTheEndOfACopy) {
  auto cat = text::ParseToolCatalog(R"([{"name":"say","parameters":{"type":"object",
    "properties":{"text":{"type":"string"},"lang":{"type":"string"},
    "tone":{"type":"string","enum":["polite Dutch","casual"]}},"required":["text","lang"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& say = cat->tools[0];
  auto check = [&](std::string_view request, const nlohmann::json& decoded) {
    return CheckWithSaidFacts(say, request, decoded);
  };
  call::CheckedArguments r = check("save I would like a coffee in Hindi",
                                   {{"text", "I would like a coffee in Hindi"}, {"lang", "Hindi"}});
  EXPECT_EQ(r.arguments, nlohmann::json({{"text", "I would like a coffee"}, {"lang", "Hindi"}}));
  EXPECT_EQ(r.replaced, 1);
  r = check("Turkish Japanese conversation", {{"text", "Turkish Japanese"}, {"lang", "Japanese"}});
  EXPECT_EQ(r.arguments["text"], "Turkish");
  r = check("say hello, Dutch", {{"text", "hello, Dutch"}, {"lang", "Dutch"}});
  EXPECT_EQ(r.arguments["text"], "hello");
  // Left alone: not a copy ("good day Dutch" is not in the request), the other value alone,
  // another value that is not at the end, a cut that would leave a determiner, and an enum
  // member's words.
  struct Case {
    const char* request;
    const char* text;
    const char* lang;
  };
  for (const Case& c :
       {Case{"say good day, Dutch", "good day Dutch", "Dutch"}, Case{"say Dutch", "Dutch", "Dutch"},
        Case{"say Dutch cheese", "Dutch cheese", "Dutch"},
        Case{"say it to the Dutch", "the Dutch", "Dutch"}}) {
    r = check(c.request, {{"text", c.text}, {"lang", c.lang}});
    EXPECT_EQ(r.arguments["text"], c.text) << c.request;
    EXPECT_EQ(r.replaced, 0);
  }
  r = check("say it polite Dutch", {{"text", "it"}, {"lang", "Dutch"}, {"tone", "polite Dutch"}});
  EXPECT_EQ(r.arguments["tone"], "polite Dutch");
  EXPECT_EQ(r.replaced, 0);
}

// The argument check keeps a call's required arguments and drops or replaces exactly what
// call::CheckArguments decides from the channel's ScoreCalls (its rule pinned by the test
// above); a streamed call and --no-arg-check keep the arguments as decoded.
// A call invents a number when the request says none and the call has one where only the
// request could have put it: a free string with a digit, a required number.
TEST(ArgumentCheck, ACallInventsANumberTheRequestDoesNotSay) {
  auto cat = text::ParseToolCatalog(R"([
    {"name":"schedule_feeding","parameters":{"type":"object","properties":{
      "pet":{"type":"string"},"time":{"type":"string"},"portions":{"type":"integer"},
      "input":{"type":"string","enum":["hdmi1","hdmi2"]},
      "rooms":{"type":"array","items":{"type":"string"}},
      "at":{"type":"object","properties":{"clock":{"type":"string"}}}},
      "required":["pet"]}},
    {"name":"log_weight","parameters":{"type":"object","properties":{
      "pet":{"type":"string"},"kg":{"type":"number"}},"required":["pet","kg"]}}])");
  FG_ASSERT_OK(cat.status());
  const text::Tool& feed = cat->tools[0];
  const text::Tool& weigh = cat->tools[1];
  auto invents = [&](const text::Tool& tool, const nlohmann::json& args, const char* request) {
    return call::InventsNumbers(tool, args, request);
  };
  const char* none = "Charlie is begging again";
  EXPECT_TRUE(invents(feed, {{"pet", "Charlie"}, {"time", "9 am"}}, none));
  EXPECT_TRUE(invents(feed, {{"pet", "Charlie"}, {"rooms", {"hall", "room 2"}}}, none));
  EXPECT_TRUE(invents(feed, {{"pet", "Charlie"}, {"at", {{"clock", "10:10"}}}}, none));
  EXPECT_TRUE(invents(weigh, {{"pet", "Coco"}, {"kg", 100}}, "Coco has been throwing up"));
  // Not: no number anywhere, an enum member with a digit, an optional number (the argument
  // check's to drop), the same calls where the request says a number in digits, in words or as
  // a measure.
  EXPECT_FALSE(invents(feed, {{"pet", "Charlie"}, {"rooms", {"hall"}}}, none));
  EXPECT_FALSE(invents(feed, {{"pet", "Charlie"}, {"input", "hdmi1"}}, none));
  EXPECT_FALSE(invents(feed, {{"pet", "Charlie"}, {"portions", 2}}, none));
  EXPECT_FALSE(invents(feed, {{"pet", "Rocky"}, {"time", "111 pm"}}, "Feed Rocky at 11 pm"));
  EXPECT_FALSE(invents(feed, {{"pet", "Rocky"}, {"time", "9 am"}}, "Feed Rocky at nine am"));
  EXPECT_FALSE(invents(weigh, {{"pet", "Coco"}, {"kg", 1}}, "Coco weighs a kilogram"));
  EXPECT_FALSE(invents(weigh, {{"pet", "Coco"}, {"kg", 4}}, "Coco is 4kg"));
  EXPECT_FALSE(invents(weigh, nlohmann::json::array(), none));
}

// A call that invents a number is decoded again without its tool; a request that says a number
// is decoded once.
TEST(FunctionCaller, ACallThatInventsANumberIsDecodedAgainWithoutItsTool) {
  constexpr char kLevelCatalog[] = R"([
    {"name": "set_level", "description": "Sets the level.",
     "parameters": {"type": "object", "properties": {"level": {"type": "integer"}},
                    "required": ["level"]}},
    {"name": "stop_music", "description": "Stops the music."}])";
  FunctionCallerOptions o = Options("call");
  o.tool_channel = 1e-3;  // the prior on, too weak to choose
  auto [checked, plain] = CheckedAndPlain(o, kLevelCatalog);
  ASSERT_NE(checked, nullptr);
  ASSERT_NE(plain, nullptr);
  int excluded = 0;
  for (const char* req :
       {"kitchen light on", "turn it up", "lights off", "stop the music", "louder please",
        "the level", "quiet", "music off in the den", "more", "set the level high"}) {
    auto raw = plain->Call(req);
    auto r = checked->Call(req);
    FG_ASSERT_OK(raw.status());
    FG_ASSERT_OK(r.status());
    FG_ASSERT_OK(r->validity) << r->text;
    ASSERT_EQ(raw->calls.size(), 1u) << raw->text;
    ASSERT_EQ(r->calls.size(), 1u) << r->text;
    EXPECT_EQ(raw->stats.excluded_tools, 0);
    EXPECT_EQ(r->calls[0].name, "stop_music") << req;
    EXPECT_EQ(r->stats.excluded_tools, raw->calls[0].name == "set_level" ? 1 : 0) << req;
    excluded += static_cast<int>(r->stats.excluded_tools);
  }
  EXPECT_GT(excluded, 0);  // the requests did exercise a second decode
  for (const char* req : {"level 7", "set the level to five"}) {
    auto raw = plain->Call(req);
    auto r = checked->Call(req);
    FG_ASSERT_OK(raw.status());
    FG_ASSERT_OK(r.status());
    EXPECT_EQ(r->stats.excluded_tools, 0) << req;
    EXPECT_EQ(r->text, raw->text) << req;
  }
}

TEST(FunctionCaller, ArgumentCheckDropsTheOptionalArgumentsTheRequestIsLikelierWithout) {
  auto cat = text::ParseToolCatalog(kOptionalCatalog);
  FG_ASSERT_OK(cat.status());
  FunctionCallerOptions o = Options("call");
  o.tool_channel = 1;
  o.grammar_tools = {"set_light"};  // the tool with optional arguments (no tool prior then)
  auto [checked, plain] = CheckedAndPlain(o, kOptionalCatalog);
  ASSERT_NE(checked, nullptr);
  ASSERT_NE(plain, nullptr);
  auto channel = call::ToolChannel::Create(call::RuntimeModel(*TinyModel()),
                                           call::CallTokenizer(*TinyModel()), *cat, nullptr);
  FG_ASSERT_OK(channel.status());
  int optional_seen = 0, dropped = 0, replaced = 0;
  for (const char* req : {"kitchen light on", "turn the hall light on red", "lights off",
                          "stop the music", "music off in the den", "dim the kitchen to 10",
                          "blue light please", "all music off", "light on full", "quiet"}) {
    auto raw = plain->Call(req);
    FG_ASSERT_OK(raw.status());
    FG_ASSERT_OK(raw->validity) << raw->text;
    EXPECT_EQ(raw->stats.dropped_arguments, 0);
    EXPECT_EQ(raw->stats.argument_check_ms, 0.0);
    auto r = checked->Call(req);
    FG_ASSERT_OK(r.status());
    FG_ASSERT_OK(r->validity) << r->text;
    EXPECT_EQ(r->text, raw->text);  // the decoding is the same; only `calls` are checked
    EXPECT_EQ(r->stats.channel_ms, 0.0);  // one tool admitted: no tool prior, yet a check
    ASSERT_EQ(r->calls.size(), raw->calls.size());
    int64_t dropped_here = 0, replaced_here = 0;
    for (size_t i = 0; i < raw->calls.size(); ++i) {
      const FunctionCall& c = raw->calls[i];
      const text::Tool* tool = cat->Find(c.name);
      ASSERT_NE(tool, nullptr);
      int optional = 0;
      for (const auto& [key, value] : c.arguments.items()) optional += key != "room";
      const call::CallScorer score = [&](std::span<const nlohmann::json> cands) {
        std::vector<std::pair<const text::Tool*, nlohmann::json>> calls;
        for (const nlohmann::json& a : cands) calls.emplace_back(tool, a);
        return (*channel)->ScoreCalls(calls, req);
      };
      const call::SaidFacts said = call::SaidFactsOf(req, *tool);
      auto want = call::CheckArguments(*tool, c.arguments, score, &said);
      FG_ASSERT_OK(want.status());
      dropped_here += want->dropped;
      replaced_here += want->replaced;
      EXPECT_GT(r->stats.argument_check_ms, 0.0);  // every call here has an enum argument
      optional_seen += optional;
      EXPECT_EQ(r->calls[i].name, c.name);
      EXPECT_EQ(r->calls[i].arguments, want->arguments) << req;
      EXPECT_TRUE(r->calls[i].arguments.contains("room"));
    }
    EXPECT_EQ(r->stats.dropped_arguments, dropped_here) << req;
    EXPECT_EQ(r->stats.replaced_values, replaced_here) << req;
    dropped += static_cast<int>(dropped_here);
    replaced += static_cast<int>(replaced_here);
    // Streamed pieces are the answer: no check.
    CallControl streamed;
    std::string pieces;
    streamed.on_piece = [&](std::string_view p) { pieces += p; };
    auto st = checked->Call(req, streamed);
    FG_ASSERT_OK(st.status());
    EXPECT_EQ(pieces, raw->text);
    EXPECT_EQ(st->calls.size(), raw->calls.size());
    for (size_t i = 0; i < st->calls.size(); ++i) {
      EXPECT_EQ(st->calls[i].arguments, raw->calls[i].arguments);
    }
    EXPECT_EQ(st->stats.dropped_arguments, 0);
  }
  EXPECT_GT(dropped, 0);  // the requests did exercise both outcomes
  EXPECT_LT(dropped, optional_seen);
  std::printf(
      "argument check: %d optional arguments decoded, %d dropped, %d enum values replaced\n",
      optional_seen, dropped, replaced);
}

TEST(ToolChannel, PriorShiftsEachNameTokenByTheToolsItCanStillBecome) {
  auto tk = TinyTokenizer();
  const text::ToolCatalog cat = Catalog();
  auto g = text::CallGrammar::Create(cat, *tk, text::GrammarOptions{});
  FG_ASSERT_OK(g.status());
  const std::vector<std::string> names = {"set_light", "set_timer", "get_weather"};
  // The second prior rules get_weather out: a token that leads only to it is ruled out too.
  for (const std::vector<double>& prior :
       {std::vector<double>{-1.5, 0.25, -4.0},
        std::vector<double>{-1.5, 0.25, -std::numeric_limits<double>::infinity()}}) {
    auto lse = [&](const std::string& text) {  // over the tools whose name fits "call:" + text
      double z = 0;
      const size_t brace = text.find('{');
      for (size_t i = 0; i < names.size(); ++i) {
        const bool fits = brace == std::string::npos ? names[i].rfind(text, 0) == 0
                                                     : names[i] == text.substr(0, brace);
        if (fits) z += std::exp(prior[i]);
      }
      return std::log(z);
    };
    const int32_t start_call = *tk->Find("<start_function_call>");
    int ruled_out = 0;
    // Walk the grammar to each tool's name, checking every sampled step of the way.
    for (size_t target_i = 0; target_i < names.size(); ++target_i) {
      const std::string& target = names[target_i];
      if (!std::isfinite(prior[target_i])) continue;
      auto proc = call::MakeToolPrior(&names, &prior, tk.get(), start_call);
      text::CallGrammar::State s = (*g)->Start();
      std::string written;  // since <start_function_call>
      bool in_call = false;
      int checked = 0;
      for (int step = 0; step < 64; ++step) {
        std::span<const int32_t> allowed = (*g)->Allowed(s);
        ASSERT_FALSE(allowed.empty());
        const std::string before = written.size() >= 5 ? written.substr(5) : "";
        const bool in_name = in_call && written.find('{') == std::string::npos;
        std::vector<float> cand(allowed.size(), 0.0f);
        int32_t pick = allowed[0];
        if (allowed.size() > 1) {
          proc->Restrict({**g, s, allowed}, cand);
          for (size_t j = 0; j < allowed.size(); ++j) {
            const std::string t = written + tk->TokenToPiece(allowed[j], true);
            double want = 0;
            if (in_name && t.size() > 5) want = lse(t.substr(5)) - lse(before);
            if (std::isinf(want)) {
              EXPECT_EQ(cand[j], -std::numeric_limits<float>::infinity()) << t;
              ++ruled_out;
            } else {
              EXPECT_NEAR(cand[j], want, 1e-5) << target << " step " << step << " '" << t << "'";
            }
            ++checked;
          }
        }
        // Follow the target's name: the allowed token that keeps "call:" + target + "{" reachable.
        const std::string goal = "call:" + target + "{";
        for (int32_t a : allowed) {
          const std::string t = written + tk->TokenToPiece(a, true);
          if (!in_call && a == start_call) {
            pick = a;
            break;
          }
          if (in_call && (goal.rfind(t, 0) == 0 || t.rfind(goal, 0) == 0)) {
            pick = a;
            break;
          }
        }
        if (pick == start_call) {
          in_call = true;
          written.clear();
        } else if (in_call) {
          written += tk->TokenToPiece(pick, true);
        }
        proc->Written(pick);
        FG_ASSERT_OK((*g)->Advance(&s, pick));
        if (written.find('{') != std::string::npos) break;
      }
      EXPECT_EQ(written.substr(0, 5 + target.size() + 1), "call:" + target + "{");
      EXPECT_GT(checked, 0) << target;
      // After the name: no shift, whatever follows.
      std::span<const int32_t> allowed = (*g)->Allowed(s);
      std::vector<float> cand(allowed.size(), 0.0f);
      proc->Restrict({**g, s, allowed}, cand);
      for (float c : cand) EXPECT_EQ(c, 0.0f);
    }
    EXPECT_EQ(ruled_out > 0, !std::isfinite(prior[2]));
  }
}

// FunctionCallerOptions::tool_examples join the catalog's own "examples" (the same caller as a
// catalog that lists them); a name the catalog lacks or an empty request is refused.
TEST(FunctionCaller, ToolExamplesJoinTheCatalogsOwn) {
  FunctionCallerOptions o = Options("call");
  o.tool_channel = 50;
  o.tool_examples = {{"set_mode", "make it warmer"}, {"set_light", "kitchen lights off"}};
  auto make = [&](const FunctionCallerOptions& opt, const std::string& catalog) {
    auto c = FunctionCaller::Create(WideTinyModel(), catalog, opt);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  };
  auto given = make(o, kBoundedCatalog);
  nlohmann::json cat = nlohmann::json::parse(kBoundedCatalog);
  cat[0]["examples"] = {"the light"};
  auto own = nlohmann::json(cat);
  own[0]["examples"].push_back("kitchen lights off");
  own[1]["examples"] = {"make it warmer"};
  ASSERT_EQ(own[1]["name"], "set_mode");
  FunctionCallerOptions plain = o;
  plain.tool_examples.clear();
  auto listed = make(plain, own.dump());
  auto both = make(o, cat.dump());  // "the light" first, then the options'
  auto none = make(plain, kBoundedCatalog);
  ASSERT_TRUE(given && listed && both && none);
  int differ = 0;
  for (const char* req : {"turn the light on", "make it warmer", "eco mode"}) {
    auto a = listed->Call(req);
    auto b = both->Call(req);
    FG_ASSERT_OK(a.status());
    FG_ASSERT_OK(b.status());
    EXPECT_EQ(a->tokens, b->tokens) << req;
    auto c = given->Call(req);
    auto d = none->Call(req);
    FG_ASSERT_OK(c.status());
    FG_ASSERT_OK(d.status());
    differ += c->tokens != d->tokens;
  }
  EXPECT_GT(differ, 0);  // the examples moved the prior's choice
  o.tool_examples = {{"set_heater", "x"}};
  EXPECT_THAT(FunctionCaller::Create(WideTinyModel(), kBoundedCatalog, o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'set_heater' is not a tool")));
  o.tool_examples = {{"set_mode", ""}};
  EXPECT_THAT(FunctionCaller::Create(WideTinyModel(), kBoundedCatalog, o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty request")));
}

TEST(FunctionCaller, ToolChannelChoosesTheToolThatExplainsTheRequest) {
  FunctionCallerOptions off = Options("call");
  off.tool_channel = 0;
  auto plain = NewCaller(off, kBoundedCatalog);
  ASSERT_NE(plain, nullptr);
  auto cat = text::ParseToolCatalog(kBoundedCatalog);
  FG_ASSERT_OK(cat.status());
  auto channel = call::ToolChannel::Create(call::RuntimeModel(*TinyModel()),
                                           call::CallTokenizer(*TinyModel()), *cat, nullptr);
  FG_ASSERT_OK(channel.status());
  int differ = 0, checked = 0;
  for (const char* req : {"turn the light on", "make it warmer", "stop the music", "eco mode",
                          "kitchen lights off", "cool the house"}) {
    auto scores = (*channel)->Score(req);
    FG_ASSERT_OK(scores.status());
    std::vector<double> sorted = *scores;
    std::sort(sorted.rbegin(), sorted.rend());
    const double gap = sorted[0] - sorted[1];  // the random model barely tells its tools apart
    if (!(gap > 0)) continue;
    // A weight that drowns the model's own preference: the chosen tool is the channel's.
    FunctionCallerOptions o = Options("call");
    o.tool_channel = 200 / gap;
    auto c = NewCaller(o, kBoundedCatalog);
    ASSERT_NE(c, nullptr);
    const size_t best = std::max_element(scores->begin(), scores->end()) - scores->begin();
    auto r = c->Call(req);
    FG_ASSERT_OK(r.status());
    FG_ASSERT_OK(r->validity) << r->text;
    ASSERT_EQ(r->calls.size(), 1u);
    EXPECT_EQ(r->calls[0].name, cat->tools[best].name) << req;
    EXPECT_GT(r->stats.channel_ms, 0.0);
    ++checked;
    auto p = plain->Call(req);
    FG_ASSERT_OK(p.status());
    FG_ASSERT_OK(p->validity);
    EXPECT_EQ(p->stats.channel_ms, 0.0);
    differ += p->calls[0].name != r->calls[0].name;
  }
  EXPECT_GE(checked, 4);
  EXPECT_GT(differ, 0);  // the prior did change some choices
  // The default: off for a FunctionGemma vocabulary, on for a base Gemma 3 one.
  auto dflt = NewCaller(Options("call"), kBoundedCatalog);
  ASSERT_NE(dflt, nullptr);
  EXPECT_EQ(dflt->Call("turn the light on")->stats.channel_ms, 0.0);
  auto base = CallModel::Load(BaseVocabModelPath());
  FG_ASSERT_OK(base.status());
  auto on = FunctionCaller::Create(*base, kBoundedCatalog, Options("call"));
  FG_ASSERT_OK(on.status());
  EXPECT_GT((*on)->Call("turn the light on")->stats.channel_ms, 0.0);
  // Only the tools the grammar admits are scored; one tool leaves nothing to choose.
  FunctionCallerOptions one = Options("call");
  one.tool_channel = 1;
  one.grammar_tools = {"set_mode"};
  auto single = NewCaller(one, kBoundedCatalog);
  ASSERT_NE(single, nullptr);
  auto r = single->Call("turn the light on");
  FG_ASSERT_OK(r.status());
  EXPECT_EQ(r->stats.channel_ms, 0.0);
  EXPECT_EQ(r->calls.at(0).name, "set_mode");
  one.grammar_tools = {"set_mode", "stop_music"};
  auto two = NewCaller(one, kBoundedCatalog);
  ASSERT_NE(two, nullptr);
  r = two->Call("turn the light on");
  FG_ASSERT_OK(r.status());
  EXPECT_GT(r->stats.channel_ms, 0.0);
  EXPECT_NE(r->calls.at(0).name, "set_light");
}

// CallModel::Load's prior_loras: the tool prior runs with them (a marked adapter only), while
// the call is decoded with the model's own adapters (none here).
TEST(FunctionCaller, PriorAdaptersRunTheToolPriorOnly) {
  std::string paths[2];
  for (const bool marked : {true, false}) {
    FG_ASSERT_OK_AND_ASSIGN(paths[marked], WriteChannelLora("prior_lora", marked));
  }
  EXPECT_THAT(CallModel::Load(TinyModelPath(), {}, {{paths[0], 1.0f}}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not trained for the tool prior")));
  EXPECT_FALSE(CallModel::Load(TinyModelPath(), {}, {{"/nonexistent/prior.gguf", 1.0f}}).ok());
  FG_ASSERT_OK_AND_ASSIGN(auto with_prior,
                          CallModel::Load(TinyModelPath(), {}, {{paths[1], 1.0f}}));
  FG_ASSERT_OK_AND_ASSIGN(auto adapted, runtime::Model::Load(TinyModelPath(), {{paths[1], 1.0f}}));
  auto cat = text::ParseToolCatalog(kBoundedCatalog);
  FG_ASSERT_OK(cat.status());
  const text::Tokenizer& tk = call::CallTokenizer(*TinyModel());
  auto channel = call::ToolChannel::Create(*adapted, tk, *cat, nullptr);
  FG_ASSERT_OK(channel.status());
  auto plain_channel =
      call::ToolChannel::Create(call::RuntimeModel(*TinyModel()), tk, *cat, nullptr);
  FG_ASSERT_OK(plain_channel.status());
  // The prior's model shares the calling model's mapping (Model::Share), and scores as a model
  // loaded with the adapter alone.
  const runtime::Model* prior_model = call::PriorModel(*with_prior);
  ASSERT_NE(prior_model, nullptr);
  EXPECT_EQ(call::PriorModel(*TinyModel()), nullptr);
  EXPECT_EQ(&prior_model->file(), &call::RuntimeModel(*with_prior).file());
  EXPECT_TRUE(prior_model->adapters_in_channel());
  EXPECT_TRUE(call::RuntimeModel(*with_prior).adapters().empty());
  {
    auto shared = call::ToolChannel::Create(*prior_model, tk, *cat, nullptr);
    FG_ASSERT_OK(shared.status());
    FG_ASSERT_OK_AND_ASSIGN(const std::vector<double> a, (*shared)->Score("eco mode"));
    FG_ASSERT_OK_AND_ASSIGN(const std::vector<double> b, (*channel)->Score("eco mode"));
    EXPECT_EQ(a, b);
  }
  int checked = 0, differ = 0;
  for (const char* req :
       {"turn the light on", "make it warmer", "stop the music", "eco mode", "kitchen lights off",
        "cool the house", "play some jazz", "set a timer", "dim the lights", "heat to 22"}) {
    FG_ASSERT_OK_AND_ASSIGN(const std::vector<double> scores, (*channel)->Score(req));
    FG_ASSERT_OK_AND_ASSIGN(const std::vector<double> plain, (*plain_channel)->Score(req));
    std::vector<double> sorted = scores;
    std::sort(sorted.rbegin(), sorted.rend());
    const double gap = sorted[0] - sorted[1];
    if (!(gap > 0)) continue;
    FunctionCallerOptions o = Options("call");
    o.tool_channel = 200 / gap;
    auto c = FunctionCaller::Create(with_prior, kBoundedCatalog, o);
    FG_ASSERT_OK(c.status());
    auto r = (*c)->Call(req);
    FG_ASSERT_OK(r.status());
    FG_ASSERT_OK(r->validity) << r->text;
    ASSERT_EQ(r->calls.size(), 1u);
    const size_t best = std::max_element(scores.begin(), scores.end()) - scores.begin();
    EXPECT_EQ(r->calls[0].name, cat->tools[best].name) << req;
    ++checked;
    differ += std::max_element(plain.begin(), plain.end()) - plain.begin() !=
              static_cast<std::ptrdiff_t>(best);
  }
  EXPECT_GE(checked, 6);
  EXPECT_GT(differ, 0);  // the adapter's prior chooses otherwise than the base model's somewhere
  // With the prior off the call is the model's own: the prior's adapter does not decode it.
  FunctionCallerOptions off = Options("call");
  off.tool_channel = 0;
  auto a = FunctionCaller::Create(with_prior, kBoundedCatalog, off);
  auto b = NewCaller(off, kBoundedCatalog);
  FG_ASSERT_OK(a.status());
  ASSERT_NE(b, nullptr);
  for (const char* req : {"turn the light on", "eco mode"}) {
    auto ra = (*a)->Call(req);
    auto rb = b->Call(req);
    FG_ASSERT_OK(ra.status());
    FG_ASSERT_OK(rb.status());
    EXPECT_EQ(ra->tokens, rb->tokens) << req;
  }
}

// Optional arguments only, bounded values: where an app's adapter leaves one out, the prior's
// model may give it.
constexpr char kFillCatalog[] = R"([
  {"name": "set_light", "description": "Turns a light on or off.",
   "parameters": {"type": "object",
     "properties": {"room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
                    "state": {"type": "string", "enum": ["on", "off"]},
                    "dim": {"type": "boolean"}},
     "required": ["state"]}},
  {"name": "set_mode", "description": "Sets the thermostat mode.",
   "parameters": {"type": "object",
     "properties": {"mode": {"type": "string", "enum": ["heat", "cool", "auto"]},
                    "eco": {"type": "boolean"},
                    "fan": {"type": "string", "enum": ["low", "high"]}},
     "required": ["mode"]}},
  {"name": "stop_music", "description": "Stops the music."}
])";

// An app's adapter for the tiny model (another synthetic adapter than the prior's, applied after
// the prefix) recording `given` as the arguments its examples gave (call::kGivenArgumentsKey;
// "": none recorded).
StatusOr<std::string> WriteAppLora(const std::string& name, const std::string& given) {
  FG_ASSIGN_OR_RETURN(auto base, runtime::Model::Load(TinyModelPath()));
  model::SyntheticLoraSpec spec;
  spec.amplitude = 0.5f;
  spec.seed = 7;
  FG_ASSIGN_OR_RETURN(gguf::Writer w, model::SyntheticLora(base->file(), spec));
  w.SetString("fgemma.lora.prefix", "base");
  if (!given.empty()) w.SetString(call::kGivenArgumentsKey, given);
  const std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  FG_RETURN_IF_ERROR(w.WriteFile(path));
  return path;
}

// Requests of kFillCatalog's tools, for the fill's and the blend's tests.
// The tests below count the cases these requests show on the random tiny model (a fill, an
// unsaid enum member left out, ...), which depend on the kernels' rounding: 24 requests show each
// case with the scalar, AVX2 and AVX-512 kernels alike (FGEMMA_ISA), where the first 12 did not
// show every case with the AVX-512 ones.
constexpr const char* kFillRequests[] = {
    "turn the light on",  "make it warmer",     "stop the music",     "eco mode",
    "kitchen lights off", "cool the house",     "play some jazz",     "dim the hall",
    "heat on high fan",   "lights off",         "bedroom light",      "auto mode please",
    "hall light on",      "fan on low",         "switch to heat",     "too cold in here",
    "quiet the music",    "kitchen light dim",  "set it to cool eco", "bedroom lights on",
    "high fan auto",      "it is dark in here", "music off",          "heat the bedroom"};

// FunctionCallerOptions::fill_arguments: an app's call that leaves out an optional argument its
// examples never gave takes it from the call the prior's model decodes for the same request (the
// call a caller of that adapter alone makes), when that call names the same function, save an
// enum member the request does not say; the arguments the examples gave, and calls of another
// function, are the app's own.
TEST(FunctionCaller, ArgumentsTheAppNeverGaveAreFilledFromThePriorsModel) {
  FG_ASSERT_OK_AND_ASSIGN(const std::string prior, WriteChannelLora("fill_prior", true));
  FG_ASSERT_OK_AND_ASSIGN(
      const std::string none_given,
      WriteAppLora("fill_app_none", R"({"set_light":[],"set_mode":[],"stop_music":[]})"));
  FG_ASSERT_OK_AND_ASSIGN(
      const std::string all_given,
      WriteAppLora("fill_app_all", R"({"set_light":["dim","room","state"],)"
                                   R"("set_mode":["eco","fan","mode"],"stop_music":[]})"));
  FG_ASSERT_OK_AND_ASSIGN(auto app,
                          CallModel::Load(TinyModelPath(), {{none_given, 1.0f}}, {{prior, 1.0f}}));
  FG_ASSERT_OK_AND_ASSIGN(auto app_all,
                          CallModel::Load(TinyModelPath(), {{all_given, 1.0f}}, {{prior, 1.0f}}));
  FG_ASSERT_OK_AND_ASSIGN(auto prior_alone, CallModel::Load(TinyModelPath(), {{prior, 1.0f}}));
  auto cat = text::ParseToolCatalog(kFillCatalog);
  FG_ASSERT_OK(cat.status());
  FunctionCallerOptions o = Options("call");
  o.tool_channel = 1;
  o.blend = 0;  // the app's own decode (the blend has a test of its own)
  FunctionCallerOptions off = o;
  off.fill_arguments = false;
  auto make = [&](std::shared_ptr<const CallModel> m, const FunctionCallerOptions& opt) {
    auto c = FunctionCaller::Create(std::move(m), kFillCatalog, opt);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  };
  // With a prefix cache dir, the partner reads the caller's file (both prefixes are the base
  // model's): one file, the same answers.
  FunctionCallerOptions cached = o;
  cached.cache_dir = ::testing::TempDir() + "/fill_cache";
  std::filesystem::remove_all(cached.cache_dir);
  auto filled = make(app, o), own = make(app, off), all = make(app_all, o),
       start = make(prior_alone, o), from_disk = make(app, cached);
  ASSERT_TRUE(filled && own && all && start && from_disk);
  EXPECT_GT(filled->memory_bytes(), own->memory_bytes());  // the partner's session
  EXPECT_TRUE(filled->checks_arguments());
  int fills = 0, same_function = 0, unsaid_members = 0;
  for (const char* req : kFillRequests) {
    FG_ASSERT_OK_AND_ASSIGN(const CallResult a, own->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult b, start->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult f, filled->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult g, all->Call(req));
    FG_ASSERT_OK(a.validity) << a.text;
    FG_ASSERT_OK(b.validity) << b.text;
    ASSERT_EQ(a.calls.size(), 1u);
    ASSERT_EQ(b.calls.size(), 1u);
    EXPECT_EQ(f.text, a.text) << req;  // the app's own decode
    // Every argument given by the examples: the app's call as it is, no second decode.
    EXPECT_EQ(g.calls[0].ToJson(), a.calls[0].ToJson()) << req;
    EXPECT_EQ(g.stats.fill_ms, 0.0);
    EXPECT_EQ(g.stats.filled_arguments, 0);
    nlohmann::json want = a.calls[0].arguments;
    int64_t added = 0;
    if (b.calls[0].name == a.calls[0].name) {
      ++same_function;
      const text::Tool* tool = cat->Find(a.calls[0].name);
      ASSERT_NE(tool, nullptr);
      for (const auto& [key, value] : b.calls[0].arguments.items()) {
        if (want.contains(key)) continue;
        // An enum member only where the request says it ("dim the hall": not `room: "bedroom"`).
        const text::Schema& schema = tool->parameters.properties.at(key);
        if (!schema.enum_values.empty()) {
          const int member = call::SaidEnumMember(req, schema);
          if (member < 0 || schema.enum_values[static_cast<size_t>(member)] != value) {
            ++unsaid_members;
            continue;
          }
        }
        want[key] = value;
        ++added;
      }
    }
    ASSERT_EQ(f.calls.size(), 1u);
    EXPECT_EQ(f.calls[0].name, a.calls[0].name) << req;
    EXPECT_EQ(f.calls[0].arguments, want) << req << ": app " << a.calls[0].ToJson().dump()
                                          << ", start " << b.calls[0].ToJson().dump();
    EXPECT_EQ(f.stats.filled_arguments, added) << req;
    fills += added > 0;
    FG_ASSERT_OK_AND_ASSIGN(const CallResult d, from_disk->Call(req));
    EXPECT_EQ(d.calls[0].ToJson(), f.calls[0].ToJson()) << req;
    EXPECT_EQ(d.stats.filled_arguments, added) << req;
  }
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(cached.cache_dir)) {
    ++files;
  }
  EXPECT_EQ(files, 1u);
  EXPECT_GT(fills, 0);              // the test saw a fill
  EXPECT_GT(same_function, fills);  // and a call the start agreed with, with nothing to add
  EXPECT_GT(unsaid_members, 0);     // and an unsaid enum member left out
}

// FunctionCallerOptions::blend: the app's adapter and the prior's model choose each token
// together. A weight near 0 decodes what the app alone decodes, one near 1 what the prior's model
// alone decodes (under the same tool prior), and between them the calls of both can come out;
// blend_sure 0 (the app sure of every step) leaves every step to the app; without a prior's
// model of its own, or at 0, no partner is made.
TEST(FunctionCaller, TheBlendDecodesWithBothModels) {
  FG_ASSERT_OK_AND_ASSIGN(const std::string prior, WriteChannelLora("blend_prior", true));
  FG_ASSERT_OK_AND_ASSIGN(
      const std::string given,
      WriteAppLora("blend_app", R"({"set_light":[],"set_mode":[],"stop_music":[]})"));
  FG_ASSERT_OK_AND_ASSIGN(auto app,
                          CallModel::Load(TinyModelPath(), {{given, 1.0f}}, {{prior, 1.0f}}));
  FG_ASSERT_OK_AND_ASSIGN(auto prior_alone, CallModel::Load(TinyModelPath(), {{prior, 1.0f}}));
  FunctionCallerOptions o = Options("call");
  o.tool_channel = 1;
  o.fill_arguments = false;
  o.copy_bias = 0;  // the models decide, not the request's text
  auto make = [&](std::shared_ptr<const CallModel> m, double blend, double sure = 2) {
    FunctionCallerOptions opt = o;
    opt.blend = blend;
    opt.blend_sure = sure;
    auto c = FunctionCaller::Create(std::move(m), kFillCatalog, opt);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  };
  auto own = make(app, 0), near_own = make(app, 1e-6), near_prior = make(app, 1 - 1e-6),
       half = make(app, 0.5), start = make(prior_alone, 0), start_blend = make(prior_alone, 0.5),
       app_sure = make(app, 1 - 1e-6, 0);
  ASSERT_TRUE(own && near_own && near_prior && half && start && start_blend && app_sure);
  EXPECT_GT(half->memory_bytes(), own->memory_bytes());           // the partner's session
  EXPECT_EQ(start_blend->memory_bytes(), start->memory_bytes());  // no record: no partner
  // The blend does not hold a streamed answer back (fgemma serve): only the fill and the check do.
  FunctionCallerOptions unchecked = o;
  unchecked.argument_check = false;
  unchecked.blend = 0.5;
  FG_ASSERT_OK_AND_ASSIGN(auto streams, FunctionCaller::Create(app, kFillCatalog, unchecked));
  EXPECT_FALSE(streams->checks_arguments());
  int differ = 0, half_differs_from_own = 0;
  for (const char* req : kFillRequests) {
    FG_ASSERT_OK_AND_ASSIGN(const CallResult a, own->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult b, start->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult n, near_own->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult p, near_prior->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult h, half->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult sb, start_blend->Call(req));
    FG_ASSERT_OK_AND_ASSIGN(const CallResult as, app_sure->Call(req));
    EXPECT_EQ(as.text, a.text) << req;
    EXPECT_EQ(as.stats.blended_steps, 0);
    // Sure everywhere, the partner never steps: its session holds the prefix alone.
    EXPECT_EQ(call::PartnerSession(*app_sure)->position(), app_sure->prefix_tokens()) << req;
    EXPECT_EQ(h.stats.blended_steps,
              h.stats.sparse_steps + h.stats.full_steps + h.stats.drafted_steps)
        << req;  // blend_sure 2: all
    EXPECT_GT(h.stats.blended_steps, 0);
    EXPECT_EQ(n.text, a.text) << req;
    EXPECT_EQ(p.text, b.text) << req;
    EXPECT_EQ(sb.text, b.text) << req;
    FG_EXPECT_OK(h.validity) << h.text;
    EXPECT_EQ(a.stats.blend_ms, 0.0);
    EXPECT_GT(h.stats.blend_ms, 0.0);
    differ += a.text != b.text;
    half_differs_from_own += h.text != a.text;
    // Streamed, the same pieces as the answer.
    std::string streamed;
    CallControl control;
    control.on_piece = [&](std::string_view piece) { streamed += piece; };
    FG_ASSERT_OK_AND_ASSIGN(const CallResult hs, half->Call(req, control));
    EXPECT_EQ(streamed, hs.text) << req;
  }
  EXPECT_GT(differ, 0);                 // the two models disagree somewhere
  EXPECT_GT(half_differs_from_own, 0);  // and the blend is not the app alone

  // Both adapters apply after the prefix: the partner took the catalog prefix's K/V from the
  // caller's session (no prefill of its own). Its caches then hold what a session of the prior's
  // model holds after the same tokens (prefix, request, call), all of them prefilled. Half sure:
  // the partner skips some steps and appends the tokens written meanwhile with its next one.
  auto fresh = make(app, 0.5, 0.5);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(call::PartnerSession(*own), nullptr);
  FG_ASSERT_OK_AND_ASSIGN(const CallResult r, fresh->Call("turn the light on"));
  EXPECT_GT(r.stats.blended_steps, 0);
  EXPECT_LT(r.stats.blended_steps + 1,
            r.stats.sparse_steps + r.stats.full_steps + r.stats.drafted_steps);
  const runtime::Session* partner = call::PartnerSession(*fresh);
  ASSERT_NE(partner, nullptr);
  const int64_t n = fresh->prefix_tokens();
  EXPECT_EQ(partner->pinned(), n);
  FG_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> tokens, fresh->PromptTokens("turn the light on"));
  tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  ASSERT_GT(partner->position(), n);
  ASSERT_LE(partner->position(), static_cast<int64_t>(tokens.size()));
  runtime::SessionOptions so;
  so.lora_from = n;
  FG_ASSERT_OK_AND_ASSIGN(auto prefilled, runtime::Session::Create(*call::PriorModel(*app), so));
  const std::span<const int32_t> all(tokens);
  FG_ASSERT_OK(prefilled->Append(all.first(n), runtime::LogitsRequest::None()));
  FG_ASSERT_OK(
      prefilled->Append(all.subspan(n, partner->position() - n), runtime::LogitsRequest::None()));
  for (int64_t l = 0; l < call::PriorModel(*app)->config().n_layers; ++l) {
    for (const bool is_k : {true, false}) {
      const auto want = is_k ? prefilled->cached_k(l) : prefilled->cached_v(l);
      const auto got = is_k ? partner->cached_k(l) : partner->cached_v(l);
      ASSERT_EQ(got.size(), want.size()) << l;
      float worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LT(worst, 1e-4f) << "layer " << l << (is_k ? " K" : " V");
    }
  }
}

// The adapter's record of the given arguments is checked when the model loads.
TEST(FunctionCaller, AMalformedGivenArgumentsRecordIsALoadError) {
  FG_ASSERT_OK_AND_ASSIGN(const std::string prior, WriteChannelLora("fill_prior", true));
  for (const char* bad : {"[1]", R"({"set_light": "room"})", R"({"set_light": [1]})", "{"}) {
    FG_ASSERT_OK_AND_ASSIGN(const std::string path, WriteAppLora("fill_bad", bad));
    EXPECT_THAT(CallModel::Load(TinyModelPath(), {{path, 1.0f}}, {{prior, 1.0f}}).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(call::kGivenArgumentsKey)))
        << bad;
  }
}

// The prior's model (Model::Share) uses the calling model's prepacked panels (the base weights'
// panels, one copy), and scores as before.
TEST(FunctionCaller, ThePriorsModelSharesThePrepackedPanels) {
  // The tiny model's shapes in Q8_0, a type with panel kernels (F32 has none).
  FG_ASSERT_OK_AND_ASSIGN(auto spec, gguf::SyntheticPreset("tiny"));
  spec.context = 2048;
  spec.default_type = tensor::DType::kQ8_0;
  const std::string path = ::testing::TempDir() + "/call_tiny_q8_0.gguf";
  FG_ASSERT_OK(gguf::WriteSyntheticGemma3(spec, path));
  FG_ASSERT_OK_AND_ASSIGN(const std::string lora, WriteChannelLora("prior_lora_panels", true));
  FG_ASSERT_OK_AND_ASSIGN(auto unpacked, CallModel::Load(path, {}, {{lora, 1.0f}}));
  FG_ASSERT_OK_AND_ASSIGN(auto packed, CallModel::Load(path, {}, {{lora, 1.0f}}));
  const runtime::Model* prior = call::PriorModel(*packed);
  ASSERT_NE(prior, nullptr);
  EXPECT_EQ(prior->panel_bytes(), 0u);
  FG_ASSERT_OK(call::PrepackPanels(*packed, nullptr));
  const size_t bytes = call::RuntimeModel(*packed).panel_bytes();
  ASSERT_GT(bytes, 0u);
  EXPECT_EQ(prior->panel_bytes(), bytes);
  const std::string q =
      std::string(call::RuntimeModel(*packed).weights().layers.at(0).attn_q->name);
  FG_ASSERT_OK_AND_ASSIGN(const exec::WeightData mine, call::RuntimeModel(*packed).resolver()(q));
  FG_ASSERT_OK_AND_ASSIGN(const exec::WeightData its, prior->resolver()(q));
  ASSERT_NE(mine.panels, nullptr);
  EXPECT_EQ(its.panels, mine.panels);
  EXPECT_EQ(call::PriorModel(*unpacked)->panel_bytes(), 0u);  // another load keeps its own
  auto cat = text::ParseToolCatalog(kBoundedCatalog);
  FG_ASSERT_OK(cat.status());
  const text::Tokenizer& tk = call::CallTokenizer(*packed);
  auto with_panels = call::ToolChannel::Create(*prior, tk, *cat, nullptr);
  auto without = call::ToolChannel::Create(*call::PriorModel(*unpacked), tk, *cat, nullptr);
  FG_ASSERT_OK(with_panels.status());
  FG_ASSERT_OK(without.status());
  for (const char* req : {"turn the light on", "eco mode", "set a timer for ten minutes please"}) {
    FG_ASSERT_OK_AND_ASSIGN(const std::vector<double> a, (*with_panels)->Score(req));
    FG_ASSERT_OK_AND_ASSIGN(const std::vector<double> b, (*without)->Score(req));
    EXPECT_EQ(a, b) << req;
  }
}

}  // namespace
}  // namespace fg
