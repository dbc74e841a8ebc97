// Test helper: model configurations the export/contract tests share, so every test means the
// same model by the same name.
#ifndef FGEMMA_TESTS_TESTING_CONFIGS_H_
#define FGEMMA_TESTS_TESTING_CONFIGS_H_

#include "src/model/gemma3/config.h"

namespace fg::testing {

// The hyperparameters of Gemma 3 270M (no weights): 18 layers, one KV head, window 512.
inline model::Config Gemma270mConfig() {
  model::Config c;
  c.n_layers = 18;
  c.hidden = 640;
  c.n_heads = 4;
  c.n_kv_heads = 1;
  c.head_dim = 256;
  c.ffn = 2048;
  c.vocab = 262144;
  c.context_length = 32768;
  c.sliding_window = 512;
  c.query_scale = 1.0f / 16.0f;  // query_pre_attn_scalar 256
  c.embed_scale = 25.298221f;    // sqrtf(640)
  return c;
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_CONFIGS_H_
