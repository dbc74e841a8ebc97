#include "src/graph/backward.h"

#include <algorithm>
#include <utility>

namespace fg::graph {

namespace {

struct Ctx {
  Builder& b;
  const BackwardSpec& spec;
  std::vector<bool> needs;  // by value id: a gradient must reach it (it leads to a wrt value)
  std::vector<ValueId> grad;  // by value id: its gradient so far, or none

  const Value& V(ValueId id) const { return b.graph().value(id); }
  // A new value name for a gradient of `v` (or a value made on the way): prefix + name +
  // suffix, then ".2", ".3", ...
  std::string Fresh(ValueId v, std::string_view suffix = {}) const {
    std::string base = spec.prefix + V(v).name + std::string(suffix), name = base;
    for (int k = 2; b.graph().Find(name).valid(); ++k) name = base + "." + std::to_string(k);
    return name;
  }
  // Adds `d` to v's gradient (nothing when no gradient needs to reach v).
  void Accumulate(ValueId v, ValueId d) {
    if (!needs[v]) return;
    grad[v] = grad[v].valid() ? b.Add(Fresh(v), grad[v], d) : d;
  }
};

// Operand `i` of `n`.
ValueId In(const Node& n, size_t i) { return ValueId(n.inputs[i]); }

Status NoRule(Ctx& c, const Node& n, ValueId) {
  return UnimplementedError("backward: no gradient rule for " + std::string(OpName(n.op)) + " ('" +
                            c.V(ValueId(n.output)).name + "') on the path to the loss");
}

Status Leaf(Ctx&, const Node&, ValueId) { return OkStatus(); }  // the gradient stays in grad[]

// --- The rules, one per differentiable op: dy is the gradient of the node's output. ---

Status EmbeddingRule(Ctx& c, const Node& n, ValueId) {
  if (c.needs[In(n, 0)]) {
    return UnimplementedError("backward: embedding tables are not trained ('" + c.V(In(n, 0)).name +
                              "')");
  }
  return OkStatus();  // token ids have no gradient
}

Status RmsNormRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0), w = In(n, 1);
  if (c.needs[w]) {
    return UnimplementedError("backward: norm weights are not trained ('" + c.V(w).name + "')");
  }
  if (!c.needs[x]) return OkStatus();
  const ValueId dx = c.b.RmsNormBack(c.Fresh(x), x, w, dy, n.eps);
  c.Accumulate(x, dx);
  return OkStatus();
}

// y = x w^T, w [N,K]: dx = dy w (w^T stored, or w itself through low_rank when f32);
// dw = dy^T x.
Status MatMulRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0), w = In(n, 1);
  if (c.needs[w]) {
    const ValueId dw = c.b.DotTN(c.Fresh(w), dy, x);
    c.Accumulate(w, dw);
  }
  if (!c.needs[x]) return OkStatus();
  const Value wv = c.V(w);
  ValueId dx;
  if (wv.stored_dtype == tensor::DType::kF32) {
    dx = c.b.LowRank(c.Fresh(x), dy, w, 1.0f);
  } else {
    if (!c.spec.transposed) {
      return InvalidArgumentError("backward: '" + wv.name + "' is " +
                                  std::string(tensor::DTypeName(wv.stored_dtype)) +
                                  " and no transposed weight was given");
    }
    const TransposedWeight t = c.spec.transposed(wv);
    ValueId wt = c.b.graph().Find(t.name);
    if (!wt.valid()) {
      wt = c.b.Weight(t.name, {wv.shape[1], wv.shape[0]}, t.type);
    }
    dx = c.b.MatMul(c.Fresh(x), dy, wt);
  }
  c.Accumulate(x, dx);
  return OkStatus();
}

// out = y + s x w, w [K,N] f32: dy passes to y; dx = s dy w^T; dw = s x^T dy.
Status LowRankRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0), w = In(n, 1);
  if (n.inputs.size() > 2) c.Accumulate(In(n, 2), dy);
  auto scaled = [&](ValueId v, ValueId target) {
    if (n.scale == 1.0f) return v;
    return c.b.Scale(c.Fresh(target), v, n.scale);
  };
  if (c.needs[w]) {
    const ValueId p = c.b.DotTN(c.Fresh(w), x, dy);
    const ValueId dw = scaled(p, w);
    c.Accumulate(w, dw);
  }
  if (c.needs[x]) {
    const ValueId p = c.b.MatMul(c.Fresh(x), dy, w);
    const ValueId dx = scaled(p, x);
    c.Accumulate(x, dx);
  }
  return OkStatus();
}

Status ReshapeRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0);
  if (!c.needs[x]) return OkStatus();
  const ValueId dx = c.b.Reshape(c.Fresh(x), dy, c.V(x).shape);
  c.Accumulate(x, dx);
  return OkStatus();
}

Status RopeRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0);
  if (!c.needs[x]) return OkStatus();
  const ValueId dx = c.b.RopeBack(c.Fresh(x), dy, In(n, 1), n.rope_base);
  c.Accumulate(x, dx);
  return OkStatus();
}

// The written rows' gradient is the cache gradient at rows pos % R; the old cache is a state.
Status CacheWriteRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 1);
  if (!c.needs[x]) return OkStatus();
  const ValueId dx = c.b.CacheRead(c.Fresh(x), dy, In(n, 2));
  c.Accumulate(x, dx);
  return OkStatus();
}

Status AttentionRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId q = In(n, 0), k = In(n, 1), v = In(n, 2);
  // Caches written by cache_write at the queries' positions: only those rows' gradient is read
  // (CacheWriteRule), so the keys before them (a cached prefix) need no dK/dV.
  auto written = [&](ValueId x) {
    const int p = c.V(x).producer;
    if (p < 0) return false;
    const Node& w = c.b.graph().nodes()[p];
    return w.op == OpKind::kCacheWrite && w.inputs[2] == n.inputs[3];  // at the same positions
  };
  const ValueId all = c.b.AttentionBack(c.Fresh(ValueId(n.output), ".back"), n, dy,
                                        written(k) && written(v));
  const int64_t nq = c.V(q).elements(), nk = c.V(k).elements();
  const std::vector<int64_t> qs = c.V(q).shape, ks = c.V(k).shape;
  if (c.needs[q]) {
    const ValueId dq = c.b.Slice(c.Fresh(q), all, 0, qs);
    c.Accumulate(q, dq);
  }
  if (c.needs[k]) {
    const ValueId dk = c.b.Slice(c.Fresh(k), all, nq, ks);
    c.Accumulate(k, dk);
  }
  if (c.needs[v]) {
    const ValueId dv = c.b.Slice(c.Fresh(v), all, nq + nk, ks);
    c.Accumulate(v, dv);
  }
  return OkStatus();
}

Status GeluMulRule(Ctx& c, const Node& n, ValueId dy) {
  for (int64_t operand : {0, 1}) {
    const ValueId x = In(n, operand);
    if (!c.needs[x]) continue;
    const ValueId dx = c.b.GeluMulBack(c.Fresh(x), In(n, 0), In(n, 1), dy, operand);
    c.Accumulate(x, dx);
  }
  return OkStatus();
}

Status AddRule(Ctx& c, const Node& n, ValueId dy) {
  c.Accumulate(In(n, 0), dy);
  c.Accumulate(In(n, 1), dy);
  return OkStatus();
}

Status SelectRowsRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0);
  if (!c.needs[x]) return OkStatus();
  const ValueId dx = c.b.ScatterRows(c.Fresh(x), dy, In(n, 1), c.V(x).shape[0]);
  c.Accumulate(x, dx);
  return OkStatus();
}

Status ScaleRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0);
  if (!c.needs[x]) return OkStatus();
  const ValueId dx = c.b.Scale(c.Fresh(x), dy, n.scale);
  c.Accumulate(x, dx);
  return OkStatus();
}

Status TransposeRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0);
  if (!c.needs[x]) return OkStatus();
  std::vector<int64_t> inverse(n.perm.size());
  for (size_t i = 0; i < n.perm.size(); ++i) inverse[n.perm[i]] = static_cast<int64_t>(i);
  const ValueId dx = c.b.Transpose(c.Fresh(x), dy, std::move(inverse));
  c.Accumulate(x, dx);
  return OkStatus();
}

// y = a b: da = dy b^T, db = a^T dy.
Status DotRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId a = In(n, 0), b = In(n, 1);
  if (c.needs[a]) {
    const ValueId bt = c.b.Transpose(c.Fresh(b, ".t"), b, {1, 0});
    const ValueId da = c.b.Dot(c.Fresh(a), dy, bt);
    c.Accumulate(a, da);
  }
  if (c.needs[b]) {
    const ValueId db = c.b.DotTN(c.Fresh(b), a, dy);
    c.Accumulate(b, db);
  }
  return OkStatus();
}

// y = a^T b: da = b dy^T, db = a dy.
Status DotTNRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId a = In(n, 0), b = In(n, 1);
  if (c.needs[a]) {
    const ValueId dyt = c.b.Transpose(c.Fresh(ValueId(n.output), ".t"), dy, {1, 0});
    const ValueId da = c.b.Dot(c.Fresh(a), b, dyt);
    c.Accumulate(a, da);
  }
  if (c.needs[b]) {
    const ValueId db = c.b.Dot(c.Fresh(b), a, dy);
    c.Accumulate(b, db);
  }
  return OkStatus();
}

// The matmul node producing `logits` when cross_entropy may take head_cross_entropy_back
// (BackwardSpec::sparse_head): a frozen quantized weight, the logits read by nothing else.
const Node* SparseHeadProduct(const Ctx& c, ValueId logits) {
  const SparseHead& sh = c.spec.sparse_head;
  if (sh.threshold <= 0.0f || !sh.mean) return nullptr;
  const Graph& g = c.b.graph();
  const Node& p = g.nodes()[c.V(logits).producer];
  if (p.op != OpKind::kMatMul) return nullptr;
  const Value& w = c.V(In(p, 1));
  if (c.needs[In(p, 1)] || w.type != ValueType::kStored || w.stored_dtype == tensor::DType::kF32) {
    return nullptr;
  }
  int readers = 0;
  for (const Node& m : g.nodes())
    readers += static_cast<int>(std::count(m.inputs.begin(), m.inputs.end(), logits.index()));
  return readers == 1 ? &p : nullptr;
}

Status CrossEntropyRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0);
  if (!c.needs[x]) return OkStatus();
  if (const Node* p = SparseHeadProduct(c, x)) {
    // The head is frozen (SparseHeadProduct), so the logits need a gradient through hx alone.
    const ValueId hx = In(*p, 0), w = In(*p, 1);
    const Value wv = c.V(w);
    const std::string mean_name = c.spec.sparse_head.mean(wv);
    ValueId mean = c.b.graph().Find(mean_name);
    if (!mean.valid()) mean = c.b.Weight(mean_name, {wv.shape[1]}, tensor::DType::kF32);
    const ValueId dx =
        c.b.HeadCrossEntropyBack(c.Fresh(hx), w, mean, x, In(n, 1), ValueId(n.output), dy,
                                 c.spec.sparse_head.threshold, c.spec.sparse_head.max_tokens);
    c.Accumulate(hx, dx);
    return OkStatus();
  }
  const ValueId dx = c.b.CrossEntropyBack(c.Fresh(x), x, In(n, 1), dy);
  c.Accumulate(x, dx);
  return OkStatus();
}

// y[r,c] = x[r] . w[ids[r,c]], w frozen: dx[r] = sum_c dy[r,c] w[ids[r,c]].
Status CandidateLogitsRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId x = In(n, 0), w = In(n, 1);
  if (c.needs[w]) {
    return UnimplementedError("backward: LM-head candidates are not trained ('" + c.V(w).name +
                              "')");
  }
  if (!c.needs[x]) return OkStatus();
  const ValueId dx = c.b.CandidateLogitsBack(c.Fresh(x), w, In(n, 2), dy);
  c.Accumulate(x, dx);
  return OkStatus();
}

// Along an axis with nothing but size-1 dimensions before it, each operand is one contiguous
// piece of the output: its gradient is a slice of dy. Other axes have no rule.
Status ConcatRule(Ctx& c, const Node& n, ValueId dy) {
  const ValueId a = In(n, 0), b = In(n, 1);
  for (int64_t i = 0; i < n.axis; ++i) {
    if (c.V(a).shape[i] != 1) return NoRule(c, n, dy);
  }
  if (c.needs[a]) c.Accumulate(a, c.b.Slice(c.Fresh(a), dy, 0, c.V(a).shape));
  if (c.needs[b]) c.Accumulate(b, c.b.Slice(c.Fresh(b), dy, c.V(a).elements(), c.V(b).shape));
  return OkStatus();
}

using Rule = Status (*)(Ctx&, const Node&, ValueId dy);

// The rule table (no default: a new op must say whether it has a rule).
Rule RuleOf(OpKind op) {
  switch (op) {
    case OpKind::kInput: return Leaf;
    case OpKind::kWeight: return Leaf;
    case OpKind::kState: return Leaf;
    case OpKind::kEmbedding: return EmbeddingRule;
    case OpKind::kRmsNorm: return RmsNormRule;
    case OpKind::kMatMul: return MatMulRule;
    case OpKind::kReshape: return ReshapeRule;
    case OpKind::kRope: return RopeRule;
    case OpKind::kCacheWrite: return CacheWriteRule;
    case OpKind::kAttention: return AttentionRule;
    case OpKind::kGeluMul: return GeluMulRule;
    case OpKind::kAdd: return AddRule;
    case OpKind::kSelectRows: return SelectRowsRule;
    case OpKind::kArgmax: return NoRule;
    case OpKind::kIota: return NoRule;
    case OpKind::kScale: return ScaleRule;
    case OpKind::kTranspose: return TransposeRule;
    case OpKind::kConcat: return ConcatRule;
    case OpKind::kRopeTable: return NoRule;
    case OpKind::kAttentionKV: return NoRule;
    case OpKind::kDot: return DotRule;
    case OpKind::kLowRank: return LowRankRule;
    case OpKind::kRmsNormBack: return NoRule;
    case OpKind::kRopeBack: return NoRule;
    case OpKind::kCacheRead: return NoRule;
    case OpKind::kAttentionBack: return NoRule;
    case OpKind::kSlice: return NoRule;
    case OpKind::kGeluMulBack: return NoRule;
    case OpKind::kScatterRows: return NoRule;
    case OpKind::kCrossEntropy: return CrossEntropyRule;
    case OpKind::kCrossEntropyBack: return NoRule;
    case OpKind::kDotTN: return DotTNRule;
    case OpKind::kCandidateLogits: return CandidateLogitsRule;
    case OpKind::kCandidateLogitsBack: return NoRule;
    case OpKind::kHeadCrossEntropyBack:
      return NoRule;
  }
  return NoRule;
}

}  // namespace

TransposedWeight TransposedName(const Value& weight, tensor::DType type) {
  return {weight.name + "^T", type};
}

StatusOr<std::vector<ValueId>> AddBackward(Builder& b, const BackwardSpec& spec) {
  FG_RETURN_IF_ERROR(b.status());
  const Graph& g = b.graph();
  const int nv = static_cast<int>(g.values().size());
  for (ValueId id : {spec.loss, spec.seed}) {
    if (id.index() < 0 || id.index() >= nv || g.value(id).type != ValueType::kF32) {
      return InvalidArgumentError("backward: loss and seed must be f32 values");
    }
  }
  if (g.value(spec.loss).shape != g.value(spec.seed).shape) {
    return InvalidArgumentError("backward: the seed " + ShapeString(g.value(spec.seed).shape) +
                                " does not match the loss " +
                                ShapeString(g.value(spec.loss).shape));
  }
  Ctx c{b, spec, std::vector<bool>(nv, false), std::vector<ValueId>(nv)};
  for (ValueId w : spec.wrt) {
    if (w.index() < 0 || w.index() >= nv) {
      return InvalidArgumentError("backward: no value with id " + std::to_string(w.index()));
    }
    const Value& v = g.value(w);
    const OpKind op = g.nodes()[v.producer].op;
    const bool ok = (op == OpKind::kInput && v.type == ValueType::kF32) ||
                    (op == OpKind::kWeight && v.stored_dtype == tensor::DType::kF32);
    if (!ok) {
      return InvalidArgumentError("backward: '" + v.name +
                                  "' is not an f32 input or an f32 weight");
    }
    c.needs[w] = true;
  }
  const int last = g.value(spec.loss).producer;
  for (int i = 0; i <= last; ++i) {
    const Node& n = g.nodes()[i];
    for (int in : n.inputs) {
      if (c.needs[in]) c.needs[n.output] = true;
    }
  }
  if (!c.needs[spec.loss]) {
    return InvalidArgumentError("backward: the loss does not depend on any wrt value");
  }
  c.grad[spec.loss] = spec.seed;
  for (int i = last; i >= 0; --i) {
    const Node n = b.graph().nodes()[i];  // a copy: rules append nodes
    const ValueId dy = c.grad[n.output];
    if (!dy.valid() || !c.needs[n.output]) continue;
    FG_RETURN_IF_ERROR(RuleOf(n.op)(c, n, dy));
    FG_RETURN_IF_ERROR(b.status());  // a shape error of the rule's ops
  }
  std::vector<ValueId> out;
  for (ValueId w : spec.wrt) {
    if (!c.grad[w].valid()) {
      return InvalidArgumentError("backward: the loss does not depend on '" + c.V(w).name + "'");
    }
    b.MarkOutput(c.grad[w], spec.prefix + c.V(w).name);
    out.push_back(c.grad[w]);
  }
  FG_RETURN_IF_ERROR(b.status());
  return out;
}

}  // namespace fg::graph
