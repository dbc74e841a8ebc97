// The oracle: a deliberately naive, readable Gemma 3 forward pass (llama2.c style).
//
// Every weight is dequantized to f32 once at load (about 1.1 GB for the 270M). Each call runs
// the whole sequence from position 0 with no KV cache: causal masking, plus the sliding window
// on local layers. Dot products, norms and softmax accumulate in double. It is the reference
// for the kernels, the executor and the exporter, so it never gets optimized and it shares no
// code with them beyond the GGUF reader and the scalar DequantizeRow.
// ref: docs/model.md; llama.cpp src/models/gemma3.cpp.
#ifndef FGEMMA_REFERENCE_REFERENCE_H_
#define FGEMMA_REFERENCE_REFERENCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/gguf/reader.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/lora.h"

namespace fg::reference {

// Receives a named intermediate: `data` holds the tensor row-major with `shape`
// (outermost-first, the first dimension is always the token). Names follow the executor:
//   inp_embd                                 [n, hidden]   (embedding * sqrt(hidden))
//   blk.N.attn_norm                          [n, hidden]
//   blk.N.q / blk.N.k / blk.N.v              [n, heads, head_dim]  (projections)
//   blk.N.q_normed / blk.N.k_normed          [n, heads, head_dim]  (per-head RMS norm)
//   blk.N.q_rope / blk.N.k_rope              [n, heads, head_dim]  (after RoPE)
//   blk.N.attn_out                           [n, n_heads, head_dim] (softmax(qk)v, before Wo)
//   blk.N.attn_proj, attn_post_norm, attn_residual              [n, hidden]
//   blk.N.ffn_norm                           [n, hidden]
//   blk.N.ffn_gate, ffn_up, ffn_act          [n, ffn]       (ffn_act = gelu(gate) * up)
//   blk.N.ffn_down, ffn_post_norm, out       [n, hidden]    (out = residual after the FFN)
//   result_norm                              [rows, hidden] (only the rows whose logits
//   result_output                            [rows, vocab]   were asked for)
using DumpFn = std::function<void(std::string_view name, std::span<const float> data,
                                  std::span<const int64_t> shape)>;

class Reference {
 public:
  // Reads the config, binds and dequantizes every weight. The File may be closed afterwards.
  static StatusOr<std::unique_ptr<Reference>> Load(const gguf::File& file);
  static StatusOr<std::unique_ptr<Reference>> Open(const std::string& path);

  const model::Config& config() const { return config_; }

  // Folds a LoRA adapter into the f32 weights: W += s B A, s = adapter.Scale(pair, scale), in
  // double (the oracle for the graph's low-rank path). A token_embd pair changes the looked-up
  // rows only: a tied LM head keeps the base table (llama.cpp's build_inp_embd).
  Status AddLora(const model::LoraAdapter& adapter, float scale);

  // Logits [vocab] of row `position` of the sequence (-1: the last).
  StatusOr<std::vector<float>> Logits(std::span<const int32_t> tokens, int64_t position = -1);
  // Logits of several rows, [positions.size(), vocab] row-major, from one forward pass.
  StatusOr<std::vector<float>> LogitsAt(std::span<const int32_t> tokens,
                                        std::span<const int64_t> positions);
  // Logits of every row, [n, vocab] (meant for small vocabularies).
  StatusOr<std::vector<float>> AllLogits(std::span<const int32_t> tokens);
  // Greedy continuation: n_steps new tokens, each argmax (lowest id on ties) of a from-scratch
  // forward pass over prompt + the tokens so far.
  StatusOr<std::vector<int32_t>> Greedy(std::span<const int32_t> prompt, int n_steps);

  // Installs (or with nullptr removes) the intermediate-tensor hook.
  void SetDump(DumpFn fn) { dump_ = std::move(fn); }

 private:
  struct Layer {
    // f32 copies of the GGUF tensors, row-major with the same (outermost-first) shapes.
    std::vector<float> attn_norm, attn_q, attn_k, attn_v, attn_q_norm, attn_k_norm, attn_output,
        post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm;
  };

  Reference() = default;
  // Checks ids and length; runs all layers; returns the residual stream [n, hidden].
  StatusOr<std::vector<float>> Forward(std::span<const int32_t> tokens);
  void Dump(std::string_view name, const std::vector<float>& data,
            std::initializer_list<int64_t> shape) const;

  model::Config config_;
  std::vector<float> token_embd_;   // [vocab, hidden]
  std::vector<float> output_norm_;  // [hidden]
  std::vector<float> output_;       // [vocab, hidden]; empty when tied to token_embd_
  std::vector<Layer> layers_;
  DumpFn dump_;
};

}  // namespace fg::reference

#endif  // FGEMMA_REFERENCE_REFERENCE_H_
