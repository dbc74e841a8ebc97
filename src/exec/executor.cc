#include "src/exec/executor.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

#include "src/kernels/attention.h"
#include "src/kernels/grad.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/matmul.h"
#include "src/kernels/ops.h"
#include "src/kernels/quant.h"
#include "src/tensor/half.h"

namespace fg::exec {

namespace {

using graph::Node;
using graph::OpKind;
using graph::Value;
using graph::ValueType;

constexpr size_t kAlign = 64;
// Every value is f32 or i32: 4 bytes an element.
constexpr int64_t kElementBytes = 4;
static_assert(sizeof(float) == kElementBytes && sizeof(int32_t) == kElementBytes);
// Elements per task of the element-wise ops.
constexpr int64_t kChunk = 4096;

// n rounded up to kAlign (sizes in uint64_t, addresses in uintptr_t).
template <typename T>
T AlignUp(T n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// In 64 bits even in a 32-bit build, so the planner can see sizes beyond the address space.
uint64_t ValueBytes(const Value& v) {
  return static_cast<uint64_t>(v.elements()) * kElementBytes;
}

bool IsAlias(OpKind op) {
  return op == OpKind::kReshape || op == OpKind::kCacheWrite || op == OpKind::kSlice;
}

// Runs fn(begin, end) over [0, n) on the pool when the work is large enough to pay for a job;
// ranges of at least `min_grain` items (but the last).
template <typename F>
void MaybeParallel(ThreadPool* pool, int64_t n, int64_t work_per_item, F&& fn,
                   int64_t min_grain = 1) {
  if (pool == nullptr || pool->size() == 1 || n * work_per_item < ThreadPool::kMinWork || n < 2) {
    fn(int64_t{0}, n);
    return;
  }
  pool->ParallelFor(n, fn, std::max(min_grain, ThreadPool::GrainFor(work_per_item)));
}

// Rows per range of the low_rank kernel's jobs: its blocks of 8 rows read each weight vector
// once for all 8, so a range of fewer rows reads the weight again per row (ranges of one row
// were 5.9 % of a per-app tune's cycles in `perf`).
constexpr int64_t kLowRankRows = 8;

// The attention ops' tasks: one per (query row, KV head, share of the KV head's `group` query
// heads). A group is split in shares only when there are fewer (row, KV head) pairs than threads.
int64_t AttentionSplits(int threads, int64_t rows, int64_t kv_heads, int64_t group) {
  return std::clamp<int64_t>(threads / (rows * kv_heads), 1, group);
}
struct AttentionTask {
  int64_t t, kvh;  // query row, KV head
  int64_t g0, gn;  // its query heads g0 .. g0 + gn - 1 within the group
};
AttentionTask AttentionTaskOf(int64_t i, int64_t kv_heads, int64_t group, int64_t splits) {
  const int64_t share = i % splits;
  const int64_t g0 = group * share / splits;
  return {i / (kv_heads * splits), i / splits % kv_heads, g0, group * (share + 1) / splits - g0};
}
// Runs task(begin, end, thread) over [0, tasks) (`work`: floats touched per task) on the pool
// when that pays; ranges are claimed by the pool's threads, `thread` picks the scores row.
template <typename F>
void RunAttentionTasks(ThreadPool* pool, int64_t tasks, int64_t work, F&& task) {
  if (pool == nullptr || pool->size() == 1 || tasks == 1 || tasks * work < ThreadPool::kMinWork) {
    task(int64_t{0}, tasks, 0);
  } else {
    pool->ParallelForThread(tasks, task, ThreadPool::GrainFor(work));
  }
}

// y [M,N] = a b in double, a's element (m, k) at a[m * sam + k * sak], b [K,N] row-major: the
// reference of dot (a [M,K]) and dot_tn (a [K,M] read transposed).
void ReferenceProduct(const float* a, int64_t sam, int64_t sak, const float* b, int64_t M,
                      int64_t K, int64_t N, float* y) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(a[m * sam + k * sak]) * b[k * N + j];
      y[m * N + j] = static_cast<float>(acc);
    }
  }
}

// A loss's targets: each below the vocabulary's V (negative: a row without one).
Status CheckTargets(const int32_t* t, int64_t R, int64_t V) {
  for (int64_t r = 0; r < R; ++r) {
    if (t[r] >= V) {
      return OutOfRangeError("exec: target " + std::to_string(t[r]) + " is outside [0, " +
                             std::to_string(V) + ")");
    }
  }
  return OkStatus();
}

}  // namespace

Executor::~Executor() = default;

StatusOr<std::unique_ptr<Executor>> Executor::Create(graph::Graph graph,
                                                     const WeightResolver& weights,
                                                     ThreadPool* pool, ExecOptions options) {
  std::unique_ptr<Executor> e(new Executor(
      options.reference ? kernels::ReferenceKernelSet() : kernels::ActiveKernelSet()));
  e->graph_ = std::move(graph);
  e->pool_ = pool;
  e->options_ = options;
  const auto& values = e->graph_.values();
  for (const Value& v : values) {
    if (graph::HasDynamic(v.shape)) {
      return InvalidArgumentError("exec: value '" + v.name + "' has a dynamic shape " +
                                  graph::ShapeString(v.shape) +
                                  " (build the graph with concrete sizes to run it)");
    }
  }
  e->weight_data_.resize(values.size());
  e->norm_f32_.resize(values.size());
  for (int id : e->graph_.weights()) {
    const Value& v = values[id];
    FG_ASSIGN_OR_RETURN(WeightData wd, weights(v.name));
    if (wd.shape != v.shape || wd.type != v.stored_dtype) {
      return InvalidArgumentError("exec: weight '" + v.name + "' is " +
                                  std::string(tensor::DTypeName(wd.type)) + " " +
                                  graph::ShapeString(wd.shape) + ", the graph expects " +
                                  std::string(tensor::DTypeName(v.stored_dtype)) + " " +
                                  graph::ShapeString(v.shape));
    }
    if (!tensor::Info(wd.type).supported || e->kernels_.type_ops(wd.type) == nullptr) {
      return UnimplementedError("exec: weight '" + v.name + "' has type " +
                                std::string(tensor::DTypeName(wd.type)) + ", which has no kernels");
    }
    e->weight_data_[id] = std::move(wd);
  }
  // Norm weights are read as f32 vectors: convert the rare F16/BF16 ones once.
  for (const Node& n : e->graph_.nodes()) {
    if (n.op != OpKind::kRmsNorm && n.op != OpKind::kRmsNormBack) continue;
    int w = n.inputs[1];
    if (!e->norm_f32_[w].empty()) continue;
    if (values[w].type != ValueType::kStored) continue;
    const WeightData& wd = e->weight_data_[w];
    if (wd.type == tensor::DType::kF32) continue;
    std::vector<float> f(values[w].elements());
    FG_RETURN_IF_ERROR(
        kernels::DequantizeRow(wd.type, wd.data, f.data(), static_cast<int64_t>(f.size()))
            .WithContext("exec: norm weight '" + values[w].name + "'"));
    e->norm_f32_[w] = std::move(f);
  }
  FG_RETURN_IF_ERROR(e->Plan());
  return e;
}

MemoryPlan PlanMemory(const graph::Graph& graph) {
  const auto& values = graph.values();
  const auto& nodes = graph.nodes();
  const int nv = static_cast<int>(values.size());
  const int nn = static_cast<int>(nodes.size());
  // The value whose storage a value uses (itself unless it is an alias).
  std::vector<int> root(nv);
  for (int i = 0; i < nv; ++i) root[i] = i;
  for (const Node& n : nodes) {
    if (IsAlias(n.op)) root[n.output] = root[n.inputs[0]];
  }
  std::vector<int> last_use(nv, -1);
  for (int i = 0; i < nn; ++i) {
    for (int in : nodes[i].inputs) last_use[root[in]] = std::max(last_use[root[in]], i);
    last_use[root[nodes[i].output]] = std::max(last_use[root[nodes[i].output]], i);
  }
  for (int out : graph.outputs()) last_use[root[out]] = nn;
  for (int in : graph.inputs()) last_use[in] = nn;  // inputs are set before Run()

  // Greedy first-fit over the node order, in 64-bit sizes even in a 32-bit build so a plan
  // beyond the address space is seen as such.
  struct Block {
    uint64_t off, size;
    int value;
  };
  MemoryPlan plan;
  std::vector<Block> live;
  plan.offset.assign(nv, UINT64_MAX);
  auto allocate = [&](int v) {
    uint64_t size = AlignUp(std::max<uint64_t>(ValueBytes(values[v]), 1));
    std::sort(live.begin(), live.end(), [](const Block& a, const Block& b) { return a.off < b.off; });
    uint64_t off = 0;
    for (const Block& b : live) {
      if (b.off >= off + size) break;
      off = std::max(off, b.off + b.size);
    }
    live.push_back({off, size, v});
    plan.offset[v] = off;
    plan.arena_bytes = std::max(plan.arena_bytes, off + size);
    if (plan.largest_value < 0 || ValueBytes(values[v]) > plan.largest_bytes) {
      plan.largest_value = v;
      plan.largest_bytes = ValueBytes(values[v]);
    }
  };
  for (int in : graph.inputs()) allocate(in);
  for (int i = 0; i < nn; ++i) {
    const Node& n = nodes[i];
    if (n.op != OpKind::kInput && n.op != OpKind::kWeight && n.op != OpKind::kState && !IsAlias(n.op)) {
      allocate(n.output);
    }
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Block& b) { return last_use[b.value] == i; }),
               live.end());
  }
  // Attention scores: per thread, one cache-length row per query head of a KV group.
  for (const Node& n : nodes) {
    if (n.op == OpKind::kAttention) {
      const int64_t group = values[n.inputs[0]].shape[1] / values[n.inputs[1]].shape[1];
      plan.max_scores = std::max(plan.max_scores, values[n.inputs[1]].shape[0] * group);
    } else if (n.op == OpKind::kAttentionKV) {
      // k is [1, KV, T, D]: T keys per query head of a group.
      const int64_t group = values[n.inputs[0]].shape[1] / values[n.inputs[1]].shape[1];
      plan.max_scores = std::max(plan.max_scores, values[n.inputs[1]].shape[2] * group);
    }
  }
  return plan;
}

Status Executor::Plan() {
  const auto& values = graph_.values();
  const int nv = static_cast<int>(values.size());
  MemoryPlan plan = PlanMemory(graph_);
  const uint64_t peak = plan.arena_bytes;
  const uint64_t threads = pool_ ? pool_->size() : 1;
  if (peak > SIZE_MAX - 2 * kAlign ||
      static_cast<uint64_t>(plan.max_scores) * threads > SIZE_MAX / sizeof(float)) {
    return ResourceExhaustedError("exec: " + std::to_string(peak) +
                                  " bytes of activation memory do not fit the address space");
  }
  scores_stride_ = plan.max_scores;
  scores_.resize(static_cast<size_t>(plan.max_scores * threads));  // small: rows of keys
  arena_bytes_ = static_cast<size_t>(peak);
  offset_.assign(nv, SIZE_MAX);
  for (int v = 0; v < nv; ++v) {
    if (plan.offset[v] != UINT64_MAX) offset_[v] = static_cast<size_t>(plan.offset[v]);
  }
  uint8_t* base = nullptr;
  if (!options_.external_arena) {
    arena_.reset(new (std::nothrow) uint8_t[std::max<size_t>(arena_bytes_, 1) + kAlign]);
    if (!arena_) {
      return ResourceExhaustedError("exec: cannot allocate " + std::to_string(peak) +
                                    " bytes of activation memory");
    }
    base = reinterpret_cast<uint8_t*>(AlignUp(reinterpret_cast<uintptr_t>(arena_.get())));
    has_arena_ = true;
  }
  ptr_.assign(nv, nullptr);
  state_bound_.assign(nv, false);
  if (base != nullptr) PlaceArena(base);
  for (int v = 0; v < nv; ++v) {
    if (values[v].type == ValueType::kStored) {
      ptr_[v] = const_cast<uint8_t*>(static_cast<const uint8_t*>(weight_data_[v].data));
      if (!norm_f32_[v].empty()) ptr_[v] = reinterpret_cast<uint8_t*>(norm_f32_[v].data());
    }
  }
  RebindAliases();
  return OkStatus();
}

void Executor::PlaceArena(uint8_t* base) {
  for (size_t v = 0; v < offset_.size(); ++v) {
    if (offset_[v] != SIZE_MAX) ptr_[v] = base + offset_[v];
  }
}

void Executor::RebindAliases() {
  // Aliases (reshapes, cache writes) share their input's storage; in node order, so an alias of
  // an alias follows.
  for (const Node& n : graph_.nodes()) {
    if (IsAlias(n.op)) {
      ptr_[n.output] =
          ptr_[n.inputs[0]] == nullptr
              ? nullptr
              : ptr_[n.inputs[0]] + (n.op == OpKind::kSlice ? n.offset * kElementBytes : 0);
    }
  }
}

Status Executor::UseArena(uint8_t* base, size_t bytes) {
  if (!options_.external_arena) {
    return FailedPreconditionError("exec: UseArena needs ExecOptions::external_arena");
  }
  if (base == nullptr || bytes < arena_bytes_ ||
      reinterpret_cast<uintptr_t>(base) % kAlign != 0) {
    return InvalidArgumentError("exec: the arena needs " + std::to_string(arena_bytes_) +
                                " bytes aligned to " + std::to_string(kAlign) + ", got " +
                                std::to_string(bytes));
  }
  PlaceArena(base);
  RebindAliases();
  has_arena_ = true;
  return OkStatus();
}

Status Executor::CopyInput(std::string_view name, ValueType type, const void* data, size_t count) {
  int id = graph_.Find(name);
  if (id < 0 || graph_.nodes()[graph_.value(id).producer].op != OpKind::kInput) {
    return NotFoundError("exec: no input named '" + std::string(name) + "'");
  }
  if (!has_arena_) return FailedPreconditionError("exec: no activation arena (UseArena)");
  const Value& v = graph_.value(id);
  if (v.type != type || static_cast<int64_t>(count) != v.elements()) {
    return InvalidArgumentError("exec: input '" + v.name + "' wants " +
                                std::to_string(v.elements()) +
                                (v.type == ValueType::kI32 ? " i32" : " f32") + " values, got " +
                                std::to_string(count) + (type == ValueType::kI32 ? " i32" : " f32"));
  }
  if (count > 0) std::memcpy(ptr_[id], data, count * kElementBytes);  // i32 and f32; P may be 0
  return OkStatus();
}

Status Executor::SetInput(std::string_view name, std::span<const int32_t> data) {
  return CopyInput(name, ValueType::kI32, data.data(), data.size());
}

Status Executor::SetInput(std::string_view name, std::span<const float> data) {
  return CopyInput(name, ValueType::kF32, data.data(), data.size());
}

Status Executor::BindState(std::string_view name, float* data, size_t elements) {
  int id = graph_.Find(name);
  if (id < 0 || graph_.nodes()[graph_.value(id).producer].op != OpKind::kState) {
    return NotFoundError("exec: no state named '" + std::string(name) + "'");
  }
  if (static_cast<int64_t>(elements) != graph_.value(id).elements()) {
    return InvalidArgumentError("exec: state '" + std::string(name) + "' has " +
                                std::to_string(graph_.value(id).elements()) + " elements, got " +
                                std::to_string(elements));
  }
  ptr_[id] = reinterpret_cast<uint8_t*>(data);
  state_bound_[id] = true;
  // Cache writes share the state's storage; rebound once before the next run, so binding many
  // states (a batch's caches, src/runtime/step_batcher.cc) costs one pass over the graph.
  aliases_stale_ = true;
  return OkStatus();
}

Status Executor::Run() {
  if (!has_arena_) return FailedPreconditionError("exec: no activation arena (UseArena)");
  for (int s : graph_.states()) {
    if (!state_bound_[s]) {
      return FailedPreconditionError("exec: state '" + graph_.value(s).name + "' is not bound");
    }
  }
  if (aliases_stale_) {
    RebindAliases();
    aliases_stale_ = false;
  }
  for (auto& rc : rope_cache_) rc.pos_value = -1;
  for (const Node& n : graph_.nodes()) {
    FG_RETURN_IF_ERROR(RunNode(n));
    if (dump_ && n.op != OpKind::kInput && n.op != OpKind::kWeight && n.op != OpKind::kState &&
        n.op != OpKind::kCacheWrite) {
      const Value& v = graph_.value(n.output);
      if (v.type == ValueType::kF32) {
        dump_(v.name, v.shape, {F32(n.output), static_cast<size_t>(v.elements())});
      }
    }
  }
  return OkStatus();
}

// One function per op; the switch has no default, so an op without a case is a compile warning
// (an error under -Werror).
Status Executor::RunNode(const Node& n) {
  switch (n.op) {
    case OpKind::kInput:
    case OpKind::kWeight:
    case OpKind::kState:
    case OpKind::kReshape:
    case OpKind::kSlice:
      return OkStatus();  // data already in place; reshapes and slices are views (RebindAliases)
    case OpKind::kEmbedding: return RunEmbedding(n);
    case OpKind::kRmsNorm: return RunRmsNorm(n);
    case OpKind::kMatMul: return RunMatMul(n);
    case OpKind::kRope:
    case OpKind::kRopeBack: return RunRope(n);
    case OpKind::kCacheWrite: return RunCacheWrite(n);
    case OpKind::kAttention: return RunAttention(n);
    case OpKind::kGeluMul: return RunGeluMul(n);
    case OpKind::kAdd: return RunAdd(n);
    case OpKind::kSelectRows: return RunSelectRows(n);
    case OpKind::kArgmax: return RunArgmax(n);
    case OpKind::kIota: return RunIota(n);
    case OpKind::kScale: return RunScale(n);
    case OpKind::kTranspose: return RunTranspose(n);
    case OpKind::kConcat: return RunConcat(n);
    case OpKind::kRopeTable: return RunRopeTable(n);
    case OpKind::kAttentionKV: return RunAttentionKV(n);
    case OpKind::kDot: return RunDot(n);
    case OpKind::kLowRank: return RunLowRank(n);
    case OpKind::kRmsNormBack: return RunRmsNormBack(n);
    case OpKind::kCacheRead: return RunCacheRead(n);
    case OpKind::kAttentionBack: return RunAttentionBack(n);
    case OpKind::kGeluMulBack: return RunGeluMulBack(n);
    case OpKind::kScatterRows: return RunScatterRows(n);
    case OpKind::kCrossEntropy:
    case OpKind::kCrossEntropyBack: return RunCrossEntropy(n);
    case OpKind::kDotTN: return RunDotTN(n);
    case OpKind::kCandidateLogits:
    case OpKind::kCandidateLogitsBack: return RunCandidateLogits(n);
    case OpKind::kHeadCrossEntropyBack:
      return RunHeadCrossEntropyBack(n);
  }
  return InternalError("exec: unknown op");
}

Status Executor::RunEmbedding(const Node& n) {
  const Value& out = graph_.value(n.output);
  const WeightData& wd = weight_data_[n.inputs[0]];
  const int64_t vocab = wd.shape[0], hidden = wd.shape[1];
  const kernels::TypeOps* to = kernels_.type_ops(wd.type);
  const size_t row_bytes = static_cast<size_t>(*tensor::RowBytes(wd.type, hidden));
  const int32_t* ids = I32(n.inputs[1]);
  float* y = F32(n.output);
  for (int64_t t = 0; t < out.shape[0]; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) {
      return OutOfRangeError("exec: token id " + std::to_string(ids[t]) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
    to->dequantize_row(static_cast<const uint8_t*>(wd.data) + row_bytes * ids[t], y + t * hidden,
                       hidden);
    ops_->scale(y + t * hidden, n.scale, hidden);
  }
  return OkStatus();
}

Status Executor::RunRmsNorm(const Node& n) {
  const Value& out = graph_.value(n.output);
  const int64_t width = out.shape.back();
  const int64_t rows = out.elements() / width;
  const float* x = F32(n.inputs[0]);
  const float* w = F32(n.inputs[1]);
  float* y = F32(n.output);
  MaybeParallel(pool_, rows, width, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) ops_->rms_norm(x + r * width, w, y + r * width, width, n.eps);
  });
  return OkStatus();
}

Status Executor::RunMatMul(const Node& n) {
  const WeightData& wd = weight_data_[n.inputs[1]];
  kernels::WeightMatrix w;
  w.type = wd.type;
  w.data = wd.data;
  w.rows = wd.shape[0];
  w.cols = wd.shape[1];
  w.row_bytes = static_cast<size_t>(*tensor::RowBytes(wd.type, w.cols));
  w.panels = wd.panels;
  w.panel_set = wd.panel_set;
  const int64_t m = graph_.value(n.inputs[0]).shape[0];
  kernels::MatMul(kernels_, w, F32(n.inputs[0]), m, F32(n.output), w.rows, pool_);
  return OkStatus();
}

Status Executor::RunRope(const Node& n) {
  const Value& out = graph_.value(n.output);
  const int64_t S = out.shape[0], heads = out.shape[1], D = out.shape[2];
  FG_ASSIGN_OR_RETURN(const RopeCache* rc, RopeTables(n.inputs[1], n.rope_base, S, D));
  const float* sin = rc->sin.data();
  if (n.op == OpKind::kRopeBack) {  // the inverse rotation: sin negated
    rope_neg_sin_.resize(rc->sin.size());
    for (size_t i = 0; i < rc->sin.size(); ++i) rope_neg_sin_[i] = -rc->sin[i];
    sin = rope_neg_sin_.data();
  }
  const float* x = F32(n.inputs[0]);
  float* y = F32(n.output);
  if (x != y) std::memcpy(y, x, ValueBytes(out));
  for (int64_t t = 0; t < S; ++t) {
    ops_->apply_rope(y + t * heads * D, heads, D, rc->cos.data() + t * D / 2, sin + t * D / 2);
  }
  return OkStatus();
}

Status Executor::RunCacheWrite(const Node& n) {
  const Value& cache = graph_.value(n.inputs[0]);
  const int64_t R = cache.shape[0], row = cache.shape[1] * cache.shape[2];
  const float* x = F32(n.inputs[1]);
  const int32_t* pos = I32(n.inputs[2]);
  float* c = F32(n.inputs[0]);
  for (int64_t t = 0; t < graph_.value(n.inputs[1]).shape[0]; ++t) {
    if (pos[t] < 0) return OutOfRangeError("exec: negative position " + std::to_string(pos[t]));
    std::memcpy(c + (pos[t] % R) * row, x + t * row, row * kElementBytes);
  }
  return OkStatus();
}

Status Executor::CheckKeysInRing(const int32_t* pos, int64_t S, int64_t window, int64_t R) {
  for (int64_t t = 0; t < S; ++t) {
    if (pos[t] < 0) return OutOfRangeError("exec: negative position " + std::to_string(pos[t]));
  }
  const kernels::KeySpan span = kernels::KeysRead(pos, S, window);
  if (span.rows() > R) {
    return OutOfRangeError("exec: positions " + std::to_string(span.lowest) + ".." +
                           std::to_string(span.highest) + " need " + std::to_string(span.rows()) +
                           " cached keys, the cache holds " + std::to_string(R));
  }
  return OkStatus();
}

Status Executor::RunAttention(const Node& n) {
  const Value& q = graph_.value(n.inputs[0]);
  const Value& kc = graph_.value(n.inputs[1]);
  const int64_t S = q.shape[0];
  kernels::RingAttention a;
  a.q = F32(n.inputs[0]);
  a.k = F32(n.inputs[1]);
  a.v = F32(n.inputs[2]);
  a.pos = I32(n.inputs[3]);
  a.Hq = q.shape[1];
  a.D = q.shape[2];
  a.R = kc.shape[0];
  a.KV = kc.shape[1];
  a.window = n.window;
  a.scale = n.scale;
  a.out = F32(n.output);
  FG_RETURN_IF_ERROR(CheckKeysInRing(a.pos, S, a.window, a.R));
  // One task per (token, KV head, share of its query heads): the query heads sharing a KV
  // head go through the keys together (kernels::AttendRing), each with R floats of scores
  // (sized in Plan). Their group is split in `splits` shares only when there are fewer
  // (token, KV head) pairs than threads (decode: 1 token, 1 KV head in the 270M).
  const int64_t group = a.Hq / a.KV;
  const int64_t splits = AttentionSplits(pool_ ? pool_->size() : 1, S, a.KV, group);
  const kernels::KernelSet& ks = kernels_;
  float* scores = scores_.data();
  const int64_t stride = scores_stride_;
  auto task = [&](int64_t begin, int64_t end, int thread) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [t, kvh, g0, gn] = AttentionTaskOf(i, a.KV, group, splits);
      kernels::AttendRing(ks, a, t, kvh, g0, gn, scores + thread * stride, a.R);
    }
  };
  // Ranges of tasks are claimed by the pool's threads (a preempted thread's share is taken
  // over); `thread` picks the scores row, so ranges running at once never share one.
  const int64_t keys = std::min<int64_t>(a.R, a.pos[S - 1] + 1);  // most keys a query reads
  const int64_t work = keys * a.D * 4 * group / splits;          // dot + axpy per key and head
  RunAttentionTasks(pool_, S * a.KV * splits, work, task);
  return OkStatus();
}

Status Executor::RunGeluMul(const Node& n) {
  const float* g = F32(n.inputs[0]);
  const float* u = F32(n.inputs[1]);
  float* y = F32(n.output);
  const int64_t total = graph_.value(n.output).elements();
  MaybeParallel(pool_, (total + kChunk - 1) / kChunk, kChunk * 8, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kChunk, hi = std::min(total, e * kChunk);
    ops_->gelu_tanh_mul(g + lo, u + lo, y + lo, hi - lo);
  });
  return OkStatus();
}

Status Executor::RunAdd(const Node& n) {
  ops_->add(F32(n.inputs[0]), F32(n.inputs[1]), F32(n.output), graph_.value(n.output).elements());
  return OkStatus();
}

Status Executor::RunSelectRows(const Node& n) {
  const Value& x = graph_.value(n.inputs[0]);
  const int64_t S = x.shape[0], width = x.shape[1];
  const int32_t* rows = I32(n.inputs[1]);
  for (int64_t r = 0; r < graph_.value(n.output).shape[0]; ++r) {
    if (rows[r] < 0 || rows[r] >= S) {
      return OutOfRangeError("exec: row " + std::to_string(rows[r]) + " is outside [0, " +
                             std::to_string(S) + ")");
    }
    std::memcpy(F32(n.output) + r * width, F32(n.inputs[0]) + rows[r] * width,
                width * kElementBytes);
  }
  return OkStatus();
}

Status Executor::RunArgmax(const Node& n) {
  const Value& x = graph_.value(n.inputs[0]);
  const int64_t width = x.shape[1];
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    I32(n.output)[r] = static_cast<int32_t>(ops_->argmax(F32(n.inputs[0]) + r * width, width));
  }
  return OkStatus();
}

Status Executor::RunIota(const Node& n) {
  int32_t* y = I32(n.output);
  for (int64_t i = 0; i < graph_.value(n.output).shape[0]; ++i) y[i] = static_cast<int32_t>(i);
  return OkStatus();
}

Status Executor::RunScale(const Node& n) {
  // The same kernel as the embedding's scale, so an embeddings input gives bit-identical rows.
  const Value& out = graph_.value(n.output);
  float* y = F32(n.output);
  std::memcpy(y, F32(n.inputs[0]), ValueBytes(out));
  ops_->scale(y, n.scale, out.elements());
  return OkStatus();
}

Status Executor::RunTranspose(const Node& n) {
  // Data movement only (the same in reference and fast mode). Walks the output in order; when
  // the last axis stays last, whole rows are copied.
  const Value& x = graph_.value(n.inputs[0]);
  const Value& out = graph_.value(n.output);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  // Strides and the output index in a scratch kept across runs (no allocation per run).
  transpose_scratch_.assign(2 * rank, 0);
  int64_t* in_stride = transpose_scratch_.data();
  int64_t* idx = in_stride + rank;
  if (rank > 0) in_stride[rank - 1] = 1;
  for (int64_t i = rank - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * x.shape[i + 1];
  const bool rows = rank > 0 && n.perm.back() == rank - 1;
  const int64_t inner = rows ? out.shape.back() : 1;
  const int64_t outer_rank = rows ? rank - 1 : rank;
  const uint8_t* src = ptr_[n.inputs[0]];
  uint8_t* dst = ptr_[n.output];
  const int64_t count = out.elements() / std::max<int64_t>(inner, 1);
  for (int64_t c = 0; c < count; ++c) {
    int64_t off = 0;
    for (int64_t i = 0; i < outer_rank; ++i) off += idx[i] * in_stride[n.perm[i]];
    std::memcpy(dst + c * inner * kElementBytes, src + off * kElementBytes, inner * kElementBytes);
    for (int64_t i = outer_rank - 1; i >= 0; --i) {
      if (++idx[i] < out.shape[i]) break;
      idx[i] = 0;
    }
  }
  return OkStatus();
}

Status Executor::RunConcat(const Node& n) {
  const Value& a = graph_.value(n.inputs[0]);
  const Value& b = graph_.value(n.inputs[1]);
  const Value& out = graph_.value(n.output);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < n.axis; ++i) outer *= out.shape[i];
  for (size_t i = n.axis + 1; i < out.shape.size(); ++i) inner *= out.shape[i];
  const int64_t na = a.shape[n.axis] * inner * kElementBytes;
  const int64_t nb = b.shape[n.axis] * inner * kElementBytes;
  const uint8_t* pa = ptr_[n.inputs[0]];
  const uint8_t* pb = ptr_[n.inputs[1]];
  uint8_t* y = ptr_[n.output];
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(y + o * (na + nb), pa + o * na, na);
    std::memcpy(y + o * (na + nb) + na, pb + o * nb, nb);
  }
  return OkStatus();
}

Status Executor::RunRopeTable(const Node& n) {
  // y = x*cos + swap_halves(x)*sin with the contract's signed tables. The fast kernel rounds
  // each product in f32 as apply_rope does; the reference computes in double.
  const Value& out = graph_.value(n.output);
  const int64_t S = out.shape[0], heads = out.shape[1], D = out.shape[2], half = D / 2;
  const float* x = F32(n.inputs[0]);
  const float* cs = F32(n.inputs[1]);
  const float* sn = F32(n.inputs[2]);
  float* y = F32(n.output);
  auto rope = [&](auto row) {  // row(xr, c, s, i, j) -> y[i]
    for (int64_t t = 0; t < S; ++t) {
      const float* c = cs + t * D;
      const float* s = sn + t * D;
      for (int64_t h = 0; h < heads; ++h) {
        const float* xr = x + (t * heads + h) * D;
        float* yr = y + (t * heads + h) * D;
        for (int64_t i = 0; i < D; ++i) yr[i] = row(xr, c, s, i, i < half ? i + half : i - half);
      }
    }
  };
  if (kernels_.reference) {
    rope([](const float* xr, const float* c, const float* s, int64_t i, int64_t j) {
      return static_cast<float>(static_cast<double>(xr[i]) * c[i] +
                                static_cast<double>(xr[j]) * s[i]);
    });
  } else {
    rope([](const float* xr, const float* c, const float* s, int64_t i, int64_t j) {
      return xr[i] * c[i] + xr[j] * s[i];
    });
  }
  return OkStatus();
}

Status Executor::RunAttentionKV(const Node& n) {
  const Value& q = graph_.value(n.inputs[0]);
  const Value& kv = graph_.value(n.inputs[1]);
  const int64_t S = q.shape[0], Hq = q.shape[1], D = q.shape[2];
  const int64_t KV = kv.shape[1], T = kv.shape[2];
  const int64_t group = Hq / KV;
  const float* qd = F32(n.inputs[0]);
  const float* kd = F32(n.inputs[1]);
  const float* vd = F32(n.inputs[2]);
  const float* mask = n.inputs.size() > 3 ? F32(n.inputs[3]) : nullptr;
  float* y = F32(n.output);
  const kernels::KernelSet& ks = kernels_;
  const kernels::ElementOps& ops = *ops_;
  const int64_t splits = AttentionSplits(pool_ ? pool_->size() : 1, S, KV, group);
  float* scores = scores_.data();
  const int64_t stride = scores_stride_;
  // Task = (query row, KV head, share of its query heads), as for the cache attention.
  auto task = [&](int64_t begin, int64_t end, int thread) {
    float* sc = scores + thread * stride;
    for (int64_t i = begin; i < end; ++i) {
      const auto [t, kvh, g0, gn] = AttentionTaskOf(i, KV, group, splits);
      int64_t lo = 0, nk = T;
      if (mask == nullptr) {  // causal from the end: query t is key T - S + t
        const int64_t qi = T - S + t;
        lo = kernels::FirstKey(qi, n.window);
        nk = qi - lo + 1;
      }
      const float* qv = qd + (t * Hq + kvh * group + g0) * D;
      const float* kb = kd + (kvh * T + lo) * D;
      const float* vb = vd + (kvh * T + lo) * D;
      kernels::AttnScores(ks, qv, gn, D, kb, D, nk, n.scale, sc, T);
      for (int64_t g = 0; g < gn; ++g) {
        if (mask != nullptr) {
          const float* m = mask + ((kvh * group + g0 + g) * S + t) * T;
          ops.add(sc + g * T, m, sc + g * T, T);
        }
        ops.softmax(sc + g * T, nk);
      }
      float* o = y + (t * Hq + kvh * group + g0) * D;
      std::memset(o, 0, gn * D * kElementBytes);
      kernels::AttnWeightedSum(ks, sc, T, gn, vb, D, nk, D, o);
    }
  };
  RunAttentionTasks(pool_, S * KV * splits, T * D * 4 * group / splits, task);
  return OkStatus();
}

Status Executor::RunDot(const Node& n) {
  const Value& a = graph_.value(n.inputs[0]);
  const int64_t M = a.shape[0], K = a.shape[1], N = graph_.value(n.output).shape[1];
  const float* pa = F32(n.inputs[0]);
  const float* pb = F32(n.inputs[1]);
  float* y = F32(n.output);
  if (kernels_.reference) {
    ReferenceProduct(pa, K, 1, pb, M, K, N, y);
    return OkStatus();
  }
  std::memset(y, 0, M * N * kElementBytes);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) ops_->axpy(pa[m * K + k], pb + k * N, y + m * N, N);
  }
  return OkStatus();
}

Status Executor::RunLowRank(const Node& n) {
  // out[s] = y[s] + sum_k (scale * x[s][k]) * w[k], in k order for every element.
  const Value& out = graph_.value(n.output);
  const int64_t S = out.shape[0], N = out.shape[1];
  const int64_t K = graph_.value(n.inputs[0]).shape[1];
  const float* x = F32(n.inputs[0]);
  const float* w = F32(n.inputs[1]);  // f32 [K, N] (the graph checks the type)
  const float* y = n.inputs.size() > 2 ? F32(n.inputs[2]) : nullptr;
  float* o = F32(n.output);
  const float scale = n.scale;
  if (kernels_.reference) {
    for (int64_t i = 0; i < S; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(x[i * K + k]) * w[k * N + j];
        o[i * N + j] = static_cast<float>((y != nullptr ? y[i * N + j] : 0.0) + scale * acc);
      }
    }
    return OkStatus();
  }
  MaybeParallel(
      pool_, S, N * K,
      [&](int64_t lo, int64_t hi) {
        ops_->low_rank(y != nullptr ? y + lo * N : nullptr, x + lo * K, w, scale, hi - lo, K, N,
                       o + lo * N);
      },
      kLowRankRows);
  return OkStatus();
}

Status Executor::RunRmsNormBack(const Node& n) {
  const Value& out = graph_.value(n.output);
  const int64_t width = out.shape.back();
  const int64_t rows = out.elements() / width;
  const float* x = F32(n.inputs[0]);
  const float* w = F32(n.inputs[1]);
  const float* dy = F32(n.inputs[2]);
  float* dx = F32(n.output);
  MaybeParallel(pool_, rows, width * 2, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      if (kernels_.reference) {
        kernels::scalar::RmsNormBackRow(x + r * width, w, dy + r * width, dx + r * width, width,
                                        n.eps);
      } else {
        kernels::RmsNormBackRow(*ops_, x + r * width, w, dy + r * width, dx + r * width, width,
                                n.eps);
      }
    }
  });
  return OkStatus();
}

Status Executor::RunCacheRead(const Node& n) {
  const Value& cache = graph_.value(n.inputs[0]);
  const int64_t R = cache.shape[0], row = cache.shape[1] * cache.shape[2];
  const int32_t* pos = I32(n.inputs[1]);
  for (int64_t t = 0; t < graph_.value(n.output).shape[0]; ++t) {
    if (pos[t] < 0) return OutOfRangeError("exec: negative position " + std::to_string(pos[t]));
    std::memcpy(F32(n.output) + t * row, F32(n.inputs[0]) + (pos[t] % R) * row,
                row * kElementBytes);
  }
  return OkStatus();
}

Status Executor::RunGeluMulBack(const Node& n) {
  const float* g = F32(n.inputs[0]);
  const float* u = F32(n.inputs[1]);
  const float* dy = F32(n.inputs[2]);
  float* y = F32(n.output);
  const int64_t total = graph_.value(n.output).elements();
  const int operand = static_cast<int>(n.operand);
  MaybeParallel(pool_, (total + kChunk - 1) / kChunk, kChunk * 8, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kChunk, hi = std::min(total, e * kChunk);
    if (kernels_.reference) {
      kernels::scalar::GeluMulBack(g + lo, u + lo, dy + lo, y + lo, hi - lo, operand);
    } else {
      kernels::GeluMulBack(*ops_, g + lo, u + lo, dy + lo, y + lo, hi - lo, operand);
    }
  });
  return OkStatus();
}

Status Executor::RunScatterRows(const Node& n) {
  const Value& out = graph_.value(n.output);
  const int64_t R = graph_.value(n.inputs[0]).shape[0], width = out.shape[1], S = out.shape[0];
  const int32_t* rows = I32(n.inputs[1]);
  float* y = F32(n.output);
  std::memset(y, 0, ValueBytes(out));
  for (int64_t r = 0; r < R; ++r) {
    if (rows[r] < 0 || rows[r] >= S) {
      return OutOfRangeError("exec: row " + std::to_string(rows[r]) + " is outside [0, " +
                             std::to_string(S) + ")");
    }
    ops_->add(y + rows[r] * width, F32(n.inputs[0]) + r * width, y + rows[r] * width, width);
  }
  return OkStatus();
}

Status Executor::RunCrossEntropy(const Node& n) {
  const Value& lv = graph_.value(n.inputs[0]);
  const int64_t R = lv.shape[0], V = lv.shape[1];
  const float* x = F32(n.inputs[0]);
  const int32_t* t = I32(n.inputs[1]);
  FG_RETURN_IF_ERROR(CheckTargets(t, R, V));
  const bool back = n.op == OpKind::kCrossEntropyBack;
  const float* dloss = back ? F32(n.inputs[2]) : nullptr;
  float* y = F32(n.output);
  const kernels::ElementOps& ops = *ops_;
  MaybeParallel(pool_, R, V * 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * V;
      if (!back) {
        y[r] = t[r] < 0 ? 0.0f
               : kernels_.reference ? kernels::scalar::CrossEntropyRow(xr, V, t[r])
                                    : kernels::CrossEntropyRow(ops, xr, V, t[r]);
      } else if (t[r] < 0) {
        std::memset(y + r * V, 0, V * kElementBytes);
      } else if (kernels_.reference) {
        kernels::scalar::CrossEntropyBackRow(xr, V, t[r], dloss[r], y + r * V);
      } else {
        kernels::CrossEntropyBackRow(ops, xr, V, t[r], dloss[r], y + r * V);
      }
    }
  });
  return OkStatus();
}

Status Executor::RunCandidateLogits(const Node& n) {
  // Forward: (x [R,D], w [V,D], ids [R,C]) -> [R,C]; backward: (w, ids, dy [R,C]) -> [R,D].
  const bool back = n.op == OpKind::kCandidateLogitsBack;
  const int w_in = back ? 0 : 1;
  const WeightData& wd = weight_data_[n.inputs[w_in]];
  const int64_t V = wd.shape[0], D = wd.shape[1];
  const Value& iv = graph_.value(n.inputs[w_in + 1]);
  const int64_t R = iv.shape[0], C = iv.shape[1];
  const int32_t* ids = I32(n.inputs[w_in + 1]);
  for (int64_t i = 0; i < R * C; ++i) {
    if (ids[i] >= V) {
      return OutOfRangeError("exec: candidate " + std::to_string(ids[i]) +
                             " is outside the vocabulary [0, " + std::to_string(V) + ")");
    }
  }
  const kernels::TypeOps* to = kernels_.type_ops(wd.type);
  const size_t row_bytes = static_cast<size_t>(*tensor::RowBytes(wd.type, D));
  const auto* w = static_cast<const uint8_t*>(wd.data);
  const float* in = F32(n.inputs[back ? 2 : 0]);  // x, or dy
  float* y = F32(n.output);
  const kernels::ElementOps& ops = *ops_;
  // Each thread owns whole rows and goes through a row's candidates in order, so the result
  // does not depend on the threads.
  MaybeParallel(pool_, R, C * D * 2, [&](int64_t lo, int64_t hi) {
    std::vector<float> row(static_cast<size_t>(D));
    for (int64_t r = lo; r < hi; ++r) {
      if (back) std::memset(y + r * D, 0, D * kElementBytes);
      for (int64_t c = 0; c < C; ++c) {
        const int32_t id = ids[r * C + c];
        if (id < 0) {
          if (!back) y[r * C + c] = graph::kMaskedLogit;
          continue;
        }
        to->dequantize_row(w + row_bytes * id, row.data(), D);
        if (back) {
          ops.axpy(in[r * C + c], row.data(), y + r * D, D);
        } else {
          y[r * C + c] = ops.dot(in + r * D, row.data(), D);
        }
      }
    }
  });
  return OkStatus();
}

Status Executor::RunHeadCrossEntropyBack(const Node& n) {
  // (w [V,D], mean f32 [D], logits [R,V], targets [R], loss [R], dloss [R]) -> [R,D]
  const WeightData& wd = weight_data_[n.inputs[0]];
  const WeightData& md = weight_data_[n.inputs[1]];
  kernels::HeadBackArgs a;
  a.rows = kernels_.type_ops(wd.type);
  if (a.rows == nullptr) {
    return UnimplementedError("exec: no kernels for the LM head's type " +
                              std::string(tensor::DTypeName(wd.type)));
  }
  a.head = static_cast<const uint8_t*>(wd.data);
  a.type = wd.type;
  a.V = wd.shape[0];
  a.D = wd.shape[1];
  a.row_bytes = static_cast<size_t>(*tensor::RowBytes(wd.type, a.D));
  a.mean = static_cast<const float*>(md.data);
  a.threshold = n.threshold;
  a.max_tokens = n.max_tokens;
  const int64_t R = graph_.value(n.inputs[2]).shape[0];
  const float* logits = F32(n.inputs[2]);
  const int32_t* t = I32(n.inputs[3]);
  const float* loss = F32(n.inputs[4]);
  const float* dloss = F32(n.inputs[5]);
  FG_RETURN_IF_ERROR(CheckTargets(t, R, a.V));
  float* y = F32(n.output);
  const kernels::ElementOps& ops = *ops_;
  // Each row on one thread, its tokens in id order: the result does not depend on the threads.
  MaybeParallel(pool_, R, a.V * 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* dx = y + r * a.D;
      if (t[r] < 0) {
        std::memset(dx, 0, a.D * kElementBytes);
      } else if (kernels_.reference) {
        kernels::scalar::HeadCrossEntropyBackRow(a, logits + r * a.V, t[r], loss[r], dloss[r], dx);
      } else {
        kernels::HeadCrossEntropyBackRow(ops, a, logits + r * a.V, t[r], loss[r], dloss[r], dx);
      }
    }
  });
  return OkStatus();
}

Status Executor::RunDotTN(const Node& n) {
  // y [M,N] = a^T b, a [K,M], b [K,N]: each thread owns rows of y and adds the K products of
  // each element in k order, so the result does not depend on the threads.
  const Value& a = graph_.value(n.inputs[0]);
  const int64_t K = a.shape[0], M = a.shape[1], N = graph_.value(n.output).shape[1];
  const float* pa = F32(n.inputs[0]);
  const float* pb = F32(n.inputs[1]);
  float* y = F32(n.output);
  if (kernels_.reference) {
    ReferenceProduct(pa, 1, M, pb, M, K, N, y);
    return OkStatus();
  }
  // The thread's rows of a^T, then low_rank from zero (scale 1): every element takes its K
  // products in k order, fused, as K axpy calls would give it, bit for bit, with one weight
  // load per 8 rows (a LoRA's dA and dB: M = its rank, 16; N the projection's width).
  MaybeParallel(
      pool_, M, K * N,
      [&](int64_t lo, int64_t hi) {
        thread_local std::vector<float> at;
        at.resize(static_cast<size_t>((hi - lo) * K));
        for (int64_t k = 0; k < K; ++k) {
          for (int64_t m = lo; m < hi; ++m) at[(m - lo) * K + k] = pa[k * M + m];
        }
        ops_->low_rank(nullptr, at.data(), pb, 1.0f, hi - lo, K, N, y + lo * N);
      },
      kLowRankRows);
  return OkStatus();
}

Status Executor::RunAttentionBack(const Node& n) {
  const Value& q = graph_.value(n.inputs[0]);
  const Value& kc = graph_.value(n.inputs[1]);
  const int64_t S = q.shape[0], Hq = q.shape[1], D = q.shape[2];
  const int64_t R = kc.shape[0], KV = kc.shape[1];
  const int32_t* pos = I32(n.inputs[3]);
  FG_RETURN_IF_ERROR(CheckKeysInRing(pos, S, n.window, R));
  float* dq = F32(n.output);
  const int64_t cache = R * KV * D;
  float* dk = dq + S * Hq * D;
  float* dv = dk + cache;
  kernels::AttentionBackArgs a{F32(n.inputs[0]), F32(n.inputs[1]), F32(n.inputs[2]), pos,
                               F32(n.inputs[4]), Hq, D, R, KV, n.window, n.scale, dq, dk, dv};
  // The keys whose dK/dV rows are computed: all those read, or from the first query's on.
  kernels::KeySpan keys = kernels::KeysRead(pos, S, n.window);
  if (n.written_keys_only) {
    a.kv_from = *std::min_element(pos, pos + S);
    keys.lowest = std::max(keys.lowest, a.kv_from);
  }
  std::memset(dk, 0, 2 * cache * kElementBytes);
  if (kernels_.reference) {
    kernels::scalar::AttentionBack(a, 0, S);
    return OkStatus();
  }
  // A fixed number of query chunks, each adding into its own K/V gradient, summed in chunk
  // order afterwards: the result does not depend on the threads that ran the chunks.
  const int64_t chunks = std::min<int64_t>(S, kAttentionBackChunks);
  // The chunks' K/V gradients: the calling thread's buffer, shared by every executor it runs
  // (a trainer keeps dozens of executors; one buffer each would be megabytes apiece).
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(chunks * 2 * cache)) {
    scratch.resize(static_cast<size_t>(chunks * 2 * cache));
  }
  float* parts = scratch.data();  // not `scratch` in the lambda: there it is the pool thread's
  const kernels::KernelSet& ks = kernels_;
  auto run = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float* part = parts + c * 2 * cache;
      kernels::AttentionBackArgs ac = a;
      if (c > 0) {
        for (int64_t p = keys.lowest; p <= keys.highest; ++p) {
          std::memset(part + (p % R) * KV * D, 0, KV * D * kElementBytes);
          std::memset(part + cache + (p % R) * KV * D, 0, KV * D * kElementBytes);
        }
        ac.dk = part;
        ac.dv = part + cache;
      }
      kernels::AttentionBack(ks, ac, S * c / chunks, S * (c + 1) / chunks);
    }
  };
  if (pool_ == nullptr || pool_->size() == 1 || chunks == 1) {
    run(0, chunks);
  } else {
    pool_->ParallelFor(chunks, run, 1);
  }
  // Summed over the rows the chunks wrote (the keys' rows; the rest of each part is stale).
  for (int64_t c = 1; c < chunks; ++c) {
    const float* part = parts + c * 2 * cache;
    for (int64_t p = keys.lowest; p <= keys.highest; ++p) {
      const int64_t off = (p % R) * KV * D;
      ops_->add(dk + off, part + off, dk + off, KV * D);
      ops_->add(dv + off, part + cache + off, dv + off, KV * D);
    }
  }
  return OkStatus();
}

StatusOr<const Executor::RopeCache*> Executor::RopeTables(int pos_value, double base, int64_t S,
                                                          int64_t D) {
  for (auto& c : rope_cache_) {
    if (c.pos_value == pos_value && c.base == base) return &c;
  }
  RopeCache* rc = nullptr;
  for (auto& c : rope_cache_) {
    if (c.pos_value == -1) rc = &c;
  }
  if (rc == nullptr) rc = &rope_cache_.emplace_back();
  const int32_t* pos = I32(pos_value);
  rc->pos_value = pos_value;
  rc->base = base;
  rc->cos.resize(S * D / 2);
  rc->sin.resize(S * D / 2);
  for (int64_t t = 0; t < S; ++t) {
    if (pos[t] < 0) {
      rc->pos_value = -1;
      return OutOfRangeError("exec: negative position " + std::to_string(pos[t]));
    }
    kernels::RopeTable(pos[t], D, base, rc->cos.data() + t * D / 2, rc->sin.data() + t * D / 2);
  }
  return rc;
}

int Executor::FindOutput(std::string_view name) const {
  const auto& names = graph_.output_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return graph_.outputs()[i];
  }
  return -1;
}

StatusOr<std::span<const float>> Executor::OutputF32(std::string_view name) const {
  int id = FindOutput(name);
  if (id < 0 || graph_.value(id).type != ValueType::kF32) {  // FindOutput gives output ids only
    return NotFoundError("exec: no f32 output named '" + std::string(name) + "'");
  }
  return std::span<const float>(F32(id), static_cast<size_t>(graph_.value(id).elements()));
}

StatusOr<std::span<const int32_t>> Executor::OutputI32(std::string_view name) const {
  int id = FindOutput(name);
  if (id < 0 || graph_.value(id).type != ValueType::kI32) {  // FindOutput gives output ids only
    return NotFoundError("exec: no i32 output named '" + std::string(name) + "'");
  }
  return std::span<const int32_t>(I32(id), static_cast<size_t>(graph_.value(id).elements()));
}

Status SharedArena::Grow(size_t bytes) {
  std::unique_ptr<uint8_t[]> grown(new (std::nothrow) uint8_t[bytes + kAlign]);
  if (!grown) {
    return ResourceExhaustedError("cannot allocate " + std::to_string(bytes) +
                                  " bytes of activation memory");
  }
  base_ = grown.get() + (kAlign - reinterpret_cast<uintptr_t>(grown.get()) % kAlign) % kAlign;
  storage_ = std::move(grown);
  capacity_ = bytes;
  return OkStatus();
}

}  // namespace fg::exec
