// The contract functions on the real Gemma 3 270M Q4_K_M, run on the host (HostInvoke), agree
// with the plain runtime: gemma_prefill_at + gemma_with_past give the session's greedy tokens
// (until a near-tie in the session's own logits, where two correct kernel orders may differ),
// and gemma_at gives the session's first token. Prints the memory plans at S = 1024.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/export/contract.h"
#include "src/export/host_invoke.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "tests/testing/contract_inputs.h"

namespace fg::exporter {
namespace {

using ::fg::testing::OneHot;

// The contract graphs and the session's graph compute the same function with other f32 steps
// (RoPE from tables, explicit masks, a one-hot select). With 8-bit activations such rounding
// differences are amplified: one activation that lands on the other side of a quantization step
// moves a value by 1/127 of its block's range. Measured on this model: two chunkings of the same
// prompt through the session with the earlier (batch-dependent) kernels differed by up to 1.2
// in a logit (NMSE 7e-4 .. 3.5e-3). A divergence is therefore only accepted where the session's
// own margin is below that.
constexpr double kTieMargin = 1.5;

// "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
// with BOS, as `fgemma tokenize` gives it on this model.
const std::vector<int32_t> kPrompt = {2,    105,    2364, 107, 3689, 563, 506, 5279,
                                      529,  7001, 236881, 106, 107,  105, 4368, 107};

TEST(ContractRealTest, PrefillAtAndWithPastFollowTheSession) {
  const char* path = std::getenv("FGEMMA_MODEL");
  if (path == nullptr || *path == '\0') GTEST_SKIP() << "FGEMMA_MODEL is not set";
  FG_ASSERT_OK_AND_ASSIGN(auto model, runtime::Model::Load(path));
  const model::Config& c = model->config();
  ThreadPool pool(2);
  const int steps = 12, S = 24, n = static_cast<int>(kPrompt.size());

  runtime::SessionOptions so;
  so.context = 256;
  so.pool = &pool;
  FG_ASSERT_OK_AND_ASSIGN(auto session, runtime::Session::Create(*model, so));
  FG_ASSERT_OK(session->Append(kPrompt));
  runtime::Sampler greedy({});
  std::vector<int32_t> want;
  std::vector<std::vector<float>> logits;
  for (int i = 0; i < steps; ++i) {
    logits.emplace_back(session->logits().begin(), session->logits().end());
    want.push_back(greedy.Sample(session->logits()));
    FG_ASSERT_OK(session->Append(std::span<const int32_t>(&want.back(), 1)));
  }

  InvokeOptions o;
  o.seq = S;
  o.pool = &pool;
  auto call = [&](Function f, const std::vector<HostTensor>& args) {
    o.function = f;
    return HostInvoke(c, model->weights(), model->resolver(), o, args);
  };
  std::vector<int32_t> padded = kPrompt;
  padded.resize(S, 0);
  FG_ASSERT_OK_AND_ASSIGN(auto at, call(Function::kRedecodeAt,
                                        {HostTensor::I32({1, S}, padded), OneHot(S, n - 1)}));
  EXPECT_EQ(at[0].i32[0], want[0]);
  FG_ASSERT_OK_AND_ASSIGN(auto pre, call(Function::kPrefillAt,
                                         {HostTensor::I32({S}, padded), OneHot(S, n - 1)}));
  // Per-layer caches [rows, D] (one KV head in the 270M), the first n rows of the prefill.
  const int64_t D = c.head_dim;
  ASSERT_EQ(c.n_kv_heads, 1);
  std::vector<std::vector<float>> k(c.n_layers), v(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    k[l].assign(pre[2 * l].f32.begin(), pre[2 * l].f32.begin() + n * D);
    v[l].assign(pre[2 * l + 1].f32.begin(), pre[2 * l + 1].f32.begin() + n * D);
  }
  std::vector<int32_t> got = {pre.back().i32[0]};
  for (int i = 1; i < steps; ++i) {
    const int64_t pos = n + i - 1, rows = pos;
    std::vector<HostTensor> args = {HostTensor::I32({1}, {got.back()})};
    bool seen[2] = {false, false};
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const bool g = c.IsGlobal(l);
      if (!seen[g]) {
        seen[g] = true;
        std::vector<float> cs, sn;
        ContractRopeRows(pos, 1, D, c.RopeBase(l), &cs, &sn);
        args.push_back(HostTensor::F32({1, D}, cs));
        args.push_back(HostTensor::F32({1, D}, sn));
      }
      const int64_t keep = g ? rows : std::min<int64_t>(rows, c.sliding_window - 1);
      args.push_back(HostTensor::F32({1, 1, keep, D}, {k[l].end() - keep * D, k[l].end()}));
      args.push_back(HostTensor::F32({1, 1, keep, D}, {v[l].end() - keep * D, v[l].end()}));
    }
    FG_ASSERT_OK_AND_ASSIGN(auto res, call(Function::kWithPast, args));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      k[l].insert(k[l].end(), res[2 * l].f32.end() - D, res[2 * l].f32.end());
      v[l].insert(v[l].end(), res[2 * l + 1].f32.end() - D, res[2 * l + 1].f32.end());
    }
    got.push_back(res.back().i32[0]);
  }
  for (int i = 0; i < steps; ++i) {
    if (got[i] == want[i]) continue;
    const double margin = logits[i][want[i]] - logits[i][got[i]];
    EXPECT_LT(margin, kTieMargin) << "step " << i << ": session " << want[i] << ", contract "
                                  << got[i] << " is not a near-tie";
    std::printf("step %d: near-tie (margin %.4f), comparison stops\n", i, margin);
    break;
  }
  std::printf("session:  ");
  for (int32_t t : want) std::printf(" %d", t);
  std::printf("\ncontract: ");
  for (int32_t t : got) std::printf(" %d", t);
  std::printf("\n");

  ContractSpec spec;
  spec.seq = 1024;
  for (Function f : {Function::kRedecode, Function::kRedecodeAt, Function::kPrefillAt}) {
    spec.function = f;
    FG_ASSERT_OK_AND_ASSIGN(InvokeStats st, PlanFunction(c, model->weights(), spec));
    std::printf("%s S=1024: arena %llu bytes, largest %s %llu bytes\n",
                std::string(FunctionName(f)).c_str(), static_cast<unsigned long long>(st.arena_bytes),
                st.largest_name.c_str(), static_cast<unsigned long long>(st.largest_bytes));
    if (f == Function::kRedecode) {
      EXPECT_GE(st.arena_bytes, uint64_t{1024} * c.vocab * 4);
    } else {
      EXPECT_LT(st.arena_bytes, uint64_t{1024} * c.vocab * 4 / 8);
    }
  }
}

}  // namespace
}  // namespace fg::exporter
