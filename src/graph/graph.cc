#include "src/graph/graph.h"

#include <utility>

namespace fg::graph {

std::string_view OpName(OpKind op) {
  switch (op) {
    case OpKind::kInput: return "input";
    case OpKind::kWeight: return "weight";
    case OpKind::kState: return "state";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kRmsNorm: return "rms_norm";
    case OpKind::kMatMul: return "matmul";
    case OpKind::kReshape: return "reshape";
    case OpKind::kRope: return "rope";
    case OpKind::kCacheWrite: return "cache_write";
    case OpKind::kAttention: return "attention";
    case OpKind::kGeluMul: return "gelu_mul";
    case OpKind::kAdd: return "add";
    case OpKind::kSelectRows: return "select_rows";
    case OpKind::kArgmax: return "argmax";
    case OpKind::kIota: return "iota";
    case OpKind::kScale: return "scale";
    case OpKind::kTranspose: return "transpose";
    case OpKind::kConcat: return "concat";
    case OpKind::kRopeTable: return "rope_table";
    case OpKind::kAttentionKV: return "attention_kv";
    case OpKind::kDot: return "dot";
    case OpKind::kLowRank: return "low_rank";
    case OpKind::kRmsNormBack: return "rms_norm_back";
    case OpKind::kRopeBack: return "rope_back";
    case OpKind::kCacheRead: return "cache_read";
    case OpKind::kAttentionBack: return "attention_back";
    case OpKind::kSlice: return "slice";
    case OpKind::kGeluMulBack: return "gelu_mul_back";
    case OpKind::kScatterRows: return "scatter_rows";
    case OpKind::kCrossEntropy: return "cross_entropy";
    case OpKind::kCrossEntropyBack: return "cross_entropy_back";
    case OpKind::kDotTN: return "dot_tn";
    case OpKind::kCandidateLogits: return "candidate_logits";
    case OpKind::kCandidateLogitsBack: return "candidate_logits_back";
    case OpKind::kHeadCrossEntropyBack:
      return "head_cross_entropy_back";
  }
  return "?";
}

int64_t Value::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool HasDynamic(const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d == kDynamic) return true;
  }
  return false;
}

ValueId Graph::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? ValueId() : ValueId(it->second);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

Status ShapeError(std::string_view op, std::string_view name, const std::string& what) {
  return InvalidArgumentError("graph: " + std::string(op) + " '" + std::string(name) + "': " + what);
}

bool ValidShape(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == kDynamic) continue;
    if (d < 0) return false;
    if (d > 0 && n > (int64_t{1} << 48) / d) return false;
    n *= d;
  }
  return true;
}

}  // namespace

ValueId Builder::Fail(Status error) {
  if (status_.ok()) status_ = std::move(error);
  return ValueId();
}

ValueId Builder::Refuse(std::string_view op, std::string_view name, const std::string& what) {
  return Fail(ShapeError(op, name, what));
}

bool Builder::Usable(std::string_view name, std::initializer_list<ValueId> ids) {
  if (!status_.ok()) return false;
  for (ValueId id : ids) {
    if (id.index() < 0 || id.index() >= static_cast<int>(g_.values_.size())) {
      Fail(InvalidArgumentError("graph: " + std::string(name) + ": no value with id " +
                                std::to_string(id.index())));
      return false;
    }
  }
  return true;
}

ValueId Builder::Add(OpKind op, std::string name, std::vector<int> inputs,
                     std::vector<int64_t> shape, ValueType type, Node attrs) {
  if (!status_.ok()) return ValueId();
  if (!ValidShape(shape)) {
    return Refuse(OpName(op), name, "invalid shape " + ShapeString(shape));
  }
  if (g_.Find(name).valid()) return Refuse(OpName(op), name, "duplicate value name");
  Value v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.type = type;
  v.producer = static_cast<int>(g_.nodes_.size());
  g_.values_.push_back(std::move(v));
  attrs.op = op;
  attrs.inputs = std::move(inputs);
  const int id = static_cast<int>(g_.values_.size()) - 1;
  g_.by_name_.emplace(g_.values_[id].name, id);
  attrs.output = id;
  g_.nodes_.push_back(std::move(attrs));
  return ValueId(id);
}

ValueId Builder::Input(std::string name, std::vector<int64_t> shape, ValueType type) {
  if (type == ValueType::kStored) return Refuse("input", name, "inputs are f32 or i32");
  const ValueId id = Add(OpKind::kInput, std::move(name), {}, std::move(shape), type);
  if (id.valid()) g_.inputs_.push_back(id);
  return id;
}

ValueId Builder::Weight(std::string name, std::vector<int64_t> shape, tensor::DType dtype) {
  const ValueId id =
      Add(OpKind::kWeight, std::move(name), {}, std::move(shape), ValueType::kStored);
  if (!id.valid()) return id;
  g_.values_[id].stored_dtype = dtype;
  g_.weights_.push_back(id);
  return id;
}

ValueId Builder::State(std::string name, std::vector<int64_t> shape) {
  const ValueId id = Add(OpKind::kState, std::move(name), {}, std::move(shape), ValueType::kF32);
  if (id.valid()) g_.states_.push_back(id);
  return id;
}

ValueId Builder::Embedding(std::string name, ValueId weight, ValueId ids, float scale) {
  if (!Usable(name, {weight, ids})) return ValueId();
  const Value& w = g_.values_[weight];
  const Value& t = g_.values_[ids];
  if (w.shape.size() != 2)
    return Refuse("embedding", name, "table must be 2-D, is " + ShapeString(w.shape));
  if (t.type != ValueType::kI32 || t.shape.size() != 1) {
    return Refuse("embedding", name, "ids must be i32 [S], are " + ShapeString(t.shape));
  }
  Node n;
  n.scale = scale;
  return Add(OpKind::kEmbedding, std::move(name), {weight, ids}, {t.shape[0], w.shape[1]},
             ValueType::kF32, n);
}

ValueId Builder::RmsNorm(std::string name, ValueId x, ValueId w, float eps) {
  if (!Usable(name, {x, w})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& wv = g_.values_[w];
  if (xv.type != ValueType::kF32 || xv.shape.empty())
    return Refuse("rms_norm", name, "x must be f32 with rank >= 1");
  if (wv.shape.size() != 1 || wv.shape[0] != xv.shape.back()) {
    return Refuse("rms_norm", name,
                  "weight " + ShapeString(wv.shape) + " does not match x " + ShapeString(xv.shape));
  }
  if (wv.type == ValueType::kI32)
    return Refuse("rms_norm", name, "norm weight must be a float vector");
  Node n;
  n.eps = eps;
  return Add(OpKind::kRmsNorm, std::move(name), {x, w}, xv.shape, ValueType::kF32, n);
}

ValueId Builder::MatMul(std::string name, ValueId x, ValueId w) {
  if (!Usable(name, {x, w})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& wv = g_.values_[w];
  if (xv.type != ValueType::kF32 || xv.shape.size() != 2)
    return Refuse("matmul", name, "x must be f32 [S,K], is " + ShapeString(xv.shape));
  if (wv.type != ValueType::kStored || wv.shape.size() != 2)
    return Refuse("matmul", name, "w must be a stored [N,K] weight");
  if (wv.shape[1] != xv.shape[1]) {
    return Refuse(
        "matmul", name,
        "x " + ShapeString(xv.shape) + " and w " + ShapeString(wv.shape) + " disagree on K");
  }
  return Add(OpKind::kMatMul, std::move(name), {x, w}, {xv.shape[0], wv.shape[0]}, ValueType::kF32);
}

ValueId Builder::Reshape(std::string name, ValueId x, std::vector<int64_t> shape) {
  if (!Usable(name, {x})) return ValueId();
  const Value& xv = g_.values_[x];
  Value probe;
  probe.shape = shape;
  if (HasDynamic(shape) || HasDynamic(xv.shape)) {
    return Refuse("reshape", name, "dynamic dims cannot be reshaped");
  }
  if (!ValidShape(shape) || probe.elements() != xv.elements()) {
    return Refuse("reshape", name, ShapeString(xv.shape) + " cannot become " + ShapeString(shape));
  }
  return Add(OpKind::kReshape, std::move(name), {x}, std::move(shape), xv.type);
}

ValueId Builder::Rope(std::string name, ValueId x, ValueId pos, double base) {
  if (!Usable(name, {x, pos})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& pv = g_.values_[pos];
  if (xv.type != ValueType::kF32 || xv.shape.size() != 3 || xv.shape[2] % 2 != 0) {
    return Refuse("rope", name,
                  "x must be f32 [S,heads,D] with even D, is " + ShapeString(xv.shape));
  }
  if (pv.type != ValueType::kI32 || pv.shape != std::vector<int64_t>{xv.shape[0]}) {
    return Refuse("rope", name, "positions must be i32 [S]");
  }
  if (!(base > 1.0)) return Refuse("rope", name, "base must be > 1");
  Node n;
  n.rope_base = base;
  return Add(OpKind::kRope, std::move(name), {x, pos}, xv.shape, ValueType::kF32, n);
}

ValueId Builder::CacheWrite(std::string name, ValueId cache, ValueId x, ValueId pos) {
  if (!Usable(name, {cache, x, pos})) return ValueId();
  const Value& cv = g_.values_[cache];
  const Value& xv = g_.values_[x];
  const Value& pv = g_.values_[pos];
  const Node& producer = g_.nodes_[cv.producer];
  if (producer.op != OpKind::kState && producer.op != OpKind::kCacheWrite) {
    return Refuse("cache_write", name, "target must be a state");
  }
  if (cv.shape.size() != 3 || xv.shape.size() != 3 || cv.shape[1] != xv.shape[1] ||
      cv.shape[2] != xv.shape[2]) {
    return Refuse("cache_write", name,
                  "rows " + ShapeString(xv.shape) + " do not fit cache " + ShapeString(cv.shape));
  }
  if (pv.type != ValueType::kI32 || pv.shape != std::vector<int64_t>{xv.shape[0]}) {
    return Refuse("cache_write", name, "positions must be i32 [S]");
  }
  if (xv.shape[0] > cv.shape[0])
    return Refuse("cache_write", name, "more rows than the cache holds");
  return Add(OpKind::kCacheWrite, std::move(name), {cache, x, pos}, cv.shape, ValueType::kF32);
}

ValueId Builder::Attention(std::string name, ValueId q, ValueId kcache, ValueId vcache, ValueId pos,
                           float scale, int64_t window) {
  if (!Usable(name, {q, kcache, vcache, pos})) return ValueId();
  const Value& qv = g_.values_[q];
  const Value& kv = g_.values_[kcache];
  const Value& vv = g_.values_[vcache];
  const Value& pv = g_.values_[pos];
  if (qv.shape.size() != 3 || kv.shape.size() != 3 || kv.shape != vv.shape) {
    return Refuse("attention", name, "q [S,Hq,D] and caches [R,KV,D] expected");
  }
  if (kv.shape[2] != qv.shape[2] || kv.shape[1] == 0 || qv.shape[1] % kv.shape[1] != 0) {
    return Refuse(
        "attention", name,
        "q " + ShapeString(qv.shape) + " and cache " + ShapeString(kv.shape) + " disagree");
  }
  if (pv.type != ValueType::kI32 || pv.shape != std::vector<int64_t>{qv.shape[0]}) {
    return Refuse("attention", name, "positions must be i32 [S]");
  }
  if (window < 0) return Refuse("attention", name, "window must be >= 0");
  Node n;
  n.scale = scale;
  n.window = window;
  return Add(OpKind::kAttention, std::move(name), {q, kcache, vcache, pos},
             {qv.shape[0], qv.shape[1] * qv.shape[2]}, ValueType::kF32, n);
}

ValueId Builder::GeluMul(std::string name, ValueId gate, ValueId up) {
  if (!Usable(name, {gate, up})) return ValueId();
  if (g_.values_[gate].shape != g_.values_[up].shape)
    return Refuse("gelu_mul", name, "shapes differ");
  return Add(OpKind::kGeluMul, std::move(name), {gate, up}, g_.values_[gate].shape, ValueType::kF32);
}

ValueId Builder::Add(std::string name, ValueId a, ValueId b) {
  if (!Usable(name, {a, b})) return ValueId();
  if (g_.values_[a].shape != g_.values_[b].shape) {
    return Refuse("add", name,
                  ShapeString(g_.values_[a].shape) + " + " + ShapeString(g_.values_[b].shape));
  }
  return Add(OpKind::kAdd, std::move(name), {a, b}, g_.values_[a].shape, ValueType::kF32);
}

ValueId Builder::SelectRows(std::string name, ValueId x, ValueId rows) {
  if (!Usable(name, {x, rows})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& rv = g_.values_[rows];
  if (xv.shape.size() != 2 || rv.type != ValueType::kI32 || rv.shape.size() != 1) {
    return Refuse("select_rows", name, "x [S,N] and rows i32 [R] expected");
  }
  return Add(OpKind::kSelectRows, std::move(name), {x, rows}, {rv.shape[0], xv.shape[1]}, xv.type);
}

ValueId Builder::Argmax(std::string name, ValueId x) {
  if (!Usable(name, {x})) return ValueId();
  const Value& xv = g_.values_[x];
  if (xv.shape.size() != 2 || xv.type != ValueType::kF32 || xv.shape[1] == 0) {
    return Refuse("argmax", name, "x must be f32 [R,N] with N > 0");
  }
  return Add(OpKind::kArgmax, std::move(name), {x}, {xv.shape[0]}, ValueType::kI32);
}

ValueId Builder::Iota(std::string name, int64_t n) {
  if (n <= 0) return Refuse("iota", name, "length must be > 0");
  return Add(OpKind::kIota, std::move(name), {}, {n}, ValueType::kI32);
}

ValueId Builder::Scale(std::string name, ValueId x, float scale) {
  if (!Usable(name, {x})) return ValueId();
  if (g_.values_[x].type != ValueType::kF32) return Refuse("scale", name, "x must be f32");
  Node n;
  n.scale = scale;
  return Add(OpKind::kScale, std::move(name), {x}, g_.values_[x].shape, ValueType::kF32, n);
}

ValueId Builder::Transpose(std::string name, ValueId x, std::vector<int64_t> perm) {
  if (!Usable(name, {x})) return ValueId();
  const Value& xv = g_.values_[x];
  if (xv.type == ValueType::kStored) return Refuse("transpose", name, "x must be computed");
  const size_t rank = xv.shape.size();
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (size_t i = 0; ok && i < rank; ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<int64_t>(rank) && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return Refuse(
        "transpose", name,
        "perm " + ShapeString(perm) + " is not a permutation of rank " + std::to_string(rank));
  }
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) shape[i] = xv.shape[perm[i]];
  Node n;
  n.perm = std::move(perm);
  return Add(OpKind::kTranspose, std::move(name), {x}, std::move(shape), xv.type, n);
}

ValueId Builder::Concat(std::string name, ValueId a, ValueId b, int64_t axis) {
  if (!Usable(name, {a, b})) return ValueId();
  const Value& av = g_.values_[a];
  const Value& bv = g_.values_[b];
  if (av.type == ValueType::kStored || av.type != bv.type || av.shape.size() != bv.shape.size() ||
      axis < 0 || axis >= static_cast<int64_t>(av.shape.size())) {
    return Refuse("concat", name, "operands of one computed type and rank, axis in range");
  }
  std::vector<int64_t> shape = av.shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (static_cast<int64_t>(i) == axis) continue;
    if (av.shape[i] != bv.shape[i]) {
      return Refuse("concat", name,
                    ShapeString(av.shape) + " and " + ShapeString(bv.shape) +
                        " differ outside axis " + std::to_string(axis));
    }
  }
  shape[axis] = (av.shape[axis] == kDynamic || bv.shape[axis] == kDynamic)
                    ? kDynamic
                    : av.shape[axis] + bv.shape[axis];
  Node n;
  n.axis = axis;
  return Add(OpKind::kConcat, std::move(name), {a, b}, std::move(shape), av.type, n);
}

ValueId Builder::RopeTable(std::string name, ValueId x, ValueId cos, ValueId sin) {
  if (!Usable(name, {x, cos, sin})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& cv = g_.values_[cos];
  const Value& sv = g_.values_[sin];
  if (xv.type != ValueType::kF32 || xv.shape.size() != 3 || xv.shape[2] % 2 != 0) {
    return Refuse("rope_table", name,
                  "x must be f32 [S,heads,D] with even D, is " + ShapeString(xv.shape));
  }
  const std::vector<int64_t> table = {xv.shape[0], xv.shape[2]};
  if (cv.type != ValueType::kF32 || sv.type != ValueType::kF32 || cv.shape != table ||
      sv.shape != table) {
    return Refuse("rope_table", name,
                  "cos/sin must be f32 " + ShapeString(table) + ", are " + ShapeString(cv.shape) +
                      " and " + ShapeString(sv.shape));
  }
  return Add(OpKind::kRopeTable, std::move(name), {x, cos, sin}, xv.shape, ValueType::kF32);
}

ValueId Builder::AttentionKV(std::string name, ValueId q, ValueId k, ValueId v,
                             std::optional<ValueId> mask, float scale, int64_t window) {
  if (!Usable(name, {q, k, v})) return ValueId();
  if (mask && !Usable(name, {*mask})) return ValueId();
  const Value& qv = g_.values_[q];
  const Value& kv = g_.values_[k];
  const Value& vv = g_.values_[v];
  if (qv.type != ValueType::kF32 || kv.type != ValueType::kF32 || vv.type != ValueType::kF32 ||
      qv.shape.size() != 3 || kv.shape.size() != 4 || kv.shape != vv.shape || kv.shape[0] != 1) {
    return Refuse("attention_kv", name, "q f32 [S,Hq,D] and k, v f32 [1,KV,T,D] expected");
  }
  const int64_t S = qv.shape[0], Hq = qv.shape[1], D = qv.shape[2], KV = kv.shape[1],
                T = kv.shape[2];
  if (kv.shape[3] != D || KV <= 0 || Hq % KV != 0 || HasDynamic(qv.shape)) {
    return Refuse("attention_kv", name,
                  "q " + ShapeString(qv.shape) + " and k " + ShapeString(kv.shape) + " disagree");
  }
  if (T != kDynamic && T < S) {
    return Refuse("attention_kv", name, "fewer keys than queries");
  }
  if (window < 0) return Refuse("attention_kv", name, "window must be >= 0");
  std::vector<int> ins = {q, k, v};
  if (mask) {
    const Value& mv = g_.values_[*mask];
    if (mv.type != ValueType::kF32 || mv.shape != std::vector<int64_t>{1, Hq, S, T}) {
      return Refuse(
          "attention_kv", name,
          "mask must be f32 " + ShapeString({1, Hq, S, T}) + ", is " + ShapeString(mv.shape));
    }
    if (window != 0) return Refuse("attention_kv", name, "a masked attention has no window");
    ins.push_back(*mask);
  }
  Node n;
  n.scale = scale;
  n.window = window;
  return Add(OpKind::kAttentionKV, std::move(name), std::move(ins), {S, Hq * D}, ValueType::kF32,
             n);
}

ValueId Builder::Dot(std::string name, ValueId a, ValueId b) {
  if (!Usable(name, {a, b})) return ValueId();
  const Value& av = g_.values_[a];
  const Value& bv = g_.values_[b];
  if (av.type != ValueType::kF32 || bv.type != ValueType::kF32 || av.shape.size() != 2 ||
      bv.shape.size() != 2 || av.shape[1] != bv.shape[0]) {
    return Refuse(
        "dot", name,
        "f32 [M,K] x [K,N] expected, got " + ShapeString(av.shape) + " x " + ShapeString(bv.shape));
  }
  return Add(OpKind::kDot, std::move(name), {a, b}, {av.shape[0], bv.shape[1]}, ValueType::kF32);
}

ValueId Builder::LowRank(std::string name, ValueId x, ValueId w, float scale,
                         std::optional<ValueId> y) {
  if (!Usable(name, {x, w})) return ValueId();
  if (y && !Usable(name, {*y})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& wv = g_.values_[w];
  if (xv.type != ValueType::kF32 || xv.shape.size() != 2) {
    return Refuse("low_rank", name, "x must be f32 [S,K], is " + ShapeString(xv.shape));
  }
  if (wv.type != ValueType::kStored || wv.shape.size() != 2 ||
      wv.stored_dtype != tensor::DType::kF32) {
    return Refuse("low_rank", name, "w must be a stored f32 [K,N] weight");
  }
  if (wv.shape[0] != xv.shape[1]) {
    return Refuse(
        "low_rank", name,
        "x " + ShapeString(xv.shape) + " and w " + ShapeString(wv.shape) + " disagree on K");
  }
  std::vector<int64_t> shape = {xv.shape[0], wv.shape[1]};
  std::vector<int> inputs = {x, w};
  if (y) {
    const Value& yv = g_.values_[*y];
    if (yv.type != ValueType::kF32 || yv.shape != shape) {
      return Refuse("low_rank", name,
                    "y must be f32 " + ShapeString(shape) + ", is " + ShapeString(yv.shape));
    }
    inputs.push_back(*y);
  }
  Node n;
  n.scale = scale;
  return Add(OpKind::kLowRank, std::move(name), std::move(inputs), std::move(shape),
             ValueType::kF32, n);
}

ValueId Builder::RmsNormBack(std::string name, ValueId x, ValueId w, ValueId dy, float eps) {
  if (!Usable(name, {x, w, dy})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& wv = g_.values_[w];
  if (xv.type != ValueType::kF32 || xv.shape.empty() || g_.values_[dy].shape != xv.shape ||
      g_.values_[dy].type != ValueType::kF32) {
    return Refuse("rms_norm_back", name, "x and dy must be f32 of one shape");
  }
  if (wv.shape.size() != 1 || wv.shape[0] != xv.shape.back() || wv.type == ValueType::kI32) {
    return Refuse("rms_norm_back", name,
                  "weight " + ShapeString(wv.shape) + " does not match x " + ShapeString(xv.shape));
  }
  Node n;
  n.eps = eps;
  return Add(OpKind::kRmsNormBack, std::move(name), {x, w, dy}, xv.shape, ValueType::kF32, n);
}

ValueId Builder::RopeBack(std::string name, ValueId dy, ValueId pos, double base) {
  if (!Usable(name, {dy, pos})) return ValueId();
  const Value& xv = g_.values_[dy];
  const Value& pv = g_.values_[pos];
  if (xv.type != ValueType::kF32 || xv.shape.size() != 3 || xv.shape[2] % 2 != 0) {
    return Refuse("rope_back", name, "dy must be f32 [S,heads,D] with even D");
  }
  if (pv.type != ValueType::kI32 || pv.shape != std::vector<int64_t>{xv.shape[0]}) {
    return Refuse("rope_back", name, "positions must be i32 [S]");
  }
  if (!(base > 1.0)) return Refuse("rope_back", name, "base must be > 1");
  Node n;
  n.rope_base = base;
  return Add(OpKind::kRopeBack, std::move(name), {dy, pos}, xv.shape, ValueType::kF32, n);
}

ValueId Builder::CacheRead(std::string name, ValueId cache, ValueId pos) {
  if (!Usable(name, {cache, pos})) return ValueId();
  const Value& cv = g_.values_[cache];
  const Value& pv = g_.values_[pos];
  if (cv.type != ValueType::kF32 || cv.shape.size() != 3) {
    return Refuse("cache_read", name, "cache must be f32 [R,KV,D]");
  }
  if (pv.type != ValueType::kI32 || pv.shape.size() != 1) {
    return Refuse("cache_read", name, "positions must be i32 [S]");
  }
  return Add(OpKind::kCacheRead, std::move(name), {cache, pos},
             {pv.shape[0], cv.shape[1], cv.shape[2]}, ValueType::kF32);
}

ValueId Builder::AttentionBack(std::string name, const Node& attention, ValueId dout,
                               bool written_keys_only) {
  if (attention.op != OpKind::kAttention) {
    return Refuse("attention_back", name, "needs an attention node");
  }
  if (!Usable(name, {dout})) return ValueId();
  for (int id : attention.inputs) {
    if (!Usable(name, {ValueId(id)})) return ValueId();
  }
  const Value& qv = g_.values_[attention.inputs[0]];
  const Value& kv = g_.values_[attention.inputs[1]];
  const Value& dv = g_.values_[dout];
  if (dv.type != ValueType::kF32 || dv.shape != std::vector<int64_t>{qv.shape[0], qv.shape[1] * qv.shape[2]}) {
    return Refuse("attention_back", name, "dout must be f32 [S,Hq*D], is " + ShapeString(dv.shape));
  }
  Node n;
  n.scale = attention.scale;
  n.window = attention.window;
  n.written_keys_only = written_keys_only;
  std::vector<int> inputs = attention.inputs;
  inputs.push_back(dout);
  return Add(OpKind::kAttentionBack, std::move(name), std::move(inputs),
             {qv.elements() + 2 * kv.elements()}, ValueType::kF32, n);
}

ValueId Builder::Slice(std::string name, ValueId x, int64_t offset, std::vector<int64_t> shape) {
  if (!Usable(name, {x})) return ValueId();
  const Value& xv = g_.values_[x];
  Value probe;
  probe.shape = shape;
  if (xv.type == ValueType::kStored || HasDynamic(shape) || HasDynamic(xv.shape) ||
      !ValidShape(shape) || offset < 0 || offset + probe.elements() > xv.elements()) {
    return Refuse("slice", name,
                  ShapeString(shape) + " at " + std::to_string(offset) + " does not fit in " +
                      ShapeString(xv.shape));
  }
  Node n;
  n.offset = offset;
  return Add(OpKind::kSlice, std::move(name), {x}, std::move(shape), xv.type, n);
}

ValueId Builder::GeluMulBack(std::string name, ValueId gate, ValueId up, ValueId dy,
                             int64_t operand) {
  if (!Usable(name, {gate, up, dy})) return ValueId();
  const auto& shape = g_.values_[gate].shape;
  if (g_.values_[up].shape != shape || g_.values_[dy].shape != shape) {
    return Refuse("gelu_mul_back", name, "shapes differ");
  }
  if (operand != 0 && operand != 1) return Refuse("gelu_mul_back", name, "operand is 0 or 1");
  Node n;
  n.operand = operand;
  return Add(OpKind::kGeluMulBack, std::move(name), {gate, up, dy}, shape, ValueType::kF32, n);
}

ValueId Builder::ScatterRows(std::string name, ValueId dy, ValueId rows, int64_t n_rows) {
  if (!Usable(name, {dy, rows})) return ValueId();
  const Value& dv = g_.values_[dy];
  const Value& rv = g_.values_[rows];
  if (dv.type != ValueType::kF32 || dv.shape.size() != 2 || rv.type != ValueType::kI32 ||
      rv.shape != std::vector<int64_t>{dv.shape[0]} || n_rows < 0) {
    return Refuse("scatter_rows", name, "dy f32 [R,N] and rows i32 [R] expected");
  }
  Node n;
  n.n_rows = n_rows;
  return Add(OpKind::kScatterRows, std::move(name), {dy, rows}, {n_rows, dv.shape[1]},
             ValueType::kF32, n);
}

ValueId Builder::CrossEntropy(std::string name, ValueId logits, ValueId targets) {
  if (!Usable(name, {logits, targets})) return ValueId();
  const Value& lv = g_.values_[logits];
  const Value& tv = g_.values_[targets];
  if (lv.type != ValueType::kF32 || lv.shape.size() != 2 || lv.shape[1] == 0 ||
      tv.type != ValueType::kI32 || tv.shape != std::vector<int64_t>{lv.shape[0]}) {
    return Refuse("cross_entropy", name, "logits f32 [R,V] and targets i32 [R] expected");
  }
  return Add(OpKind::kCrossEntropy, std::move(name), {logits, targets}, {lv.shape[0]},
             ValueType::kF32);
}

ValueId Builder::CrossEntropyBack(std::string name, ValueId logits, ValueId targets,
                                  ValueId dloss) {
  if (!Usable(name, {logits, targets, dloss})) return ValueId();
  const Value& lv = g_.values_[logits];
  const Value& tv = g_.values_[targets];
  const Value& dv = g_.values_[dloss];
  if (lv.type != ValueType::kF32 || lv.shape.size() != 2 || lv.shape[1] == 0 ||
      tv.type != ValueType::kI32 || tv.shape != std::vector<int64_t>{lv.shape[0]} ||
      dv.type != ValueType::kF32 || dv.shape != tv.shape) {
    return Refuse("cross_entropy_back", name,
                  "logits f32 [R,V], targets i32 [R] and dloss f32 [R] expected");
  }
  return Add(OpKind::kCrossEntropyBack, std::move(name), {logits, targets, dloss}, lv.shape,
             ValueType::kF32);
}

ValueId Builder::DotTN(std::string name, ValueId a, ValueId b) {
  if (!Usable(name, {a, b})) return ValueId();
  const Value& av = g_.values_[a];
  const Value& bv = g_.values_[b];
  if (av.type != ValueType::kF32 || bv.type != ValueType::kF32 || av.shape.size() != 2 ||
      bv.shape.size() != 2 || av.shape[0] != bv.shape[0]) {
    return Refuse("dot_tn", name,
                  "f32 [K,M]^T x [K,N] expected, got " + ShapeString(av.shape) + " x " +
                      ShapeString(bv.shape));
  }
  return Add(OpKind::kDotTN, std::move(name), {a, b}, {av.shape[1], bv.shape[1]}, ValueType::kF32);
}

ValueId Builder::CandidateLogits(std::string name, ValueId x, ValueId w, ValueId ids) {
  if (!Usable(name, {x, w, ids})) return ValueId();
  const Value& xv = g_.values_[x];
  const Value& wv = g_.values_[w];
  const Value& iv = g_.values_[ids];
  if (xv.type != ValueType::kF32 || xv.shape.size() != 2 || wv.type != ValueType::kStored ||
      wv.shape.size() != 2 || wv.shape[1] != xv.shape[1] || iv.type != ValueType::kI32 ||
      iv.shape.size() != 2 || iv.shape[0] != xv.shape[0] || iv.shape[1] == 0) {
    return Refuse("candidate_logits", name,
                  "x f32 [R,D], a stored weight [V,D] and ids i32 [R,C] expected, got " +
                      ShapeString(xv.shape) + ", " + ShapeString(wv.shape) + ", " +
                      ShapeString(iv.shape));
  }
  return Add(OpKind::kCandidateLogits, std::move(name), {x, w, ids}, iv.shape, ValueType::kF32);
}

ValueId Builder::CandidateLogitsBack(std::string name, ValueId w, ValueId ids, ValueId dy) {
  if (!Usable(name, {w, ids, dy})) return ValueId();
  const Value& wv = g_.values_[w];
  const Value& iv = g_.values_[ids];
  const Value& dv = g_.values_[dy];
  if (wv.type != ValueType::kStored || wv.shape.size() != 2 || iv.type != ValueType::kI32 ||
      iv.shape.size() != 2 || dv.type != ValueType::kF32 || dv.shape != iv.shape) {
    return Refuse("candidate_logits_back", name,
                  "a stored weight [V,D], ids i32 [R,C] and dy f32 [R,C] expected");
  }
  return Add(OpKind::kCandidateLogitsBack, std::move(name), {w, ids, dy},
             {iv.shape[0], wv.shape[1]}, ValueType::kF32);
}

ValueId Builder::HeadCrossEntropyBack(std::string name, ValueId w, ValueId mean, ValueId logits,
                                      ValueId targets, ValueId loss, ValueId dloss, float threshold,
                                      int64_t max_tokens) {
  if (!Usable(name, {w, mean, logits, targets, loss, dloss})) return ValueId();
  const Value& lossv = g_.values_[loss];
  const Value& wv = g_.values_[w];
  const Value& mv = g_.values_[mean];
  const Value& lv = g_.values_[logits];
  const Value& tv = g_.values_[targets];
  const Value& dv = g_.values_[dloss];
  if (wv.type != ValueType::kStored || wv.shape.size() != 2 || mv.type != ValueType::kStored ||
      mv.stored_dtype != tensor::DType::kF32 || mv.shape != std::vector<int64_t>{wv.shape[1]} ||
      lv.type != ValueType::kF32 || lv.shape.size() != 2 || lv.shape[1] != wv.shape[0] ||
      tv.type != ValueType::kI32 || tv.shape != std::vector<int64_t>{lv.shape[0]} ||
      dv.type != ValueType::kF32 || dv.shape != tv.shape || lossv.type != ValueType::kF32 ||
      lossv.shape != tv.shape) {
    return Refuse("head_cross_entropy_back", name,
                  "a stored weight [V,D], its mean row f32 [D], logits f32 [R,V], targets i32 "
                  "[R], loss f32 [R] and dloss f32 [R] expected");
  }
  if (!(threshold > 0.0f && threshold < 1.0f) || max_tokens < 1) {
    return Refuse("head_cross_entropy_back", name,
                  "the threshold must be in (0, 1) and max_tokens at least 1");
  }
  Node n;
  n.threshold = threshold;
  n.max_tokens = max_tokens;
  return Add(OpKind::kHeadCrossEntropyBack, std::move(name),
             {w, mean, logits, targets, loss, dloss}, {lv.shape[0], wv.shape[1]}, ValueType::kF32,
             n);
}

void Builder::MarkOutput(ValueId value, std::string name) {
  if (!Usable("output", {value})) return;
  if (name.empty()) name = g_.values_[value].name;
  for (const std::string& n : g_.output_names_) {
    if (n == name) {
      Fail(InvalidArgumentError("graph: duplicate output name '" + name + "'"));
      return;
    }
  }
  g_.outputs_.push_back(value);
  g_.output_names_.push_back(std::move(name));
}

StatusOr<Graph> Builder::Finish() {
  Graph g = std::exchange(g_, Graph{});
  if (!status_.ok()) return std::exchange(status_, Status());
  return g;
}

}  // namespace fg::graph
