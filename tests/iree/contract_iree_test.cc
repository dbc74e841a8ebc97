// The IREE round trip of the contract's functions (docs/contract.md): each function,
// emitted by fgemma's StableHLO emitter with the past length dynamic, compiled by iree-compile
// (llvm-cpu) and run by iree-run-module with fgemma's parameter archive, must give the tokens of
// the host run of the same function (HostInvoke, the oracle) on the same arguments, and K/V
// with NMSE <= 1e-5. A small synthetic model (6 layers, layer 5 global, window 8) with F32
// weights exported as f32, so both sides read the same numbers; pasts longer than the window.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/export/archive.h"
#include "src/export/contract.h"
#include "src/export/contract_graphs.h"
#include "src/export/host_invoke.h"
#include "src/export/stablehlo.h"
#include "src/gguf_tools/synthetic.h"
#include "src/runtime/model.h"
#include "tests/testing/iree_runner.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using exporter::ArgType;
using exporter::Function;

constexpr int64_t kSeq = 12, kChunk = 4;

struct Env {
  std::string compiler, runner, dir, irpa;
  std::unique_ptr<runtime::Model> model;
  // Four query heads on two KV heads (the attention lowering's grouped path).
  std::string irpa_kv2;
  std::unique_ptr<runtime::Model> model_kv2;
};

Env* env = nullptr;

class ContractIreeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    // Owned here until every step succeeded: a failed ASSERT below returns early, leaving env
    // null and skip_reason_ empty, which SetUp reports as a failure (not a skip).
    auto e = std::make_unique<Env>();
    e->compiler = fg::testing::IreeTool("iree-compile", &why);
    e->runner = fg::testing::IreeTool("iree-run-module", &why);
    if (e->compiler.empty() || e->runner.empty()) {
      skip_reason_ = why;
      return;
    }
    // Per process: ctest runs each case in its own process, in parallel with -j.
    e->dir = ::testing::TempDir() + "/contract_iree_" + std::to_string(::getpid());
    ASSERT_EQ(std::system(("mkdir -p " + e->dir).c_str()), 0);
    auto spec = gguf::SyntheticPreset("small");
    ASSERT_TRUE(spec.ok());
    const std::string path = e->dir + "/m.gguf";
    FG_ASSERT_OK(gguf::WriteSyntheticGemma3(*spec, path));
    auto m = runtime::Model::Load(path);
    FG_ASSERT_OK(m.status());
    e->model = std::move(*m);
    spec->heads = 4;
    spec->kv_heads = 2;
    const std::string path2 = e->dir + "/m_kv2.gguf";
    FG_ASSERT_OK(gguf::WriteSyntheticGemma3(*spec, path2));
    auto m2 = runtime::Model::Load(path2);
    FG_ASSERT_OK(m2.status());
    e->model_kv2 = std::move(*m2);
    env = e.release();
  }
  static void TearDownTestSuite() {
    if (env != nullptr) std::filesystem::remove_all(env->dir);
    delete env;
    env = nullptr;
  }
  void SetUp() override {
    if (env == nullptr) {
      ASSERT_FALSE(skip_reason_.empty()) << "suite setup failed (see the failure above)";
      GTEST_SKIP() << skip_reason_;
    }
  }
  static std::string skip_reason_;
};
std::string ContractIreeTest::skip_reason_;

uint32_t rng_state = 99;
float NextF() {
  rng_state = rng_state * 1664525u + 1013904223u;
  return static_cast<float>(static_cast<int32_t>(rng_state >> 8) % 2000) / 1000.0f;
}

// Arguments of `f` for positions starting at `pos`, sliding layers given `past_sliding` rows
// and global layers `past_global` rows of (random) past K/V.
std::vector<exporter::HostTensor> MakeArgs(const model::Config& c, Function f, bool emb,
                                           int64_t pos, int64_t past_sliding, int64_t past_global,
                                           int64_t n_real) {
  exporter::SignatureOptions o{.seq = kSeq, .chunk = kChunk, .emb_input = emb};
  auto sig = exporter::GetSignature(f, c, o);
  EXPECT_TRUE(sig.ok());
  std::vector<exporter::HostTensor> args;
  const int64_t n = f == Function::kWithPast ? 1 : (f == Function::kPrefillWithPast ? kChunk : kSeq);
  for (const exporter::Arg& a : sig->args) {
    std::vector<int64_t> shape = a.shape;
    const bool global_kv = a.layer >= 0 && c.IsGlobal(a.layer);
    for (int64_t& d : shape) {
      if (d == exporter::kDynamic) {
        if (a.name == "maskGlobal") d = past_global + n;
        else if (a.name == "maskSliding") d = past_sliding + n;
        else d = global_kv ? past_global : past_sliding;
      }
    }
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (a.type == ArgType::kI32) {
      std::vector<int32_t> ids(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) ids[i] = i < n_real ? static_cast<int32_t>(3 + (i * 37 + pos * 11) % (c.vocab - 3)) : 0;
      args.push_back(exporter::HostTensor::I32(shape, ids));
      continue;
    }
    std::vector<float> v(static_cast<size_t>(count), 0.0f);
    if (a.name == "select") {
      v[static_cast<size_t>(n_real - 1)] = 1.0f;
    } else if (a.name.rfind("cos", 0) == 0 || a.name.rfind("sin", 0) == 0) {
      std::vector<float> cs, sn;
      exporter::ContractRopeRows(pos, n, c.head_dim,
                                 a.name.find("Global") != std::string::npos ? c.rope_base_global
                                                                             : c.rope_base_local,
                                 &cs, &sn);
      v = a.name.rfind("cos", 0) == 0 ? cs : sn;
    } else if (a.name == "maskSliding" || a.name == "maskGlobal") {
      const bool global = a.name == "maskGlobal";
      v = exporter::ContractChunkMask(pos, global ? past_global : past_sliding, n, n_real,
                                      global ? 0 : c.sliding_window, c.n_heads);
    } else {
      for (float& x : v) x = NextF();  // emb rows, past K/V
    }
    args.push_back(exporter::HostTensor::F32(shape, v));
  }
  return args;
}

struct Compiled {
  std::string vmfb;
  int n_results = 0;
};

// Emits, writes the archive (once) and compiles one function.
Compiled Compile(Function f, bool emb, bool kv2 = false) {
  runtime::Model* model = kv2 ? env->model_kv2.get() : env->model.get();
  std::string& irpa = kv2 ? env->irpa_kv2 : env->irpa;
  const model::Config& c = model->config();
  exporter::ContractSpec spec;
  spec.function = f;
  spec.seq = kSeq;
  spec.chunk = kChunk;
  spec.emb_input = emb;
  auto g = exporter::BuildContractFunction(c, model->weights(), spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  const std::string name = std::string(exporter::FunctionName(f)) + (emb ? "_emb" : "") + (kv2 ? "_kv2" : "");
  if (irpa.empty()) {
    // Every function reads the same weights (the emb variants a subset): one archive.
    exporter::IrpaWriter w;
    const graph::Graph* gp = &*g;
    Status s = exporter::AddGraphWeights(model->file(), std::span(&gp, 1), exporter::WeightType::kF32, &w);
    EXPECT_TRUE(s.ok()) << s.ToString();
    irpa = env->dir + (kv2 ? "/model_kv2.irpa" : "/model.irpa");
    s = w.WriteFile(irpa);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  exporter::EmitFunction fn{std::string(exporter::FunctionName(f)), &*g};
  auto text = exporter::EmitModule(std::span(&fn, 1), {.weight_type = exporter::WeightType::kF32});
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return {};
  const std::string mlir = env->dir + "/" + name + ".mlir";
  std::ofstream(mlir) << *text;
  Compiled out;
  out.vmfb = env->dir + "/" + name + ".vmfb";
  out.n_results = static_cast<int>(g->outputs().size());
  const std::string err = fg::testing::IreeCompile(env->compiler, mlir, out.vmfb);
  EXPECT_EQ(err, "");
  if (!err.empty()) return {};
  return out;
}

// Runs both sides and compares; prints the worst K/V NMSE.
void Agree(const Compiled& cf, Function f, bool emb, const std::vector<exporter::HostTensor>& args,
           const std::string& what, bool kv2 = false) {
  ASSERT_FALSE(cf.vmfb.empty());
  runtime::Model* model = kv2 ? env->model_kv2.get() : env->model.get();
  exporter::InvokeOptions o;
  o.function = f;
  o.seq = kSeq;
  o.chunk = kChunk;
  o.emb_input = emb;
  auto host = exporter::HostInvoke(model->config(), model->weights(), model->resolver(), o, args);
  FG_ASSERT_OK(host.status());
  std::vector<exporter::HostTensor> out;
  const std::string err = fg::testing::IreeRun(env->runner, cf.vmfb, kv2 ? env->irpa_kv2 : env->irpa,
                                               std::string(exporter::FunctionName(f)), args,
                                               cf.n_results, env->dir, &out);
  ASSERT_EQ(err, "");
  ASSERT_EQ(out.size(), host->size());
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const exporter::HostTensor& h = (*host)[i];
    ASSERT_EQ(out[i].shape, h.shape) << what << " result " << i;
    ASSERT_EQ(out[i].type, h.type) << what << " result " << i;
    if (h.type == ArgType::kI32) {
      EXPECT_EQ(out[i].i32, h.i32) << what << " result " << i << " (tokens)";
    } else {
      const double e = fg::testing::Nmse(out[i].f32, h.f32);
      worst = std::max(worst, e);
      EXPECT_LE(e, 1e-5) << what << " result " << i;
    }
  }
  std::printf("%-40s tokens equal, K/V NMSE max %.3g\n", what.c_str(), worst);
}

TEST_F(ContractIreeTest, Redecode) {
  const auto& c = env->model->config();
  Compiled cf = Compile(Function::kRedecode, false);
  Agree(cf, Function::kRedecode, false, MakeArgs(c, Function::kRedecode, false, 0, 0, 0, 10), "gemma n=10");
}

TEST_F(ContractIreeTest, RedecodeAt) {
  const auto& c = env->model->config();
  Compiled cf = Compile(Function::kRedecodeAt, false);
  Agree(cf, Function::kRedecodeAt, false, MakeArgs(c, Function::kRedecodeAt, false, 0, 0, 0, 11), "gemma_at n=11");
  Agree(cf, Function::kRedecodeAt, false, MakeArgs(c, Function::kRedecodeAt, false, 0, 0, 0, 3), "gemma_at n=3");
}

TEST_F(ContractIreeTest, Prefill) {
  const auto& c = env->model->config();
  Compiled cf = Compile(Function::kPrefill, false);
  Agree(cf, Function::kPrefill, false, MakeArgs(c, Function::kPrefill, false, 0, 0, 0, 12), "gemma_prefill n=12");
}

TEST_F(ContractIreeTest, PrefillAt) {
  const auto& c = env->model->config();
  Compiled cf = Compile(Function::kPrefillAt, false);
  Agree(cf, Function::kPrefillAt, false, MakeArgs(c, Function::kPrefillAt, false, 0, 0, 0, 9), "gemma_prefill_at n=9");
}

TEST_F(ContractIreeTest, WithPastBeyondTheWindow) {
  const auto& c = env->model->config();
  const int64_t W = c.sliding_window;
  Compiled cf = Compile(Function::kWithPast, false);
  // Early (every layer sees all 3 past rows), then past the window: sliding layers W-1 rows,
  // global layers all 2W+3 rows; one dynamic-P module serves every length.
  Agree(cf, Function::kWithPast, false, MakeArgs(c, Function::kWithPast, false, 3, 3, 3, 1), "gemma_with_past pos=3");
  Agree(cf, Function::kWithPast, false, MakeArgs(c, Function::kWithPast, false, 2 * W + 3, W - 1, 2 * W + 3, 1),
        "gemma_with_past pos=2W+3");
}

TEST_F(ContractIreeTest, PrefillWithPastBeyondTheWindow) {
  const auto& c = env->model->config();
  const int64_t W = c.sliding_window;
  Compiled cf = Compile(Function::kPrefillWithPast, false);
  Agree(cf, Function::kPrefillWithPast, false,
        MakeArgs(c, Function::kPrefillWithPast, false, 5, 5, 5, kChunk), "gemma_prefill_with_past pos=5");
  // A partial chunk (2 real rows, padding after) far past the window; sliding layers get
  // their last W-1 rows plus the mask's window.
  Agree(cf, Function::kPrefillWithPast, false,
        MakeArgs(c, Function::kPrefillWithPast, false, 3 * W, W - 1, 3 * W, 2),
        "gemma_prefill_with_past pos=3W n=2");
}

TEST_F(ContractIreeTest, EmbeddingsInputVariants) {
  const auto& c = env->model->config();
  const int64_t W = c.sliding_window;
  Compiled at = Compile(Function::kPrefillAt, true);
  Agree(at, Function::kPrefillAt, true, MakeArgs(c, Function::kPrefillAt, true, 0, 0, 0, 7), "gemma_prefill_at emb");
  Compiled wp = Compile(Function::kWithPast, true);
  Agree(wp, Function::kWithPast, true, MakeArgs(c, Function::kWithPast, true, W + 2, W - 1, W + 2, 1),
        "gemma_with_past emb pos=W+2");
}

TEST_F(ContractIreeTest, TwoKvHeads) {
  const auto& c = env->model_kv2->config();
  ASSERT_EQ(c.n_kv_heads, 2);
  const int64_t W = c.sliding_window;
  Compiled wp = Compile(Function::kWithPast, false, true);
  Agree(wp, Function::kWithPast, false, MakeArgs(c, Function::kWithPast, false, 2 * W, W - 1, 2 * W, 1),
        "gemma_with_past KV=2 pos=2W", true);
  Compiled pw = Compile(Function::kPrefillWithPast, false, true);
  Agree(pw, Function::kPrefillWithPast, false,
        MakeArgs(c, Function::kPrefillWithPast, false, 2 * W, W - 1, 2 * W, 3), "gemma_prefill_with_past KV=2", true);
  Compiled pa = Compile(Function::kPrefillAt, false, true);
  Agree(pa, Function::kPrefillAt, false, MakeArgs(c, Function::kPrefillAt, false, 0, 0, 0, 12),
        "gemma_prefill_at KV=2", true);
}

}  // namespace
}  // namespace fg
