#include "src/model/gemma3/forward.h"

#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace fg::model {

namespace {

using graph::Builder;
using graph::ValueType;

StatusOr<int> W(Builder& b, const gguf::TensorInfo* t) {
  return b.Weight(std::string(t->name), t->shape, t->type);
}

// The adapters of `w` that adapt tensor `name` with a nonzero scale: (index, pair).
std::vector<std::pair<size_t, const LoraPair*>> LorasOf(const Weights& w, std::string_view name) {
  std::vector<std::pair<size_t, const LoraPair*>> used;
  for (size_t i = 0; i < w.loras.size(); ++i) {
    const LoraPair* p = w.loras[i].adapter->Find(name);
    if (p != nullptr && w.loras[i].scale != 0.0f) used.emplace_back(i, p);
  }
  return used;
}

// y + s B t with t = `a_of`(adapter `i`'s lora_a as stored) [S, r]: one adapter's term, named
// `name`. low_rank reads B transposed in f32 (LoraTransposedName), as the model holds it.
StatusOr<int> AddLora(Builder& b, const Weights& w, size_t i, const LoraPair& p,
                      const std::string& name, int y,
                      const std::function<StatusOr<int>(int)>& a_of) {
  FG_ASSIGN_OR_RETURN(int a, b.Weight(LoraWeightName(p.a->name, i), p.a->shape, p.a->type));
  FG_ASSIGN_OR_RETURN(int t, a_of(a));
  FG_ASSIGN_OR_RETURN(int bt, b.Weight(LoraTransposedName(p.b->name, i),
                                       {p.b->shape[1], p.b->shape[0]}, tensor::DType::kF32));
  return b.LowRank(name, t, bt, w.loras[i].adapter->Scale(p, w.loras[i].scale), y);
}

std::string LoraTag(const std::string& name, size_t i) {
  return name + ".lora" + (i > 0 ? std::to_string(i) : "");
}

// y = x W^T + sum over adapters of s B (A x): the projection `t` with every LoRA that adapts
// it (llama.cpp's build_lora_mm). Without one (or with scale 0) it is the plain MatMul named
// `name`, so the base model's graph is unchanged; with one, the sum carries `name`.
StatusOr<int> Linear(Builder& b, const Weights& w, const std::string& name, int x,
                     const gguf::TensorInfo* t) {
  const auto used = LorasOf(w, t->name);
  FG_ASSIGN_OR_RETURN(int wv, W(b, t));
  FG_ASSIGN_OR_RETURN(int y, b.MatMul(used.empty() ? name : name + ".base", x, wv));
  for (size_t u = 0; u < used.size(); ++u) {
    const auto [i, p] = used[u];
    const std::string tag = LoraTag(name, i);
    FG_ASSIGN_OR_RETURN(y, AddLora(b, w, i, *p, u + 1 == used.size() ? name : tag, y,
                                   // A as stored: a Q8_0 A meets 8-bit activations, as in
                                   // llama.cpp (3x closer to it than f32 products).
                                   [&](int a) { return b.MatMul(tag + "_a", x, a); }));
  }
  return y;
}

}  // namespace

StatusOr<int> Embed(Builder& b, const Config& c, const Weights& w, int embd_w, int tokens) {
  const auto used = LorasOf(w, w.token_embd->name);
  if (used.empty()) return b.Embedding("inp_embd", embd_w, tokens, c.embed_scale);
  // llama.cpp's build_inp_embd: the looked-up rows plus s B (A's rows), then the sqrt(H) scale.
  FG_ASSIGN_OR_RETURN(int x, b.Embedding("inp_embd.base", embd_w, tokens, 1.0f));
  for (const auto& [i, p] : used) {
    const std::string tag = LoraTag("inp_embd", i);
    FG_ASSIGN_OR_RETURN(x, AddLora(b, w, i, *p, tag, x, [&](int a) {
                          return b.Embedding(tag + "_a", a, tokens, 1.0f);
                        }));
  }
  return b.Scale("inp_embd", x, c.embed_scale);
}

std::string Blk(int64_t l, const char* what) { return "blk." + std::to_string(l) + "." + what; }

std::string KCacheName(int64_t layer) { return Blk(layer, "k_cache"); }
std::string VCacheName(int64_t layer) { return Blk(layer, "v_cache"); }

StatusOr<int> WeightValue(Builder& b, const gguf::TensorInfo* t) { return W(b, t); }

StatusOr<int> LmHeadValue(Builder& b, const Weights& w, int embd) {
  if (w.output != nullptr && w.output != w.token_embd) return W(b, w.output);
  return embd;
}

// ref: llama.cpp src/models/gemma3.cpp (graph), docs/model.md (numerics).
StatusOr<int> BuildLayers(Builder& b, const Config& c, const Weights& w, int64_t S, int x,
                          const AttentionCore& core) {
  if (static_cast<int64_t>(w.layers.size()) != c.n_layers) {
    return InvalidArgumentError("forward: weights have " + std::to_string(w.layers.size()) +
                                " layers, config " + std::to_string(c.n_layers));
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    // Attention block.
    FG_ASSIGN_OR_RETURN(int an_w, W(b, lw.attn_norm));
    FG_ASSIGN_OR_RETURN(int h, b.RmsNorm(Blk(l, "attn_norm"), x, an_w, c.rms_eps));
    FG_ASSIGN_OR_RETURN(int q, Linear(b, w, Blk(l, "q"), h, lw.attn_q));
    FG_ASSIGN_OR_RETURN(int k, Linear(b, w, Blk(l, "k"), h, lw.attn_k));
    FG_ASSIGN_OR_RETURN(int v, Linear(b, w, Blk(l, "v"), h, lw.attn_v));
    FG_ASSIGN_OR_RETURN(int q3, b.Reshape(Blk(l, "q_heads"), q, {S, c.n_heads, c.head_dim}));
    FG_ASSIGN_OR_RETURN(int k3, b.Reshape(Blk(l, "k_heads"), k, {S, c.n_kv_heads, c.head_dim}));
    FG_ASSIGN_OR_RETURN(int v3, b.Reshape(Blk(l, "v_heads"), v, {S, c.n_kv_heads, c.head_dim}));
    // Per-head norms before RoPE; no norm on v.
    FG_ASSIGN_OR_RETURN(int qn_w, W(b, lw.attn_q_norm));
    FG_ASSIGN_OR_RETURN(int kn_w, W(b, lw.attn_k_norm));
    FG_ASSIGN_OR_RETURN(int qn, b.RmsNorm(Blk(l, "q_normed"), q3, qn_w, c.rms_eps));
    FG_ASSIGN_OR_RETURN(int kn, b.RmsNorm(Blk(l, "k_normed"), k3, kn_w, c.rms_eps));
    FG_ASSIGN_OR_RETURN(int att, core(b, l, qn, kn, v3));
    FG_ASSIGN_OR_RETURN(int proj, Linear(b, w, Blk(l, "attn_proj"), att, lw.attn_output));
    FG_ASSIGN_OR_RETURN(int pan_w, W(b, lw.post_attention_norm));
    FG_ASSIGN_OR_RETURN(int pan, b.RmsNorm(Blk(l, "attn_post_norm"), proj, pan_w, c.rms_eps));
    FG_ASSIGN_OR_RETURN(int res, b.Add(Blk(l, "attn_residual"), x, pan));

    // Feed-forward block.
    FG_ASSIGN_OR_RETURN(int fn_w, W(b, lw.ffn_norm));
    FG_ASSIGN_OR_RETURN(int fh, b.RmsNorm(Blk(l, "ffn_norm"), res, fn_w, c.rms_eps));
    FG_ASSIGN_OR_RETURN(int gate, Linear(b, w, Blk(l, "ffn_gate"), fh, lw.ffn_gate));
    FG_ASSIGN_OR_RETURN(int up, Linear(b, w, Blk(l, "ffn_up"), fh, lw.ffn_up));
    FG_ASSIGN_OR_RETURN(int act, b.GeluMul(Blk(l, "ffn_act"), gate, up));
    FG_ASSIGN_OR_RETURN(int down, Linear(b, w, Blk(l, "ffn_down"), act, lw.ffn_down));
    FG_ASSIGN_OR_RETURN(int pfn_w, W(b, lw.post_ffw_norm));
    FG_ASSIGN_OR_RETURN(int pfn, b.RmsNorm(Blk(l, "ffn_post_norm"), down, pfn_w, c.rms_eps));
    FG_ASSIGN_OR_RETURN(x, b.Add(Blk(l, "out"), res, pfn));
  }
  return x;
}

StatusOr<graph::Graph> BuildForward(const Config& c, const Weights& w, const ForwardSpec& spec) {
  const int64_t S = spec.n_tokens;
  if (S <= 0) return InvalidArgumentError("forward: n_tokens must be > 0");
  if (spec.n_logit_rows < 0 || spec.n_logit_rows > S) {
    return InvalidArgumentError("forward: n_logit_rows must be in [0, n_tokens]");
  }
  if (spec.argmax && (spec.n_logit_rows == 0 || !spec.lm_head)) {
    return InvalidArgumentError("forward: argmax needs logit rows and the LM head");
  }
  Builder b;
  FG_ASSIGN_OR_RETURN(int tokens, b.Input("tokens", {S}, ValueType::kI32));
  FG_ASSIGN_OR_RETURN(int pos, b.Input("pos", {S}, ValueType::kI32));
  FG_ASSIGN_OR_RETURN(int embd_w, W(b, w.token_embd));
  FG_ASSIGN_OR_RETURN(int x0, Embed(b, c, w, embd_w, tokens));

  // The session's attention: RoPE at the given positions, K/V appended to the per-layer cache
  // states (a ring for sliding layers), attention read from the caches by position.
  auto core = [&](Builder& b, int64_t l, int qn, int kn, int v3) -> StatusOr<int> {
    const bool global = c.IsGlobal(l);
    const int64_t rows = global ? spec.global_cache_rows : spec.local_cache_rows;
    FG_ASSIGN_OR_RETURN(int kc, b.State(KCacheName(l), {rows, c.n_kv_heads, c.head_dim}));
    FG_ASSIGN_OR_RETURN(int vc, b.State(VCacheName(l), {rows, c.n_kv_heads, c.head_dim}));
    FG_ASSIGN_OR_RETURN(int qr, b.Rope(Blk(l, "q_rope"), qn, pos, c.RopeBase(l)));
    FG_ASSIGN_OR_RETURN(int kr, b.Rope(Blk(l, "k_rope"), kn, pos, c.RopeBase(l)));
    FG_ASSIGN_OR_RETURN(int kc2, b.CacheWrite(Blk(l, "k_cache_w"), kc, kr, pos));
    FG_ASSIGN_OR_RETURN(int vc2, b.CacheWrite(Blk(l, "v_cache_w"), vc, v3, pos));
    return b.Attention(Blk(l, "attn_out"), qr, kc2, vc2, pos, c.query_scale,
                       global ? 0 : c.sliding_window);
  };
  FG_ASSIGN_OR_RETURN(int x, BuildLayers(b, c, w, S, x0, core));

  if (spec.n_logit_rows > 0) {
    // Only the rows whose logits are used go through the final norm and the LM head.
    FG_ASSIGN_OR_RETURN(int rows, b.Input("logit_rows", {spec.n_logit_rows}, ValueType::kI32));
    FG_ASSIGN_OR_RETURN(int sel, b.SelectRows("result_rows", x, rows));
    FG_ASSIGN_OR_RETURN(int on_w, W(b, w.output_norm));
    FG_ASSIGN_OR_RETURN(int norm, b.RmsNorm("result_norm", sel, on_w, c.rms_eps));
    if (!spec.lm_head) {
      FG_RETURN_IF_ERROR(b.MarkOutput(norm));
      return b.Finish();
    }
    FG_ASSIGN_OR_RETURN(int head, LmHeadValue(b, w, embd_w));
    FG_ASSIGN_OR_RETURN(int logits, b.MatMul("result_output", norm, head));
    FG_RETURN_IF_ERROR(b.MarkOutput(logits));
    if (spec.argmax) {
      FG_ASSIGN_OR_RETURN(int am, b.Argmax("result_argmax", logits));
      FG_RETURN_IF_ERROR(b.MarkOutput(am));
    }
  } else {
    FG_RETURN_IF_ERROR(b.MarkOutput(x));
  }
  return b.Finish();
}

}  // namespace fg::model
