// The training graph of a LoRA: the model's forward graph (model::BuildForward, the one model
// definition) with the loss and its backward pass (graph::AddBackward) appended.
//
//   inputs:  tokens i32 [S], pos i32 [S];
//            rows whose softmax covers the whole vocabulary (R of them, when R > 0):
//              logit_rows i32 [R] (the rows that predict a target), targets i32 [R] (the token
//              each row must predict; < 0: none);
//            rows whose softmax covers a few candidates (Rc of them, when Rc > 0; the tokens
//            the call grammar allows there, which is all constrained decoding chooses from):
//              cand_rows i32 [Rc], candidates i32 [Rc, C] (token ids; < 0: padding),
//              cand_targets i32 [Rc] (the target's index in its row's candidates; < 0: none);
//            loss_weights f32 [R + Rc] (each row's weight in the objective:
//              sum_r loss_weights[r] * loss[r])
//   states:  the KV caches, as the session's graph (a cached prefix is read from them; its
//            rows are constants)
//   outputs: loss f32 [R + Rc] (per row, -log p(target); the R whole-vocabulary rows first),
//            and per trainable tensor its gradient "grad.<graph name>" (A [r, n_in] and
//            B^T [r, n_out] of adapter 0, f32)
// Frozen quantized weights are crossed backwards through their transposes, served by the
// caller under graph::TransposedName(weight, transposed_type) (TransposedWeights below).
#ifndef FGEMMA_TRAIN_TRAIN_GRAPH_H_
#define FGEMMA_TRAIN_TRAIN_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fgemma/status.h"
#include "src/exec/executor.h"
#include "src/gguf/reader.h"
#include "src/graph/graph.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/weights.h"
#include "src/tensor/dtype.h"

namespace fg::train {

struct TrainGraphSpec {
  int64_t n_tokens = 1;          // S: tokens that pass forward and backward
  int64_t n_target_rows = 1;     // R: whole-vocabulary rows (may be 0 when Rc > 0)
  int64_t n_candidate_rows = 0;  // Rc: candidate rows
  int64_t n_candidates = 0;      // C: candidates per candidate row (when Rc > 0)
  int64_t global_cache_rows = 0;
  int64_t local_cache_rows = 0;
  tensor::DType transposed_type = tensor::DType::kQ8_0;  // the frozen weights' W^T
  // > 0: the whole-vocabulary rows' gradient reaches the hidden state through the LM-head rows
  // of the tokens with p >= head_threshold (at most head_max_tokens a row) and the head's mean
  // row for the rest (graph::SparseHead; served as HeadMeanName), not through the head's W^T.
  // 0: exactly, through W^T.
  float head_threshold = 0.0f;
  int64_t head_max_tokens = 0;
};

// The name under which the caller serves a weight's mean row (f32 [cols]; TransposedWeights).
std::string HeadMeanName(const std::string& weight);

// `weights.loras` must hold the trained adapter first (index 0); its tensors are the graph
// weights differentiated (model::LoraWeightName / LoraTransposedName of index 0).
StatusOr<graph::Graph> BuildTrainGraph(const model::Config& config, const model::Weights& weights,
                                       const TrainGraphSpec& spec);

// The graph names of the trained tensors of adapter 0 (A then B^T, per pair, in pair order).
std::vector<std::string> TrainedNames(const model::Weights& weights);

// The transposes W^T [K, N] of the frozen weights the backward pass multiplies by (every
// adapted projection's input side and the LM head, unless the sparse head gradient replaces
// it), made once from the base file: each row dequantized, transposed, quantized to `type`
// (F32: exact, for gradient checks); and the mean rows (HeadMeanName, f32) the graph asks for.
class TransposedWeights {
 public:
  static StatusOr<std::unique_ptr<TransposedWeights>> Make(const graph::Graph& train_graph,
                                                           const exec::WeightResolver& base,
                                                           tensor::DType type);
  // Serves the transposes by name, else asks `next`.
  exec::WeightResolver Resolver(exec::WeightResolver next) const;
  uint64_t bytes() const { return bytes_; }

 private:
  struct Tensor {
    std::vector<int64_t> shape;
    tensor::DType type;
    std::vector<uint8_t> data;
  };
  std::unordered_map<std::string, Tensor> tensors_;
  uint64_t bytes_ = 0;
};

}  // namespace fg::train

#endif  // FGEMMA_TRAIN_TRAIN_GRAPH_H_
