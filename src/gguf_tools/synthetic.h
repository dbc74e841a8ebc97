// Deterministic random Gemma 3 GGUF files for tests and benchmarks: the real file's metadata
// keys, tensor names, tensor order and (for the 270m preset) its exact shapes and Q4_K_M type
// mix, with weights drawn from a seeded PRNG (identical bytes for the same spec on every
// platform) and a Gemma-shaped tokenizer (control tokens, FunctionGemma tokens at their real ids,
// 256 byte tokens, SentencePiece-style pieces with decreasing scores).
#ifndef FGEMMA_GGUF_TOOLS_SYNTHETIC_H_
#define FGEMMA_GGUF_TOOLS_SYNTHETIC_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/gguf/writer.h"
#include "src/tensor/dtype.h"

namespace fg::gguf {

struct SyntheticSpec {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 2;
  int64_t kv_heads = 1;
  int64_t head_dim = 32;
  int64_t ffn = 128;
  int64_t vocab = 640;
  int64_t window = 8;     // gemma3.attention.sliding_window
  int64_t context = 256;  // gemma3.context_length
  double rope_base_global = 1e6;  // gemma3.rope.freq_base
  double rope_base_local = 1e4;   // gemma3.rope.freq_base_swa, written only if asked
  bool write_rope_base_local = false;
  double eps = 1e-6;
  uint64_t seed = 1;
  uint64_t alignment = 32;  // general.alignment is written only when not 32
  std::string name = "fgemma synthetic";
  // general.file_type (llama_ftype); -1: derived from default_type (0 when every weight is F32).
  int64_t file_type = -1;
  // Type of every 2-D weight unless an override matches; norms are always F32.
  tensor::DType default_type = tensor::DType::kF32;
  // (pattern, type): the first pattern that is a substring of the tensor name wins
  // ("token_embd", "ffn_down", "blk.3.attn_v.").
  std::vector<std::pair<std::string, tensor::DType>> type_overrides;
  // Only the metadata (and a one-column token_embd.weight, whose rows are the vocabulary), no
  // weights: for checking a spec with the model loader's own rules (ConfigFromGguf) before
  // writing a whole model (fgemma mkmodel).
  bool metadata_only = false;
  // Called before each tensor is generated (index, count, name); for progress output.
  std::function<void(size_t index, size_t count, const std::string& name)> progress;
};

// Presets: "tiny" (2 layers, all local), "small" (6 layers: layer 5 is global), "270m" (the real
// FunctionGemma 270M shapes and Q4_K_M type mix).
StatusOr<SyntheticSpec> SyntheticPreset(std::string_view name);
std::vector<std::string> SyntheticPresetNames();

// The smallest vocabulary the synthetic tokenizer fits in (special, byte and base tokens).
int64_t MinSyntheticVocab();

// The tokenizer arrays the file gets (exposed for tokenizer tests).
struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama.cpp token types: 1 normal, 3 control, 4 user, 6 byte
};
StatusOr<SyntheticVocab> MakeSyntheticVocab(int64_t vocab, uint64_t seed);

// The type a tensor gets under `spec` (F32 for 1-D tensors).
tensor::DType SyntheticTensorType(const SyntheticSpec& spec, std::string_view name,
                                  size_t n_dims);

// Checks the spec and returns a writer holding the whole model (weights are generated when it
// writes). Errors: InvalidArgument naming the bad field or tensor.
StatusOr<Writer> BuildSyntheticGemma3(const SyntheticSpec& spec);
// BuildSyntheticGemma3 + an atomic write to `path`.
Status WriteSyntheticGemma3(const SyntheticSpec& spec, const std::string& path);

}  // namespace fg::gguf

#endif  // FGEMMA_GGUF_TOOLS_SYNTHETIC_H_
