#include "src/gguf_tools/synthetic.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>

#include "src/kernels/quant.h"

namespace fg::gguf {

namespace {

using tensor::DType;

// ref: the real gemma-3-270m GGUF (llama.cpp convert_hf_to_gguf.py, Gemma3Model).
constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kByte = 6;
constexpr int64_t kFirstByteToken = 238;
constexpr int64_t kFirstNormalToken = kFirstByteToken + 256;  // 494

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// Approximately N(0, 1): the Irwin-Hall sum of four 16-bit uniforms, rescaled to unit variance.
// Only integer arithmetic and exactly rounded float operations, so the bytes are the same with
// every compiler and libm (Box-Muller's log/cos are not correctly rounded everywhere, and
// std::normal_distribution differs between standard libraries).
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed) {}
  double Next() {
    uint64_t r = SplitMix64(state_);
    uint64_t s = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
    // Each term is uniform on [0, 65535]; (s + 2) / 65536 has mean 2 and variance ~1/3.
    double u = static_cast<double>(s + 2) * (1.0 / 65536.0) - 2.0;
    return u * 1.7320508075688772;  // sqrt(3)
  }

 private:
  uint64_t state_;
};

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // outermost-first
  enum Kind { kMatrix, kEmbedding, kNorm } kind;
};

std::vector<TensorPlan> Plan(const SyntheticSpec& s) {
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  // Same order as the real file: output_norm, token_embd, then each block's tensors sorted by
  // name.
  std::vector<TensorPlan> p = {
      {"output_norm.weight", {s.hidden}, TensorPlan::kNorm},
      {"token_embd.weight", {s.vocab, s.hidden}, TensorPlan::kEmbedding},
  };
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    p.push_back({b + "attn_k.weight", {kv, s.hidden}, TensorPlan::kMatrix});
    p.push_back({b + "attn_k_norm.weight", {s.head_dim}, TensorPlan::kNorm});
    p.push_back({b + "attn_norm.weight", {s.hidden}, TensorPlan::kNorm});
    p.push_back({b + "attn_output.weight", {s.hidden, q}, TensorPlan::kMatrix});
    p.push_back({b + "attn_q.weight", {q, s.hidden}, TensorPlan::kMatrix});
    p.push_back({b + "attn_q_norm.weight", {s.head_dim}, TensorPlan::kNorm});
    p.push_back({b + "attn_v.weight", {kv, s.hidden}, TensorPlan::kMatrix});
    p.push_back({b + "ffn_down.weight", {s.hidden, s.ffn}, TensorPlan::kMatrix});
    p.push_back({b + "ffn_gate.weight", {s.ffn, s.hidden}, TensorPlan::kMatrix});
    p.push_back({b + "ffn_norm.weight", {s.hidden}, TensorPlan::kNorm});
    p.push_back({b + "ffn_up.weight", {s.ffn, s.hidden}, TensorPlan::kMatrix});
    p.push_back({b + "post_attention_norm.weight", {s.hidden}, TensorPlan::kNorm});
    p.push_back({b + "post_ffw_norm.weight", {s.hidden}, TensorPlan::kNorm});
  }
  return p;
}

// Fills one tensor: rows of floats from the tensor's own PRNG stream, quantized row by row.
Status Generate(const TensorPlan& t, DType type, uint64_t seed, int64_t hidden,
                std::span<uint8_t> out) {
  const int64_t cols = t.shape.back();
  const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1;
  auto row_bytes = tensor::RowBytes(type, cols);
  if (!row_bytes || static_cast<uint64_t>(*row_bytes * rows) != out.size()) {
    return InternalError("synthetic: size mismatch");
  }
  uint64_t mix = seed ^ Fnv1a(t.name);
  Normal rng(SplitMix64(mix));
  double scale = 0.1;
  switch (t.kind) {
    case TensorPlan::kMatrix:
      scale = 1.0 / std::sqrt(static_cast<double>(cols));
      break;
    case TensorPlan::kEmbedding:
      // The model multiplies embeddings by sqrt(hidden): this keeps inputs near unit RMS/2.
      scale = 0.5 / std::sqrt(static_cast<double>(hidden));
      break;
    case TensorPlan::kNorm:
      scale = 0.1;  // GGUF Gemma norms hold 1 + w (added by the converter)
      break;
  }
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      double v = rng.Next() * scale;
      if (t.kind == TensorPlan::kNorm) v += 1.0;
      row[c] = static_cast<float>(v);
    }
    FG_RETURN_IF_ERROR(kernels::QuantizeRow(type, row.data(), out.data() + r * *row_bytes, cols));
  }
  return OkStatus();
}

// Gemma-like English pieces for the normal part of the vocabulary ("▁" marks a word start).
constexpr const char* kWords[] = {
    "the", "turn", "on", "off", "light", "lights", "set", "to", "a", "of", "and", "in", "is",
    "for", "call", "function", "kitchen", "living", "room", "bedroom", "temperature", "degrees",
    "timer", "minutes", "play", "music", "send", "message", "weather", "what", "please", "get",
    "current", "location", "city", "alarm", "at", "tomorrow", "today", "open", "close", "door",
    "volume", "up", "down", "name", "value", "true", "false", "it", "me", "my", "you", "can",
    "be", "with", "this", "that", "from", "by", "are", "was", "will", "how", "when", "where",
};
constexpr const char* kInnerPieces[] = {"in", "er", "on", "he", "re", "en", "at", "or", "es",
                                        "an", "it", "is", "al", "ar", "le", "th", "ing", "ed",
                                        "ion", "ly", "st", "nd", "ou", "ch", "ent"};

// llama_ftype "MOSTLY_<type>" (ref: llama.cpp include/llama.h enum llama_ftype).
std::optional<uint32_t> FileTypeOf(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ4_K: return 15;  // Q4_K_M
    case DType::kQ5_K: return 17;  // Q5_K_M
    case DType::kQ6_K: return 18;
    case DType::kIQ4_NL: return 25;
    case DType::kBF16: return 32;
    default: return std::nullopt;
  }
}

}  // namespace

int64_t MinSyntheticVocab() { return kFirstNormalToken + 1 + 26 + 94; }

StatusOr<SyntheticVocab> MakeSyntheticVocab(int64_t vocab, uint64_t seed) {
  if (vocab < MinSyntheticVocab() || vocab > (int64_t{1} << 24)) {
    return InvalidArgumentError("synthetic vocab must be " + std::to_string(MinSyntheticVocab()) +
                                ".." + std::to_string(int64_t{1} << 24) + ", got " +
                                std::to_string(vocab));
  }
  SyntheticVocab v;
  std::set<std::string> seen;
  auto add = [&](std::string tok, float score, int32_t type) {
    if (static_cast<int64_t>(v.tokens.size()) >= vocab || !seen.insert(tok).second) return;
    v.tokens.push_back(std::move(tok));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  int unused = 0;
  auto add_unused = [&]() { add("<unused" + std::to_string(unused++) + ">", -1000.f, kControl); };
  // ids 0..5, then <unusedN> up to 45.
  for (const char* t : {"<pad>", "<eos>", "<bos>", "<unk>", "<mask>"}) add(t, -1000.f, kControl);
  add("[multimodal]", -1000.f, kUserDefined);
  while (v.tokens.size() < 46) add_unused();
  // FunctionGemma's function-calling tokens at their real ids 46..52.
  for (const char* t : {"<start_function_declaration>", "<end_function_declaration>",
                        "<start_function_call>", "<end_function_call>",
                        "<start_function_response>", "<end_function_response>", "<escape>"}) {
    add(t, -1000.f, kControl);
  }
  unused += 7;  // the real vocabulary's <unused40..46> became the tokens above
  while (v.tokens.size() < 105) add_unused();
  add("<start_of_turn>", -1000.f, kControl);
  add("<end_of_turn>", -1000.f, kControl);
  // 107.. runs of newlines (user-defined, as in the real file), then more unused slots.
  for (int n = 1; n <= 31; ++n) add(std::string(n, '\n'), -1000.f, kUserDefined);
  while (static_cast<int64_t>(v.tokens.size()) < kFirstByteToken) add_unused();
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    add(buf, 0.f, kByte);
  }
  // Normal pieces, most frequent first, score -0, -1, -2, ... like the real file.
  float score = 0.f;
  auto normal = [&](const std::string& t) {
    size_t before = v.tokens.size();
    add(t, -score, kNormal);
    if (v.tokens.size() != before) score += 1.f;
  };
  const std::string kSp = "\xe2\x96\x81";  // U+2581, SentencePiece's space
  normal(kSp);
  for (char c = 'a'; c <= 'z'; ++c) normal(kSp + c);
  for (char c = '!'; c <= '~'; ++c) normal(std::string(1, c));
  for (const char* p : kInnerPieces) normal(p);
  // Every prefix of each word, so SentencePiece merges can reach the whole word.
  for (const char* w : kWords) {
    std::string word = kSp + w;
    for (size_t n = kSp.size() + 2; n <= word.size(); ++n) normal(word.substr(0, n));
  }
  // Pad with deterministic pseudo-words.
  uint64_t state = seed ^ 0x5eed70c3ull;
  while (static_cast<int64_t>(v.tokens.size()) < vocab) {
    uint64_t r = SplitMix64(state);
    int len = 2 + static_cast<int>(r % 7);
    std::string w = (r >> 8) & 1 ? kSp : "";
    for (int k = 0; k < len; ++k) w += static_cast<char>('a' + (r >> (12 + 5 * k)) % 26);
    normal(w);
  }
  return v;
}

std::vector<std::string> SyntheticPresetNames() { return {"tiny", "small", "270m"}; }

StatusOr<SyntheticSpec> SyntheticPreset(std::string_view name) {
  SyntheticSpec s;
  s.name = "fgemma synthetic " + std::string(name);
  if (name == "tiny") {
    return s;  // the defaults
  }
  if (name == "small") {
    s.layers = 6;  // Gemma 3's fixed pattern makes layer l global iff l % 6 == 5
    s.hidden = 128;
    s.heads = 4;
    s.kv_heads = 1;
    s.head_dim = 64;
    s.ffn = 256;
    s.vocab = 1024;
    s.window = 16;
    s.context = 512;
    return s;
  }
  if (name == "270m") {
    s.layers = 18;
    s.hidden = 640;
    s.heads = 4;
    s.kv_heads = 1;
    s.head_dim = 256;
    s.ffn = 2048;
    s.vocab = 262144;
    s.window = 512;
    s.context = 32768;
    s.default_type = DType::kQ5_0;
    s.file_type = 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M, as in the real file
    // llama.cpp's Q4_K_M mix (ref: llama.cpp src/llama-quant.cpp, use_more_bits): attn_v and
    // ffn_down get more bits on layers i < n/8, i >= 7n/8 and (i - n/8) % 3 == 2.
    const int64_t n = s.layers;
    for (int64_t i = 0; i < n; ++i) {
      bool more = i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
      std::string b = "blk." + std::to_string(i) + ".";
      s.type_overrides.push_back({b + "attn_v.", more ? DType::kQ8_0 : DType::kQ5_0});
      s.type_overrides.push_back({b + "ffn_down.", more ? DType::kQ6_K : DType::kQ4_K});
    }
    s.type_overrides.push_back({"token_embd", DType::kQ8_0});
    s.type_overrides.push_back({"attn_output", DType::kQ4_K});
    return s;
  }
  return InvalidArgumentError("unknown preset '" + std::string(name) +
                              "' (expected tiny, small or 270m)");
}

DType SyntheticTensorType(const SyntheticSpec& spec, std::string_view name, size_t n_dims) {
  if (n_dims < 2) return DType::kF32;
  for (const auto& [pattern, type] : spec.type_overrides) {
    if (name.find(pattern) != std::string_view::npos) return type;
  }
  return spec.default_type;
}

StatusOr<Writer> BuildSyntheticGemma3(const SyntheticSpec& spec) {
  struct Field {
    const char* name;
    int64_t value, max;
  };
  for (const Field& f : {Field{"layers", spec.layers, 1024}, Field{"hidden", spec.hidden, 1 << 16},
                         Field{"heads", spec.heads, 1024}, Field{"kv_heads", spec.kv_heads, 1024},
                         Field{"head_dim", spec.head_dim, 4096}, Field{"ffn", spec.ffn, 1 << 18},
                         Field{"window", spec.window, 1 << 24},
                         Field{"context", spec.context, 1 << 24}}) {
    if (f.value < 1 || f.value > f.max) {
      return InvalidArgumentError("synthetic spec: " + std::string(f.name) + " must be 1.." +
                                  std::to_string(f.max) + ", got " + std::to_string(f.value));
    }
  }
  if (spec.heads % spec.kv_heads != 0) {
    return InvalidArgumentError("synthetic spec: heads (" + std::to_string(spec.heads) +
                                ") must be a multiple of kv_heads (" +
                                std::to_string(spec.kv_heads) + ")");
  }
  if (!(spec.eps > 0) || !(spec.rope_base_global > 0) || !(spec.rope_base_local > 0)) {
    return InvalidArgumentError("synthetic spec: eps and rope bases must be positive");
  }
  FG_ASSIGN_OR_RETURN(SyntheticVocab vocab, MakeSyntheticVocab(spec.vocab, spec.seed));

  Writer w(spec.alignment);
  const bool quantized = [&] {
    for (const TensorPlan& t : Plan(spec)) {
      if (SyntheticTensorType(spec, t.name, t.shape.size()) != DType::kF32) return true;
    }
    return false;
  }();
  w.SetString("general.architecture", "gemma3");
  w.SetString("general.type", "model");
  w.SetString("general.name", spec.name);
  w.SetUint32("gemma3.context_length", static_cast<uint32_t>(spec.context));
  w.SetUint32("gemma3.embedding_length", static_cast<uint32_t>(spec.hidden));
  w.SetUint32("gemma3.block_count", static_cast<uint32_t>(spec.layers));
  w.SetUint32("gemma3.feed_forward_length", static_cast<uint32_t>(spec.ffn));
  w.SetUint32("gemma3.attention.head_count", static_cast<uint32_t>(spec.heads));
  w.SetFloat32("gemma3.attention.layer_norm_rms_epsilon", static_cast<float>(spec.eps));
  w.SetUint32("gemma3.attention.key_length", static_cast<uint32_t>(spec.head_dim));
  w.SetUint32("gemma3.attention.value_length", static_cast<uint32_t>(spec.head_dim));
  w.SetFloat32("gemma3.rope.freq_base", static_cast<float>(spec.rope_base_global));
  if (spec.write_rope_base_local) {
    w.SetFloat32("gemma3.rope.freq_base_swa", static_cast<float>(spec.rope_base_local));
  }
  w.SetUint32("gemma3.attention.sliding_window", static_cast<uint32_t>(spec.window));
  w.SetUint32("gemma3.attention.head_count_kv", static_cast<uint32_t>(spec.kv_heads));
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetString("tokenizer.ggml.pre", "default");
  w.SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", vocab.scores);
  w.SetInt32Array("tokenizer.ggml.token_type", vocab.types);
  w.SetUint32("tokenizer.ggml.bos_token_id", 2);
  w.SetUint32("tokenizer.ggml.eos_token_id", 1);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 3);
  w.SetUint32("tokenizer.ggml.padding_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_sep_token", false);
  w.SetBool("tokenizer.ggml.add_eos_token", false);
  w.SetBool("tokenizer.ggml.add_space_prefix", false);
  if (quantized) w.SetUint32("general.quantization_version", 2);
  if (spec.file_type >= 0) {
    w.SetUint32("general.file_type", static_cast<uint32_t>(spec.file_type));
  } else if (auto ft = FileTypeOf(quantized ? spec.default_type : DType::kF32)) {
    w.SetUint32("general.file_type", *ft);
  }

  std::vector<TensorPlan> plan = Plan(spec);
  for (size_t k = 0; k < plan.size(); ++k) {
    const TensorPlan& t = plan[k];
    DType type = SyntheticTensorType(spec, t.name, t.shape.size());
    if (!tensor::RowBytes(type, t.shape.back())) {
      return InvalidArgumentError(
          "synthetic: tensor '" + t.name + "': row size " + std::to_string(t.shape.back()) +
          " is not a multiple of the " + std::string(tensor::DTypeName(type)) + " block size " +
          std::to_string(tensor::Info(type).block_elems) + " (choose another --type)");
    }
    if (spec.metadata_only) continue;
    auto progress = spec.progress;
    uint64_t seed = spec.seed;
    int64_t hidden = spec.hidden;
    size_t count = plan.size();
    FG_RETURN_IF_ERROR(w.AddTensorGenerated(
        t.name, type, t.shape, [t, type, seed, hidden, progress, k, count](std::span<uint8_t> out) {
          if (progress) progress(k, count, t.name);
          return Generate(t, type, seed, hidden, out);
        }));
  }
  if (spec.metadata_only) {
    // The loader reads the vocabulary from the embedding's rows: one column stands for it.
    FG_RETURN_IF_ERROR(w.AddTensor("token_embd.weight", DType::kF32, {spec.vocab, 1},
                                   std::vector<uint8_t>(static_cast<size_t>(spec.vocab) * 4)));
  }
  return w;
}

Status WriteSyntheticGemma3(const SyntheticSpec& spec, const std::string& path) {
  FG_ASSIGN_OR_RETURN(Writer w, BuildSyntheticGemma3(spec));
  return w.WriteFile(path);
}

}  // namespace fg::gguf
