// Gemma 3 hyperparameters, read from GGUF metadata and validated once so every consumer
// (graph builder, executor, reference, exporter) can trust them.
// ref: llama.cpp src/llama-model.cpp (LLM_ARCH_GEMMA3 hparams), docs/model.md.
#ifndef FGEMMA_MODEL_GEMMA3_CONFIG_H_
#define FGEMMA_MODEL_GEMMA3_CONFIG_H_

#include <cstdint>
#include <string>

#include "fgemma/status.h"
#include "src/gguf/reader.h"

namespace fg::model {

// Every kGlobalLayerPeriod-th layer (5, 11, 17, ...) attends globally; the others use the sliding
// window. ref: llama.cpp hparams.set_swa_pattern(6).
inline constexpr int64_t kGlobalLayerPeriod = 6;

struct Config {
  int64_t n_layers = 0;
  int64_t hidden = 0;          // embedding_length
  int64_t n_heads = 0;         // query heads
  int64_t n_kv_heads = 0;      // key/value heads (GQA)
  int64_t head_dim = 0;        // key_length == value_length
  int64_t ffn = 0;             // feed_forward_length
  int64_t vocab = 0;           // rows of token_embd (fine-tunes add tokens past 262144)
  int64_t context_length = 0;  // trained context
  int64_t sliding_window = 0;  // keys visible to a sliding layer, the current one included
  float rms_eps = 1e-6f;
  double rope_base_global = 1e6;  // gemma3.rope.freq_base
  double rope_base_local = 1e4;   // gemma3.rope.freq_base_swa, 10 000 when absent
  // Multiplies q before q.k. 1/sqrt(head_dim) except for the 27B, where llama.cpp uses
  // 1/sqrt(hidden / n_heads) (HF query_pre_attn_scalar). ref: llama.cpp src/llama-model.cpp
  // `hparams.f_attention_scale` for LLM_ARCH_GEMMA3, applied in src/models/gemma3.cpp.
  float query_scale = 0.0f;
  // Embedding scale sqrt(hidden), computed in f32 as llama.cpp does (sqrtf(n_embd)).
  float embed_scale = 0.0f;

  // See kGlobalLayerPeriod.
  bool IsGlobal(int64_t layer) const {
    return layer % kGlobalLayerPeriod == kGlobalLayerPeriod - 1;
  }
  double RopeBase(int64_t layer) const {
    return IsGlobal(layer) ? rope_base_global : rope_base_local;
  }
  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  // Query heads per KV head: query head h reads KV head h / group_size().
  int64_t group_size() const { return n_heads / n_kv_heads; }

  // One line for logs and `fgemma inspect`.
  std::string ToString() const;
};

// Reads and validates the config. Errors name the offending key or tensor:
//   wrong architecture, a missing key, zero or absurd sizes, key_length != value_length,
//   n_heads not a multiple of n_kv_heads, a non-positive sliding window.
StatusOr<Config> ConfigFromGguf(const gguf::File& file);

}  // namespace fg::model

#endif  // FGEMMA_MODEL_GEMMA3_CONFIG_H_
