#include "src/model/gemma3/weights.h"

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace fg::model {
namespace {

std::string ShapeString(std::span<const int64_t> shape) {
  std::string s = "{";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "}";
}

enum class Kind { kMatrix, kNorm };

// Finds `name` and checks its shape (outermost-first) and type.
StatusOr<const gguf::TensorInfo*> Bind(const gguf::File& file, const std::string& name,
                                       std::initializer_list<int64_t> shape, Kind kind) {
  const gguf::TensorInfo* t = file.FindTensor(name);
  if (t == nullptr) return NotFoundError("gemma3 weights: missing tensor '" + name + "'");
  const std::vector<int64_t> want(shape);
  if (t->shape != want) {
    return InvalidArgumentError("gemma3 weights: tensor '" + name + "' has shape " +
                                ShapeString(t->shape) + ", expected " + ShapeString(want));
  }
  const tensor::DTypeInfo& info = tensor::Info(t->type);
  if (!info.supported) {
    return UnimplementedError("gemma3 weights: tensor '" + name + "' has type " +
                              std::string(info.name) + ", which fgemma does not support");
  }
  if (kind == Kind::kNorm && !IsNormType(t->type)) {
    return UnimplementedError("gemma3 weights: norm tensor '" + name + "' has type " +
                              std::string(info.name) + "; expected F32, F16 or BF16");
  }
  // Rows must be whole blocks (a Q4_K row of 640 is not): the reader checks sizes, not this.
  if (!tensor::RowBytes(t->type, want.back()).has_value()) {
    return InvalidArgumentError("gemma3 weights: tensor '" + name + "' of type " +
                                std::string(info.name) + ": row length " +
                                std::to_string(want.back()) +
                                " is not a multiple of its block "
                                "size " +
                                std::to_string(info.block_elems));
  }
  return t;
}

}  // namespace

bool IsNormType(tensor::DType t) {
  return t == tensor::DType::kF32 || t == tensor::DType::kF16 || t == tensor::DType::kBF16;
}

StatusOr<Weights> BindWeights(const gguf::File& file, const Config& c) {
  Weights w;
  FG_ASSIGN_OR_RETURN(w.token_embd,
                      Bind(file, "token_embd.weight", {c.vocab, c.hidden}, Kind::kMatrix));
  FG_ASSIGN_OR_RETURN(w.output_norm, Bind(file, "output_norm.weight", {c.hidden}, Kind::kNorm));
  if (file.FindTensor("output.weight") != nullptr) {
    FG_ASSIGN_OR_RETURN(w.output, Bind(file, "output.weight", {c.vocab, c.hidden}, Kind::kMatrix));
  } else {
    w.output = w.token_embd;
  }

  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const int64_t H = c.hidden;
    FG_ASSIGN_OR_RETURN(L.attn_norm, Bind(file, p + "attn_norm.weight", {H}, Kind::kNorm));
    FG_ASSIGN_OR_RETURN(L.attn_q, Bind(file, p + "attn_q.weight", {c.q_dim(), H}, Kind::kMatrix));
    FG_ASSIGN_OR_RETURN(L.attn_k, Bind(file, p + "attn_k.weight", {c.kv_dim(), H}, Kind::kMatrix));
    FG_ASSIGN_OR_RETURN(L.attn_v, Bind(file, p + "attn_v.weight", {c.kv_dim(), H}, Kind::kMatrix));
    FG_ASSIGN_OR_RETURN(L.attn_q_norm,
                        Bind(file, p + "attn_q_norm.weight", {c.head_dim}, Kind::kNorm));
    FG_ASSIGN_OR_RETURN(L.attn_k_norm,
                        Bind(file, p + "attn_k_norm.weight", {c.head_dim}, Kind::kNorm));
    FG_ASSIGN_OR_RETURN(L.attn_output,
                        Bind(file, p + "attn_output.weight", {H, c.q_dim()}, Kind::kMatrix));
    FG_ASSIGN_OR_RETURN(L.post_attention_norm,
                        Bind(file, p + "post_attention_norm.weight", {H}, Kind::kNorm));
    FG_ASSIGN_OR_RETURN(L.ffn_norm, Bind(file, p + "ffn_norm.weight", {H}, Kind::kNorm));
    FG_ASSIGN_OR_RETURN(L.ffn_gate, Bind(file, p + "ffn_gate.weight", {c.ffn, H}, Kind::kMatrix));
    FG_ASSIGN_OR_RETURN(L.ffn_up, Bind(file, p + "ffn_up.weight", {c.ffn, H}, Kind::kMatrix));
    FG_ASSIGN_OR_RETURN(L.ffn_down, Bind(file, p + "ffn_down.weight", {H, c.ffn}, Kind::kMatrix));
    FG_ASSIGN_OR_RETURN(L.post_ffw_norm, Bind(file, p + "post_ffw_norm.weight", {H}, Kind::kNorm));
  }
  return w;
}

}  // namespace fg::model
