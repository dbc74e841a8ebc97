// Test helper: a double-precision interpreter of forward graphs (the oracle of the gradient
// checks: central finite differences of a graph's function, evaluated in double).
//
// It runs the ops training graphs use (input, weight, state, embedding, rms_norm, matmul,
// reshape, rope, cache_write, attention, gelu_mul, add, select_rows, scale, transpose, dot,
// low_rank, cross_entropy, dot_tn, iota, concat, candidate_logits) with the semantics of
// src/graph/graph.h and the executor (src/exec/executor.cc), every operation in double: stored
// weights are dequantized with kernels::DequantizeRow and widened; RoPE angles are pos *
// base^(-2i/D) (the formula of kernels::RopeTable, without its rounding of cos/sin to f32); gelu is
// the tanh form. Any other op is an Unimplemented error naming the value.
//
// States are the caller's values, copied at the start of every Run (cache writes change the
// copy), so runs do not depend on each other: f(x + h) and f(x - h) see the same caches.
#ifndef FGEMMA_TESTS_TESTING_GRAPH_DOUBLE_H_
#define FGEMMA_TESTS_TESTING_GRAPH_DOUBLE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fgemma/status.h"
#include "src/exec/executor.h"
#include "src/graph/graph.h"

namespace fg::testing {

class GraphDouble {
 public:
  // `graph` is copied; weights are resolved (and dequantized) lazily, on first use.
  GraphDouble(const graph::Graph& graph, exec::WeightResolver weights);

  Status SetInput(std::string_view name, std::span<const double> data);
  Status SetInput(std::string_view name, std::span<const float> data);
  Status SetInput(std::string_view name, std::span<const int32_t> data);
  Status SetState(std::string_view name, std::span<const double> data);
  Status SetState(std::string_view name, std::span<const float> data);
  // Replaces a weight's values (row-major, its graph shape), e.g. a parameter moved by +-h.
  Status OverrideWeight(std::string_view name, std::span<const double> data);
  // The weight's values as the interpreter uses them (dequantized, or the override).
  StatusOr<std::vector<double>> WeightValues(std::string_view name);

  // Evaluates the nodes in order up to the one that makes `until` (-1: every node).
  Status Run(int until = -1);
  // A value of the last Run (f32 values; i32 ones widened).
  StatusOr<std::vector<double>> Get(std::string_view name) const;
  StatusOr<std::vector<double>> Get(int value) const;

  const graph::Graph& graph() const { return graph_; }

 private:
  Status RunNode(const graph::Node& n);
  Status EnsureWeight(int id);
  const std::vector<double>& D(int id) const { return f_[id]; }

  graph::Graph graph_;
  exec::WeightResolver weights_;
  std::vector<std::vector<double>> f_;     // by value id: f32 values in double
  std::vector<std::vector<int32_t>> i_;    // by value id: i32 values
  std::vector<std::vector<double>> w_;     // by value id: weights (dequantized), or empty
  std::vector<std::vector<double>> state_; // by value id: the states' values before a run
  std::vector<bool> has_input_;
};

// The error of an analytic gradient `got` against finite differences `want`: the largest
// |got_i - want_i| / (|want_i| + floor), floor = 1% of max_j |want_j| (an element that is near 0
// by cancellation carries the absolute f32 rounding of its tensor's scale, not of itself).
double MaxGradError(std::span<const float> got, std::span<const double> want);

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_GRAPH_DOUBLE_H_
