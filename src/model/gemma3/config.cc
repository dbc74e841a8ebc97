#include "src/model/gemma3/config.h"

#include <cmath>
#include <sstream>
#include <string>
#include <string_view>

namespace fg::model {
namespace {

// Sizes beyond these are not a Gemma 3 and would overflow products like n_heads * head_dim.
constexpr uint64_t kMaxDim = uint64_t{1} << 24;
constexpr uint64_t kMaxLayers = 4096;

std::string Key(std::string_view suffix) { return "gemma3." + std::string(suffix); }

Status WithKey(const Status& s, std::string_view key) {
  return s.WithContext("gemma3 config: key '" + std::string(key) + "'");
}

// A required positive integer <= max.
StatusOr<int64_t> RequiredDim(const gguf::File& f, std::string_view suffix,
                              uint64_t max = kMaxDim) {
  const std::string key = Key(suffix);
  auto v = f.GetUint(key);
  if (!v.ok()) {
    if (v.status().code() == StatusCode::kNotFound) {
      return NotFoundError("gemma3 config: missing key '" + key + "'");
    }
    return WithKey(v.status(), key);
  }
  if (*v == 0) return InvalidArgumentError("gemma3 config: key '" + key + "' is 0");
  if (*v > max) {
    return OutOfRangeError("gemma3 config: key '" + key + "' = " + std::to_string(*v) +
                           " exceeds " + std::to_string(max));
  }
  return static_cast<int64_t>(*v);
}

// An optional positive integer: `fallback` when absent.
StatusOr<int64_t> OptionalDim(const gguf::File& f, std::string_view suffix, int64_t fallback) {
  if (f.Find(Key(suffix)) == nullptr) return fallback;
  return RequiredDim(f, suffix);
}

StatusOr<double> OptionalFloat(const gguf::File& f, const std::string& key, double fallback) {
  if (f.Find(key) == nullptr) return fallback;
  auto v = f.GetFloat(key);
  if (!v.ok()) return WithKey(v.status(), key);
  return *v;
}

}  // namespace

std::string Config::ToString() const {
  std::ostringstream os;
  os << "gemma3 layers=" << n_layers << " hidden=" << hidden << " heads=" << n_heads
     << " kv_heads=" << n_kv_heads << " head_dim=" << head_dim << " ffn=" << ffn
     << " vocab=" << vocab << " ctx=" << context_length << " window=" << sliding_window
     << " eps=" << rms_eps << " rope_global=" << rope_base_global
     << " rope_local=" << rope_base_local << " q_scale=" << query_scale;
  return os.str();
}

StatusOr<Config> ConfigFromGguf(const gguf::File& file) {
  auto arch = file.GetString("general.architecture");
  if (!arch.ok()) {
    if (arch.status().code() == StatusCode::kNotFound) {
      return NotFoundError("gemma3 config: missing key 'general.architecture'");
    }
    return WithKey(arch.status(), "general.architecture");
  }
  if (*arch != "gemma3") {
    return UnimplementedError("gemma3 config: general.architecture is '" + std::string(*arch) +
                              "', expected 'gemma3'");
  }

  Config c;
  FG_ASSIGN_OR_RETURN(c.n_layers, RequiredDim(file, "block_count", kMaxLayers));
  FG_ASSIGN_OR_RETURN(c.hidden, RequiredDim(file, "embedding_length"));
  FG_ASSIGN_OR_RETURN(c.ffn, RequiredDim(file, "feed_forward_length"));
  FG_ASSIGN_OR_RETURN(c.n_heads, RequiredDim(file, "attention.head_count"));
  // llama.cpp defaults: head_count_kv = head_count, key_length = hidden / heads,
  // value_length = key_length (src/llama-model.cpp load_hparams).
  FG_ASSIGN_OR_RETURN(c.n_kv_heads, OptionalDim(file, "attention.head_count_kv", c.n_heads));
  FG_ASSIGN_OR_RETURN(c.head_dim, OptionalDim(file, "attention.key_length", c.hidden / c.n_heads));
  FG_ASSIGN_OR_RETURN(int64_t value_length,
                      OptionalDim(file, "attention.value_length", c.head_dim));
  FG_ASSIGN_OR_RETURN(c.context_length, RequiredDim(file, "context_length", uint64_t{1} << 32));

  // The window is read as a signed value so that a negative one is reported as such.
  {
    const std::string key = Key("attention.sliding_window");
    if (file.Find(key) == nullptr) {
      return NotFoundError("gemma3 config: missing key '" + key + "'");
    }
    auto w = file.GetInt(key);
    if (!w.ok()) return WithKey(w.status(), key);
    if (*w <= 0) {
      return InvalidArgumentError("gemma3 config: key '" + key + "' = " + std::to_string(*w) +
                                  " must be positive");
    }
    c.sliding_window = *w;
  }

  {
    const std::string key = Key("attention.layer_norm_rms_epsilon");
    if (file.Find(key) == nullptr) {
      return NotFoundError("gemma3 config: missing key '" + key + "'");
    }
    auto eps = file.GetFloat(key);
    if (!eps.ok()) return WithKey(eps.status(), key);
    if (!(*eps > 0.0 && *eps < 1.0)) {
      return InvalidArgumentError("gemma3 config: key '" + key + "' = " + std::to_string(*eps) +
                                  " is not in (0, 1)");
    }
    c.rms_eps = static_cast<float>(*eps);
  }

  FG_ASSIGN_OR_RETURN(c.rope_base_global, OptionalFloat(file, Key("rope.freq_base"), 1e6));
  FG_ASSIGN_OR_RETURN(c.rope_base_local, OptionalFloat(file, Key("rope.freq_base_swa"), 1e4));
  if (!(c.rope_base_global > 1.0) || !std::isfinite(c.rope_base_global)) {
    return InvalidArgumentError("gemma3 config: key 'gemma3.rope.freq_base' = " +
                                std::to_string(c.rope_base_global) + " must be > 1");
  }
  if (!(c.rope_base_local > 1.0) || !std::isfinite(c.rope_base_local)) {
    return InvalidArgumentError("gemma3 config: key 'gemma3.rope.freq_base_swa' = " +
                                std::to_string(c.rope_base_local) + " must be > 1");
  }

  // Gemma 3 4B and larger scale global-layer RoPE positions (linear, factor 8); the oracle and
  // kernels implement unscaled RoPE only, so such files are refused rather than run wrongly.
  {
    FG_ASSIGN_OR_RETURN(double factor, OptionalFloat(file, Key("rope.scaling.factor"), 1.0));
    if (factor != 1.0 && factor != 0.0) {
      return UnimplementedError("gemma3 config: key 'gemma3.rope.scaling.factor' = " +
                                std::to_string(factor) + ": RoPE scaling is not supported");
    }
  }

  if (value_length != c.head_dim) {
    return InvalidArgumentError("gemma3 config: attention.key_length (" +
                                std::to_string(c.head_dim) + ") != attention.value_length (" +
                                std::to_string(value_length) + ")");
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return InvalidArgumentError(
        "gemma3 config: attention.head_count (" + std::to_string(c.n_heads) +
        ") is not a multiple of attention.head_count_kv (" + std::to_string(c.n_kv_heads) + ")");
  }
  if (c.head_dim % 2 != 0) {
    return InvalidArgumentError("gemma3 config: attention.key_length (" +
                                std::to_string(c.head_dim) + ") must be even for RoPE");
  }
  if (c.q_dim() > static_cast<int64_t>(kMaxDim)) {
    return OutOfRangeError("gemma3 config: head_count * key_length = " + std::to_string(c.q_dim()) +
                           " is too large");
  }

  // The vocabulary is the number of embedding rows, not tokenizer metadata: fine-tunes that
  // add tokens have 262153 rows while some metadata still says 262144.
  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return NotFoundError("gemma3 config: missing tensor 'token_embd.weight'");
  if (embd->shape.size() != 2 || embd->shape[0] <= 0) {
    return InvalidArgumentError(
        "gemma3 config: tensor 'token_embd.weight' must be 2-D "
        "[vocab, hidden]");
  }
  c.vocab = embd->shape[0];

  // ref: llama.cpp src/llama-model.cpp, LLM_ARCH_GEMMA3: the 27B (62 layers) scales by
  // 1/sqrt(n_embd / n_head); every other size by 1/sqrt(n_embd_head_k).
  const double scale_dim = c.n_layers == 62 ? static_cast<double>(c.hidden / c.n_heads)
                                            : static_cast<double>(c.head_dim);
  c.query_scale = 1.0f / std::sqrt(static_cast<float>(scale_dim));
  c.embed_scale = std::sqrt(static_cast<float>(c.hidden));
  return c;
}

}  // namespace fg::model
