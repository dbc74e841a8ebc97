// The graph executor and the session, held to the naive reference forward pass on small
// synthetic Gemma 3 models (windows smaller than the prompts, a global layer, quant mixes).
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/gguf_tools/synthetic.h"
#include "src/kernels/cpu.h"
#include "src/reference/reference.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "tests/testing/exec_inputs.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using ::fg::testing::Prompt;
using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using tensor::DType;

using ::fg::testing::Nmse;

struct Fixture {
  std::string path;
  std::unique_ptr<runtime::Model> model;
  std::unique_ptr<reference::Reference> ref;
};

Fixture Make(const std::string& preset, DType type,
             std::vector<std::pair<std::string, DType>> overrides = {}) {
  Fixture f;
  auto spec = gguf::SyntheticPreset(preset);
  EXPECT_TRUE(spec.ok());
  spec->default_type = type;
  spec->type_overrides = std::move(overrides);
  f.path = ::testing::TempDir() + "/exec_" + preset + "_" + std::string(tensor::DTypeName(type)) +
           "_" + std::to_string(spec->type_overrides.size()) + ".gguf";
  Status s = gguf::WriteSyntheticGemma3(*spec, f.path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto m = runtime::Model::Load(f.path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  f.model = std::move(*m);
  auto r = reference::Reference::Open(f.path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  f.ref = std::move(*r);
  return f;
}

std::unique_ptr<runtime::Session> NewSession(const runtime::Model& m, ThreadPool* pool,
                                             int64_t chunk = 64, bool reference = false,
                                             int64_t context = 256) {
  runtime::SessionOptions o;
  o.context = context;
  o.max_chunk = chunk;
  o.pool = pool;
  o.reference = reference;
  auto s = runtime::Session::Create(m, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

class ExecutorVsReference : public ::testing::TestWithParam<std::string> {};

// Every named intermediate of a prompt longer than the window matches the reference.
TEST_P(ExecutorVsReference, NamedTensorsMatchOnF32Weights) {
  Fixture f = Make(GetParam(), DType::kF32);
  ASSERT_NE(f.model, nullptr);
  const auto& c = f.model->config();
  ASSERT_LT(c.sliding_window, 20);
  std::vector<int32_t> prompt = Prompt(20, c.vocab);

  std::map<std::string, std::vector<float>> want;
  f.ref->SetDump([&](std::string_view name, std::span<const float> d, std::span<const int64_t>) {
    want[std::string(name)].assign(d.begin(), d.end());
  });
  auto ref_logits = f.ref->Logits(prompt);
  FG_ASSERT_OK(ref_logits.status());

  for (kernels::Isa isa : kernels::AvailableIsas()) {
    SCOPED_TRACE(std::string(kernels::IsaName(isa)));
    kernels::SetActiveIsa(isa);
    ThreadPool pool(2);
    auto s = NewSession(*f.model, &pool, /*chunk=*/64);
    std::map<std::string, std::vector<float>> got;
    s->SetDump([&](std::string_view name, const std::vector<int64_t>&, std::span<const float> d) {
      got[std::string(name)].assign(d.begin(), d.end());
    });
    FG_ASSERT_OK(s->Append(prompt));
    int compared = 0;
    for (const auto& [name, w] : want) {
      auto it = got.find(name);
      if (it == got.end()) continue;
      std::span<const float> g = it->second;
      std::span<const float> wv = w;
      if (g.size() != wv.size()) {
        // result_norm: the executor only normalizes the rows whose logits are used (the last).
        ASSERT_LT(g.size(), wv.size()) << name;
        wv = wv.subspan(wv.size() - g.size());
      }
      EXPECT_LE(Nmse(g, wv), 1e-6) << name;
      ++compared;
    }
    EXPECT_GE(compared, 2 + 14 * c.n_layers) << "too few named tensors in common";
    EXPECT_LE(Nmse(s->logits(), *ref_logits), 1e-6);
  }
  kernels::SetActiveIsa(kernels::DefaultIsa());
}

// Greedy decoding from the session equals the reference's from-scratch greedy for 64 steps.
TEST_P(ExecutorVsReference, Greedy64StepsIdentical) {
  Fixture f = Make(GetParam(), DType::kF32);
  ASSERT_NE(f.model, nullptr);
  std::vector<int32_t> prompt = Prompt(12, f.model->config().vocab, 11);
  auto want = f.ref->Greedy(prompt, 64);
  FG_ASSERT_OK(want.status());
  ThreadPool pool(2);
  auto s = NewSession(*f.model, &pool);
  FG_ASSERT_OK(s->Append(prompt));
  runtime::Sampler greedy({});
  std::vector<int32_t> got;
  for (int i = 0; i < 64; ++i) {
    int32_t t = greedy.Sample(s->logits());
    got.push_back(t);
    FG_ASSERT_OK(s->Append(std::span<const int32_t>(&t, 1)));
  }
  EXPECT_EQ(got, *want);
}

INSTANTIATE_TEST_SUITE_P(Presets, ExecutorVsReference, ::testing::Values("tiny", "small"));

// Chunked prefill (chunks smaller and larger than the window) equals one-shot prefill bit for
// bit, for f32 and quantized weights: every kernel gives a token the same bits whatever the
// batch (kernels/panel.h), so how a prompt is split never changes the result; positions go past
// the ring size so the ring wraps.
TEST(SessionTest, ChunkedPrefillEqualsOneShotBitForBit) {
  for (DType type : {DType::kF32, DType::kQ8_0, DType::kQ5_0, DType::kQ4_0}) {
    SCOPED_TRACE(tensor::DTypeName(type));
    Fixture f = Make("small", type);
    ASSERT_NE(f.model, nullptr);
    std::vector<int32_t> prompt = Prompt(100, f.model->config().vocab, 5);
    ThreadPool pool(2);
    auto one = NewSession(*f.model, &pool, /*chunk=*/128);
    FG_ASSERT_OK(one->Append(prompt));
    for (int64_t chunk : {1, 3, 7, 16, 33}) {
      SCOPED_TRACE(chunk);
      auto s = NewSession(*f.model, &pool, chunk);
      FG_ASSERT_OK(s->Append(std::span<const int32_t>(prompt).subspan(0, 41)));
      FG_ASSERT_OK(s->Append(std::span<const int32_t>(prompt).subspan(41)));
      ASSERT_EQ(s->logits().size(), one->logits().size());
      EXPECT_EQ(std::memcmp(s->logits().data(), one->logits().data(),
                            s->logits().size() * sizeof(float)),
                0);
    }
  }
}

// Snapshot after a prefix, decode, restore, decode again: identical to an uninterrupted run.
TEST(SessionTest, SnapshotRestoreEqualsUninterrupted) {
  Fixture f = Make("small", DType::kF32);
  ASSERT_NE(f.model, nullptr);
  std::vector<int32_t> prompt = Prompt(30, f.model->config().vocab, 3);
  ThreadPool pool(2);
  auto s = NewSession(*f.model, &pool, 8);
  FG_ASSERT_OK(s->Append(prompt));
  runtime::Session::Snapshot snap = s->Save();
  auto decode = [&](int n) {
    runtime::Sampler greedy({});
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      int32_t t = greedy.Sample(s->logits());
      out.push_back(t);
      EXPECT_TRUE(s->Append(std::span<const int32_t>(&t, 1)).ok());
    }
    return out;
  };
  std::vector<int32_t> first = decode(40);  // wraps the sliding rings
  FG_ASSERT_OK(s->Restore(snap));
  EXPECT_EQ(s->position(), 30);
  std::vector<int32_t> second = decode(40);
  EXPECT_EQ(first, second);
}

// Quantized weights: the fast kernels (activations quantized to 8 bits) stay close to the
// reference kernels of the same executor and to the naive reference; the argmax agrees.
TEST(SessionTest, QuantMixesMatchReference) {
  const std::vector<std::pair<std::string, DType>> mix = {
      {"token_embd", DType::kQ8_0}, {"attn_q.", DType::kQ5_0}, {"attn_k.", DType::kQ5_0},
      {"attn_v.", DType::kQ8_0},    {"ffn_gate", DType::kQ4_0}, {"ffn_up", DType::kQ4_1},
      {"ffn_down", DType::kQ5_1},   {"attn_output", DType::kIQ4_NL}};
  for (DType base : {DType::kF16, DType::kBF16, DType::kQ8_0}) {
    SCOPED_TRACE(std::string(tensor::DTypeName(base)));
    Fixture f = Make("small", base, base == DType::kQ8_0 ? mix : decltype(mix){});
    ASSERT_NE(f.model, nullptr);
    std::vector<int32_t> prompt = Prompt(24, f.model->config().vocab, 9);
    auto want = f.ref->Logits(prompt);
    FG_ASSERT_OK(want.status());
    ThreadPool pool(2);
    auto fast = NewSession(*f.model, &pool, 64, /*reference=*/false);
    auto slow = NewSession(*f.model, &pool, 64, /*reference=*/true);
    FG_ASSERT_OK(fast->Append(prompt));
    FG_ASSERT_OK(slow->Append(prompt));
    EXPECT_LE(Nmse(slow->logits(), *want), 1e-6);
    EXPECT_LE(Nmse(fast->logits(), *want), 1e-3);
    runtime::Sampler greedy({});
    EXPECT_EQ(greedy.Sample(fast->logits()), greedy.Sample(*want));
  }
}

TEST(SessionTest, ErrorsNameTheProblem) {
  Fixture f = Make("tiny", DType::kF32);
  ASSERT_NE(f.model, nullptr);
  ThreadPool pool(1);
  auto s = NewSession(*f.model, &pool, 16, false, /*context=*/32);
  std::vector<int32_t> bad = {2, static_cast<int32_t>(f.model->config().vocab)};
  EXPECT_THAT(s->Append(bad), StatusIs(StatusCode::kOutOfRange, HasSubstr("outside the vocabulary")));
  std::vector<int32_t> neg = {-1};
  EXPECT_THAT(s->Append(neg), StatusIs(StatusCode::kOutOfRange, HasSubstr("token id -1")));
  std::vector<int32_t> too_long = Prompt(33, f.model->config().vocab);
  EXPECT_THAT(s->Append(too_long), StatusIs(StatusCode::kOutOfRange, HasSubstr("exceed the context")));
  EXPECT_EQ(s->position(), 0);
  runtime::SessionOptions o;
  o.context = 1 << 30;
  EXPECT_THAT(runtime::Session::Create(*f.model, o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trained context")));
}

TEST(SamplerTest, SeededSamplingIsDeterministicAndRespectsTopK) {
  std::vector<float> logits = {0.1f, 2.0f, 1.5f, -1.0f, 1.9f};
  runtime::SamplingParams p;
  p.temperature = 1.0;
  p.top_k = 2;
  p.top_p = 1.0;
  p.seed = 42;
  runtime::Sampler a(p), b(p);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 200; ++i) {
    int32_t x = a.Sample(logits);
    EXPECT_EQ(x, b.Sample(logits));
    seen[x]++;
  }
  EXPECT_EQ(seen.size(), 2u);  // only ids 1 and 4 (the top 2)
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[4], 0);
  runtime::Sampler greedy({});
  EXPECT_EQ(greedy.Sample(logits), 1);
  std::vector<float> tie = {1.0f, 3.0f, 3.0f};
  EXPECT_EQ(greedy.Sample(tie), 1);  // ties go to the lowest id
  // A vocabulary-sized row (the SIMD path): the lowest index of the maximum, wherever the tied
  // copies fall among the lanes, and NaNs (even at index 0) are skipped.
  std::vector<float> big = fg::testing::Random(262144, 5);
  big[100003] = 7.0f;
  big[200001] = 7.0f;
  EXPECT_EQ(greedy.Sample(big), 100003);
  big[0] = std::nanf("");
  big[77] = 7.0f;
  EXPECT_EQ(greedy.Sample(big), 77);
  p.top_p = 0.0;
  EXPECT_FALSE(runtime::ValidateSampling(p).ok());
  p.top_p = 0.5;
  p.temperature = -1;
  EXPECT_FALSE(runtime::ValidateSampling(p).ok());
}

}  // namespace
}  // namespace fg
