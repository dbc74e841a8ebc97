// The Gemma 3 forward pass as a graph: the one place the model is written.
//
// BuildForward makes the session's function: S new tokens at given positions against
// per-layer KV caches held as states, logits only for the requested rows (the LM head is never
// applied to rows nobody reads, so no S x vocab value exists unless asked for).
//   inputs:  tokens i32 [S], pos i32 [S], logit_rows i32 [R] (when R > 0)
//   states:  blk.N.k_cache, blk.N.v_cache  f32 [rows, n_kv_heads, head_dim]; a global layer's
//            cache holds positions 0..rows-1, a sliding layer's is a ring (row = pos % rows)
//   outputs: result_output f32 [R, vocab] (when R > 0), result_argmax i32 [R] (when asked);
//            result_norm f32 [R, hidden] instead when lm_head is false
// Value names follow llama.cpp's graph callbacks where they exist (inp_embd, result_norm,
// result_output) and blk.N.<stage> otherwise; `fgemma run --dump` prints them.
#ifndef FGEMMA_MODEL_GEMMA3_FORWARD_H_
#define FGEMMA_MODEL_GEMMA3_FORWARD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fgemma/status.h"
#include "src/graph/graph.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/weights.h"

namespace fg::model {

struct ForwardSpec {
  int64_t n_tokens = 1;         // S
  int64_t n_logit_rows = 1;     // R: rows of the last hidden state that get logits (0: none)
  bool argmax = false;          // also output the argmax of each logit row
  // false: stop after the final norm and output result_norm f32 [R, hidden] instead of logits
  // (the caller applies the LM head to the vocabulary rows it needs, e.g. a grammar's few
  // allowed tokens).
  bool lm_head = true;
  int64_t global_cache_rows = 0;  // capacity of a global layer's cache (>= max position + 1)
  int64_t local_cache_rows = 0;   // ring rows of a sliding layer (>= window + S - 1)
};

// Rows a sliding layer's ring needs so that a chunk of `max_chunk` tokens never overwrites a
// key one of its own queries still reads.
inline int64_t LocalCacheRows(const Config& c, int64_t max_chunk, int64_t context) {
  int64_t rows = c.sliding_window + max_chunk - 1;
  return rows < context ? rows : context;
}

// "blk.<layer>.<what>": the name of a per-layer value (llama.cpp's spelling).
std::string Blk(int64_t layer, const char* what);
std::string KCacheName(int64_t layer);
std::string VCacheName(int64_t layer);

// The pieces every Gemma 3 graph shares (the session's graph here, the contract's functions in
// src/export/contract_graphs.cc), so the layers are written once.
//
// The attention core of layer `layer`: q [S, n_heads, D] and k [S, n_kv_heads, D] after their
// per-head norms (before RoPE), v [S, n_kv_heads, D]; returns the attention output
// [S, n_heads * D] (before the output projection).
using AttentionCore = std::function<graph::ValueId(
    graph::Builder& b, int64_t layer, graph::ValueId q, graph::ValueId k, graph::ValueId v)>;
// The decoder layers over x f32 [S, hidden] (the scaled embeddings); returns the last layer's
// output. Values are named blk.N.<stage>. Errors (a shape, weights with another layer count
// than the config) are kept by the builder, as all of these functions' are.
graph::ValueId BuildLayers(graph::Builder& b, const Config& config, const Weights& weights,
                           int64_t n_tokens, graph::ValueId x, const AttentionCore& core);
// The scaled token embeddings "inp_embd" f32 [S, hidden] of `tokens` (token_embd's value
// `embd_w`), with the weights' LoRA adapters of token_embd applied to the looked-up rows.
graph::ValueId Embed(graph::Builder& b, const Config& config, const Weights& weights,
                     graph::ValueId embd_w, graph::ValueId tokens);
// A stored tensor as a graph weight, by its GGUF name.
graph::ValueId WeightValue(graph::Builder& b, const gguf::TensorInfo* t);
// The LM head weight: token_embd's value `embd` when tied, else `output.weight`.
graph::ValueId LmHeadValue(graph::Builder& b, const Weights& weights, graph::ValueId embd);

StatusOr<graph::Graph> BuildForward(const Config& config, const Weights& weights,
                                    const ForwardSpec& spec);

// One forward pass over several sessions' new tokens (continuous batching, src/runtime/
// step_batcher.h): every matmul runs once over all their rows (the weights are read once per
// step), the attention core per sequence on that sequence's own caches. Because every kernel's
// arithmetic for a row does not depend on the other rows, a sequence's results are bit for bit
// those BuildForward gives it alone.
//   inputs:  tokens i32 [S], pos i32 [S] (S = the sum of n_tokens, the sequences in order),
//            logit_rows i32 [R] (R = the sum of max(1, head_rows): rows of the S whose final
//            hidden state goes on), full_rows i32 [F] (when F = the sum of head_rows > 0: rows
//            of the R that get logits)
//   states:  BatchKCacheName(l, i), BatchVCacheName(l, i) per layer l and sequence i, shaped as
//            BuildForward's
//   outputs: result_norm f32 [R, hidden]; result_output f32 [F, vocab] when F > 0
struct BatchSequence {
  int64_t n_tokens = 1;
  int64_t head_rows = 0;  // logit rows of its last tokens (0: only the last one's hidden state)
};
struct BatchForwardSpec {
  std::vector<BatchSequence> sequences;
  int64_t global_cache_rows = 0;
  int64_t local_cache_rows = 0;
};
std::string BatchKCacheName(int64_t layer, int64_t sequence);
std::string BatchVCacheName(int64_t layer, int64_t sequence);
StatusOr<graph::Graph> BuildBatchedForward(const Config& config, const Weights& weights,
                                           const BatchForwardSpec& spec);

}  // namespace fg::model

#endif  // FGEMMA_MODEL_GEMMA3_FORWARD_H_
