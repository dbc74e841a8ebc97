// The CPU executor: runs a graph::Graph with fgemma's kernels.
//
// Create() resolves every weight by name, converts norm vectors to f32 once, and plans memory
// from value lifetimes: every computed value gets an offset in one arena, reused once its last
// reader has run (reshapes alias their input, cache writes alias their state). The arena is
// allocated once, so Run() allocates nothing.
//
// Two kernel sets (src/kernels/kernel_set.h): the active ISA's (SIMD, threaded) and the
// reference one (scalar twins, the double-accumulating reference matmul), so tests can hold
// every op to its oracle. The executor holds the one ExecOptions::reference picks.
#ifndef FGEMMA_EXEC_EXECUTOR_H_
#define FGEMMA_EXEC_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/graph/graph.h"
#include "src/kernels/kernel_set.h"
#include "src/tensor/dtype.h"

namespace fg::exec {

// A stored tensor the graph refers to by name.
struct WeightData {
  tensor::DType type = tensor::DType::kF32;
  std::vector<int64_t> shape;  // outermost-first
  const void* data = nullptr;
  size_t size_bytes = 0;
  // Optional: prepacked panels of a matmul weight (kernels::WeightMatrix::panels, panel_set).
  const uint8_t* panels = nullptr;
  const void* panel_set = nullptr;
};
using WeightResolver = std::function<StatusOr<WeightData>(std::string_view name)>;

struct ExecOptions {
  bool reference = false;  // scalar twins + reference matmul instead of the fast kernels
  // The activation arena is the caller's (UseArena), e.g. one shared by executors that never
  // run at the same time: Create allocates none and Run fails until UseArena.
  bool external_arena = false;
};

// Called after each node with the value's name, shape and contents (f32 values only).
using DumpFn = std::function<void(std::string_view name, const std::vector<int64_t>& shape,
                                  std::span<const float> data)>;

// The arena plan of a graph, computable without weights or memory (sizes in 64 bits even in a
// 32-bit build): `fgemma invoke --stats` and tests read it.
struct MemoryPlan {
  uint64_t arena_bytes = 0;      // peak of the activation arena
  std::vector<uint64_t> offset;  // by value id; UINT64_MAX: not in the arena
  int largest_value = -1;        // the biggest value the arena holds (input or computed)
  uint64_t largest_bytes = 0;
  int64_t max_scores = 0;        // attention score floats per thread
};
MemoryPlan PlanMemory(const graph::Graph& graph);

class Executor {
 public:
  static StatusOr<std::unique_ptr<Executor>> Create(graph::Graph graph,
                                                    const WeightResolver& weights,
                                                    ThreadPool* pool, ExecOptions options = {});
  ~Executor();

  const graph::Graph& graph() const { return graph_; }

  // Inputs are copied in; the caller's buffer can go away afterwards.
  Status SetInput(std::string_view name, std::span<const int32_t> data);
  Status SetInput(std::string_view name, std::span<const float> data);
  // States are the caller's buffers (KV caches), read and written in place by Run().
  Status BindState(std::string_view name, float* data, size_t elements);

  void SetDump(DumpFn fn) { dump_ = std::move(fn); }

  Status Run();

  // Outputs of the last Run() by output name (graph::Graph::output_names()); valid until the
  // next Run().
  StatusOr<std::span<const float>> OutputF32(std::string_view name) const;
  StatusOr<std::span<const int32_t>> OutputI32(std::string_view name) const;

  // Bytes of the activation arena (the peak of planned scratch memory).
  size_t arena_bytes() const { return arena_bytes_; }
  // With external_arena: puts the computed values and inputs at `base` (aligned to 64 bytes,
  // at least arena_bytes() long, owned by the caller and outliving the executor or the next
  // UseArena). Inputs must be set again afterwards; outputs of runs before it are gone, and so
  // are they whenever another user of the same memory runs.
  Status UseArena(uint8_t* base, size_t bytes);

 private:
  explicit Executor(const kernels::KernelSet& kernels)
      : kernels_(kernels), ops_(&kernels.element) {}
  Status Plan();
  void PlaceArena(uint8_t* base);  // ptr_ of the arena's values at base + offset_
  void RebindAliases();            // ptr_ of aliases from their inputs
  int FindOutput(std::string_view name) const;  // value id of an output name, or -1
  Status CopyInput(std::string_view name, graph::ValueType type, const void* data, size_t count);
  // RunNode dispatches to one Run<Op> per op.
  Status RunNode(const graph::Node& node);
  Status RunEmbedding(const graph::Node& n);
  Status RunRmsNorm(const graph::Node& n);
  Status RunMatMul(const graph::Node& n);
  Status RunRope(const graph::Node& n);  // rope and rope_back
  Status RunCacheWrite(const graph::Node& n);
  Status RunAttention(const graph::Node& n);
  Status RunGeluMul(const graph::Node& n);
  Status RunAdd(const graph::Node& n);
  Status RunSelectRows(const graph::Node& n);
  Status RunArgmax(const graph::Node& n);
  Status RunIota(const graph::Node& n);
  Status RunScale(const graph::Node& n);
  Status RunTranspose(const graph::Node& n);
  Status RunConcat(const graph::Node& n);
  Status RunRopeTable(const graph::Node& n);
  Status RunAttentionKV(const graph::Node& n);
  Status RunDot(const graph::Node& n);
  Status RunLowRank(const graph::Node& n);
  Status RunRmsNormBack(const graph::Node& n);
  Status RunCacheRead(const graph::Node& n);
  Status RunAttentionBack(const graph::Node& n);
  Status RunGeluMulBack(const graph::Node& n);
  Status RunScatterRows(const graph::Node& n);
  Status RunCrossEntropy(const graph::Node& n);  // cross_entropy and its backward
  Status RunDotTN(const graph::Node& n);
  Status RunCandidateLogits(const graph::Node& n);  // candidate_logits and its backward
  Status RunHeadCrossEntropyBack(const graph::Node& n);
  // Every key the queries at pos read is still in a ring of R rows (and no position is < 0).
  static Status CheckKeysInRing(const int32_t* pos, int64_t S, int64_t window, int64_t R);
  float* F32(int value) const { return reinterpret_cast<float*>(ptr_[value]); }
  int32_t* I32(int value) const { return reinterpret_cast<int32_t*>(ptr_[value]); }

  graph::Graph graph_;
  ThreadPool* pool_ = nullptr;
  ExecOptions options_;
  const kernels::KernelSet& kernels_;  // GetKernelSet(ActiveIsa()) or ReferenceKernelSet()
  const kernels::ElementOps* ops_;     // &kernels_.element
  std::vector<WeightData> weight_data_;      // by value id (kStored values only)
  std::vector<std::vector<float>> norm_f32_;  // by value id: non-F32 norm vectors, converted
  std::vector<uint8_t*> ptr_;                // by value id: where the value lives
  std::vector<size_t> offset_;               // by value id: arena offset (computed values)
  std::vector<bool> state_bound_;
  std::unique_ptr<uint8_t[]> arena_;  // empty with external_arena
  size_t arena_bytes_ = 0;
  bool has_arena_ = false;            // ptr_ of arena values is set
  bool aliases_stale_ = false;        // a state was bound since the last RebindAliases
  DumpFn dump_;
  std::vector<int64_t> transpose_scratch_;  // kTranspose: input strides, output index
  // RoPE tables of the current run, keyed by (positions value, base).
  struct RopeCache {
    int pos_value = -1;
    double base = 0;
    std::vector<float> cos, sin;
  };
  std::vector<RopeCache> rope_cache_;
  // The tables of (positions value, base), made on first use in a run.
  StatusOr<const RopeCache*> RopeTables(int pos_value, double base, int64_t S, int64_t D);
  std::vector<float> rope_neg_sin_;  // rope_back's inverse rotation
  // attention_back: query chunks, each adding into its own K/V gradient.
  static constexpr int64_t kAttentionBackChunks = 4;
  std::vector<float> scores_;  // attention scores: scores_stride_ floats per thread
  int64_t scores_stride_ = 0;  // cache length x query heads per KV head (largest attention)
};

// Activation memory shared by executors that never run at the same time (a session's, a
// batcher's). Fit(e, all) makes it large enough for `e` and moves `e` onto it; when it has to
// grow, every executor of `all` (those already on it) is moved to the new block first (none may
// hold results anyone still reads).
class SharedArena {
 public:
  template <typename Executors>
  Status Fit(Executor& e, const Executors& all) {
    if (e.arena_bytes() > capacity_) {
      FG_RETURN_IF_ERROR(Grow(e.arena_bytes()));
      for (Executor* other : all) FG_RETURN_IF_ERROR(other->UseArena(base_, capacity_));
    }
    return e.UseArena(base_, capacity_);
  }
  size_t capacity() const { return capacity_; }

 private:
  Status Grow(size_t bytes);
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* base_ = nullptr;  // storage_ aligned to 64 bytes
  size_t capacity_ = 0;
};

}  // namespace fg::exec

#endif  // FGEMMA_EXEC_EXECUTOR_H_
