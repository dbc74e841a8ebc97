#include "src/model/gemma3/forward.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace fg::model {

namespace {

using graph::Builder;
using graph::ValueId;
using graph::ValueType;

ValueId W(Builder& b, const gguf::TensorInfo* t) {
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
ValueId AddLora(Builder& b, const Weights& w, size_t i, const LoraPair& p, const std::string& name,
                ValueId y, const std::function<ValueId(ValueId)>& a_of) {
  ValueId a = b.Weight(LoraWeightName(p.a->name, i), p.a->shape, p.a->type);
  ValueId t = a_of(a);
  ValueId bt = b.Weight(LoraTransposedName(p.b->name, i), {p.b->shape[1], p.b->shape[0]},
                        tensor::DType::kF32);
  return b.LowRank(name, t, bt, w.loras[i].adapter->Scale(p, w.loras[i].scale), y);
}

std::string LoraTag(const std::string& name, size_t i) {
  return name + ".lora" + (i > 0 ? std::to_string(i) : "");
}

// y = x W^T + sum over adapters of s B (A x): the projection `t` with every LoRA that adapts
// it (llama.cpp's build_lora_mm). Without one (or with scale 0) it is the plain MatMul named
// `name`, so the base model's graph is unchanged; with one, the sum carries `name`.
ValueId Linear(Builder& b, const Weights& w, const std::string& name, ValueId x,
               const gguf::TensorInfo* t) {
  const auto used = LorasOf(w, t->name);
  ValueId y = b.MatMul(used.empty() ? name : name + ".base", x, W(b, t));
  for (size_t u = 0; u < used.size(); ++u) {
    const auto [i, p] = used[u];
    const std::string tag = LoraTag(name, i);
    y = AddLora(b, w, i, *p, u + 1 == used.size() ? name : tag, y,
                // A as stored: a Q8_0 A meets 8-bit activations, as in llama.cpp (3x closer to
                // it than f32 products).
                [&](ValueId a) { return b.MatMul(tag + "_a", x, a); });
  }
  return y;
}

}  // namespace

ValueId Embed(Builder& b, const Config& c, const Weights& w, ValueId embd_w, ValueId tokens) {
  const auto used = LorasOf(w, w.token_embd->name);
  if (used.empty()) return b.Embedding("inp_embd", embd_w, tokens, c.embed_scale);
  // llama.cpp's build_inp_embd: the looked-up rows plus s B (A's rows), then the sqrt(H) scale.
  ValueId x = b.Embedding("inp_embd.base", embd_w, tokens, 1.0f);
  for (const auto& [i, p] : used) {
    const std::string tag = LoraTag("inp_embd", i);
    x = AddLora(b, w, i, *p, tag, x,
                [&](ValueId a) { return b.Embedding(tag + "_a", a, tokens, 1.0f); });
  }
  return b.Scale("inp_embd", x, c.embed_scale);
}

std::string Blk(int64_t l, const char* what) { return "blk." + std::to_string(l) + "." + what; }

std::string KCacheName(int64_t layer) { return Blk(layer, "k_cache"); }
std::string VCacheName(int64_t layer) { return Blk(layer, "v_cache"); }

namespace {

// One sequence's attention over its own caches: q, k (after RoPE) and v of its rows written to
// the cache states named k_cache / v_cache at `pos`, then attention read from them by position.
// Value names are blk.L.<stage> + tag.
ValueId CacheAndAttend(Builder& b, const Config& c, int64_t l, int64_t rows, ValueId q, ValueId k,
                       ValueId v, ValueId pos, const std::string& k_cache,
                       const std::string& v_cache, const std::string& tag) {
  ValueId kc = b.State(k_cache, {rows, c.n_kv_heads, c.head_dim});
  ValueId vc = b.State(v_cache, {rows, c.n_kv_heads, c.head_dim});
  kc = b.CacheWrite(Blk(l, "k_cache_w") + tag, kc, k, pos);
  vc = b.CacheWrite(Blk(l, "v_cache_w") + tag, vc, v, pos);
  return b.Attention(Blk(l, "attn_out") + tag, q, kc, vc, pos, c.query_scale,
                     c.IsGlobal(l) ? 0 : c.sliding_window);
}

}  // namespace

ValueId WeightValue(Builder& b, const gguf::TensorInfo* t) { return W(b, t); }

ValueId LmHeadValue(Builder& b, const Weights& w, ValueId embd) {
  if (w.output != nullptr && w.output != w.token_embd) return W(b, w.output);
  return embd;
}

// ref: llama.cpp src/models/gemma3.cpp (graph), docs/model.md (numerics).
ValueId BuildLayers(Builder& b, const Config& c, const Weights& w, int64_t S, ValueId x,
                    const AttentionCore& core) {
  if (static_cast<int64_t>(w.layers.size()) != c.n_layers) {
    return b.Fail(InvalidArgumentError("forward: weights have " + std::to_string(w.layers.size()) +
                                       " layers, config " + std::to_string(c.n_layers)));
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    // Attention block.
    ValueId h = b.RmsNorm(Blk(l, "attn_norm"), x, W(b, lw.attn_norm), c.rms_eps);
    ValueId q = Linear(b, w, Blk(l, "q"), h, lw.attn_q);
    ValueId k = Linear(b, w, Blk(l, "k"), h, lw.attn_k);
    ValueId v = Linear(b, w, Blk(l, "v"), h, lw.attn_v);
    q = b.Reshape(Blk(l, "q_heads"), q, {S, c.n_heads, c.head_dim});
    k = b.Reshape(Blk(l, "k_heads"), k, {S, c.n_kv_heads, c.head_dim});
    v = b.Reshape(Blk(l, "v_heads"), v, {S, c.n_kv_heads, c.head_dim});
    // Per-head norms before RoPE; no norm on v.
    ValueId qn_w = W(b, lw.attn_q_norm);
    ValueId kn_w = W(b, lw.attn_k_norm);
    q = b.RmsNorm(Blk(l, "q_normed"), q, qn_w, c.rms_eps);
    k = b.RmsNorm(Blk(l, "k_normed"), k, kn_w, c.rms_eps);
    ValueId att = core(b, l, q, k, v);
    ValueId proj = Linear(b, w, Blk(l, "attn_proj"), att, lw.attn_output);
    proj = b.RmsNorm(Blk(l, "attn_post_norm"), proj, W(b, lw.post_attention_norm), c.rms_eps);
    ValueId res = b.Add(Blk(l, "attn_residual"), x, proj);

    // Feed-forward block.
    h = b.RmsNorm(Blk(l, "ffn_norm"), res, W(b, lw.ffn_norm), c.rms_eps);
    ValueId gate = Linear(b, w, Blk(l, "ffn_gate"), h, lw.ffn_gate);
    ValueId up = Linear(b, w, Blk(l, "ffn_up"), h, lw.ffn_up);
    ValueId act = b.GeluMul(Blk(l, "ffn_act"), gate, up);
    ValueId down = Linear(b, w, Blk(l, "ffn_down"), act, lw.ffn_down);
    down = b.RmsNorm(Blk(l, "ffn_post_norm"), down, W(b, lw.post_ffw_norm), c.rms_eps);
    x = b.Add(Blk(l, "out"), res, down);
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
  ValueId tokens = b.Input("tokens", {S}, ValueType::kI32);
  ValueId pos = b.Input("pos", {S}, ValueType::kI32);
  ValueId embd_w = W(b, w.token_embd);
  ValueId x = Embed(b, c, w, embd_w, tokens);

  // The session's attention: RoPE at the given positions, K/V appended to the per-layer cache
  // states (a ring for sliding layers), attention read from the caches by position.
  auto core = [&](Builder& b, int64_t l, ValueId q, ValueId k, ValueId v) {
    const int64_t rows = c.IsGlobal(l) ? spec.global_cache_rows : spec.local_cache_rows;
    q = b.Rope(Blk(l, "q_rope"), q, pos, c.RopeBase(l));
    k = b.Rope(Blk(l, "k_rope"), k, pos, c.RopeBase(l));
    return CacheAndAttend(b, c, l, rows, q, k, v, pos, KCacheName(l), VCacheName(l), "");
  };
  x = BuildLayers(b, c, w, S, x, core);

  if (spec.n_logit_rows == 0) {
    b.MarkOutput(x);
    return b.Finish();
  }
  // Only the rows whose logits are used go through the final norm and the LM head.
  ValueId rows = b.Input("logit_rows", {spec.n_logit_rows}, ValueType::kI32);
  x = b.SelectRows("result_rows", x, rows);
  x = b.RmsNorm("result_norm", x, W(b, w.output_norm), c.rms_eps);
  if (!spec.lm_head) {
    b.MarkOutput(x);
    return b.Finish();
  }
  ValueId logits = b.MatMul("result_output", x, LmHeadValue(b, w, embd_w));
  b.MarkOutput(logits);
  if (spec.argmax) b.MarkOutput(b.Argmax("result_argmax", logits));
  return b.Finish();
}

std::string BatchKCacheName(int64_t layer, int64_t sequence) {
  return KCacheName(layer) + "#" + std::to_string(sequence);
}
std::string BatchVCacheName(int64_t layer, int64_t sequence) {
  return VCacheName(layer) + "#" + std::to_string(sequence);
}

StatusOr<graph::Graph> BuildBatchedForward(const Config& c, const Weights& w,
                                           const BatchForwardSpec& spec) {
  const auto& seqs = spec.sequences;
  if (seqs.empty()) return InvalidArgumentError("forward: a batch needs a sequence");
  int64_t S = 0, R = 0, F = 0;
  for (const BatchSequence& q : seqs) {
    if (q.n_tokens <= 0 || q.head_rows < 0 || q.head_rows > q.n_tokens) {
      return InvalidArgumentError("forward: a batch sequence needs n_tokens > 0 and head_rows "
                                  "in [0, n_tokens]");
    }
    S += q.n_tokens;
    R += std::max<int64_t>(1, q.head_rows);
    F += q.head_rows;
  }
  Builder b;
  ValueId tokens = b.Input("tokens", {S}, ValueType::kI32);
  ValueId pos = b.Input("pos", {S}, ValueType::kI32);
  ValueId embd_w = W(b, w.token_embd);
  ValueId x = Embed(b, c, w, embd_w, tokens);

  // RoPE over all rows at once (a row's rotation depends on its position only); then each
  // sequence's rows write its caches and attend over them, and the outputs are concatenated
  // back in order for the output projection.
  auto core = [&](Builder& b, int64_t l, ValueId q, ValueId k, ValueId v) {
    const int64_t rows = c.IsGlobal(l) ? spec.global_cache_rows : spec.local_cache_rows;
    q = b.Rope(Blk(l, "q_rope"), q, pos, c.RopeBase(l));
    k = b.Rope(Blk(l, "k_rope"), k, pos, c.RopeBase(l));
    const int64_t hq = c.n_heads * c.head_dim, hkv = c.n_kv_heads * c.head_dim;
    ValueId out;
    int64_t at = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int64_t n = seqs[i].n_tokens;
      const std::string tag = "#" + std::to_string(i);
      const auto si = static_cast<int64_t>(i);
      ValueId pi = b.Slice(Blk(l, "pos") + tag, pos, at, {n});
      ValueId qi = b.Slice(Blk(l, "q_rope") + tag, q, at * hq, {n, c.n_heads, c.head_dim});
      ValueId ki = b.Slice(Blk(l, "k_rope") + tag, k, at * hkv, {n, c.n_kv_heads, c.head_dim});
      ValueId vi = b.Slice(Blk(l, "v_heads") + tag, v, at * hkv, {n, c.n_kv_heads, c.head_dim});
      ValueId o = CacheAndAttend(b, c, l, rows, qi, ki, vi, pi, BatchKCacheName(l, si),
                                 BatchVCacheName(l, si), tag);
      out = i == 0 ? o
                   : b.Concat(i + 1 == seqs.size() ? Blk(l, "attn_out")
                                                   : Blk(l, "attn_out") + "+" + tag,
                              out, o, 0);
      at += n;
    }
    return out;
  };
  x = BuildLayers(b, c, w, S, x, core);

  ValueId rows = b.Input("logit_rows", {R}, ValueType::kI32);
  x = b.SelectRows("result_rows", x, rows);
  x = b.RmsNorm("result_norm", x, W(b, w.output_norm), c.rms_eps);
  b.MarkOutput(x);
  if (F > 0) {
    ValueId full = b.Input("full_rows", {F}, ValueType::kI32);
    ValueId h = b.SelectRows("result_full", x, full);
    b.MarkOutput(b.MatMul("result_output", h, LmHeadValue(b, w, embd_w)));
  }
  return b.Finish();
}

}  // namespace fg::model
