// Requantizing a GGUF (fgemma quantize): types, fallbacks, metadata, accuracy, and that the
// result runs and stays close to the original model.
#include "src/gguf_tools/requantize.h"

#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/gguf_tools/synthetic.h"
#include "src/kernels/quant.h"
#include "src/runtime/model.h"
#include "src/runtime/session.h"
#include "tests/testing/cli_runner.h"
#include "tests/testing/metrics.h"

namespace fg::gguf {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using tensor::DType;

std::string SmallF32() {
  static const std::string path = [] {
    std::string p = ::testing::TempDir() + "/requant_small_f32.gguf";
    auto spec = SyntheticPreset("small");
    EXPECT_TRUE(spec.ok());
    EXPECT_TRUE(WriteSyntheticGemma3(*spec, p).ok());
    return p;
  }();
  return path;
}

std::vector<float> Dequantize(const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements));
  EXPECT_TRUE(kernels::DequantizeRow(t.type, t.data, out.data(), t.n_elements).ok());
  return out;
}

TEST(RequantizeTest, TypesFallbacksAndMetadata) {
  auto in = File::Open(SmallF32());
  FG_ASSERT_OK(in.status());
  RequantizeSpec spec;
  spec.type = DType::kQ4_K;
  spec.overrides = {{"token_embd", DType::kQ8_0}};
  const std::string out_path = ::testing::TempDir() + "/requant_q4k.gguf";
  auto w = BuildRequantized(**in, spec);
  FG_ASSERT_OK(w.status());
  FG_ASSERT_OK(w->WriteFile(out_path));
  auto out = File::Open(out_path);
  FG_ASSERT_OK(out.status());
  ASSERT_EQ((*out)->tensors().size(), (*in)->tensors().size());
  for (const TensorInfo& t : (*out)->tensors()) {
    SCOPED_TRACE(std::string(t.name));
    if (t.shape.size() == 1) {
      EXPECT_EQ(t.type, DType::kF32);  // norms untouched
    } else if (t.name == "token_embd.weight") {
      EXPECT_EQ(t.type, DType::kQ8_0);
    } else if (t.shape.back() % 256 == 0) {
      EXPECT_EQ(t.type, DType::kQ4_K);  // ffn_down: rows of 256
    } else {
      EXPECT_EQ(t.type, DType::kQ5_0);  // rows of 128: llama-quantize's fallback
    }
  }
  EXPECT_EQ(*(*out)->GetUint("general.file_type"), 14u);
  EXPECT_EQ(*(*out)->GetString("general.architecture"), "gemma3");
  EXPECT_EQ((*out)->GetStringArray("tokenizer.ggml.tokens")->size(),
            (*in)->GetStringArray("tokenizer.ggml.tokens")->size());
}

TEST(RequantizeTest, Q8_0IsAccurateAndTheModelStillAgrees) {
  auto in = File::Open(SmallF32());
  FG_ASSERT_OK(in.status());
  RequantizeSpec spec;
  spec.type = DType::kQ8_0;
  ThreadPool pool(2);
  spec.pool = &pool;
  const std::string out_path = ::testing::TempDir() + "/requant_q8.gguf";
  auto w = BuildRequantized(**in, spec);
  FG_ASSERT_OK(w.status());
  FG_ASSERT_OK(w->WriteFile(out_path));
  auto out = File::Open(out_path);
  FG_ASSERT_OK(out.status());
  for (size_t i = 0; i < (*in)->tensors().size(); ++i) {
    const TensorInfo& a = (*in)->tensors()[i];
    const TensorInfo& b = (*out)->tensors()[i];
    if (a.shape.size() == 1) continue;
    ASSERT_EQ(b.type, DType::kQ8_0);
    std::vector<float> x = Dequantize(a), y = Dequantize(b);
    double num = 0, den = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      num += (x[k] - y[k]) * (x[k] - y[k]);
      den += x[k] * x[k];
    }
    EXPECT_LE(std::sqrt(num / den), 0.01) << a.name;  // 8-bit blocks: ~0.4% relative RMS
  }
  // The requantized model gives nearly the same logits as the original.
  auto m1 = runtime::Model::Load(SmallF32());
  auto m2 = runtime::Model::Load(out_path);
  FG_ASSERT_OK(m1.status());
  FG_ASSERT_OK(m2.status());
  runtime::SessionOptions o;
  o.context = 64;
  o.pool = &pool;
  auto s1 = runtime::Session::Create(**m1, o);
  auto s2 = runtime::Session::Create(**m2, o);
  std::vector<int32_t> prompt = {2, 500, 501, 502, 600, 601, 602, 603};
  FG_ASSERT_OK((*s1)->Append(prompt));
  FG_ASSERT_OK((*s2)->Append(prompt));
  // 8-bit weights and 8-bit activations through 6 random layers: measured 1.1e-3; a misplaced
  // row or block gives an NMSE near 1.
  EXPECT_LE(::fg::testing::Nmse((*s2)->logits(), (*s1)->logits()), 1e-2);
}

TEST(RequantizeTest, TypesWithoutKernelsAreRefused) {
  auto in = File::Open(SmallF32());
  FG_ASSERT_OK(in.status());
  RequantizeSpec spec;
  spec.type = DType::kQ2_K;
  EXPECT_THAT(BuildRequantized(**in, spec).status(),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("Q2_K")));
  EXPECT_EQ(LlamaFileType(DType::kQ8_0), 7u);
  EXPECT_EQ(LlamaFileType(DType::kF16), 1u);
}

TEST(RequantizeCliTest, ExitCodesAndOutput) {
  using ::fg::testing::RunFgemma;
  const std::string out = ::testing::TempDir() + "/requant_cli.gguf";
  auto ok = RunFgemma("quantize -m " + SmallF32() + " -o " + out + " --type q8_0 --tensor-type ffn_down=q4_0");
  ASSERT_EQ(ok.rc, 0) << ok.out;
  EXPECT_THAT(ok.out, HasSubstr("ffn_down.weight"));
  EXPECT_THAT(ok.out, HasSubstr("F32 -> Q4_0"));
  auto f = File::Open(out);
  FG_ASSERT_OK(f.status());
  EXPECT_EQ((*f)->FindTensor("blk.0.ffn_down.weight")->type, DType::kQ4_0);
  EXPECT_EQ((*f)->FindTensor("blk.0.ffn_up.weight")->type, DType::kQ8_0);
  EXPECT_EQ(RunFgemma("quantize -m " + SmallF32() + " -o " + out + " --type q9_9").rc, 2);
  EXPECT_EQ(RunFgemma("quantize -m " + SmallF32() + " --type q8_0").rc, 2);
  EXPECT_EQ(RunFgemma("quantize -m " + SmallF32() + " -o " + out + " --type q8_0 --tensor-type x").rc, 2);
  auto missing = RunFgemma("quantize -m /nonexistent.gguf -o " + out + " --type q8_0");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.out, HasSubstr("cannot open"));
  auto unwritable = RunFgemma("quantize -m " + SmallF32() + " -o /nonexistent/dir/x.gguf --type q8_0 -q");
  EXPECT_EQ(unwritable.rc, 1);
}

}  // namespace
}  // namespace fg::gguf
