#include "src/export/contract.h"

#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/kernels/ops.h"
#include "tests/testing/configs.h"

namespace fg::exporter {
namespace {

using ::testing::ElementsAre;

model::Config Gemma270m() { return fg::testing::Gemma270mConfig(); }

std::vector<std::string> ArgNames(const std::vector<Arg>& v) {
  std::vector<std::string> n;
  for (const Arg& a : v) n.push_back(a.name);
  return n;
}

TEST(ContractTest, NamesAndQualification) {
  EXPECT_EQ(FunctionName(Function::kRedecodeAt), "gemma_at");
  EXPECT_EQ(FunctionName(Function::kPrefillWithPast), "gemma_prefill_with_past");
  EXPECT_EQ(Qualified("gemma_at"), "module.gemma_at");
  EXPECT_EQ(Qualified("mod.gemma_at"), "mod.gemma_at");
  for (Function f : kAllFunctions) EXPECT_EQ(ParseGraphName(GraphName(f)), f);
  EXPECT_FALSE(ParseGraphName("all").has_value());
  for (Function f : kAllFunctions) {
    EXPECT_EQ(ParseFunctionName(FunctionName(f)), f);
    EXPECT_EQ(ParseFunctionName(Qualified(FunctionName(f))), f);
  }
  EXPECT_FALSE(ParseFunctionName("redecode_at").has_value());
  EXPECT_FALSE(ParseFunctionName("module.").has_value());
}

TEST(ContractTest, WithPastHas41ArgsInTraceOrder) {
  FG_ASSERT_OK_AND_ASSIGN(Signature s, GetSignature(Function::kWithPast, Gemma270m(), {}));
  ASSERT_EQ(s.args.size(), 41u);
  auto n = ArgNames(s.args);
  EXPECT_THAT(std::vector<std::string>(n.begin(), n.begin() + 5),
              ElementsAre("token", "cosSliding", "sinSliding", "l0.k", "l0.v"));
  // Layer 5 is the first global layer: its tables come right before l5.k.
  EXPECT_THAT(std::vector<std::string>(n.begin() + 13, n.begin() + 17),
              ElementsAre("cosGlobal", "sinGlobal", "l5.k", "l5.v"));
  EXPECT_EQ(n.back(), "l17.v");
  EXPECT_EQ(s.args[3].shape, (std::vector<int64_t>{1, 1, kDynamic, 256}));
  EXPECT_EQ(s.args[1].shape, (std::vector<int64_t>{1, 256}));
  ASSERT_EQ(s.results.size(), 37u);
  EXPECT_EQ(s.results[0].name, "l0.k");
  EXPECT_EQ(s.results[1].name, "l0.v");
  EXPECT_EQ(s.results.back().name, "token");
  EXPECT_EQ(s.results.back().type, ArgType::kI32);
}

TEST(ContractTest, ChunkHas44ArgsMasksAfterFirstOfTypeSelectLast) {
  SignatureOptions o;
  o.chunk = 64;
  FG_ASSERT_OK_AND_ASSIGN(Signature s, GetSignature(Function::kPrefillWithPast, Gemma270m(), o));
  ASSERT_EQ(s.args.size(), 44u);
  auto n = ArgNames(s.args);
  EXPECT_THAT(std::vector<std::string>(n.begin(), n.begin() + 6),
              ElementsAre("tokens", "cosSliding", "sinSliding", "l0.k", "l0.v", "maskSliding"));
  auto at = [&](const std::string& name) { return std::find(n.begin(), n.end(), name) - n.begin(); };
  EXPECT_EQ(at("maskGlobal"), at("l5.v") + 1);
  EXPECT_EQ(n.back(), "select");
  EXPECT_EQ(s.args[0].shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(s.args[at("maskSliding")].shape, (std::vector<int64_t>{1, 4, 64, kDynamic}));
  EXPECT_EQ(s.args.back().shape, (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(s.args[1].shape, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(s.results.size(), 37u);
}

TEST(ContractTest, PositionSelectedFunctionsHaveNoSeqByVocabValue) {
  SignatureOptions o;
  o.seq = 1024;
  FG_ASSERT_OK_AND_ASSIGN(Signature at, GetSignature(Function::kRedecodeAt, Gemma270m(), o));
  EXPECT_THAT(ArgNames(at.args), ElementsAre("tokens", "select"));
  EXPECT_EQ(at.args[0].shape, (std::vector<int64_t>{1, 1024}));
  EXPECT_EQ(at.args[1].shape, (std::vector<int64_t>{1, 1024}));
  ASSERT_EQ(at.results.size(), 1u);
  EXPECT_EQ(at.results[0].shape, (std::vector<int64_t>{1}));
  FG_ASSERT_OK_AND_ASSIGN(Signature pa, GetSignature(Function::kPrefillAt, Gemma270m(), o));
  EXPECT_EQ(pa.results.size(), 37u);
  EXPECT_EQ(pa.results[0].shape, (std::vector<int64_t>{1, 1, 1024, 256}));
  FG_ASSERT_OK_AND_ASSIGN(Signature p, GetSignature(Function::kPrefill, Gemma270m(), o));
  EXPECT_EQ(p.results.back().shape, (std::vector<int64_t>{1024}));
  FG_ASSERT_OK_AND_ASSIGN(Signature r, GetSignature(Function::kRedecode, Gemma270m(), o));
  EXPECT_THAT(ArgNames(r.args), ElementsAre("tokens"));
}

TEST(ContractTest, EmbeddingsInputGoesRightAfterTokens) {
  SignatureOptions o;
  o.emb_input = true;
  for (Function f : kAllFunctions) {
    FG_ASSERT_OK_AND_ASSIGN(Signature s, GetSignature(f, Gemma270m(), o));
    ASSERT_GE(s.args.size(), 2u);
    EXPECT_EQ(s.args[1].name, "emb") << FunctionName(f);
    EXPECT_EQ(s.args[1].shape.back(), 640);
    EXPECT_EQ(s.args[1].shape[0], s.args[0].shape.back());
  }
}

TEST(ContractTest, BadSizesAreRefused) {
  SignatureOptions o;
  o.seq = 0;
  EXPECT_FALSE(GetSignature(Function::kRedecode, Gemma270m(), o).ok());
  o.seq = 24;
  o.chunk = 100000;
  EXPECT_FALSE(GetSignature(Function::kPrefillWithPast, Gemma270m(), o).ok());
}

TEST(ContractTest, RopeRowsRotateLikeTheSplitHalfKernel) {
  const int64_t D = 16;
  for (double base : {1e4, 1e6}) {
    for (int64_t pos : {0, 1, 511, 512, 4097}) {
      std::vector<float> cos, sin;
      ContractRopeRows(pos, 1, D, base, &cos, &sin);
      std::vector<float> x(D), want(D), got(D);
      for (int64_t i = 0; i < D; ++i) x[i] = static_cast<float>(std::sin(0.7 * i + 1.0));
      // The graph computes x*cos + swap_halves(x)*sin.
      for (int64_t i = 0; i < D; ++i) {
        got[i] = x[i] * cos[i] + x[(i + D / 2) % D] * sin[i];
      }
      want = x;
      std::vector<float> ch(D / 2), sh(D / 2);
      kernels::RopeTable(pos, D, base, ch.data(), sh.data());
      kernels::scalar::ApplyRope(want.data(), 1, D, ch.data(), sh.data());
      for (int64_t i = 0; i < D; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << pos << " " << i;
    }
  }
}

TEST(ContractTest, ChunkMaskAttendsExactlyTheWindow) {
  const int64_t pos = 10, past = 6, chunk = 4, n_real = 3, W = 3, heads = 2;
  std::vector<float> m = ContractChunkMask(pos, past, chunk, n_real, W, heads);
  const int64_t keys = past + chunk;
  ASSERT_EQ(m.size(), static_cast<size_t>(heads * chunk * keys));
  for (int64_t i = 0; i < chunk; ++i) {
    int attended = 0;
    for (int64_t j = 0; j < keys; ++j) {
      const float v = m[i * keys + j];
      EXPECT_EQ(v, m[chunk * keys + i * keys + j]);  // identical across heads
      const int64_t key = pos - past + j, a = pos + i;
      bool want = i < n_real ? (key <= a && key >= a - W + 1) : (j == past + i);
      EXPECT_EQ(v == 0.0f, want) << i << " " << j;
      EXPECT_TRUE(v == 0.0f || v == kMaskedValue);
      attended += v == 0.0f;
    }
    EXPECT_EQ(attended, i < n_real ? W : 1);  // exactly W keys, itself included
  }
  // Global mask: everything up to the row.
  std::vector<float> g = ContractChunkMask(pos, past, chunk, chunk, 0, 1);
  for (int64_t j = 0; j < keys; ++j) EXPECT_EQ(g[(chunk - 1) * keys + j], 0.0f);
  EXPECT_EQ(g[0 * keys + past + 1], kMaskedValue);  // row 0 cannot see the next token
}

}  // namespace
}  // namespace fg::exporter
