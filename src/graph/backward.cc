#include "src/graph/backward.h"

#include <algorithm>
#include <utility>

namespace fg::graph {

namespace {

struct Ctx {
  Builder& b;
  const BackwardSpec& spec;
  std::vector<bool> needs;  // by value id: a gradient must reach it (it leads to a wrt value)
  std::vector<int> grad;    // by value id: its gradient so far, or -1

  const Value& V(int id) const { return b.graph().value(id); }
  // A new value name for a gradient of `v` (or a value made on the way): prefix + name +
  // suffix, then ".2", ".3", ...
  std::string Fresh(int v, std::string_view suffix = {}) const {
    std::string base = spec.prefix + V(v).name + std::string(suffix), name = base;
    for (int k = 2; b.graph().Find(name) >= 0; ++k) name = base + "." + std::to_string(k);
    return name;
  }
  // Adds `d` to v's gradient (nothing when no gradient needs to reach v).
  Status Accumulate(int v, int d) {
    if (!needs[v]) return OkStatus();
    if (grad[v] < 0) {
      grad[v] = d;
      return OkStatus();
    }
    FG_ASSIGN_OR_RETURN(grad[v], b.Add(Fresh(v), grad[v], d));
    return OkStatus();
  }
};

Status NoRule(Ctx& c, const Node& n, int) {
  return UnimplementedError("backward: no gradient rule for " + std::string(OpName(n.op)) +
                            " ('" + c.V(n.output).name + "') on the path to the loss");
}

Status Leaf(Ctx&, const Node&, int) { return OkStatus(); }  // the gradient stays in grad[]

// --- The rules, one per differentiable op: dy is the gradient of the node's output. ---

Status EmbeddingRule(Ctx& c, const Node& n, int) {
  if (c.needs[n.inputs[0]]) {
    return UnimplementedError("backward: embedding tables are not trained ('" +
                              c.V(n.inputs[0]).name + "')");
  }
  return OkStatus();  // token ids have no gradient
}

Status RmsNormRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0], w = n.inputs[1];
  if (c.needs[w]) {
    return UnimplementedError("backward: norm weights are not trained ('" + c.V(w).name + "')");
  }
  if (!c.needs[x]) return OkStatus();
  FG_ASSIGN_OR_RETURN(int dx, c.b.RmsNormBack(c.Fresh(x), x, w, dy, n.f0));
  return c.Accumulate(x, dx);
}

// y = x w^T, w [N,K]: dx = dy w (w^T stored, or w itself through low_rank when f32);
// dw = dy^T x.
Status MatMulRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0], w = n.inputs[1];
  if (c.needs[w]) {
    FG_ASSIGN_OR_RETURN(int dw, c.b.DotTN(c.Fresh(w), dy, x));
    FG_RETURN_IF_ERROR(c.Accumulate(w, dw));
  }
  if (!c.needs[x]) return OkStatus();
  const Value wv = c.V(w);
  int dx;
  if (wv.stored_dtype == tensor::DType::kF32) {
    FG_ASSIGN_OR_RETURN(dx, c.b.LowRank(c.Fresh(x), dy, w, 1.0f));
  } else {
    if (!c.spec.transposed) {
      return InvalidArgumentError("backward: '" + wv.name + "' is " +
                                  std::string(tensor::DTypeName(wv.stored_dtype)) +
                                  " and no transposed weight was given");
    }
    const TransposedWeight t = c.spec.transposed(wv);
    int wt = c.b.graph().Find(t.name);
    if (wt < 0) {
      FG_ASSIGN_OR_RETURN(wt, c.b.Weight(t.name, {wv.shape[1], wv.shape[0]}, t.type));
    }
    FG_ASSIGN_OR_RETURN(dx, c.b.MatMul(c.Fresh(x), dy, wt));
  }
  return c.Accumulate(x, dx);
}

// out = y + s x w, w [K,N] f32: dy passes to y; dx = s dy w^T; dw = s x^T dy.
Status LowRankRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0], w = n.inputs[1];
  if (n.inputs.size() > 2) FG_RETURN_IF_ERROR(c.Accumulate(n.inputs[2], dy));
  auto scaled = [&](int v, int target) -> StatusOr<int> {
    if (n.f0 == 1.0f) return v;
    return c.b.Scale(c.Fresh(target), v, n.f0);
  };
  if (c.needs[w]) {
    FG_ASSIGN_OR_RETURN(int p, c.b.DotTN(c.Fresh(w), x, dy));
    FG_ASSIGN_OR_RETURN(int dw, scaled(p, w));
    FG_RETURN_IF_ERROR(c.Accumulate(w, dw));
  }
  if (c.needs[x]) {
    FG_ASSIGN_OR_RETURN(int p, c.b.MatMul(c.Fresh(x), dy, w));
    FG_ASSIGN_OR_RETURN(int dx, scaled(p, x));
    FG_RETURN_IF_ERROR(c.Accumulate(x, dx));
  }
  return OkStatus();
}

Status ReshapeRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0];
  if (!c.needs[x]) return OkStatus();
  FG_ASSIGN_OR_RETURN(int dx, c.b.Reshape(c.Fresh(x), dy, c.V(x).shape));
  return c.Accumulate(x, dx);
}

Status RopeRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0];
  if (!c.needs[x]) return OkStatus();
  FG_ASSIGN_OR_RETURN(int dx, c.b.RopeBack(c.Fresh(x), dy, n.inputs[1], n.base));
  return c.Accumulate(x, dx);
}

// The written rows' gradient is the cache gradient at rows pos % R; the old cache is a state.
Status CacheWriteRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[1];
  if (!c.needs[x]) return OkStatus();
  FG_ASSIGN_OR_RETURN(int dx, c.b.CacheRead(c.Fresh(x), dy, n.inputs[2]));
  return c.Accumulate(x, dx);
}

Status AttentionRule(Ctx& c, const Node& n, int dy) {
  const int q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
  FG_ASSIGN_OR_RETURN(int all, c.b.AttentionBack(c.Fresh(n.output, ".back"), n, dy));
  const int64_t nq = c.V(q).elements(), nk = c.V(k).elements();
  const std::vector<int64_t> qs = c.V(q).shape, ks = c.V(k).shape;
  if (c.needs[q]) {
    FG_ASSIGN_OR_RETURN(int dq, c.b.Slice(c.Fresh(q), all, 0, qs));
    FG_RETURN_IF_ERROR(c.Accumulate(q, dq));
  }
  if (c.needs[k]) {
    FG_ASSIGN_OR_RETURN(int dk, c.b.Slice(c.Fresh(k), all, nq, ks));
    FG_RETURN_IF_ERROR(c.Accumulate(k, dk));
  }
  if (c.needs[v]) {
    FG_ASSIGN_OR_RETURN(int dv, c.b.Slice(c.Fresh(v), all, nq + nk, ks));
    FG_RETURN_IF_ERROR(c.Accumulate(v, dv));
  }
  return OkStatus();
}

Status GeluMulRule(Ctx& c, const Node& n, int dy) {
  for (int64_t operand : {0, 1}) {
    const int x = n.inputs[operand];
    if (!c.needs[x]) continue;
    FG_ASSIGN_OR_RETURN(int dx, c.b.GeluMulBack(c.Fresh(x), n.inputs[0], n.inputs[1], dy, operand));
    FG_RETURN_IF_ERROR(c.Accumulate(x, dx));
  }
  return OkStatus();
}

Status AddRule(Ctx& c, const Node& n, int dy) {
  FG_RETURN_IF_ERROR(c.Accumulate(n.inputs[0], dy));
  return c.Accumulate(n.inputs[1], dy);
}

Status SelectRowsRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0];
  if (!c.needs[x]) return OkStatus();
  FG_ASSIGN_OR_RETURN(int dx, c.b.ScatterRows(c.Fresh(x), dy, n.inputs[1], c.V(x).shape[0]));
  return c.Accumulate(x, dx);
}

Status ScaleRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0];
  if (!c.needs[x]) return OkStatus();
  FG_ASSIGN_OR_RETURN(int dx, c.b.Scale(c.Fresh(x), dy, n.f0));
  return c.Accumulate(x, dx);
}

Status TransposeRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0];
  if (!c.needs[x]) return OkStatus();
  std::vector<int64_t> inverse(n.perm.size());
  for (size_t i = 0; i < n.perm.size(); ++i) inverse[n.perm[i]] = static_cast<int64_t>(i);
  FG_ASSIGN_OR_RETURN(int dx, c.b.Transpose(c.Fresh(x), dy, std::move(inverse)));
  return c.Accumulate(x, dx);
}

// y = a b: da = dy b^T, db = a^T dy.
Status DotRule(Ctx& c, const Node& n, int dy) {
  const int a = n.inputs[0], b = n.inputs[1];
  if (c.needs[a]) {
    FG_ASSIGN_OR_RETURN(int bt, c.b.Transpose(c.Fresh(b, ".t"), b, {1, 0}));
    FG_ASSIGN_OR_RETURN(int da, c.b.Dot(c.Fresh(a), dy, bt));
    FG_RETURN_IF_ERROR(c.Accumulate(a, da));
  }
  if (c.needs[b]) {
    FG_ASSIGN_OR_RETURN(int db, c.b.DotTN(c.Fresh(b), a, dy));
    FG_RETURN_IF_ERROR(c.Accumulate(b, db));
  }
  return OkStatus();
}

// y = a^T b: da = b dy^T, db = a dy.
Status DotTNRule(Ctx& c, const Node& n, int dy) {
  const int a = n.inputs[0], b = n.inputs[1];
  if (c.needs[a]) {
    FG_ASSIGN_OR_RETURN(int dyt, c.b.Transpose(c.Fresh(n.output, ".t"), dy, {1, 0}));
    FG_ASSIGN_OR_RETURN(int da, c.b.Dot(c.Fresh(a), b, dyt));
    FG_RETURN_IF_ERROR(c.Accumulate(a, da));
  }
  if (c.needs[b]) {
    FG_ASSIGN_OR_RETURN(int db, c.b.Dot(c.Fresh(b), a, dy));
    FG_RETURN_IF_ERROR(c.Accumulate(b, db));
  }
  return OkStatus();
}

Status CrossEntropyRule(Ctx& c, const Node& n, int dy) {
  const int x = n.inputs[0];
  if (!c.needs[x]) return OkStatus();
  FG_ASSIGN_OR_RETURN(int dx, c.b.CrossEntropyBack(c.Fresh(x), x, n.inputs[1], dy));
  return c.Accumulate(x, dx);
}

using Rule = Status (*)(Ctx&, const Node&, int dy);

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
    case OpKind::kConcat: return NoRule;
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
  }
  return NoRule;
}

}  // namespace

TransposedWeight TransposedName(const Value& weight, tensor::DType type) {
  return {weight.name + "^T", type};
}

StatusOr<std::vector<int>> AddBackward(Builder& b, const BackwardSpec& spec) {
  const Graph& g = b.graph();
  const int nv = static_cast<int>(g.values().size());
  for (int id : {spec.loss, spec.seed}) {
    if (id < 0 || id >= nv || g.value(id).type != ValueType::kF32) {
      return InvalidArgumentError("backward: loss and seed must be f32 values");
    }
  }
  if (g.value(spec.loss).shape != g.value(spec.seed).shape) {
    return InvalidArgumentError("backward: the seed " + ShapeString(g.value(spec.seed).shape) +
                                " does not match the loss " +
                                ShapeString(g.value(spec.loss).shape));
  }
  Ctx c{b, spec, std::vector<bool>(nv, false), std::vector<int>(nv, -1)};
  for (int w : spec.wrt) {
    if (w < 0 || w >= nv) return InvalidArgumentError("backward: no value with id " + std::to_string(w));
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
    const int dy = c.grad[n.output];
    if (dy < 0 || !c.needs[n.output]) continue;
    FG_RETURN_IF_ERROR(RuleOf(n.op)(c, n, dy));
  }
  std::vector<int> out;
  for (int w : spec.wrt) {
    if (c.grad[w] < 0) {
      return InvalidArgumentError("backward: the loss does not depend on '" + c.V(w).name + "'");
    }
    FG_RETURN_IF_ERROR(b.MarkOutput(c.grad[w], spec.prefix + c.V(w).name));
    out.push_back(c.grad[w]);
  }
  return out;
}

}  // namespace fg::graph
