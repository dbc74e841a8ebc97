// Naive Gemma 3 forward pass. Read top to bottom; every step is one loop nest.
// ref: docs/model.md, llama.cpp src/models/gemma3.cpp (graph), ggml/src/ggml-cpu/ops.cpp
// (rms_norm, rope_neox, soft_max), HF transformers models/gemma3/modeling_gemma3.py.
#include "src/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "src/kernels/quant.h"
#include "src/model/gemma3/weights.h"
#include "src/tensor/dtype.h"

namespace fg::reference {
namespace {

// Dequantizes a whole tensor (1-D or 2-D) to f32, row by row.
StatusOr<std::vector<float>> ToF32(const gguf::TensorInfo& t) {
  const int64_t cols = t.shape.back();
  const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1;
  const std::optional<int64_t> row_bytes = tensor::RowBytes(t.type, cols);
  const std::string name(t.name);
  if (!row_bytes ||
      static_cast<uint64_t>(*row_bytes) * static_cast<uint64_t>(rows) > t.size_bytes) {
    return DataLossError("reference: tensor '" + name + "' is smaller than its shape");
  }
  // The scalar kernels on purpose: SIMD dequantizers are among the things this oracle checks.
  const kernels::TypeOps* ops = kernels::GetTypeOps(t.type, kernels::Isa::kScalar);
  if (ops == nullptr) {
    return UnimplementedError("reference: tensor '" + name + "' has type " +
                              std::string(tensor::DTypeName(t.type)) + " with no dequantizer");
  }
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    ops->dequantize_row(t.data + r * *row_bytes, out.data() + r * cols, cols);
  }
  return out;
}

// sum_c w[c] * x[c]; double accumulation. Four partial sums (by c mod 4) only so the
// additions do not wait on each other: the real-model golden test is slow enough as it is.
float Dot(const float* w, const float* x, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t c = 0;
  for (; c + 4 <= n; c += 4) {
    s0 += static_cast<double>(w[c]) * x[c];
    s1 += static_cast<double>(w[c + 1]) * x[c + 1];
    s2 += static_cast<double>(w[c + 2]) * x[c + 2];
    s3 += static_cast<double>(w[c + 3]) * x[c + 3];
  }
  for (; c < n; ++c) s0 += static_cast<double>(w[c]) * x[c];
  return static_cast<float>((s0 + s1) + (s2 + s3));
}

// Y[t, r] = sum_c W[r, c] * X[t, c]: X [n, cols] -> Y [n, rows]. Rows of W outermost so each
// weight row is read from memory once for all tokens.
std::vector<float> MatMul(const std::vector<float>& W, const std::vector<float>& X, int64_t n,
                          int64_t rows, int64_t cols) {
  std::vector<float> Y(static_cast<size_t>(n * rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < n; ++t) Y[t * rows + r] = Dot(&W[r * cols], &X[t * cols], cols);
  }
  return Y;
}

// out = x / sqrt(mean(x^2) + eps) * w over `dim` elements. GGUF norm weights already hold
// 1 + w (the converter adds the 1), so w is applied as is.
void RmsNorm(const float* x, const float* w, float* out, int64_t dim, float eps) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) out[i] = static_cast<float>(x[i] * inv) * w[i];
}

// RMS norm of each of the n rows of length dim in X [n, dim] (dim may be one head).
std::vector<float> RmsNormRows(const std::vector<float>& X, const std::vector<float>& w,
                               int64_t n_rows, int64_t dim, float eps) {
  std::vector<float> out(X.size());
  for (int64_t r = 0; r < n_rows; ++r) RmsNorm(&X[r * dim], w.data(), &out[r * dim], dim, eps);
  return out;
}

// RoPE, "NEOX" split-half form: element i pairs with i + d/2, rotated by angle
// pos * base^(-2i/d). Angles in double. ref: ggml rope_neox (llama.cpp rope type for gemma3).
void Rope(float* head, int64_t d, int64_t pos, double base) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double theta =
        static_cast<double>(pos) * std::pow(base, -2.0 * static_cast<double>(i) / d);
    const double c = std::cos(theta), s = std::sin(theta);
    const double x0 = head[i], x1 = head[i + half];
    head[i] = static_cast<float>(x0 * c - x1 * s);
    head[i + half] = static_cast<float>(x0 * s + x1 * c);
  }
}

// gelu with the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float GeluTanh(float xf) {
  const double x = xf;
  const double kSqrt2OverPi = 0.79788456080286535588;
  return static_cast<float>(0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x))));
}

}  // namespace

StatusOr<std::unique_ptr<Reference>> Reference::Open(const std::string& path) {
  FG_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(path));
  return Load(*file);
}

StatusOr<std::unique_ptr<Reference>> Reference::Load(const gguf::File& file) {
  std::unique_ptr<Reference> ref(new Reference());
  FG_ASSIGN_OR_RETURN(ref->config_, model::ConfigFromGguf(file));
  FG_ASSIGN_OR_RETURN(model::Weights w, model::BindWeights(file, ref->config_));
  FG_ASSIGN_OR_RETURN(ref->token_embd_, ToF32(*w.token_embd));
  FG_ASSIGN_OR_RETURN(ref->output_norm_, ToF32(*w.output_norm));
  if (w.output != w.token_embd) {
    FG_ASSIGN_OR_RETURN(ref->output_, ToF32(*w.output));
  }
  ref->layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const model::LayerWeights& in = w.layers[l];
    Layer& L = ref->layers_[l];
    FG_ASSIGN_OR_RETURN(L.attn_norm, ToF32(*in.attn_norm));
    FG_ASSIGN_OR_RETURN(L.attn_q, ToF32(*in.attn_q));
    FG_ASSIGN_OR_RETURN(L.attn_k, ToF32(*in.attn_k));
    FG_ASSIGN_OR_RETURN(L.attn_v, ToF32(*in.attn_v));
    FG_ASSIGN_OR_RETURN(L.attn_q_norm, ToF32(*in.attn_q_norm));
    FG_ASSIGN_OR_RETURN(L.attn_k_norm, ToF32(*in.attn_k_norm));
    FG_ASSIGN_OR_RETURN(L.attn_output, ToF32(*in.attn_output));
    FG_ASSIGN_OR_RETURN(L.post_attention_norm, ToF32(*in.post_attention_norm));
    FG_ASSIGN_OR_RETURN(L.ffn_norm, ToF32(*in.ffn_norm));
    FG_ASSIGN_OR_RETURN(L.ffn_gate, ToF32(*in.ffn_gate));
    FG_ASSIGN_OR_RETURN(L.ffn_up, ToF32(*in.ffn_up));
    FG_ASSIGN_OR_RETURN(L.ffn_down, ToF32(*in.ffn_down));
    FG_ASSIGN_OR_RETURN(L.post_ffw_norm, ToF32(*in.post_ffw_norm));
  }
  return ref;
}

Status Reference::AddLora(const model::LoraAdapter& adapter, float scale) {
  for (const model::LoraPair& p : adapter.pairs()) {
    FG_ASSIGN_OR_RETURN(std::vector<float> a, ToF32(*p.a));
    FG_ASSIGN_OR_RETURN(std::vector<float> b, ToF32(*p.b));
    const double s = adapter.Scale(p, scale);
    const int64_t r = p.rank;
    std::vector<float>* w = nullptr;
    const bool embd = p.base == "token_embd.weight";
    if (embd) {
      if (output_.empty()) output_ = token_embd_;  // the LM head keeps the base table
      w = &token_embd_;
    } else {
      // "blk.N.<module>.weight"
      const size_t dot = p.base.find('.', 4);
      const int64_t l = std::stoll(p.base.substr(4, dot - 4));
      const std::string m = p.base.substr(dot + 1, p.base.size() - dot - 1 - 7);
      Layer& L = layers_.at(static_cast<size_t>(l));
      w = m == "attn_q"        ? &L.attn_q
          : m == "attn_k"      ? &L.attn_k
          : m == "attn_v"      ? &L.attn_v
          : m == "attn_output" ? &L.attn_output
          : m == "ffn_gate"    ? &L.ffn_gate
          : m == "ffn_up"      ? &L.ffn_up
                               : &L.ffn_down;
    }
    // W {n_out, n_in}: W[o][i] += s sum_k B[o][k] A[k][i]; token_embd {V, H}:
    // E[v][h] += s sum_k A[v][k] B[h][k].
    const int64_t rows = embd ? p.a->shape[0] : p.b->shape[0];
    const int64_t cols = embd ? p.b->shape[0] : p.a->shape[1];
    for (int64_t o = 0; o < rows; ++o) {
      for (int64_t i = 0; i < cols; ++i) {
        double acc = 0;
        for (int64_t k = 0; k < r; ++k) {
          acc += embd ? static_cast<double>(a[o * r + k]) * b[i * r + k]
                      : static_cast<double>(b[o * r + k]) * a[k * cols + i];
        }
        float& x = (*w)[static_cast<size_t>(o * cols + i)];
        x = static_cast<float>(x + s * acc);
      }
    }
  }
  return OkStatus();
}

void Reference::Dump(std::string_view name, const std::vector<float>& data,
                     std::initializer_list<int64_t> shape) const {
  if (!dump_) return;
  const std::vector<int64_t> dims(shape);
  dump_(name, std::span<const float>(data), std::span<const int64_t>(dims));
}

StatusOr<std::vector<float>> Reference::Forward(std::span<const int32_t> tokens) {
  const model::Config& c = config_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return InvalidArgumentError("reference: empty token sequence");
  if (n > c.context_length) {
    return OutOfRangeError("reference: " + std::to_string(n) + " tokens exceed context_length " +
                           std::to_string(c.context_length));
  }
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab) {
      return OutOfRangeError("reference: token " + std::to_string(tokens[t]) + " at position " +
                             std::to_string(t) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab) + ")");
    }
  }
  const int64_t H = c.hidden, D = c.head_dim, NH = c.n_heads, NKV = c.n_kv_heads, F = c.ffn;

  // Embedding, scaled by sqrt(hidden) in f32 (llama.cpp: ggml_scale(inp, sqrtf(n_embd))).
  std::vector<float> x(static_cast<size_t>(n * H));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = &token_embd_[static_cast<size_t>(tokens[t]) * H];
    for (int64_t i = 0; i < H; ++i) x[t * H + i] = row[i] * c.embed_scale;
  }
  Dump("inp_embd", x, {n, H});

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    const std::string p = "blk." + std::to_string(l) + ".";

    // --- attention block ---
    std::vector<float> h = RmsNormRows(x, L.attn_norm, n, H, c.rms_eps);
    Dump(p + "attn_norm", h, {n, H});
    std::vector<float> q = MatMul(L.attn_q, h, n, NH * D, H);   // [n, NH, D]
    std::vector<float> k = MatMul(L.attn_k, h, n, NKV * D, H);  // [n, NKV, D]
    std::vector<float> v = MatMul(L.attn_v, h, n, NKV * D, H);  // [n, NKV, D]
    Dump(p + "q", q, {n, NH, D});
    Dump(p + "k", k, {n, NKV, D});
    Dump(p + "v", v, {n, NKV, D});

    // Per-head RMS norm of q and k (not v), before RoPE.
    q = RmsNormRows(q, L.attn_q_norm, n * NH, D, c.rms_eps);
    k = RmsNormRows(k, L.attn_k_norm, n * NKV, D, c.rms_eps);
    Dump(p + "q_normed", q, {n, NH, D});
    Dump(p + "k_normed", k, {n, NKV, D});

    const double base = c.RopeBase(l);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t hd = 0; hd < NH; ++hd) Rope(&q[(t * NH + hd) * D], D, t, base);
      for (int64_t hd = 0; hd < NKV; ++hd) Rope(&k[(t * NKV + hd) * D], D, t, base);
    }
    Dump(p + "q_rope", q, {n, NH, D});
    Dump(p + "k_rope", k, {n, NKV, D});

    // softmax(q.k * scale) v with causal masking; local layers see keys t-W+1..t only.
    std::vector<float> attn(static_cast<size_t>(n * NH * D));
    std::vector<double> score(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const int64_t first = c.IsGlobal(l) ? 0 : std::max<int64_t>(0, t - c.sliding_window + 1);
      for (int64_t hd = 0; hd < NH; ++hd) {
        const int64_t kv = hd / c.group_size();
        const float* qh = &q[(t * NH + hd) * D];
        double max_score = -INFINITY;
        for (int64_t s = first; s <= t; ++s) {
          const float* kh = &k[(s * NKV + kv) * D];
          double dot = 0.0;
          for (int64_t i = 0; i < D; ++i) dot += static_cast<double>(qh[i]) * kh[i];
          score[s] = dot * c.query_scale;
          max_score = std::max(max_score, score[s]);
        }
        double denom = 0.0;
        for (int64_t s = first; s <= t; ++s) {
          score[s] = std::exp(score[s] - max_score);
          denom += score[s];
        }
        float* out = &attn[(t * NH + hd) * D];
        for (int64_t i = 0; i < D; ++i) {
          double acc = 0.0;
          for (int64_t s = first; s <= t; ++s) acc += score[s] * v[(s * NKV + kv) * D + i];
          out[i] = static_cast<float>(acc / denom);
        }
      }
    }
    Dump(p + "attn_out", attn, {n, NH, D});

    std::vector<float> proj = MatMul(L.attn_output, attn, n, H, NH * D);
    Dump(p + "attn_proj", proj, {n, H});
    std::vector<float> post = RmsNormRows(proj, L.post_attention_norm, n, H, c.rms_eps);
    Dump(p + "attn_post_norm", post, {n, H});
    for (size_t i = 0; i < x.size(); ++i) x[i] += post[i];
    Dump(p + "attn_residual", x, {n, H});

    // --- feed-forward block: down(gelu_tanh(gate h) * up h) ---
    h = RmsNormRows(x, L.ffn_norm, n, H, c.rms_eps);
    Dump(p + "ffn_norm", h, {n, H});
    std::vector<float> gate = MatMul(L.ffn_gate, h, n, F, H);
    std::vector<float> up = MatMul(L.ffn_up, h, n, F, H);
    Dump(p + "ffn_gate", gate, {n, F});
    Dump(p + "ffn_up", up, {n, F});
    std::vector<float> act(gate.size());
    for (size_t i = 0; i < act.size(); ++i) act[i] = GeluTanh(gate[i]) * up[i];
    Dump(p + "ffn_act", act, {n, F});
    std::vector<float> down = MatMul(L.ffn_down, act, n, H, F);
    Dump(p + "ffn_down", down, {n, H});
    post = RmsNormRows(down, L.post_ffw_norm, n, H, c.rms_eps);
    Dump(p + "ffn_post_norm", post, {n, H});
    for (size_t i = 0; i < x.size(); ++i) x[i] += post[i];
    Dump(p + "out", x, {n, H});
  }
  return x;
}

StatusOr<std::vector<float>> Reference::LogitsAt(std::span<const int32_t> tokens,
                                                 std::span<const int64_t> positions) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return InvalidArgumentError("reference: empty token sequence");
  for (int64_t p : positions) {
    if (p < 0 || p >= n) {
      return OutOfRangeError("reference: logits position " + std::to_string(p) +
                             " outside the sequence of " + std::to_string(n) + " tokens");
    }
  }
  FG_ASSIGN_OR_RETURN(std::vector<float> x, Forward(tokens));
  const model::Config& c = config_;
  const int64_t H = c.hidden, V = c.vocab, rows = static_cast<int64_t>(positions.size());
  std::vector<float> normed(static_cast<size_t>(rows * H));
  for (int64_t r = 0; r < rows; ++r) {
    RmsNorm(&x[positions[r] * H], output_norm_.data(), &normed[r * H], H, c.rms_eps);
  }
  Dump("result_norm", normed, {rows, H});
  // Tied LM head: the embedding table again (unless the file has output.weight).
  const std::vector<float>& head = output_.empty() ? token_embd_ : output_;
  std::vector<float> logits = MatMul(head, normed, rows, V, H);
  Dump("result_output", logits, {rows, V});
  return logits;
}

StatusOr<std::vector<float>> Reference::Logits(std::span<const int32_t> tokens, int64_t position) {
  const int64_t pos = position == -1 ? static_cast<int64_t>(tokens.size()) - 1 : position;
  const int64_t positions[1] = {pos};
  return LogitsAt(tokens, positions);
}

StatusOr<std::vector<float>> Reference::AllLogits(std::span<const int32_t> tokens) {
  std::vector<int64_t> positions(tokens.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i);
  return LogitsAt(tokens, positions);
}

StatusOr<std::vector<int32_t>> Reference::Greedy(std::span<const int32_t> prompt, int n_steps) {
  if (n_steps < 0) return InvalidArgumentError("reference: negative number of greedy steps");
  std::vector<int32_t> seq(prompt.begin(), prompt.end());
  std::vector<int32_t> generated;
  for (int step = 0; step < n_steps; ++step) {
    FG_ASSIGN_OR_RETURN(std::vector<float> logits, Logits(seq, -1));
    // max_element returns the first maximum: the lowest id wins ties.
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    generated.push_back(next);
    seq.push_back(next);
  }
  return generated;
}

}  // namespace fg::reference
