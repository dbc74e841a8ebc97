// Reverse mode over the graph IR: appends the gradient of a loss to a graph.
//
// AddBackward walks the nodes backwards from `loss` and applies one rule per op (the table in
// backward.cc: a reader can scan it op by op), adding the backward ops of graph.h
// (rms_norm_back, rope_back, attention_back, ...) and the forward ones they reuse (matmul,
// low_rank, dot_tn, scale, reshape, add). Gradients flow only where they lead to a value in
// `wrt`; two paths into one value are added. What may be differentiated: f32 inputs and
// stored f32 weights used by matmul or low_rank (a LoRA's A and B^T). Frozen weights stay
// frozen: a gradient through matmul(x, W) with a quantized W is matmul(dy, W^T), where W^T is
// a stored weight the caller serves (`transposed`: its name and type; f32 weights use low_rank
// with W itself). States (KV caches) are constants; cache_write passes its rows' gradient to
// the rows written; candidate_logits (a few LM-head rows per row) passes dx on through
// candidate_logits_back, the head frozen; cross_entropy over a frozen quantized head's full
// product may take head_cross_entropy_back (BackwardSpec::sparse_head); concat along a leading axis
// passes each operand its slice. An op without a rule (argmax, the contract's other ops, concat
// along an inner axis, the backward ops themselves) on a gradient's path is an Unimplemented error
// naming the value.
#ifndef FGEMMA_GRAPH_BACKWARD_H_
#define FGEMMA_GRAPH_BACKWARD_H_

#include <functional>
#include <string>
#include <vector>

#include "fgemma/status.h"
#include "src/graph/graph.h"
#include "src/tensor/dtype.h"

namespace fg::graph {

// The stored transpose [K, N] of a frozen weight [N, K].
struct TransposedWeight {
  std::string name;
  tensor::DType type = tensor::DType::kF32;
};

// cross_entropy(matmul(x, W)) with W frozen and quantized, the logits read by nothing else:
// with a threshold, dx comes from head_cross_entropy_back (the rows of W whose tokens carry
// the softmax's mass, W's mean row for the rest) instead of cross_entropy_back's [R,V] and a
// product with W^T. The mean row is a stored f32 [D] weight the caller serves, named by `mean`.
struct SparseHead {
  float threshold = 0.0f;  // 0: off
  int64_t max_tokens = 0;
  std::function<std::string(const Value& head)> mean;
};

struct BackwardSpec {
  ValueId loss;              // an f32 value
  ValueId seed;              // d(objective)/d(loss): an f32 value of loss's shape (an input)
  std::vector<ValueId> wrt;  // f32 inputs or stored f32 weights
  std::function<TransposedWeight(const Value& weight)> transposed;
  std::string prefix = "grad.";  // gradient values are named prefix + the value's name
  SparseHead sparse_head = {};
};

// Returns, for each value of spec.wrt, its gradient (same shape), named spec.prefix + its name.
// A wrt value the loss does not depend on is an InvalidArgument error, as is a builder that
// already holds an error; a shape error of the added ops is returned (and kept by `b`).
StatusOr<std::vector<ValueId>> AddBackward(Builder& b, const BackwardSpec& spec);

// The default TransposedWeight: "<name>^T" in `type`.
TransposedWeight TransposedName(const Value& weight, tensor::DType type);

}  // namespace fg::graph

#endif  // FGEMMA_GRAPH_BACKWARD_H_
