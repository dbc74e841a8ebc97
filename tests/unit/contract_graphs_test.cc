// The contract functions as graphs: inputs and outputs exactly as GetSignature lists them (names,
// order, shapes, dtypes), for the 270M shape and a tiny model, with and without the embeddings
// input; no S x vocab value in the one-position functions; the memory plans that make the
// point of `_at` (docs/contract.md: about 1 GiB of S x V scratch at S = 1024 for `gemma`).
#include "src/export/contract_graphs.h"

#include <deque>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/export/host_invoke.h"
#include "tests/testing/configs.h"

namespace fg::exporter {
namespace {

using graph::ValueType;

model::Config Gemma270m() { return fg::testing::Gemma270mConfig(); }

model::Config Tiny() {
  model::Config c;
  c.n_layers = 7;  // layer 5 global, 6 sliding again
  c.hidden = 16;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.ffn = 24;
  c.vocab = 50;
  c.context_length = 128;
  c.sliding_window = 4;
  c.query_scale = 0.35f;
  c.embed_scale = 4.0f;
  return c;
}

// A weight table with the model's names and shapes (no data: graphs only need the table).
struct FakeWeights {
  std::deque<std::string> names;
  std::deque<gguf::TensorInfo> infos;
  model::Weights w;
  const gguf::TensorInfo* Add(const std::string& name, std::vector<int64_t> shape) {
    names.push_back(name);
    gguf::TensorInfo t;
    t.name = names.back();
    t.type = tensor::DType::kF32;
    t.shape = std::move(shape);
    infos.push_back(t);
    return &infos.back();
  }
  explicit FakeWeights(const model::Config& c) {
    w.token_embd = Add("token_embd.weight", {c.vocab, c.hidden});
    w.output_norm = Add("output_norm.weight", {c.hidden});
    w.output = w.token_embd;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      model::LayerWeights lw;
      lw.attn_norm = Add(p + "attn_norm.weight", {c.hidden});
      lw.attn_q = Add(p + "attn_q.weight", {c.q_dim(), c.hidden});
      lw.attn_k = Add(p + "attn_k.weight", {c.kv_dim(), c.hidden});
      lw.attn_v = Add(p + "attn_v.weight", {c.kv_dim(), c.hidden});
      lw.attn_q_norm = Add(p + "attn_q_norm.weight", {c.head_dim});
      lw.attn_k_norm = Add(p + "attn_k_norm.weight", {c.head_dim});
      lw.attn_output = Add(p + "attn_output.weight", {c.hidden, c.q_dim()});
      lw.post_attention_norm = Add(p + "post_attention_norm.weight", {c.hidden});
      lw.ffn_norm = Add(p + "ffn_norm.weight", {c.hidden});
      lw.ffn_gate = Add(p + "ffn_gate.weight", {c.ffn, c.hidden});
      lw.ffn_up = Add(p + "ffn_up.weight", {c.ffn, c.hidden});
      lw.ffn_down = Add(p + "ffn_down.weight", {c.hidden, c.ffn});
      lw.post_ffw_norm = Add(p + "post_ffw_norm.weight", {c.hidden});
      w.layers.push_back(lw);
    }
  }
};

ValueType TypeOf(ArgType t) { return t == ArgType::kI32 ? ValueType::kI32 : ValueType::kF32; }

void ExpectMatchesSignature(const model::Config& c, const ContractSpec& spec) {
  SCOPED_TRACE(std::string(FunctionName(spec.function)) + (spec.emb_input ? " emb" : "") +
               " past " + std::to_string(spec.past));
  FakeWeights fw(c);
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, BuildContractFunction(c, fw.w, spec));
  FG_ASSERT_OK_AND_ASSIGN(Signature sig, GetSignature(spec.function, c, OptionsOf(spec)));
  ASSERT_EQ(g.inputs().size(), sig.args.size());
  const int64_t n = spec.function == Function::kWithPast ? 1 : spec.chunk;
  for (size_t i = 0; i < sig.args.size(); ++i) {
    const graph::Value& v = g.value(g.inputs()[i]);
    std::vector<int64_t> want = sig.args[i].shape;
    // With a concrete P, the dynamic dims are P (K/V) and P + C (masks).
    if (spec.past != kDynamic) {
      for (int64_t& d : want) {
        if (d == kDynamic) d = sig.args[i].name.rfind("mask", 0) == 0 ? spec.past + n : spec.past;
      }
    }
    EXPECT_EQ(v.name, sig.args[i].name) << "argument " << i;
    EXPECT_EQ(v.shape, want) << "argument " << i << " " << v.name;
    EXPECT_EQ(v.type, TypeOf(sig.args[i].type)) << "argument " << i;
  }
  ASSERT_EQ(g.outputs().size(), sig.results.size());
  for (size_t i = 0; i < sig.results.size(); ++i) {
    const graph::Value& v = g.value(g.outputs()[i]);
    std::vector<int64_t> want = sig.results[i].shape;
    if (spec.past != kDynamic) {
      for (int64_t& d : want) {
        if (d == kDynamic) d = spec.past + n;
      }
    }
    EXPECT_EQ(g.output_names()[i], sig.results[i].name) << "result " << i;
    EXPECT_EQ(v.shape, want) << "result " << i << " " << sig.results[i].name;
    EXPECT_EQ(v.type, TypeOf(sig.results[i].type)) << "result " << i;
  }
  // Weights are GGUF tensor names; the tied embedding is one weight.
  int embd = 0;
  for (int id : g.weights()) embd += g.value(id).name == "token_embd.weight";
  EXPECT_EQ(embd, 1);
  EXPECT_EQ(g.weights().size(), 2 + 13 * static_cast<size_t>(c.n_layers));
}

TEST(ContractGraphsTest, InputsAndOutputsAreTheSignature) {
  for (const model::Config& c : {Gemma270m(), Tiny()}) {
    for (Function f : kAllFunctions) {
      for (bool emb : {false, true}) {
        for (int64_t past : {kDynamic, int64_t{5}}) {
          ContractSpec spec;
          spec.function = f;
          spec.seq = 24;
          spec.chunk = 8;
          spec.emb_input = emb;
          spec.past = past;
          ExpectMatchesSignature(c, spec);
        }
      }
    }
  }
}

TEST(ContractGraphsTest, DynamicPastPropagatesToTheResults) {
  FakeWeights fw(Gemma270m());
  ContractSpec spec;
  spec.function = Function::kPrefillWithPast;
  spec.chunk = 32;
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, BuildContractFunction(Gemma270m(), fw.w, spec));
  EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{1, 1, kDynamic, 256}));
  EXPECT_EQ(g.value(g.Find("blk.0.attn_out")).shape, (std::vector<int64_t>{32, 1024}));
}

// Different P for sliding and global layers (the caller trims sliding caches to W-1 rows).
TEST(ContractGraphsTest, SlidingAndGlobalPastMayDiffer) {
  const model::Config c = Gemma270m();
  FakeWeights fw(c);
  ContractSpec spec;
  spec.function = Function::kPrefillWithPast;
  spec.chunk = 32;
  spec.past = 511;
  spec.past_global = 900;
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, BuildContractFunction(c, fw.w, spec));
  EXPECT_EQ(g.value(g.Find("l0.k")).shape, (std::vector<int64_t>{1, 1, 511, 256}));
  EXPECT_EQ(g.value(g.Find("l5.k")).shape, (std::vector<int64_t>{1, 1, 900, 256}));
  EXPECT_EQ(g.value(g.Find("maskSliding")).shape, (std::vector<int64_t>{1, 4, 32, 543}));
  EXPECT_EQ(g.value(g.Find("maskGlobal")).shape, (std::vector<int64_t>{1, 4, 32, 932}));
  EXPECT_EQ(g.value(g.outputs()[10]).shape, (std::vector<int64_t>{1, 1, 932, 256}));  // l5.k
}

// The point of `_at`: no value with S x vocab elements; the all-positions functions have one.
TEST(ContractGraphsTest, AtFunctionsHaveNoSeqTimesVocabValue) {
  for (const model::Config& c : {Gemma270m(), Tiny()}) {
    FakeWeights fw(c);
    for (Function f : kAllFunctions) {
      ContractSpec spec;
      spec.function = f;
      spec.seq = 24;
      spec.chunk = 8;
      spec.past = 3;
      FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, BuildContractFunction(c, fw.w, spec));
      const int64_t n = f == Function::kPrefillWithPast ? spec.chunk : spec.seq;
      int64_t biggest = 0;
      for (const graph::Value& v : g.values()) {
        if (v.type != ValueType::kStored) biggest = std::max(biggest, v.elements());
      }
      const bool all_rows = f == Function::kRedecode || f == Function::kPrefill;
      if (all_rows) {
        EXPECT_GE(biggest, n * c.vocab) << FunctionName(f);
      } else {
        EXPECT_LT(biggest, n * c.vocab) << FunctionName(f);
        EXPECT_EQ(g.value(g.Find("result_output")).shape, (std::vector<int64_t>{1, c.vocab}));
      }
    }
  }
}

// docs/contract.md: at S = 1024 the all-positions graph needs about 1 GiB of S x V scratch; the
// `_at` graph about V floats for its head. Planned without weights data or running anything.
TEST(ContractGraphsTest, MemoryPlanAtSeq1024On270mShape) {
  const model::Config c = Gemma270m();
  FakeWeights fw(c);
  ContractSpec spec;
  spec.seq = 1024;
  spec.function = Function::kRedecode;
  FG_ASSERT_OK_AND_ASSIGN(InvokeStats all, PlanFunction(c, fw.w, spec));
  spec.function = Function::kRedecodeAt;
  FG_ASSERT_OK_AND_ASSIGN(InvokeStats at, PlanFunction(c, fw.w, spec));
  const uint64_t sv = uint64_t{1024} * 262144 * 4;  // 1 GiB of f32 logits
  EXPECT_EQ(all.largest_name, "result_output");
  EXPECT_EQ(all.largest_bytes, sv);
  EXPECT_GE(all.arena_bytes, sv);
  // gemma_at: the biggest value is an FFN activation (S x 2048 f32 = 8 MiB), the head output
  // is V floats, and the whole arena stays far below the S x V logits.
  EXPECT_EQ(at.largest_bytes, uint64_t{1024} * 2048 * 4);
  EXPECT_LT(at.arena_bytes, uint64_t{64} << 20);
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, BuildContractFunction(c, fw.w, spec));
  EXPECT_EQ(g.value(g.Find("result_output")).elements(), 262144);
  std::printf("gemma S=1024: arena %llu bytes, largest %s %llu bytes\n",
              static_cast<unsigned long long>(all.arena_bytes), all.largest_name.c_str(),
              static_cast<unsigned long long>(all.largest_bytes));
  std::printf("gemma_at S=1024: arena %llu bytes, largest %s %llu bytes\n",
              static_cast<unsigned long long>(at.arena_bytes), at.largest_name.c_str(),
              static_cast<unsigned long long>(at.largest_bytes));
}

TEST(ContractGraphsTest, RefusesNegativePast) {
  FakeWeights fw(Tiny());
  ContractSpec spec;
  spec.function = Function::kWithPast;
  spec.past = -3;
  EXPECT_THAT(BuildContractFunction(Tiny(), fw.w, spec).status(),
              fg::testing::StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("negative")));
}

}  // namespace
}  // namespace fg::exporter
