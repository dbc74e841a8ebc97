// The graph IR: a model function as a list of named values and the ops that make them.
//
// The Gemma 3 model is written once as graph construction (src/model/gemma3/); the CPU
// executor (src/exec/) runs graphs and the StableHLO emitter (src/export/) lowers them, so the
// two cannot drift apart. The op set is closed: every `switch (op)` over OpKind has no
// `default`, so a new op cannot be half-added (each op has a shape rule here, a reference and
// a fast kernel in the executor, and a lowering in the emitter).
//
// Shapes are outermost-first. Every value carries a name (`blk.3.attn_out`) used by dumps and
// error messages. The builder keeps the first shape error and Finish() returns it, so graph
// construction reads like the model (no check after every op) and errors surface as a Status,
// never an abort.
#ifndef FGEMMA_GRAPH_GRAPH_H_
#define FGEMMA_GRAPH_GRAPH_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/tensor/dtype.h"

namespace fg::graph {

enum class OpKind {
  kInput,       // external input (tokens, positions, row ids); attr: none
  kWeight,      // a stored tensor, by GGUF name; any dtype; never computed
  kState,       // external mutable state (KV cache), f32, updated in place by kCacheWrite
  kEmbedding,   // (weight [V,H], ids i32 [S]) -> f32 [S,H]; rows gathered, times attr scale
  kRmsNorm,     // (x [..,N], w f32 [N]) -> [..,N]; over the last dim; attr eps
  kMatMul,      // (x f32 [S,K], w [N,K]) -> f32 [S,N]; w stored, any supported dtype
  kReshape,     // (x) -> same elements, new shape (a view)
  kRope,        // (x f32 [S,heads,D], pos i32 [S]) -> same; split-half rotation; attr rope_base
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
  // Ops of the compiled-graph contract (docs/contract.md; src/export/contract_graphs.h).
  kIota,         // () -> i32 [N]: 0, 1, ..., N-1 (the positions of a graph without a past)
  kScale,        // (x f32) -> x * attr scale, same shape (the sqrt(H) of an embeddings input)
  kTranspose,    // (x) -> x with dims permuted: out.shape[i] = x.shape[perm[i]]; attr perm
  kConcat,       // (a, b) -> a then b along attr axis; the other dims equal
  kRopeTable,    // (x f32 [S,heads,D], cos f32 [S,D], sin f32 [S,D]) -> [S,heads,D]:
                 // x*cos + swap_halves(x)*sin (the contract's tables carry the sign), per head
  kAttentionKV,  // (q f32 [S,Hq,D], k f32 [1,KV,T,D], v f32 [1,KV,T,D] [, mask f32 [1,Hq,S,T]])
                 // -> f32 [S,Hq*D]; query head h reads KV head h / (Hq/KV); scores * attr
                 // scale. Without a mask, query i sits at key index T-S+i and sees keys
                 // T-S+i-window+1 .. T-S+i (window 0: 0 .. T-S+i). With a mask (window must be
                 // 0), all T keys with the mask added to the scores (-1e30: masked).
  kDot,          // (a f32 [M,K], b f32 [K,N]) -> f32 [M,N]: a plain f32 matmul (one-hot select)
  kLowRank,      // (x f32 [S,K], w stored f32 [K,N] [, y f32 [S,N]]) -> y + scale x w (no y: 0):
                 // a LoRA's projections (w = A or B transposed), scale and add, fused; each
                 // output element sums its K products in order, so a token's result does not
                 // depend on the batch
  // Ops of the backward pass (src/graph/backward.h; training only, never exported).
  kRmsNormBack,    // (x [..,N], w f32 [N], dy) -> dx of rms_norm(x, w) (w frozen); attr eps
  kRopeBack,       // (dy f32 [S,heads,D], pos i32 [S]) -> dx: the inverse rotation; attr rope_base
  kCacheRead,      // (cache [R,KV,D], pos i32 [S]) -> f32 [S,KV,D]: rows pos % R (cache_write's
                   // gradient for its rows)
  kAttentionBack,  // (q, kcache, vcache, pos, dout f32 [S,Hq*D]) -> f32 [S*Hq*D + 2*R*KV*D]:
                   // dq, then d kcache and d vcache (zero outside the rows read); attrs as
                   // attention, and written_keys_only. Read the parts with slice.
  kSlice,          // (x) -> x's elements offset .. offset+n-1 as attr shape (a view); attr offset
  kGeluMulBack,    // (gate, up, dy) -> d gate (attr operand 0) or d up (operand 1)
  kScatterRows,    // (dy f32 [R,N], rows i32 [R]) -> f32 [S,N] (S = attr n_rows): zeros, then
                   // dy's row i added to row rows[i] (select_rows' gradient)
  kCrossEntropy,   // (logits f32 [R,V], targets i32 [R]) -> f32 [R]: -log softmax(row)[target];
                   // a negative target gives 0 (a row without a target)
  kCrossEntropyBack,      // (logits, targets, dloss f32 [R]) -> f32 [R,V]:
                          // dloss[r] (softmax(row) - onehot(target)); rows without a target: 0
  kDotTN,                 // (a f32 [K,M], b f32 [K,N]) -> f32 [M,N] = a^T b (weight gradients)
  kCandidateLogits,       // (x f32 [R,D], w [V,D] stored, ids i32 [R,C]) -> f32 [R,C]:
                          // x[r] . w[ids[r,c]] (w dequantized to f32), a few LM-head rows per
                          // row; ids[r,c] < 0: kMaskedLogit (a padding candidate)
  kCandidateLogitsBack,   // (w, ids, dy f32 [R,C]) -> f32 [R,D]: sum_c dy[r,c] w[ids[r,c]]
                          // (padding candidates skipped)
  kHeadCrossEntropyBack,  // (w [V,D] stored, mean f32 [D] stored, logits f32 [R,V], targets,
                          // loss f32 [R] (the cross_entropy's own), dloss) -> f32 [R,D]:
                          // dx of cross_entropy(x w^T) over the tokens
                          // that carry the softmax's mass (kernels::HeadCrossEntropyBackRow:
                          // p >= threshold, at most max_tokens, mean for the rest); rows
                          // without a target: 0. attrs threshold, max_tokens
};

// The logit of a padding candidate: softmax gives it 0 (finite, so no inf - inf).
inline constexpr float kMaskedLogit = -1e30f;

// A dimension only known when the graph runs (the past length P of the with-past functions).
// Shape rules pass it through; the executor refuses graphs that still have one.
inline constexpr int64_t kDynamic = -1;
bool HasDynamic(const std::vector<int64_t>& shape);

std::string_view OpName(OpKind op);

// A value of a graph under construction: the builder hands these out and takes them back, never
// plain ints, so a size or an attribute cannot be passed where a value is meant. A default
// ValueId names no value; builder ops return one once the builder holds an error. It converts
// to its index, which is how a finished Graph's tables (Node::inputs, Graph::inputs(), the
// executor's per-value arrays) refer to values.
class ValueId {
 public:
  constexpr ValueId() = default;
  constexpr explicit ValueId(int index) : index_(index) {}
  constexpr int index() const { return index_; }
  constexpr bool valid() const { return index_ >= 0; }
  constexpr operator int() const { return index_; }  // NOLINT: the index into the graph's tables
  friend constexpr bool operator==(ValueId, ValueId) = default;

 private:
  int index_ = -1;
};

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
  // Attributes, each by its name; an op sets and reads only those its OpKind comment names.
  float eps = 0.0f;           // rms_norm, rms_norm_back
  float scale = 0.0f;         // embedding, attention, attention_kv, attention_back, scale,
                              // low_rank
  double rope_base = 0.0;     // rope, rope_back
  int64_t window = 0;         // attention, attention_kv, attention_back
  int64_t axis = 0;           // concat
  std::vector<int64_t> perm;  // transpose
  int64_t offset = 0;         // slice: the first element
  int64_t operand = 0;        // gelu_mul_back: 0 d gate, 1 d up
  int64_t n_rows = 0;         // scatter_rows: the output's rows
  float threshold = 0.0f;     // head_cross_entropy_back: the least p of a token read
  int64_t max_tokens = 0;     // head_cross_entropy_back: tokens read per row at most
  // attention_back: d kcache / d vcache only for keys at positions >= the first query's (the
  // rows the cache_write before the attention wrote; older rows, a state, stay 0)
  bool written_keys_only = false;
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
  // The name each output is known by (the value's name unless MarkOutput gave another: a
  // contract result "l0.k" whose input is also called "l0.k").
  const std::vector<std::string>& output_names() const { return output_names_; }
  // The value named `name`, or an invalid ValueId.
  ValueId Find(std::string_view name) const;

 private:
  friend class Builder;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_, weights_, states_, outputs_;
  std::vector<std::string> output_names_;
  std::unordered_map<std::string, int> by_name_;
};

// Builds a graph op by op, checking shapes. Each op returns the new value's id. The first
// error (a shape rule broken, a duplicate name, an id of no value) is kept: from then on every
// op returns an invalid ValueId and adds nothing, and Finish() returns that error. So a model
// is written as straight-line construction and checked once, at Finish().
class Builder {
 public:
  Builder() = default;
  // Goes on building `g` (a finished graph: the backward pass appends to the forward).
  explicit Builder(Graph g) : g_(std::move(g)) {}
  // The graph so far.
  const Graph& graph() const { return g_; }
  // The first error so far (OK while every op has succeeded).
  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Fails the build with `error` unless it has already failed (the first error is kept), for a
  // caller's own checks during construction; returns an invalid ValueId.
  ValueId Fail(Status error);

  ValueId Input(std::string name, std::vector<int64_t> shape, ValueType type);
  ValueId Weight(std::string name, std::vector<int64_t> shape, tensor::DType dtype);
  ValueId State(std::string name, std::vector<int64_t> shape);
  ValueId Embedding(std::string name, ValueId weight, ValueId ids, float scale);
  ValueId RmsNorm(std::string name, ValueId x, ValueId w, float eps);
  ValueId MatMul(std::string name, ValueId x, ValueId w);
  ValueId Reshape(std::string name, ValueId x, std::vector<int64_t> shape);
  ValueId Rope(std::string name, ValueId x, ValueId pos, double base);
  ValueId CacheWrite(std::string name, ValueId cache, ValueId x, ValueId pos);
  ValueId Attention(std::string name, ValueId q, ValueId kcache, ValueId vcache, ValueId pos,
                    float scale, int64_t window);
  ValueId GeluMul(std::string name, ValueId gate, ValueId up);
  ValueId Add(std::string name, ValueId a, ValueId b);
  ValueId SelectRows(std::string name, ValueId x, ValueId rows);
  ValueId Argmax(std::string name, ValueId x);
  ValueId Iota(std::string name, int64_t n);
  ValueId Scale(std::string name, ValueId x, float scale);
  ValueId Transpose(std::string name, ValueId x, std::vector<int64_t> perm);
  ValueId Concat(std::string name, ValueId a, ValueId b, int64_t axis);
  ValueId RopeTable(std::string name, ValueId x, ValueId cos, ValueId sin);
  // No mask: causal from the end, with `window`.
  ValueId AttentionKV(std::string name, ValueId q, ValueId k, ValueId v,
                      std::optional<ValueId> mask, float scale, int64_t window);
  ValueId Dot(std::string name, ValueId a, ValueId b);
  ValueId LowRank(std::string name, ValueId x, ValueId w, float scale,
                  std::optional<ValueId> y = {});
  // Backward-pass ops (see OpKind).
  ValueId RmsNormBack(std::string name, ValueId x, ValueId w, ValueId dy, float eps);
  ValueId RopeBack(std::string name, ValueId dy, ValueId pos, double base);
  ValueId CacheRead(std::string name, ValueId cache, ValueId pos);
  ValueId AttentionBack(std::string name, const Node& attention, ValueId dout,
                        bool written_keys_only = false);
  ValueId Slice(std::string name, ValueId x, int64_t offset, std::vector<int64_t> shape);
  ValueId GeluMulBack(std::string name, ValueId gate, ValueId up, ValueId dy, int64_t operand);
  ValueId ScatterRows(std::string name, ValueId dy, ValueId rows, int64_t n_rows);
  ValueId CrossEntropy(std::string name, ValueId logits, ValueId targets);
  ValueId CrossEntropyBack(std::string name, ValueId logits, ValueId targets, ValueId dloss);
  ValueId DotTN(std::string name, ValueId a, ValueId b);
  ValueId CandidateLogits(std::string name, ValueId x, ValueId w, ValueId ids);
  ValueId CandidateLogitsBack(std::string name, ValueId w, ValueId ids, ValueId dy);
  ValueId HeadCrossEntropyBack(std::string name, ValueId w, ValueId mean, ValueId logits,
                               ValueId targets, ValueId loss, ValueId dloss, float threshold,
                               int64_t max_tokens);
  // `name` empty: the value's own name. Output names must be unique.
  void MarkOutput(ValueId value, std::string name = {});

  // Hands over the finished graph, or the build's first error (the builder is empty
  // afterwards either way).
  StatusOr<Graph> Finish();

 private:
  ValueId Add(OpKind op, std::string name, std::vector<int> inputs, std::vector<int64_t> shape,
              ValueType type, Node attrs = {});
  // Fails the build with op `op`'s shape error on value `name`.
  ValueId Refuse(std::string_view op, std::string_view name, const std::string& what);
  // False when the build has already failed, or (failing it) when an id names no value.
  bool Usable(std::string_view name, std::initializer_list<ValueId> ids);
  const Value& V(ValueId id) const { return g_.values_[id.index()]; }
  Graph g_;
  Status status_;
};

// "[2, 640]".
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace fg::graph

#endif  // FGEMMA_GRAPH_GRAPH_H_
