// The contract functions run on the host (HostInvoke) agree with the plain runtime
// (runtime::Session) on small synthetic models whose window is smaller than the prompt:
// prefill_at + with_past decode (sliding caches trimmed to W-1 rows) gives the session's greedy
// tokens; chunked prefill_with_past equals the one-shot prefill; gemma/gemma_at argmax equals
// the session's at every position; embeddings-input variants equal the token variants; the fast
// kernels agree with the reference kernels; bad arguments are refused naming the argument.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/export/contract.h"
#include "src/export/host_invoke.h"
#include "src/gguf_tools/synthetic.h"
#include "src/kernels/quant.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "tests/testing/contract_inputs.h"
#include "tests/testing/exec_inputs.h"
#include "tests/testing/metrics.h"

namespace fg::exporter {
namespace {

using ::fg::testing::OneHot;
using ::fg::testing::Prompt;
using ::fg::testing::Nmse;
using ::fg::testing::StatusIs;
using ::testing::HasSubstr;

// 7 layers (5 global, 6 sliding after it), window 6, and a second variant with 2 KV heads so
// the [S,KV,D] -> [1,KV,S,D] transpose is not a plain copy.
std::unique_ptr<runtime::Model> MakeModel(int64_t kv_heads, tensor::DType type = tensor::DType::kF32) {
  auto spec = gguf::SyntheticPreset("small");
  EXPECT_TRUE(spec.ok());
  spec->layers = 7;
  spec->window = 6;
  spec->kv_heads = kv_heads;
  spec->default_type = type;
  const std::string path = ::testing::TempDir() + "/contract_host_kv" +
                           std::to_string(kv_heads) + "_" +
                           std::string(tensor::DTypeName(type)) + ".gguf";
  Status s = gguf::WriteSyntheticGemma3(*spec, path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto m = runtime::Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

struct Host {
  const runtime::Model& m;
  bool reference = true;
  ThreadPool* pool = nullptr;
  StatusOr<std::vector<HostTensor>> Call(Function f, std::vector<HostTensor> args, int64_t seq,
                                         int64_t chunk = 8, bool emb = false) const {
    InvokeOptions o;
    o.function = f;
    o.seq = seq;
    o.chunk = chunk;
    o.emb_input = emb;
    o.pool = pool;
    o.exec.reference = reference;
    return HostInvoke(m.config(), m.weights(), m.resolver(), o, args);
  }
};

// A per-layer cache kept by the test in the contract layout [KV, rows, D] (as rows grow).
struct Cache {
  int64_t kv, d;
  std::vector<std::vector<float>> k, v;  // per layer: KV blocks of rows x D, stored row-major
  int64_t rows = 0;
  // Takes the first `n` rows of a [1, KV, R, D] result.
  static std::vector<float> FirstRows(const HostTensor& t, int64_t n) {
    const int64_t kv = t.shape[1], r = t.shape[2], d = t.shape[3];
    std::vector<float> out;
    for (int64_t h = 0; h < kv; ++h) {
      out.insert(out.end(), t.f32.begin() + h * r * d, t.f32.begin() + (h * r + n) * d);
    }
    return out;
  }
  // The last `n` of `rows` rows as a [1, KV, n, D] tensor.
  static HostTensor LastRows(const std::vector<float>& x, int64_t kv, int64_t rows, int64_t d,
                             int64_t n) {
    std::vector<float> out;
    for (int64_t h = 0; h < kv; ++h) {
      out.insert(out.end(), x.begin() + (h * rows + rows - n) * d, x.begin() + (h * rows + rows) * d);
    }
    return HostTensor::F32({1, kv, n, d}, out);
  }
};

// The with-past arguments of a decode step at `pos` (sliding layers: last min(pos, W-1) rows).
std::vector<HostTensor> WithPastArgs(const model::Config& c, const Cache& cache, int32_t token,
                                     int64_t pos) {
  std::vector<HostTensor> args;
  args.push_back(HostTensor::I32({1}, {token}));
  bool seen[2] = {false, false};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const bool g = c.IsGlobal(l);
    if (!seen[g]) {
      seen[g] = true;
      std::vector<float> cs, sn;
      ContractRopeRows(pos, 1, c.head_dim, c.RopeBase(l), &cs, &sn);
      args.push_back(HostTensor::F32({1, c.head_dim}, cs));
      args.push_back(HostTensor::F32({1, c.head_dim}, sn));
    }
    const int64_t n = g ? cache.rows : std::min<int64_t>(cache.rows, c.sliding_window - 1);
    args.push_back(Cache::LastRows(cache.k[l], c.n_kv_heads, cache.rows, c.head_dim, n));
    args.push_back(Cache::LastRows(cache.v[l], c.n_kv_heads, cache.rows, c.head_dim, n));
  }
  return args;
}

// Appends the last row of each [1, KV, R, D] result to the cache.
void AppendLastRows(const model::Config& c, const std::vector<HostTensor>& res, int64_t n_new,
                    int64_t n_keep, Cache* cache) {
  for (int64_t l = 0; l < c.n_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const HostTensor& t = res[2 * l + kv];
      const int64_t r = t.shape[2], d = t.shape[3];
      std::vector<float>& dst = kv ? cache->v[l] : cache->k[l];
      std::vector<float> merged;
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        merged.insert(merged.end(), dst.begin() + h * cache->rows * d,
                      dst.begin() + (h + 1) * cache->rows * d);
        const int64_t first = r - n_new;
        merged.insert(merged.end(), t.f32.begin() + (h * r + first) * d,
                      t.f32.begin() + (h * r + first + n_keep) * d);
      }
      dst = std::move(merged);
    }
  }
  cache->rows += n_keep;
}

std::vector<int32_t> SessionGreedy(const runtime::Model& m, const std::vector<int32_t>& prompt,
                                   int steps) {
  runtime::SessionOptions o;
  o.context = 256;
  o.reference = true;
  auto s = runtime::Session::Create(m, o);
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE((*s)->Append(prompt).ok());
  runtime::Sampler greedy({});
  std::vector<int32_t> got;
  for (int i = 0; i < steps; ++i) {
    int32_t t = greedy.Sample((*s)->logits());
    got.push_back(t);
    EXPECT_TRUE((*s)->Append(std::span<const int32_t>(&t, 1)).ok());
  }
  return got;
}

class ContractHost : public ::testing::TestWithParam<int64_t> {};

// gemma_prefill_at + 40 gemma_with_past steps (positions up to 50, window 6) = the session.
TEST_P(ContractHost, PrefillAtThenWithPastEqualsSessionGreedy) {
  auto m = MakeModel(GetParam());
  ASSERT_NE(m, nullptr);
  const model::Config& c = m->config();
  const int n = 10, S = 16, steps = 40;
  std::vector<int32_t> prompt = Prompt(n, c.vocab);
  std::vector<int32_t> want = SessionGreedy(*m, prompt, steps);

  Host host{*m};
  std::vector<int32_t> padded = prompt;
  padded.resize(S, 0);
  FG_ASSERT_OK_AND_ASSIGN(auto pre, host.Call(Function::kPrefillAt,
                                              {HostTensor::I32({S}, padded), OneHot(S, n - 1)}, S));
  ASSERT_EQ(pre.size(), 2 * c.n_layers + 1);
  Cache cache{c.n_kv_heads, c.head_dim, {}, {}, 0};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    cache.k.push_back(Cache::FirstRows(pre[2 * l], n));
    cache.v.push_back(Cache::FirstRows(pre[2 * l + 1], n));
  }
  cache.rows = n;
  std::vector<int32_t> got = {pre.back().i32[0]};
  for (int i = 1; i < steps; ++i) {
    const int64_t pos = n + i - 1;
    FG_ASSERT_OK_AND_ASSIGN(auto res, host.Call(Function::kWithPast,
                                                WithPastArgs(c, cache, got.back(), pos), S));
    // Sliding layers got W-1 past rows once pos >= W-1: their result has W rows.
    if (pos >= c.sliding_window - 1) {
      EXPECT_EQ(res[0].shape[2], c.sliding_window);
    }
    EXPECT_EQ(res[10].shape[2], pos + 1);  // l5.k: the global layer's full cache + 1
    AppendLastRows(c, res, 1, 1, &cache);
    got.push_back(res.back().i32[0]);
  }
  EXPECT_EQ(got, want);
  // Not a degenerate model: the greedy tokens vary.
  EXPECT_GT(std::set<int32_t>(want.begin(), want.end()).size(), 3u);
}

// Chunks of C = 8 through gemma_prefill_with_past (sliding layers given their last W-1 rows,
// global layers everything, the contract's masks, a padded last chunk) give the K/V and the
// token of the one-shot gemma_prefill_at.
TEST_P(ContractHost, ChunkedPrefillWithPastEqualsOneShot) {
  auto m = MakeModel(GetParam());
  ASSERT_NE(m, nullptr);
  const model::Config& c = m->config();
  const int n = 30, S = 32, C = 8;
  std::vector<int32_t> prompt = Prompt(n, c.vocab, 3);
  Host host{*m};
  std::vector<int32_t> padded = prompt;
  padded.resize(S, 0);
  FG_ASSERT_OK_AND_ASSIGN(auto one, host.Call(Function::kPrefillAt,
                                              {HostTensor::I32({S}, padded), OneHot(S, n - 1)}, S));

  Cache cache{c.n_kv_heads, c.head_dim, {}, {}, 0};
  cache.k.assign(c.n_layers, {});
  cache.v.assign(c.n_layers, {});
  int32_t token = -1;
  for (int64_t pos = 0; pos < n; pos += C) {
    const int64_t real = std::min<int64_t>(C, n - pos);
    std::vector<int32_t> chunk(prompt.begin() + pos, prompt.begin() + pos + real);
    chunk.resize(C, 0);
    std::vector<HostTensor> args = {HostTensor::I32({C}, chunk)};
    bool seen[2] = {false, false};
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const bool g = c.IsGlobal(l);
      const int64_t past = g ? cache.rows : std::min<int64_t>(cache.rows, c.sliding_window - 1);
      const bool first = !seen[g];
      seen[g] = true;
      if (first) {
        std::vector<float> cs, sn;
        ContractRopeRows(pos, C, c.head_dim, c.RopeBase(l), &cs, &sn);
        args.push_back(HostTensor::F32({C, c.head_dim}, cs));
        args.push_back(HostTensor::F32({C, c.head_dim}, sn));
      }
      args.push_back(Cache::LastRows(cache.k[l], c.n_kv_heads, cache.rows, c.head_dim, past));
      args.push_back(Cache::LastRows(cache.v[l], c.n_kv_heads, cache.rows, c.head_dim, past));
      if (first) {
        args.push_back(HostTensor::F32(
            {1, c.n_heads, C, past + C},
            ContractChunkMask(pos, past, C, real, g ? 0 : c.sliding_window, c.n_heads)));
      }
    }
    args.push_back(OneHot(C, real - 1));
    FG_ASSERT_OK_AND_ASSIGN(auto res, host.Call(Function::kPrefillWithPast, args, S, C));
    AppendLastRows(c, res, C, real, &cache);
    token = res.back().i32[0];
  }
  ASSERT_EQ(cache.rows, n);
  double worst = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    worst = std::max(worst, Nmse(cache.k[l], Cache::FirstRows(one[2 * l], n)));
    worst = std::max(worst, Nmse(cache.v[l], Cache::FirstRows(one[2 * l + 1], n)));
  }
  std::printf("chunked vs one-shot prefill: worst K/V NMSE %.3g\n", worst);
  EXPECT_LE(worst, 1e-6);
  EXPECT_EQ(token, one.back().i32[0]);
}

// gemma's argmax at every position = the session's argmax after each token; gemma_at with
// select at i = gemma's token i; gemma_prefill's tokens = gemma's.
TEST_P(ContractHost, RedecodeArgmaxEqualsSessionAtEveryPosition) {
  auto m = MakeModel(GetParam());
  ASSERT_NE(m, nullptr);
  const model::Config& c = m->config();
  const int n = 14, S = 16;
  std::vector<int32_t> prompt = Prompt(n, c.vocab, 5);
  runtime::SessionOptions so;
  so.context = 64;
  so.reference = true;
  FG_ASSERT_OK_AND_ASSIGN(auto s, runtime::Session::Create(*m, so));
  runtime::Sampler greedy({});
  std::vector<int32_t> want;
  for (int i = 0; i < n; ++i) {
    FG_ASSERT_OK(s->Append(std::span<const int32_t>(&prompt[i], 1)));
    want.push_back(greedy.Sample(s->logits()));
  }
  Host host{*m};
  std::vector<int32_t> padded = prompt;
  padded.resize(S, 0);
  FG_ASSERT_OK_AND_ASSIGN(auto all, host.Call(Function::kRedecode, {HostTensor::I32({1, S}, padded)}, S));
  ASSERT_EQ(all[0].shape, (std::vector<int64_t>{S}));
  EXPECT_EQ(std::vector<int32_t>(all[0].i32.begin(), all[0].i32.begin() + n), want);
  FG_ASSERT_OK_AND_ASSIGN(auto pre, host.Call(Function::kPrefill, {HostTensor::I32({S}, padded)}, S));
  EXPECT_EQ(pre.back().i32, all[0].i32);
  for (int i = 0; i < n; ++i) {
    FG_ASSERT_OK_AND_ASSIGN(auto at, host.Call(Function::kRedecodeAt,
                                               {HostTensor::I32({1, S}, padded), OneHot(S, i)}, S));
    ASSERT_EQ(at[0].shape, (std::vector<int64_t>{1}));
    EXPECT_EQ(at[0].i32[0], want[i]) << "position " << i;
  }
}

// The embeddings-input variants (unscaled rows of token_embd) equal the token variants.
TEST_P(ContractHost, EmbeddingsInputEqualsTokens) {
  auto m = MakeModel(GetParam());
  ASSERT_NE(m, nullptr);
  const model::Config& c = m->config();
  const int S = 12, C = 8, n = 9;
  std::vector<int32_t> prompt = Prompt(n, c.vocab, 9);
  prompt.resize(S, 0);
  auto emb_of = [&](std::span<const int32_t> ids) {
    std::vector<float> e(ids.size() * c.hidden);
    const gguf::TensorInfo* t = m->weights().token_embd;
    EXPECT_EQ(t->type, tensor::DType::kF32);
    for (size_t i = 0; i < ids.size(); ++i) {
      std::memcpy(&e[i * c.hidden], t->data + ids[i] * c.hidden * 4, c.hidden * 4);
    }
    return HostTensor::F32({static_cast<int64_t>(ids.size()), c.hidden}, e);
  };
  Host host{*m};
  auto same = [&](Function f, std::vector<HostTensor> args, int64_t seq, int64_t chunk) {
    SCOPED_TRACE(std::string(FunctionName(f)));
    FG_ASSERT_OK_AND_ASSIGN(auto a, host.Call(f, args, seq, chunk));
    std::span<const int32_t> ids = args[0].i32;
    args.insert(args.begin() + 1, emb_of(ids));
    FG_ASSERT_OK_AND_ASSIGN(auto b, host.Call(f, args, seq, chunk, /*emb=*/true));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].shape, b[i].shape);
      EXPECT_EQ(a[i].i32, b[i].i32) << "result " << i;
      EXPECT_EQ(a[i].f32, b[i].f32) << "result " << i;
    }
  };
  same(Function::kRedecode, {HostTensor::I32({1, S}, prompt)}, S, C);
  same(Function::kRedecodeAt, {HostTensor::I32({1, S}, prompt), OneHot(S, n - 1)}, S, C);
  same(Function::kPrefill, {HostTensor::I32({S}, prompt)}, S, C);
  same(Function::kPrefillAt, {HostTensor::I32({S}, prompt), OneHot(S, n - 1)}, S, C);

  // with_past / prefill_with_past on a past of 5 rows from a prefill.
  FG_ASSERT_OK_AND_ASSIGN(auto pre, host.Call(Function::kPrefillAt,
                                              {HostTensor::I32({S}, prompt), OneHot(S, 4)}, S));
  Cache cache{c.n_kv_heads, c.head_dim, {}, {}, 5};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    cache.k.push_back(Cache::FirstRows(pre[2 * l], 5));
    cache.v.push_back(Cache::FirstRows(pre[2 * l + 1], 5));
  }
  same(Function::kWithPast, WithPastArgs(c, cache, 17, 5), S, C);
  std::vector<HostTensor> chunk_args = {HostTensor::I32({C}, std::vector<int32_t>(prompt.begin(), prompt.begin() + C))};
  bool seen[2] = {false, false};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const bool g = c.IsGlobal(l);
    const bool first = !seen[g];
    seen[g] = true;
    if (first) {
      std::vector<float> cs, sn;
      ContractRopeRows(5, C, c.head_dim, c.RopeBase(l), &cs, &sn);
      chunk_args.push_back(HostTensor::F32({C, c.head_dim}, cs));
      chunk_args.push_back(HostTensor::F32({C, c.head_dim}, sn));
    }
    chunk_args.push_back(Cache::LastRows(cache.k[l], c.n_kv_heads, 5, c.head_dim, 5));
    chunk_args.push_back(Cache::LastRows(cache.v[l], c.n_kv_heads, 5, c.head_dim, 5));
    if (first) {
      chunk_args.push_back(HostTensor::F32(
          {1, c.n_heads, C, 5 + C}, ContractChunkMask(5, 5, C, C, g ? 0 : c.sliding_window, c.n_heads)));
    }
  }
  chunk_args.push_back(OneHot(C, C - 1));
  same(Function::kPrefillWithPast, chunk_args, S, C);
}

// The fast kernels (SIMD, two threads) agree with the reference kernels on every function.
TEST_P(ContractHost, FastKernelsAgreeWithReference) {
  auto m = MakeModel(GetParam());
  ASSERT_NE(m, nullptr);
  const model::Config& c = m->config();
  const int S = 16, n = 13;
  std::vector<int32_t> prompt = Prompt(n, c.vocab, 21);
  prompt.resize(S, 0);
  ThreadPool pool(2);
  Host ref{*m};
  Host fast{*m, false, &pool};
  std::vector<HostTensor> args = {HostTensor::I32({S}, prompt), OneHot(S, n - 1)};
  FG_ASSERT_OK_AND_ASSIGN(auto a, ref.Call(Function::kPrefillAt, args, S));
  FG_ASSERT_OK_AND_ASSIGN(auto b, fast.Call(Function::kPrefillAt, args, S));
  for (size_t i = 0; i + 1 < a.size(); ++i) EXPECT_LE(Nmse(b[i].f32, a[i].f32), 1e-6) << i;
  EXPECT_EQ(a.back().i32, b.back().i32);
  Cache cache{c.n_kv_heads, c.head_dim, {}, {}, n};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    cache.k.push_back(Cache::FirstRows(a[2 * l], n));
    cache.v.push_back(Cache::FirstRows(a[2 * l + 1], n));
  }
  auto wp = WithPastArgs(c, cache, a.back().i32[0], n);
  FG_ASSERT_OK_AND_ASSIGN(auto x, ref.Call(Function::kWithPast, wp, S));
  FG_ASSERT_OK_AND_ASSIGN(auto y, fast.Call(Function::kWithPast, wp, S));
  for (size_t i = 0; i + 1 < x.size(); ++i) EXPECT_LE(Nmse(y[i].f32, x[i].f32), 1e-6) << i;
  EXPECT_EQ(x.back().i32, y.back().i32);
}

INSTANTIATE_TEST_SUITE_P(KvHeads, ContractHost, ::testing::Values(1, 2));

TEST(ContractHostErrors, ArgumentsAreCheckedAndNamed) {
  auto m = MakeModel(1);
  ASSERT_NE(m, nullptr);
  const model::Config& c = m->config();
  Host host{*m};
  const int S = 8;
  std::vector<int32_t> ok(S, 3);
  EXPECT_THAT(host.Call(Function::kRedecodeAt, {HostTensor::I32({1, S}, ok)}, S).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("takes 2 arguments, got 1")));
  EXPECT_THAT(host.Call(Function::kRedecodeAt, {HostTensor::I32({S}, ok), OneHot(S, 0)}, S).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("argument 0 'tokens': expected shape 1x8xi32, got 8xi32")));
  EXPECT_THAT(host.Call(Function::kRedecodeAt,
                        {HostTensor::F32({1, S}, std::vector<float>(S)), OneHot(S, 0)}, S).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("argument 0 'tokens': expected 1x8xi32")));
  std::vector<int32_t> bad = ok;
  bad[5] = static_cast<int32_t>(c.vocab);
  EXPECT_THAT(host.Call(Function::kRedecodeAt, {HostTensor::I32({1, S}, bad), OneHot(S, 0)}, S).status(),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("argument 0 'tokens': token id 1024 at index 5")));
  // A K whose P disagrees with the first sliding layer's.
  Cache cache{c.n_kv_heads, c.head_dim, {}, {}, 3};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    cache.k.push_back(std::vector<float>(3 * c.kv_dim(), 0.5f));
    cache.v.push_back(std::vector<float>(3 * c.kv_dim(), 0.5f));
  }
  auto args = WithPastArgs(c, cache, 3, 3);
  FG_EXPECT_OK(host.Call(Function::kWithPast, args, S).status());
  args[5] = HostTensor::F32({1, 1, 2, c.head_dim}, std::vector<float>(2 * c.head_dim));  // l1.k
  EXPECT_THAT(host.Call(Function::kWithPast, args, S).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("argument 5 'l1.k': expected shape 1x1x3x64xf32 (P = 3")));
}

}  // namespace
}  // namespace fg::exporter
