// The whole training graph (train::BuildTrainGraph: the Gemma 3 forward, the cross-entropy loss
// and the backward pass) against central finite differences in double: a tiny synthetic Gemma 3
// with sliding layers (window 3) and a global one (layer 5), a LoRA on every module with random
// nonzero B (so A has gradients too), frozen weights crossed through exact F32 transposes. The
// objective is sum_r loss_weights[r] * loss[r]; its finite differences are taken by the double
// interpreter (tests/testing/graph_double.h) over the train graph's own forward part, for a
// sample of A and B^T entries of every module type, on sliding and global layers. Cases: no
// prefix; a cached prefix (KV caches filled by the session's forward graph); a sliding ring
// that wraps (local_cache_rows = LocalCacheRows, smaller than the positions).
//
// Tolerance: MaxGradError <= 1e-3 (relative, floored at 1% of the sample's largest element).
// The executor's gradients are f32 through 6 layers forward and back; their relative error is
// ~1e-5 (the numbers are printed), the finite differences in double are good to ~1e-9, and a
// wrong rule anywhere on the path gives O(1) errors on the entries behind it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/gguf_tools/synthetic.h"
#include "src/model/gemma3/forward.h"
#include "src/model/gemma3/lora.h"
#include "src/runtime/model.h"
#include "src/train/lora_params.h"
#include "src/train/train_graph.h"
#include "tests/testing/exec_inputs.h"
#include "tests/testing/graph_double.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using ::fg::testing::GraphDouble;
using ::fg::testing::MaxGradError;
using ::fg::testing::Prompt;
using ::fg::testing::Random;
using tensor::DType;

constexpr double kFdStep = 1e-5;
constexpr double kTolerance = 1e-3;
constexpr int kEntriesPerTensor = 12;

std::unique_ptr<runtime::Model> TinyModel(DType type) {
  gguf::SyntheticSpec spec;
  spec.layers = 6;  // layers 0-4 sliding, layer 5 global (Config::IsGlobal)
  spec.hidden = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 16;
  spec.ffn = 96;
  spec.vocab = 640;
  spec.window = 3;
  spec.context = 64;
  spec.default_type = type;
  spec.seed = 5;
  const std::string path = ::testing::TempDir() + "/train_grad_" +
                           std::string(tensor::DTypeName(type)) + ".gguf";
  EXPECT_TRUE(gguf::WriteSyntheticGemma3(spec, path).ok());
  auto m = runtime::Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(*m);
}

struct Case {
  std::string name;
  int64_t prefix = 0;        // P: positions 0..P-1 in the caches before training
  int64_t prefix_chunk = 0;  // tokens per prefix call (the ring must hold a chunk's keys)
  int64_t S = 5;             // trained tokens at positions P..P+S-1
  bool small_ring = false;   // local_cache_rows = LocalCacheRows(config, S, context)
  // Also two candidate rows (a softmax over a few LM-head rows, one candidate a padding):
  // rows 1 and S-1, the second also a whole-vocabulary row.
  bool candidates = false;
  // > 0: the sparse head gradient (TrainGraphSpec::head_threshold); the tiny vocabulary's
  // tokens all have p above it, so it is exact
  float head_threshold = 0.0f;
};

void CheckTrainGraph(const Case& tc, DType base_type) {
  SCOPED_TRACE(tc.name + " " + std::string(tensor::DTypeName(base_type)));
  std::unique_ptr<runtime::Model> m = TinyModel(base_type);
  const model::Config& config = m->config();
  ASSERT_TRUE(config.IsGlobal(5) && !config.IsGlobal(0));

  train::LoraTrainSpec ls;
  ls.rank = 4;
  ls.alpha = 8.0f;
  ls.seed = 3;
  auto lora = train::LoraParams::Create(m->file(), ls);
  ASSERT_TRUE(lora.ok()) << lora.status().ToString();
  uint32_t rnd = 77;
  for (train::LoraParams::Tensor& t : (*lora)->tensors()) {
    if (!t.is_b) continue;
    t.values = Random(t.values.size(), rnd++);
    for (float& v : t.values) v *= 0.2f;
  }
  model::Weights weights = m->weights();
  weights.loras.push_back({&(*lora)->adapter(), 1.0f});

  const int64_t P = tc.prefix, S = tc.S, total = P + S;
  const int64_t global_rows = total;
  const int64_t local_rows =
      tc.small_ring ? model::LocalCacheRows(config, std::max(S, tc.prefix_chunk), config.context_length)
                    : config.context_length;
  if (tc.small_ring) {
    ASSERT_LT(local_rows, total) << "the ring must wrap";
  }

  train::TrainGraphSpec ts;
  ts.n_tokens = S;
  ts.n_target_rows = 3;
  if (tc.candidates) {
    ts.n_candidate_rows = 2;
    ts.n_candidates = 4;
  }
  ts.global_cache_rows = global_rows;
  ts.local_cache_rows = local_rows;
  ts.transposed_type = DType::kF32;
  ts.head_threshold = tc.head_threshold;
  ts.head_max_tokens = config.vocab;
  auto tg = train::BuildTrainGraph(config, weights, ts);
  ASSERT_TRUE(tg.ok()) << tg.status().ToString();
  const bool sparse = std::any_of(tg->nodes().begin(), tg->nodes().end(), [](const graph::Node& n) {
    return n.op == graph::OpKind::kHeadCrossEntropyBack;
  });
  EXPECT_EQ(sparse, tc.head_threshold > 0.0f);
  auto transposed = train::TransposedWeights::Make(*tg, m->resolver(), DType::kF32);
  ASSERT_TRUE(transposed.ok()) << transposed.status().ToString();
  const exec::WeightResolver resolver = (*lora)->Resolver((*transposed)->Resolver(m->resolver()));

  // The caches: zeros, then the prefix through the session's forward graph (with the adapter).
  const std::vector<int32_t> tokens = Prompt(static_cast<int>(total), config.vocab, 11);
  std::map<std::string, std::vector<float>> states;
  for (int id : tg->states()) {
    states[tg->value(id).name].assign(static_cast<size_t>(tg->value(id).elements()), 0.0f);
  }
  ThreadPool pool(2);
  for (int64_t p0 = 0; p0 < P; p0 += tc.prefix_chunk) {
    const int64_t n = std::min(tc.prefix_chunk, P - p0);
    model::ForwardSpec fs;
    fs.n_tokens = n;
    fs.n_logit_rows = 0;
    fs.global_cache_rows = global_rows;
    fs.local_cache_rows = local_rows;
    auto fg_graph = model::BuildForward(config, weights, fs);
    ASSERT_TRUE(fg_graph.ok()) << fg_graph.status().ToString();
    auto e = exec::Executor::Create(std::move(*fg_graph), resolver, &pool);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::vector<int32_t> tok(tokens.begin() + p0, tokens.begin() + p0 + n), pos(n);
    for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(p0 + i);
    FG_ASSERT_OK((*e)->SetInput("tokens", std::span<const int32_t>(tok)));
    FG_ASSERT_OK((*e)->SetInput("pos", std::span<const int32_t>(pos)));
    for (auto& [name, v] : states) FG_ASSERT_OK((*e)->BindState(name, v.data(), v.size()));
    FG_ASSERT_OK((*e)->Run());
  }

  // The trained chunk: rows 0, 2 and S-1 predict; row 2 has no target.
  std::vector<int32_t> tok(tokens.begin() + P, tokens.end()), pos(S);
  for (int64_t i = 0; i < S; ++i) pos[i] = static_cast<int32_t>(P + i);
  const std::vector<int32_t> logit_rows = {0, 2, static_cast<int32_t>(S - 1)};
  const std::vector<int32_t> targets = {tokens[P + 1], -1, 123};
  std::vector<float> loss_weights = {0.7f, 1.3f, 1.1f};
  const std::vector<int32_t> cand_rows = {1, static_cast<int32_t>(S - 1)};
  const std::vector<int32_t> candidates = {5, 17, -1, 123, 40, 3, 9, 2};
  const std::vector<int32_t> cand_targets = {1, 3};
  if (tc.candidates) loss_weights.insert(loss_weights.end(), {0.9f, 1.2f});
  // The inputs of the trained chunk, to the interpreter and to each executor.
  auto set_inputs = [&](auto& runner) {
    FG_ASSERT_OK(runner.SetInput("tokens", std::span<const int32_t>(tok)));
    FG_ASSERT_OK(runner.SetInput("pos", std::span<const int32_t>(pos)));
    FG_ASSERT_OK(runner.SetInput("logit_rows", std::span<const int32_t>(logit_rows)));
    FG_ASSERT_OK(runner.SetInput("targets", std::span<const int32_t>(targets)));
    FG_ASSERT_OK(runner.SetInput("loss_weights", std::span<const float>(loss_weights)));
    if (tc.candidates) {
      FG_ASSERT_OK(runner.SetInput("cand_rows", std::span<const int32_t>(cand_rows)));
      FG_ASSERT_OK(runner.SetInput("candidates", std::span<const int32_t>(candidates)));
      FG_ASSERT_OK(runner.SetInput("cand_targets", std::span<const int32_t>(cand_targets)));
    }
  };

  // Finite differences through the forward part of the same graph, in double.
  GraphDouble gd(*tg, resolver);
  set_inputs(gd);
  for (const auto& [name, v] : states) FG_ASSERT_OK(gd.SetState(name, std::span<const float>(v)));
  const int loss_id = tg->Find("loss");
  ASSERT_GE(loss_id, 0);
  auto objective = [&]() {
    Status s = gd.Run(loss_id);
    EXPECT_TRUE(s.ok()) << s.ToString();
    const std::vector<double> l = gd.Get(loss_id).value();
    double j = 0;
    for (size_t r = 0; r < l.size(); ++r) j += loss_weights[r] * l[r];
    return j;
  };
  objective();
  const std::vector<double> want_loss = gd.Get(loss_id).value();

  // The sample: per module, its pair on a sliding layer and on the global layer 5.
  const std::vector<std::string> names = train::TrainedNames(weights);
  struct Sample {
    std::string name;
    std::vector<size_t> index;
    std::vector<double> fd;
  };
  std::vector<Sample> samples;
  int mi = 0;
  uint32_t pick = 1234;
  for (const char* module : model::kLoraModules) {
    for (int layer : {mi % 5, 5}) {
      const std::string tag = "blk." + std::to_string(layer) + "." + module + ".";
      for (const std::string& n : names) {
        if (n.rfind(tag, 0) != 0) continue;
        Sample s{n, {}, {}};
        std::vector<double> base = gd.WeightValues(n).value();
        for (int k = 0; k < kEntriesPerTensor; ++k) {
          pick = pick * 1664525u + 1013904223u;
          s.index.push_back((pick >> 8) % base.size());
        }
        for (size_t i : s.index) {
          std::vector<double> x = base;
          x[i] = base[i] + kFdStep;
          FG_ASSERT_OK(gd.OverrideWeight(n, x));
          const double jp = objective();
          x[i] = base[i] - kFdStep;
          FG_ASSERT_OK(gd.OverrideWeight(n, x));
          const double jm = objective();
          s.fd.push_back((jp - jm) / (2 * kFdStep));
        }
        FG_ASSERT_OK(gd.OverrideWeight(n, base));
        samples.push_back(std::move(s));
      }
    }
    ++mi;
  }
  ASSERT_EQ(samples.size(), 2u * 2u * 7u);

  std::map<std::string, std::vector<float>> fast_grads;  // all of every trained tensor
  for (bool reference : {false, true}) {
    SCOPED_TRACE(reference ? "reference" : "fast");
    exec::ExecOptions o;
    o.reference = reference;
    auto e = exec::Executor::Create(*tg, resolver, &pool, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    set_inputs(**e);
    std::map<std::string, std::vector<float>> run_states = states;  // the run writes its rows
    for (auto& [name, v] : run_states) FG_ASSERT_OK((*e)->BindState(name, v.data(), v.size()));
    FG_ASSERT_OK((*e)->Run());
    auto loss = (*e)->OutputF32("loss");
    FG_ASSERT_OK(loss.status());
    // Quantized bases: fast matmuls quantize activations too (see backward_test.cc).
    EXPECT_LE(MaxGradError(*loss, want_loss),
              reference || base_type == DType::kF32 ? 1e-4 : 5e-2)
        << "forward loss " << (*loss)[0] << " vs " << want_loss[0];
    EXPECT_EQ((*loss)[1], 0.0f);  // the row without a target
    // A quantized base in fast mode: its matmuls quantize their activations (8-bit), so the
    // whole forward state, and every gradient with it, is a few percent off the dequantized
    // function in double (observed NMSE 5e-4 .. 6e-3 per tensor, uniform over the layers).
    // There the gradients are held to the reference mode's (which dequantizes and meets the
    // finite differences) by NMSE <= 2e-2, and the finite-difference check is reference-only.
    const bool noisy = !reference && base_type != DType::kF32;
    for (const std::string& n : names) {
      auto g = (*e)->OutputF32("grad." + n);
      FG_ASSERT_OK(g.status());
      if (!reference) {
        fast_grads[n].assign(g->begin(), g->end());
      } else if (base_type != DType::kF32) {
        EXPECT_LE(::fg::testing::Nmse(fast_grads[n], std::vector<float>(g->begin(), g->end())),
                  2e-2)
            << n << ": fast vs reference";
      }
    }
    double worst = 0;
    std::string worst_name;
    for (const Sample& s : samples) {
      auto g = (*e)->OutputF32("grad." + s.name);
      FG_ASSERT_OK(g.status());
      std::vector<float> got;
      for (size_t i : s.index) got.push_back((*g)[i]);
      const double err = MaxGradError(got, s.fd);
      if (!noisy) {
        EXPECT_LE(err, kTolerance) << s.name;
      }
      if (err > worst) {
        worst = err;
        worst_name = s.name;
      }
    }
    std::cout << "[ grad    ] " << tc.name << " " << tensor::DTypeName(base_type) << " "
              << (reference ? "reference" : "fast") << (noisy ? " (not checked)" : "")
              << ": max rel error " << worst << " ("
              << worst_name << "), loss " << (*loss)[0] << " vs " << want_loss[0] << "\n";
  }
}

TEST(TrainGradTest, NoPrefix) { CheckTrainGraph({"no prefix", 0, 0, 6, false}, DType::kF32); }

TEST(TrainGradTest, CachedPrefix) {
  CheckTrainGraph({"cached prefix", 7, 7, 5, false}, DType::kF32);
}

TEST(TrainGradTest, CachedPrefixWithCandidateRows) {
  Case c{"candidate rows", 7, 7, 5, false};
  c.candidates = true;
  CheckTrainGraph(c, DType::kF32);
}

TEST(TrainGradTest, SlidingRingThatWraps) {
  // Window 3, chunks of 4: a ring of 6 rows; positions 8..11 after a prefix 0..7 (two calls).
  CheckTrainGraph({"ring wraps", 8, 4, 4, true}, DType::kF32);
}

// A Q8_0 base: the frozen projections (and the tied LM head) are crossed backwards through
// their exact F32 transposes; the reference executor dequantizes, so it meets the double
// function, and the fast one is held to the reference (see the comment on `noisy`).
TEST(TrainGradTest, QuantizedBaseRingThatWraps) {
  CheckTrainGraph({"ring wraps", 8, 4, 4, true}, DType::kQ8_0);
}

// The same with the sparse head gradient: the LM head's rows and their mean (served by
// TransposedWeights as HeadMeanName) instead of its transpose.
TEST(TrainGradTest, QuantizedBaseSparseHead) {
  Case c{"sparse head", 8, 4, 4, true};
  c.head_threshold = 1e-9f;
  CheckTrainGraph(c, DType::kQ8_0);
}

}  // namespace
}  // namespace fg
