// The graph IR: a model function as a list of named values and the ops that make them.
//
// The Gemma 3 model is written once as graph construction (src/model/gemma3/); the CPU
// executor (src/exec/) runs graphs and the StableHLO emitter (src/export/) lowers them, so the
// two cannot drift apart. The op set is closed: every `switch (op)` over OpKind has no
// `default`, so a new op cannot be half-added (each op has a shape rule here, a reference and
// a fast kernel in the executor, and a lowering in the emitter).
//
// Shapes are outermost-first. Every value carries a name (`blk.3.attn_out`) used by dumps and
// error messages. Builders return StatusOr so shape errors surface as Status, never aborts.
#ifndef FGEMMA_GRAPH_GRAPH_H_
#define FGEMMA_GRAPH_GRAPH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fgemma/status.h"
#include "src/tensor/dtype.h"

namespace fg::graph {

enum class OpKind {
  kInput,       // external input (tokens, positions, row ids); attr: none
  kWeight,      // a stored tensor, by GGUF name; any dtype; never computed
  kState,       // external mutable state (KV cache), f32, updated in place by kCacheWrite
  kEmbedding,   // (weight [V,H], ids i32 [S]) -> f32 [S,H]; rows gathered and multiplied by `scale`
  kRmsNorm,     // (x [..,N], w f32 [N]) -> [..,N]; over the last dim; attr eps
  kMatMul,      // (x f32 [S,K], w [N,K]) -> f32 [S,N]; w stored, any supported dtype
  kReshape,     // (x) -> same elements, new shape (a view)
  kRope,        // (x f32 [S,heads,D], pos i32 [S]) -> same; split-half rotation; attr base
  kCacheWrite,  // (cache state [R,KV,D], x f32 [S,KV,D], pos i32 [S]) -> state; row pos % R
  kAttention,   // (q f32 [S,Hq,D], kcache [R,KV,D], vcache [R,KV,D], pos i32 [S]) -> [S,Hq*D]
                // query at p sees keys at positions p-W+1..p (W = attr window, 0: 0..p),
                // each at row (key position % R) of the caches; attr scale, window.
                // The keys all queries of one call read must fit in R rows (checked at run
                // time: the ring must not have overwritten any of them).
  kGeluMul,     // (gate, up) -> gelu_tanh(gate) * up, elementwise, same shape
  kAdd,         // (a, b) -> a + b, same shape
  kSelectRows,  // (x [S,N], rows i32 [R]) -> [R,N]; rows[i] in [0,S)
  kArgmax,      // (x [R,N]) -> i32 [R]; first index of the maximum
};

std::string_view OpName(OpKind op);

enum class ValueType { kF32, kI32, kStored };  // kStored: a weight in its file dtype

struct Value {
  std::string name;
  std::vector<int64_t> shape;
  ValueType type = ValueType::kF32;
  tensor::DType stored_dtype = tensor::DType::kF32;  // for kStored
  int producer = -1;  // index of the node that makes it
  int64_t elements() const;
};

struct Node {
  OpKind op = OpKind::kInput;
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
  // Attributes (meaning per op, see OpKind).
  float f0 = 0.0f;          // eps (RmsNorm), scale (Embedding, Attention)
  double base = 0.0;        // RoPE base
  int64_t window = 0;       // Attention
};

class Graph {
 public:
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Value& value(int id) const { return values_[id]; }
  // Inputs / weights / states / outputs in the order they were declared.
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& weights() const { return weights_; }
  const std::vector<int>& states() const { return states_; }
  const std::vector<int>& outputs() const { return outputs_; }
  // Value id by name, or -1.
  int Find(std::string_view name) const;

 private:
  friend class Builder;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_, weights_, states_, outputs_;
  std::unordered_map<std::string, int> by_name_;
};

// Builds a graph op by op, checking shapes. Each method returns the new value's id.
class Builder {
 public:
  StatusOr<int> Input(std::string name, std::vector<int64_t> shape, ValueType type);
  StatusOr<int> Weight(std::string name, std::vector<int64_t> shape, tensor::DType dtype);
  StatusOr<int> State(std::string name, std::vector<int64_t> shape);
  StatusOr<int> Embedding(std::string name, int weight, int ids, float scale);
  StatusOr<int> RmsNorm(std::string name, int x, int w, float eps);
  StatusOr<int> MatMul(std::string name, int x, int w);
  StatusOr<int> Reshape(std::string name, int x, std::vector<int64_t> shape);
  StatusOr<int> Rope(std::string name, int x, int pos, double base);
  StatusOr<int> CacheWrite(std::string name, int cache, int x, int pos);
  StatusOr<int> Attention(std::string name, int q, int kcache, int vcache, int pos, float scale,
                          int64_t window);
  StatusOr<int> GeluMul(std::string name, int gate, int up);
  StatusOr<int> Add(std::string name, int a, int b);
  StatusOr<int> SelectRows(std::string name, int x, int rows);
  StatusOr<int> Argmax(std::string name, int x);
  Status MarkOutput(int value);

  // Hands over the finished graph (the builder is empty afterwards).
  Graph Finish();

 private:
  StatusOr<int> Add(OpKind op, std::string name, std::vector<int> inputs,
                    std::vector<int64_t> shape, ValueType type, Node attrs = {});
  Status CheckId(int id, std::string_view what) const;
  Graph g_;
};

// "[2, 640]".
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace fg::graph

#endif  // FGEMMA_GRAPH_GRAPH_H_
