// The reference forward pass on synthetic Gemma 3 GGUFs: against a second, literal
// implementation written here (double everywhere, explicit mask matrix, RoPE as complex
// rotation), and hand-checkable properties: causality, the sliding window (exact on one layer,
// and seen through a global layer), RoPE's relative-position property, dumps, errors,
// determinism and greedy consistency.
#include "src/reference/reference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/base/check.h"
#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/gguf_tools/synthetic.h"
#include "src/kernels/quant.h"

namespace fg::reference {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;

// A synthetic model parsed in memory, and the reference loaded from it.
struct Model {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Reference> ref;
};

std::unique_ptr<Model> MakeModel(const gguf::SyntheticSpec& spec) {
  auto m = std::make_unique<Model>();
  auto writer = gguf::BuildSyntheticGemma3(spec);
  FG_CHECK(writer.ok());
  auto bytes = writer->ToBytes();
  FG_CHECK(bytes.ok());
  m->bytes = std::move(bytes).value();
  auto file = gguf::File::FromBytes(m->bytes);
  FG_CHECK(file.ok());
  m->file = std::move(file).value();
  auto ref = Reference::Load(*m->file);
  if (!ref.ok()) std::fprintf(stderr, "%s\n", ref.status().ToString().c_str());
  FG_CHECK(ref.ok());
  m->ref = std::move(ref).value();
  return m;
}

gguf::SyntheticSpec Preset(const char* name) {
  auto s = gguf::SyntheticPreset(name);
  FG_CHECK(s.ok());
  return s.value();
}

std::vector<int32_t> Tokens(int n, int vocab, int seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = (seed * 7919 + i * 104729 + i * i * 31) % vocab;
  return t;
}

// ---------------------------------------------------------------------------------------------
// The literal implementation. Weights become double matrices (via the scalar dequantizer), and
// every step is the textbook formula.
using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // [rows][cols]

Mat ReadMatrix(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  FG_CHECK(t != nullptr);
  const int64_t cols = t->shape.back();
  const int64_t rows = t->shape.size() == 2 ? t->shape[0] : 1;
  const int64_t row_bytes = tensor::RowBytes(t->type, cols).value();
  Mat m(static_cast<size_t>(rows), Vec(static_cast<size_t>(cols)));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    FG_CHECK(kernels::GetTypeOps(t->type, kernels::Isa::kScalar) != nullptr);
    kernels::GetTypeOps(t->type, kernels::Isa::kScalar)
        ->dequantize_row(t->data + r * row_bytes, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) m[r][c] = row[c];
  }
  return m;
}
Vec ReadVector(const gguf::File& f, const std::string& name) { return ReadMatrix(f, name)[0]; }

Vec Apply(const Mat& W, const Vec& x) {
  Vec y(W.size(), 0.0);
  for (size_t r = 0; r < W.size(); ++r) {
    for (size_t c = 0; c < x.size(); ++c) y[r] += W[r][c] * x[c];
  }
  return y;
}

Vec Norm(const Vec& x, const Vec& w, double eps) {
  double ms = 0.0;
  for (double v : x) ms += v * v / static_cast<double>(x.size());
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + eps) * w[i];
  return y;
}

Vec Slice(const Vec& x, size_t start, size_t n) {
  return Vec(x.begin() + static_cast<std::ptrdiff_t>(start),
             x.begin() + static_cast<std::ptrdiff_t>(start + n));
}

// Pairs (x[i], x[i + d/2]) as complex numbers, rotated by pos * base^(-2i/d).
Vec Rotate(const Vec& x, int64_t pos, double base) {
  const size_t half = x.size() / 2;
  Vec y(x.size());
  for (size_t i = 0; i < half; ++i) {
    const double freq = 1.0 / std::pow(base, static_cast<double>(2 * i) / x.size());
    const std::complex<double> z =
        std::complex<double>(x[i], x[i + half]) * std::polar(1.0, pos * freq);
    y[i] = z.real();
    y[i + half] = z.imag();
  }
  return y;
}

// All logits [n][vocab] of `tokens`.
Mat LiteralForward(const gguf::File& f, const gguf::SyntheticSpec& s,
                   const std::vector<int32_t>& tokens) {
  const size_t n = tokens.size();
  const size_t D = static_cast<size_t>(s.head_dim);
  const Mat E = ReadMatrix(f, "token_embd.weight");
  std::vector<Vec> x(n);
  for (size_t t = 0; t < n; ++t) {
    x[t] = E[tokens[t]];
    for (double& v : x[t]) v *= std::sqrt(static_cast<double>(s.hidden));
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool global = l % 6 == 5;
    const double base = global ? s.rope_base_global : s.rope_base_local;
    const Mat Wq = ReadMatrix(f, p + "attn_q.weight"), Wk = ReadMatrix(f, p + "attn_k.weight"),
              Wv = ReadMatrix(f, p + "attn_v.weight"), Wo = ReadMatrix(f, p + "attn_output.weight"),
              Wg = ReadMatrix(f, p + "ffn_gate.weight"), Wu = ReadMatrix(f, p + "ffn_up.weight"),
              Wd = ReadMatrix(f, p + "ffn_down.weight");
    // Q[t][h], K[t][g], V[t][g]: per-head vectors.
    std::vector<std::vector<Vec>> Q(n), K(n), V(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec h = Norm(x[t], ReadVector(f, p + "attn_norm.weight"), s.eps);
      const Vec q = Apply(Wq, h), k = Apply(Wk, h), v = Apply(Wv, h);
      for (int64_t hd = 0; hd < s.heads; ++hd) {
        Q[t].push_back(
            Rotate(Norm(Slice(q, hd * D, D), ReadVector(f, p + "attn_q_norm.weight"), s.eps),
                   static_cast<int64_t>(t), base));
      }
      for (int64_t g = 0; g < s.kv_heads; ++g) {
        K[t].push_back(
            Rotate(Norm(Slice(k, g * D, D), ReadVector(f, p + "attn_k_norm.weight"), s.eps),
                   static_cast<int64_t>(t), base));
        V[t].push_back(Slice(v, g * D, D));
      }
    }
    // mask[i][j]: query i may look at key j.
    std::vector<std::vector<bool>> mask(n, std::vector<bool>(n));
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        mask[i][j] = j <= i && (global || static_cast<int64_t>(i - j) < s.window);
      }
    }
    for (size_t t = 0; t < n; ++t) {
      Vec concat;
      for (int64_t hd = 0; hd < s.heads; ++hd) {
        const int64_t g = hd / (s.heads / s.kv_heads);
        Vec w(n, 0.0);
        double total = 0.0;
        for (size_t j = 0; j < n; ++j) {
          if (!mask[t][j]) continue;
          double dot = 0.0;
          for (size_t i = 0; i < D; ++i) dot += Q[t][hd][i] * K[j][g][i];
          w[j] = std::exp(dot / std::sqrt(static_cast<double>(D)));
          total += w[j];
        }
        Vec o(D, 0.0);
        for (size_t j = 0; j < n; ++j) {
          for (size_t i = 0; i < D; ++i) o[i] += w[j] / total * V[j][g][i];
        }
        concat.insert(concat.end(), o.begin(), o.end());
      }
      const Vec a = Norm(Apply(Wo, concat), ReadVector(f, p + "post_attention_norm.weight"), s.eps);
      for (size_t i = 0; i < a.size(); ++i) x[t][i] += a[i];
      const Vec h = Norm(x[t], ReadVector(f, p + "ffn_norm.weight"), s.eps);
      const Vec gate = Apply(Wg, h), up = Apply(Wu, h);
      Vec act(gate.size());
      for (size_t i = 0; i < act.size(); ++i) {
        const double g = gate[i];
        act[i] =
            0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
      }
      const Vec d = Norm(Apply(Wd, act), ReadVector(f, p + "post_ffw_norm.weight"), s.eps);
      // x[t] is only read again by later positions' layers after this layer finished for all
      // positions, so updating in place is safe: attention above used Q/K/V already computed.
      for (size_t i = 0; i < d.size(); ++i) x[t][i] += d[i];
    }
  }
  Mat logits(n);
  for (size_t t = 0; t < n; ++t) {
    logits[t] = Apply(E, Norm(x[t], ReadVector(f, "output_norm.weight"), s.eps));
  }
  return logits;
}

void ExpectMatchesLiteral(const gguf::SyntheticSpec& spec, int n_tokens) {
  auto m = MakeModel(spec);
  const std::vector<int32_t> tokens = Tokens(n_tokens, static_cast<int>(spec.vocab), 3);
  FG_ASSERT_OK_AND_ASSIGN(std::vector<float> got, m->ref->AllLogits(tokens));
  const Mat want = LiteralForward(*m->file, spec, tokens);
  ASSERT_EQ(got.size(), tokens.size() * static_cast<size_t>(spec.vocab));
  double max_abs = 0.0, max_diff = 0.0, err = 0.0, energy = 0.0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t v = 0; v < spec.vocab; ++v) {
      const double w = want[t][v], g = got[t * spec.vocab + v];
      max_abs = std::max(max_abs, std::fabs(w));
      max_diff = std::max(max_diff, std::fabs(w - g));
      err += (w - g) * (w - g);
      energy += w * w;
    }
  }
  // The reference rounds to f32 between steps; the literal version never does.
  EXPECT_LE(err / energy, 1e-10);
  EXPECT_LE(max_diff, 1e-4 * max_abs) << "max |logit| " << max_abs;
}

TEST(ReferenceTest, MatchesLiteralImplementationOneLayer) {
  gguf::SyntheticSpec s = Preset("tiny");
  s.layers = 1;
  ExpectMatchesLiteral(s, 20);  // window 8: positions 8.. drop keys
}

TEST(ReferenceTest, MatchesLiteralImplementationTiny) { ExpectMatchesLiteral(Preset("tiny"), 20); }

TEST(ReferenceTest, MatchesLiteralImplementationSmallWithGlobalLayer) {
  gguf::SyntheticSpec s = Preset("small");  // layer 5 global, window 16
  s.rope_base_local = 2e4;                  // a non-default local base, read from metadata
  s.write_rope_base_local = true;
  ExpectMatchesLiteral(s, 40);
}

TEST(ReferenceTest, MatchesLiteralImplementationQuantizedWeights) {
  gguf::SyntheticSpec s = Preset("tiny");
  s.default_type = tensor::DType::kQ8_0;
  s.type_overrides = {{"ffn_down", tensor::DType::kQ4_0},
                      {"attn_v", tensor::DType::kF16},
                      {"token_embd", tensor::DType::kBF16}};
  ExpectMatchesLiteral(s, 12);
}

TEST(ReferenceTest, CausalLaterTokensDoNotChangeEarlierRows) {
  auto m = MakeModel(Preset("small"));
  const std::vector<int32_t> a = Tokens(24, 1024, 1);
  std::vector<int32_t> b = a;
  for (size_t i = 12; i < b.size(); ++i) b[i] = (b[i] + 17) % 1024;
  FG_ASSERT_OK_AND_ASSIGN(auto la, m->ref->AllLogits(a));
  FG_ASSERT_OK_AND_ASSIGN(auto lb, m->ref->AllLogits(b));
  const size_t V = 1024;
  for (size_t t = 0; t < 24; ++t) {
    const bool same = std::equal(la.begin() + t * V, la.begin() + (t + 1) * V, lb.begin() + t * V);
    EXPECT_EQ(same, t < 12) << "row " << t;
  }
}

// Row q of a 1-layer local model depends exactly on tokens q-W+1..q.
TEST(ReferenceTest, SlidingWindowOnOneLayerIsExact) {
  gguf::SyntheticSpec s = Preset("tiny");
  s.layers = 1;
  s.window = 4;
  auto m = MakeModel(s);
  const std::vector<int32_t> base = Tokens(12, 640, 5);
  const int64_t q = 10;
  FG_ASSERT_OK_AND_ASSIGN(auto ref_row, m->ref->Logits(base, q));
  for (int64_t changed = 0; changed <= q; ++changed) {
    std::vector<int32_t> t = base;
    t[changed] = (t[changed] + 101) % 640;
    FG_ASSERT_OK_AND_ASSIGN(auto row, m->ref->Logits(t, q));
    const bool inside = q - changed < s.window;  // 7..10
    EXPECT_EQ(row != ref_row, inside) << "changed position " << changed;
  }
}

// Local layers stacked: token 0 reaches position q only through enough layers (each moves
// information W-1 positions) or through the global layer 5.
TEST(ReferenceTest, GlobalLayerSeesBeyondTheWindow) {
  gguf::SyntheticSpec s = Preset("small");
  s.window = 2;  // 5 local layers carry information at most 5 positions
  const std::vector<int32_t> base = Tokens(12, 1024, 9);
  std::vector<int32_t> changed = base;
  changed[0] = (changed[0] + 1) % 1024;
  const int64_t q = 11;

  auto global_model = MakeModel(s);  // 6 layers: 5 is global
  FG_ASSERT_OK_AND_ASSIGN(auto a6, global_model->ref->Logits(base, q));
  FG_ASSERT_OK_AND_ASSIGN(auto b6, global_model->ref->Logits(changed, q));
  EXPECT_NE(a6, b6);

  s.layers = 5;  // all local
  auto local_model = MakeModel(s);
  FG_ASSERT_OK_AND_ASSIGN(auto a5, local_model->ref->Logits(base, q));
  FG_ASSERT_OK_AND_ASSIGN(auto b5, local_model->ref->Logits(changed, q));
  EXPECT_EQ(a5, b5);
  // ...while position 5 is within reach of position 0 through the 5 local layers.
  FG_ASSERT_OK_AND_ASSIGN(auto c5, local_model->ref->Logits(base, 5));
  FG_ASSERT_OK_AND_ASSIGN(auto d5, local_model->ref->Logits(changed, 5));
  EXPECT_NE(c5, d5);
}

// Collects every dump by name.
struct Dumps {
  std::map<std::string, std::vector<float>> data;
  std::map<std::string, std::vector<int64_t>> shape;
  std::vector<std::string> order;
  DumpFn Fn() {
    return [this](std::string_view name, std::span<const float> d, std::span<const int64_t> s) {
      const std::string key(name);
      order.push_back(key);
      data[key].assign(d.begin(), d.end());
      shape[key].assign(s.begin(), s.end());
    };
  }
};

TEST(ReferenceTest, RopeScoresDependOnRelativePosition) {
  auto m = MakeModel(Preset("tiny"));
  Dumps dumps;
  m->ref->SetDump(dumps.Fn());
  // b a b a: layer 0's q/k depend only on the token, so (a@1, b@0) and (a@3, b@2) are the same
  // vectors at the same distance.
  FG_ASSERT_OK(m->ref->Logits(std::vector<int32_t>{200, 100, 200, 100}).status());
  const auto& q = dumps.data["blk.0.q_rope"];
  const auto& k = dumps.data["blk.0.k_rope"];
  const int64_t H = 2, D = 32;  // tiny: 2 heads, 1 kv head
  auto dot = [&](int64_t tq, int64_t head, int64_t tk) {
    double s = 0.0;
    for (int64_t i = 0; i < D; ++i)
      s += static_cast<double>(q[(tq * H + head) * D + i]) * k[tk * D + i];
    return s;
  };
  for (int64_t head = 0; head < H; ++head) {
    EXPECT_NEAR(dot(1, head, 0), dot(3, head, 2), 1e-5 * (1 + std::fabs(dot(1, head, 0))));
    EXPECT_NE(dot(1, head, 0), dot(3, head, 0));  // distance 3: a different score
  }
  // Position 0 is not rotated.
  const auto& qn = dumps.data["blk.0.q_normed"];
  for (int64_t i = 0; i < H * D; ++i) EXPECT_EQ(q[i], qn[i]);
}

TEST(ReferenceTest, DumpsEveryNamedIntermediate) {
  auto m = MakeModel(Preset("tiny"));  // 2 layers, hidden 64, 2 heads, 1 kv, head_dim 32, ffn 128
  Dumps dumps;
  m->ref->SetDump(dumps.Fn());
  const std::vector<int32_t> tokens = Tokens(5, 640, 2);
  FG_ASSERT_OK_AND_ASSIGN(auto logits, m->ref->Logits(tokens, 3));
  using S = std::vector<int64_t>;
  std::map<std::string, S> want = {
      {"inp_embd", {5, 64}}, {"result_norm", {1, 64}}, {"result_output", {1, 640}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_norm", "attn_proj", "attn_post_norm", "attn_residual", "ffn_norm",
                          "ffn_down", "ffn_post_norm", "out"}) {
      want[p + n] = {5, 64};
    }
    for (const char* n : {"q", "q_normed", "q_rope", "attn_out"}) want[p + n] = {5, 2, 32};
    for (const char* n : {"k", "v", "k_normed", "k_rope"}) want[p + n] = {5, 1, 32};
    for (const char* n : {"ffn_gate", "ffn_up", "ffn_act"}) want[p + n] = {5, 128};
  }
  EXPECT_EQ(dumps.order.size(), want.size());
  for (const auto& [name, shape] : want) {
    SCOPED_TRACE(name);
    ASSERT_EQ(dumps.shape.count(name), 1u);
    EXPECT_EQ(dumps.shape[name], shape);
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    EXPECT_EQ(dumps.data[name].size(), static_cast<size_t>(count));
  }
  EXPECT_EQ(dumps.order.front(), "inp_embd");
  EXPECT_EQ(dumps.order.back(), "result_output");
  EXPECT_EQ(dumps.data["result_output"], logits);
  // Residual wiring: attn_residual = inp_embd + attn_post_norm (layer 0); out = attn_residual
  // + ffn_post_norm; ffn_act = gelu(gate) * up.
  for (size_t i = 0; i < 5 * 64; ++i) {
    EXPECT_EQ(dumps.data["blk.0.attn_residual"][i],
              dumps.data["inp_embd"][i] + dumps.data["blk.0.attn_post_norm"][i]);
    EXPECT_EQ(dumps.data["blk.1.out"][i],
              dumps.data["blk.1.attn_residual"][i] + dumps.data["blk.1.ffn_post_norm"][i]);
  }
  for (size_t i = 0; i < 5 * 128; ++i) {
    const double g = dumps.data["blk.0.ffn_gate"][i];
    const double gelu = 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    EXPECT_NEAR(dumps.data["blk.0.ffn_act"][i], gelu * dumps.data["blk.0.ffn_up"][i],
                1e-6 * (1 + std::fabs(gelu * dumps.data["blk.0.ffn_up"][i])));
  }
  // Embedding scale: row of token[0] times sqrt(64) = 8.
  const std::vector<Vec> E = ReadMatrix(*m->file, "token_embd.weight");
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(dumps.data["inp_embd"][i], static_cast<float>(E[tokens[0]][i]) * 8.0f);
  }
  // Removing the hook stops the dumps.
  m->ref->SetDump(nullptr);
  dumps.order.clear();
  FG_ASSERT_OK(m->ref->Logits(tokens).status());
  EXPECT_TRUE(dumps.order.empty());
}

TEST(ReferenceTest, LogitsAgreeAcrossEntryPoints) {
  auto m = MakeModel(Preset("tiny"));
  const std::vector<int32_t> tokens = Tokens(9, 640, 4);
  FG_ASSERT_OK_AND_ASSIGN(auto all, m->ref->AllLogits(tokens));
  FG_ASSERT_OK_AND_ASSIGN(auto last, m->ref->Logits(tokens));
  FG_ASSERT_OK_AND_ASSIGN(auto third, m->ref->Logits(tokens, 2));
  const std::vector<int64_t> rows = {8, 2};
  FG_ASSERT_OK_AND_ASSIGN(auto at, m->ref->LogitsAt(tokens, rows));
  const size_t V = 640;
  EXPECT_EQ(last, std::vector<float>(all.begin() + 8 * V, all.end()));
  EXPECT_EQ(third, std::vector<float>(all.begin() + 2 * V, all.begin() + 3 * V));
  EXPECT_EQ(std::vector<float>(at.begin(), at.begin() + V), last);
  EXPECT_EQ(std::vector<float>(at.begin() + V, at.end()), third);
  // Deterministic: the same call again gives the same bits.
  FG_ASSERT_OK_AND_ASSIGN(auto again, m->ref->AllLogits(tokens));
  EXPECT_EQ(all, again);
}

TEST(ReferenceTest, GreedyIsArgmaxOfFullRecomputation) {
  auto m = MakeModel(Preset("tiny"));
  const std::vector<int32_t> prompt = Tokens(6, 640, 8);
  FG_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> gen, m->ref->Greedy(prompt, 5));
  ASSERT_EQ(gen.size(), 5u);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), gen.begin(), gen.end() - 1);
  FG_ASSERT_OK_AND_ASSIGN(auto all, m->ref->AllLogits(seq));
  for (size_t s = 0; s < gen.size(); ++s) {
    const size_t row = prompt.size() - 1 + s;
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(row * 640);
    EXPECT_EQ(std::max_element(first, first + 640) - first, gen[s]) << "step " << s;
  }
  FG_ASSERT_OK_AND_ASSIGN(auto none, m->ref->Greedy(prompt, 0));
  EXPECT_TRUE(none.empty());
  EXPECT_THAT(m->ref->Greedy(prompt, -1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("negative")));
}

TEST(ReferenceTest, BadInputsAreErrors) {
  auto m = MakeModel(Preset("tiny"));
  EXPECT_THAT(m->ref->Logits(std::vector<int32_t>{2, 640, 5}),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("token 640 at position 1")));
  EXPECT_THAT(m->ref->Logits(std::vector<int32_t>{-1}),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("token -1")));
  EXPECT_THAT(m->ref->Logits(std::vector<int32_t>{}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(m->ref->Logits(std::vector<int32_t>{1, 2}, 2),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("position 2")));
  EXPECT_THAT(m->ref->Logits(std::vector<int32_t>{1, 2}, -2),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("position -2")));
  EXPECT_THAT(m->ref->Logits(std::vector<int32_t>(257, 1)),  // tiny context is 256
              StatusIs(StatusCode::kOutOfRange, HasSubstr("context_length 256")));
  EXPECT_THAT(m->ref->Greedy(std::vector<int32_t>{999}, 1),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("token 999")));
}

TEST(ReferenceTest, LoadRejectsABadModel) {
  gguf::SyntheticSpec s = Preset("tiny");
  auto writer = gguf::BuildSyntheticGemma3(s);
  ASSERT_TRUE(writer.ok());
  writer->SetString("general.architecture", "llama");
  FG_ASSERT_OK_AND_ASSIGN(auto bytes, writer->ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto file, gguf::File::FromBytes(bytes));
  EXPECT_THAT(Reference::Load(*file), StatusIs(StatusCode::kUnimplemented, HasSubstr("llama")));
  EXPECT_THAT(Reference::Open("/nonexistent/model.gguf"), ::testing::Not(::fg::testing::IsOk()));
}

}  // namespace
}  // namespace fg::reference
