#include "src/export/contract_graphs.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/model/gemma3/forward.h"

namespace fg::exporter {

namespace {

using graph::Builder;
using graph::ValueId;
using graph::ValueType;
using model::Blk;

}  // namespace

SignatureOptions OptionsOf(const ContractSpec& spec) {
  SignatureOptions o;
  o.seq = spec.seq;
  o.chunk = spec.chunk;
  o.emb_input = spec.emb_input;
  return o;
}

StatusOr<graph::Graph> BuildContractFunction(const model::Config& c, const model::Weights& w,
                                             const ContractSpec& spec) {
  FG_ASSIGN_OR_RETURN(Signature sig, GetSignature(spec.function, c, OptionsOf(spec)));
  const Function f = spec.function;
  const bool with_past = f == Function::kWithPast || f == Function::kPrefillWithPast;
  const int64_t p_sliding = spec.past;
  const int64_t p_global = spec.past_global.value_or(spec.past);
  for (int64_t p : {p_sliding, p_global}) {
    if (p < 0 && p != kDynamic) {
      return InvalidArgumentError("contract graph: past length " + std::to_string(p) +
                                  " is negative");
    }
  }
  // n: new rows of this call.
  const int64_t n = f == Function::kWithPast          ? 1
                    : f == Function::kPrefillWithPast ? spec.chunk
                                                      : spec.seq;
  auto past_of = [&](bool global) { return global ? p_global : p_sliding; };
  auto plus = [](int64_t p, int64_t k) { return p == kDynamic ? kDynamic : p + k; };

  Builder b;
  std::map<std::string, ValueId> arg;  // signature argument -> input value
  for (const Arg& a : sig.args) {
    std::vector<int64_t> shape = a.shape;
    const int64_t layer = a.layer;
    if (layer >= 0) {
      shape[2] = past_of(c.IsGlobal(layer));
    } else if (a.name == "maskSliding" || a.name == "maskGlobal") {
      shape[3] = plus(past_of(a.name == "maskGlobal"), n);
    }
    arg[a.name] = b.Input(a.name, std::move(shape),
                          a.type == ArgType::kI32 ? ValueType::kI32 : ValueType::kF32);
  }

  // Embeddings: gathered from token_embd by id, or the `emb` input scaled the same way.
  ValueId embd_w = model::WeightValue(b, w.token_embd);
  ValueId x;
  if (spec.emb_input) {
    x = b.Scale("inp_embd", arg.at("emb"), c.embed_scale);
  } else {
    ValueId ids;
    if (f == Function::kRedecode || f == Function::kRedecodeAt) {
      ids = b.Reshape("tokens_flat", arg.at("tokens"), {n});
    } else {
      ids = arg.at(f == Function::kWithPast ? "token" : "tokens");
    }
    x = model::Embed(b, c, w, embd_w, ids);
  }

  ValueId pos;
  if (!with_past) pos = b.Iota("pos", n);
  const int64_t KV = c.n_kv_heads, D = c.head_dim;
  std::vector<ValueId> k_out(c.n_layers), v_out(c.n_layers);
  // [n, KV, D] rows -> the contract's [1, KV, n, D].
  auto to_contract = [&](Builder& b, int64_t l, ValueId x3, const char* what) {
    ValueId t = b.Transpose(Blk(l, (std::string(what) + "_t").c_str()), x3, {1, 0, 2});
    return b.Reshape(Blk(l, (std::string(what) + "_rows").c_str()), t, {1, KV, n, D});
  };
  auto core = [&](Builder& b, int64_t l, ValueId q, ValueId k, ValueId v) {
    const bool global = c.IsGlobal(l);
    if (with_past) {
      const std::string type = global ? "Global" : "Sliding";
      const ValueId cs = arg.at("cos" + type), sn = arg.at("sin" + type);
      q = b.RopeTable(Blk(l, "q_rope"), q, cs, sn);
      k = b.RopeTable(Blk(l, "k_rope"), k, cs, sn);
    } else {
      q = b.Rope(Blk(l, "q_rope"), q, pos, c.RopeBase(l));
      k = b.Rope(Blk(l, "k_rope"), k, pos, c.RopeBase(l));
    }
    k = to_contract(b, l, k, "k");
    v = to_contract(b, l, v, "v");
    std::optional<ValueId> mask;
    int64_t window = global ? 0 : c.sliding_window;
    if (with_past) {
      const std::string ln = "l" + std::to_string(l);
      k = b.Concat(Blk(l, "k_all"), arg.at(ln + ".k"), k, 2);
      v = b.Concat(Blk(l, "v_all"), arg.at(ln + ".v"), v, 2);
      window = 0;  // the caller trims sliding caches (with_past) or the mask limits (chunk)
      if (f == Function::kPrefillWithPast) mask = arg.at(global ? "maskGlobal" : "maskSliding");
    }
    k_out[l] = k;
    v_out[l] = v;
    return b.AttentionKV(Blk(l, "attn_out"), q, k, v, mask, c.query_scale, window);
  };
  x = model::BuildLayers(b, c, w, n, x, core);

  x = b.RmsNorm("result_norm", x, model::WeightValue(b, w.output_norm), c.rms_eps);
  ValueId head = model::LmHeadValue(b, w, embd_w);
  const bool all_rows = f == Function::kRedecode || f == Function::kPrefill;
  if (!all_rows && f != Function::kWithPast) {
    // The one-hot select: [1, n] x [n, H] -> [1, H], a plain matmul every backend lowers.
    x = b.Dot("result_selected", arg.at("select"), x);
  }
  ValueId logits = b.MatMul("result_output", x, head);
  ValueId am = b.Argmax("result_argmax", logits);

  // Results in signature order: K before V per layer, the token(s) last.
  for (const Arg& r : sig.results) {
    const int64_t layer = r.layer;
    ValueId id = am;
    if (layer >= 0) id = r.name.back() == 'k' ? k_out[layer] : v_out[layer];
    b.MarkOutput(id, r.name);
  }
  return b.Finish();
}

}  // namespace fg::exporter
