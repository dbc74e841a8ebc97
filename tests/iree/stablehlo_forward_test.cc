// The StableHLO lowering of every session-graph op (embedding, rms_norm, matmul, reshape, rope,
// cache_write, attention over a wrapped sliding ring and a global cache, gelu_mul, add,
// select_rows, argmax), compiled by iree-compile (llvm-cpu) and run by iree-run-module with
// fgemma's parameter archive, against the host executor on the same inputs and caches.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/export/archive.h"
#include "src/export/stablehlo.h"
#include "src/gguf_tools/synthetic.h"
#include "src/model/gemma3/forward.h"
#include "src/runtime/model.h"
#include "tests/testing/iree_runner.h"
#include "tests/testing/metrics.h"

namespace fg {
namespace {

using exporter::WeightType;

struct Case {
  WeightType type;
  tensor::DType model_type;
};

class StablehloForwardTest : public ::testing::TestWithParam<Case> {};

TEST_P(StablehloForwardTest, MatchesExecutor) {
  std::string why;
  const std::string compiler = fg::testing::IreeTool("iree-compile", &why);
  const std::string runner = fg::testing::IreeTool("iree-run-module", &why);
  if (compiler.empty() || runner.empty()) GTEST_SKIP() << why;
  const Case c = GetParam();
  const std::string tag = std::string(exporter::WeightTypeName(c.type));
  const std::string dir = ::testing::TempDir() + "/shlo_fwd_" + tag + "_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);

  // "small": 6 layers, layer 5 global, window 8.
  auto spec = gguf::SyntheticPreset("small");
  ASSERT_TRUE(spec.ok());
  spec->default_type = c.model_type;
  const std::string gguf_path = dir + "/m.gguf";
  FG_ASSERT_OK(gguf::WriteSyntheticGemma3(*spec, gguf_path));
  auto model = runtime::Model::Load(gguf_path);
  FG_ASSERT_OK(model.status());
  const model::Config& cfg = (*model)->config();

  // 4 tokens at positions 30..33: the sliding ring (8 + 4 - 1 = 11 rows) has wrapped, the
  // global cache holds 40 rows of earlier (random) keys.
  const int64_t S = 4;
  model::ForwardSpec fs;
  fs.n_tokens = S;
  fs.n_logit_rows = 2;
  fs.argmax = true;
  fs.global_cache_rows = 40;
  fs.local_cache_rows = model::LocalCacheRows(cfg, S, 40);
  auto g = model::BuildForward(cfg, (*model)->weights(), fs);
  FG_ASSERT_OK(g.status());

  std::vector<int32_t> tokens = {5, 17, 300, 2}, pos = {30, 31, 32, 33}, rows = {3, 1};
  std::vector<std::vector<float>> states;
  uint32_t x = 12345;
  for (int s : g->states()) {
    std::vector<float> v(static_cast<size_t>(g->value(s).elements()));
    for (float& f : v) {
      x = x * 1664525u + 1013904223u;
      f = static_cast<float>(static_cast<int32_t>(x >> 8) % 2000) / 1000.0f;
    }
    states.push_back(std::move(v));
  }

  // Host.
  auto ex = exec::Executor::Create(*g, (*model)->resolver(), nullptr, {.reference = true});
  FG_ASSERT_OK(ex.status());
  FG_ASSERT_OK((*ex)->SetInput("tokens", std::span<const int32_t>(tokens)));
  FG_ASSERT_OK((*ex)->SetInput("pos", std::span<const int32_t>(pos)));
  FG_ASSERT_OK((*ex)->SetInput("logit_rows", std::span<const int32_t>(rows)));
  std::vector<std::vector<float>> host_states = states;
  for (size_t i = 0; i < g->states().size(); ++i) {
    FG_ASSERT_OK((*ex)->BindState(g->value(g->states()[i]).name, host_states[i].data(),
                                  host_states[i].size()));
  }
  FG_ASSERT_OK((*ex)->Run());
  auto logits = (*ex)->OutputF32("result_output");
  auto am = (*ex)->OutputI32("result_argmax");
  FG_ASSERT_OK(logits.status());
  FG_ASSERT_OK(am.status());

  // IREE.
  exporter::EmitFunction fn{"forward", &*g};
  auto text = exporter::EmitModule(std::span(&fn, 1), {.weight_type = c.type});
  FG_ASSERT_OK(text.status());
  const std::string mlir = dir + "/forward.mlir", vmfb = dir + "/forward.vmfb", irpa = dir + "/m.irpa";
  {
    std::ofstream f(mlir);
    f << *text;
  }
  exporter::IrpaWriter w;
  const graph::Graph* gp = &*g;
  auto gguf_file = gguf::File::Open(gguf_path);
  FG_ASSERT_OK(gguf_file.status());
  FG_ASSERT_OK(exporter::AddGraphWeights(**gguf_file, std::span(&gp, 1), c.type, &w));
  FG_ASSERT_OK(w.WriteFile(irpa));
  const std::string err = fg::testing::IreeCompile(compiler, mlir, vmfb);
  ASSERT_EQ(err, "");
  std::vector<exporter::HostTensor> in = {exporter::HostTensor::I32({S}, tokens),
                                          exporter::HostTensor::I32({S}, pos),
                                          exporter::HostTensor::I32({2}, rows)};
  for (size_t i = 0; i < states.size(); ++i) {
    in.push_back(exporter::HostTensor::F32(g->value(g->states()[i]).shape, states[i]));
  }
  std::vector<exporter::HostTensor> out;
  const std::string rerr = fg::testing::IreeRun(runner, vmfb, irpa, "forward", in, 2, dir, &out);
  ASSERT_EQ(rerr, "");
  ASSERT_EQ(out[0].f32.size(), logits->size());
  const double nmse = fg::testing::Nmse(out[0].f32, *logits);
  EXPECT_LE(nmse, 1e-5);
  std::printf("forward %s: logits NMSE %.3g\n", tag.c_str(), nmse);
  ASSERT_EQ(out[1].i32.size(), am->size());
  for (size_t i = 0; i < am->size(); ++i) EXPECT_EQ(out[1].i32[i], (*am)[i]) << "row " << i;
  std::filesystem::remove_all(dir);
}

// f32 weights exported as f32 (bit-identical weights) and bf16 weights exported as bf16
// (the archive's rounding is exact for values that already are bf16).
INSTANTIATE_TEST_SUITE_P(Types, StablehloForwardTest,
                         ::testing::Values(Case{WeightType::kF32, tensor::DType::kF32},
                                           Case{WeightType::kBf16, tensor::DType::kBF16}),
                         [](const auto& info) {
                           return std::string(exporter::WeightTypeName(info.param.type));
                         });

}  // namespace
}  // namespace fg
