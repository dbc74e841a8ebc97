// StableHLO lowering of graph::Graph (see stablehlo.h). Ops are printed in MLIR's generic form
// ("stablehlo.add"(%a, %b) : (...) -> ...), which every StableHLO version parses the same way.
// Numerics follow the executor's kernels (src/kernels/ops.cc, attention.h): RMSNorm
// x * rsqrt(mean(x^2) + eps) * w (the GGUF norm weights already hold 1 + w), GELU-tanh as
// g / (1 + exp(g (c0 + c1 g^2))), split-half RoPE, softmax over the visible keys only, argmax
// to the first index of the maximum.
#include "src/export/stablehlo.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "src/export/contract.h"

namespace fg::exporter {

std::string_view WeightTypeName(WeightType t) {
  switch (t) {
    case WeightType::kBf16: return "bf16";
    case WeightType::kF16: return "f16";
    case WeightType::kF32: return "f32";
  }
  return "?";
}

std::optional<WeightType> ParseWeightType(std::string_view name) {
  for (WeightType t : {WeightType::kBf16, WeightType::kF16, WeightType::kF32}) {
    if (WeightTypeName(t) == name) return t;
  }
  return std::nullopt;
}

WeightType StoredWeightType(const std::vector<int64_t>& shape, WeightType type) {
  return shape.size() >= 2 ? type : WeightType::kF32;
}

int64_t WeightTypeBytes(WeightType t) {
  switch (t) {
    case WeightType::kBf16:
    case WeightType::kF16: return 2;
    case WeightType::kF32: return 4;
  }
  return 4;
}

namespace {

using graph::Node;
using graph::OpKind;
using graph::Value;
using graph::HasDynamic;
using graph::ValueType;
using Shape = std::vector<int64_t>;

std::string Dims(const Shape& s) {
  std::string r;
  for (int64_t d : s) r += (d == kDynamic ? std::string("?") : std::to_string(d)) + "x";
  return r;
}

std::string Ty(const Shape& s, std::string_view elem) {
  return "tensor<" + Dims(s) + std::string(elem) + ">";
}

std::string I64Array(const Shape& v) {
  std::string r = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : ": ") + std::to_string(v[i]);
  return r + ">";
}

std::string F32Literal(float f) {
  if (std::isinf(f)) return f > 0 ? "0x7F800000" : "0xFF800000";
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.9e", static_cast<double>(f));
  return buf;
}

// A tensor SSA value with its shape and element type.
struct T {
  std::string ssa;
  Shape shape;
  std::string elem = "f32";
  std::string type() const { return Ty(shape, elem); }
};

// Emits one func.func body.
class FnEmitter {
 public:
  FnEmitter(const graph::Graph& g, const std::map<std::string, std::string>& globals,
            const std::map<std::string, WeightType>& global_types)
      : g_(g), globals_(globals), global_types_(global_types) {}

  StatusOr<std::string> Emit(const std::string& name);

 private:
  // Appends "%N = rhs" and returns the new value.
  T Op(const std::string& rhs, Shape shape, std::string elem = "f32") {
    T t{"%" + std::to_string(next_++), std::move(shape), std::move(elem)};
    body_ += "    " + t.ssa + " = " + rhs + "\n";
    return t;
  }
  // "stablehlo.<op>"(args) {attrs} : (arg types) -> result type
  T Hlo(const std::string& op, const std::vector<T>& args, Shape shape, std::string elem,
        const std::string& attrs = "") {
    std::string a, ts;
    for (size_t i = 0; i < args.size(); ++i) {
      a += (i ? ", " : "") + args[i].ssa;
      ts += (i ? ", " : "") + args[i].type();
    }
    std::string rhs = "\"stablehlo." + op + "\"(" + a + ")";
    if (!attrs.empty()) rhs += " {" + attrs + "}";
    rhs += " : (" + ts + ") -> " + Ty(shape, elem);
    return Op(rhs, std::move(shape), std::move(elem));
  }
  T Binary(const std::string& op, const T& a, const T& b) { return Hlo(op, {a, b}, a.shape, a.elem); }
  T Unary(const std::string& op, const T& a) { return Hlo(op, {a}, a.shape, a.elem); }
  T ConstF32(float f) {
    return Op("\"stablehlo.constant\"() {value = dense<" + F32Literal(f) + "> : tensor<f32>} : () -> tensor<f32>",
              {}, "f32");
  }
  T ConstI32(int64_t v) {
    return Op("\"stablehlo.constant\"() {value = dense<" + std::to_string(v) +
                  "> : tensor<i32>} : () -> tensor<i32>",
              {}, "i32");
  }
  T ConstF32Vector(const std::vector<float>& v) {
    std::string d;
    for (size_t i = 0; i < v.size(); ++i) d += (i ? ", " : "") + F32Literal(v[i]);
    Shape s{static_cast<int64_t>(v.size())};
    return Op("\"stablehlo.constant\"() {value = dense<[" + d + "]> : " + Ty(s, "f32") + "} : () -> " +
                  Ty(s, "f32"),
              s, "f32");
  }
  T Convert(const T& x, const std::string& elem) {
    if (x.elem == elem) return x;
    return Hlo("convert", {x}, x.shape, elem);
  }
  // A 1-D i32 tensor of `shape`'s extents (for dynamic broadcasts, iotas and reshapes): each
  // kDynamic dim, in order, takes its size from the next (value, dim) of `dyn`.
  using DynDims = std::vector<std::pair<T, int64_t>>;
  T ShapeTensor(const Shape& shape, const DynDims& dyn) {
    std::vector<T> parts;
    size_t next = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      T d;
      if (shape[i] == kDynamic) {
        const auto& [ref, dim] = dyn.at(next++);
        d = Hlo("get_dimension_size", {ref}, {}, "i32", "dimension = " + std::to_string(dim) + " : i64");
      } else {
        d = ConstI32(shape[i]);
      }
      parts.push_back(Hlo("reshape", {d}, {1}, "i32"));
    }
    if (parts.size() == 1) return parts[0];
    return Hlo("concatenate", parts, {static_cast<int64_t>(shape.size())}, "i32", "dimension = 0 : i64");
  }
  // The dynamic dims of `shape` taken from the same dims of `ref` (which has that shape).
  static DynDims Like(const T* ref, const Shape& shape) {
    DynDims d;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == kDynamic) d.push_back({*ref, static_cast<int64_t>(i)});
    }
    return d;
  }
  // broadcast_in_dim of x to `shape`; x's dim i goes to output dim dims[i]. `ref` supplies the
  // dynamic extents (it has `shape`).
  T Broadcast(const T& x, const Shape& shape, const Shape& dims, const T* ref = nullptr) {
    return BroadcastDyn(x, shape, dims, HasDynamic(shape) ? Like(ref, shape) : DynDims{});
  }
  T BroadcastDyn(const T& x, const Shape& shape, const Shape& dims, const DynDims& dyn) {
    if (!HasDynamic(shape)) {
      return Hlo("broadcast_in_dim", {x}, shape, x.elem, "broadcast_dimensions = " + I64Array(dims));
    }
    // Every dim of x keeps its extent (x's dynamic dims are the output's): saying so lets
    // IREE lower the op (an unannotated dim might be a 1 broadcast at run time).
    Shape same, grows;
    for (size_t i = 0; i < x.shape.size(); ++i) {
      (x.shape[i] == 1 && shape[dims[i]] != 1 ? grows : same).push_back(static_cast<int64_t>(i));
    }
    T st = ShapeTensor(shape, dyn);
    return Hlo("dynamic_broadcast_in_dim", {x, st}, shape, x.elem,
               "broadcast_dimensions = " + I64Array(dims) + ", known_expanding_dimensions = " +
                   I64Array(grows) + ", known_nonexpanding_dimensions = " + I64Array(same));
  }
  T Splat(const T& scalar, const Shape& shape, const T* ref = nullptr) {
    return Broadcast(scalar, shape, {}, ref);
  }
  T Iota(const Shape& shape, int64_t dim, const DynDims& dyn = {}) {
    if (!HasDynamic(shape)) {
      return Op("\"stablehlo.iota\"() {iota_dimension = " + std::to_string(dim) + " : i64} : () -> " +
                    Ty(shape, "i32"),
                shape, "i32");
    }
    T st = ShapeTensor(shape, dyn);
    return Hlo("dynamic_iota", {st}, shape, "i32", "iota_dimension = " + std::to_string(dim) + " : i64");
  }
  T Reshape(const T& x, const Shape& shape, const DynDims& dyn = {}) {
    if (x.shape == shape) return x;
    if (!HasDynamic(shape)) return Hlo("reshape", {x}, shape, x.elem);
    T st = ShapeTensor(shape, dyn);
    return Hlo("dynamic_reshape", {x, st}, shape, x.elem);
  }
  T Transpose(const T& x, const Shape& perm) {
    Shape s;
    for (int64_t p : perm) s.push_back(x.shape[p]);
    return Hlo("transpose", {x}, s, x.elem, "permutation = " + I64Array(perm));
  }
  T Slice(const T& x, const Shape& start, const Shape& limit) {
    Shape s, strides(x.shape.size(), 1);
    for (size_t i = 0; i < start.size(); ++i) s.push_back(limit[i] - start[i]);
    return Hlo("slice", {x}, s, x.elem,
               "start_indices = " + I64Array(start) + ", limit_indices = " + I64Array(limit) +
                   ", strides = " + I64Array(strides));
  }
  T Compare(const std::string& dir, const T& a, const T& b) {
    const std::string type = a.elem == "i32" ? "SIGNED" : "FLOAT";
    return Hlo("compare", {a, b}, a.shape, "i1",
               "comparison_direction = #stablehlo<comparison_direction " + dir +
                   ">, compare_type = #stablehlo<comparison_type " + type + ">");
  }
  T Select(const T& pred, const T& a, const T& b) { return Hlo("select", {pred, a, b}, a.shape, a.elem); }
  // reduce over `dims` with a binary op ("add", "maximum", "minimum").
  T Reduce(const T& x, const T& init, const std::string& op, const Shape& dims) {
    Shape s;
    for (size_t i = 0; i < x.shape.size(); ++i) {
      bool reduced = false;
      for (int64_t d : dims) reduced |= d == static_cast<int64_t>(i);
      if (!reduced) s.push_back(x.shape[i]);
    }
    const std::string st = "tensor<" + x.elem + ">";
    const std::string a = "%r" + std::to_string(next_), b = "%s" + std::to_string(next_);
    std::string rhs = "\"stablehlo.reduce\"(" + x.ssa + ", " + init.ssa + ") ({\n";
    rhs += "    ^bb0(" + a + ": " + st + ", " + b + ": " + st + "):\n";
    rhs += "      %t" + std::to_string(next_) + " = \"stablehlo." + op + "\"(" + a + ", " + b + ") : (" + st +
           ", " + st + ") -> " + st + "\n";
    rhs += "      \"stablehlo.return\"(%t" + std::to_string(next_) + ") : (" + st + ") -> ()\n";
    rhs += "    }) {dimensions = " + I64Array(dims) + "} : (" + x.type() + ", " + st + ") -> " + Ty(s, x.elem);
    return Op(rhs, s, x.elem);
  }
  // Rows of `table` [N, W] picked by ids i32 [R] -> [R, W] (stablehlo.gather).
  T GatherRows(const T& table, const T& ids) {
    T idx = Reshape(ids, {ids.shape[0], 1});
    const Shape out{ids.shape[0], table.shape[1]};
    return Hlo("gather", {table, idx}, out, table.elem,
               "dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
               "start_index_map = [0], index_vector_dim = 1>, slice_sizes = " +
                   I64Array({1, table.shape[1]}) + ", indices_are_sorted = false");
  }
  // Softmax over the last dim of x (masked entries already -inf).
  T Softmax(const T& x) {
    const int64_t last = static_cast<int64_t>(x.shape.size()) - 1;
    Shape keep;
    for (int64_t i = 0; i < last; ++i) keep.push_back(i);
    T m = Reduce(x, ConstF32(-INFINITY), "maximum", {last});
    T e = Unary("exponential", Binary("subtract", x, Broadcast(m, x.shape, keep, &x)));
    T s = Reduce(e, ConstF32(0.0f), "add", {last});
    return Binary("divide", e, Broadcast(s, x.shape, keep, &x));
  }

  // The value of a graph value id; weights are loaded (and converted to f32) on first use.
  T Weight(int id, bool as_f32);
  T Val(int id) { return vals_.at(id); }
  Status Lower(const Node& n);
  T Attention(const Node& n);
  T AttentionKV(const Node& n);
  T PickBlock(const T& x, int64_t dim, int64_t index, const Shape& dims);
  T QueryRows(const T& q, int64_t KV);
  T Scores(const T& qt, const T& k, int64_t KV, float scale);
  T SpreadMask(const T& vis, int64_t KV, int64_t G, const DynDims& t_dyn);
  // softmax(scores [KV, S*G, T]) . v [KV, T, D] -> [S, KV*G*D] (query head h = kv * G + g).
  T Attend(const T& scores, const T& v, int64_t S, int64_t G, int64_t KV, int64_t D);

  const graph::Graph& g_;
  const std::map<std::string, std::string>& globals_;
  const std::map<std::string, WeightType>& global_types_;
  std::map<int, T> vals_;
  std::map<int, T> raw_weights_, f32_weights_;
  std::string body_;
  int next_ = 0;
};

std::string ElemOf(ValueType t) { return t == ValueType::kI32 ? "i32" : "f32"; }

T FnEmitter::Weight(int id, bool as_f32) {
  auto it = raw_weights_.find(id);
  if (it == raw_weights_.end()) {
    const Value& v = g_.value(id);
    const std::string elem(WeightTypeName(global_types_.at(v.name)));
    T t = Op("util.global.load @" + globals_.at(v.name) + " : " + Ty(v.shape, elem), v.shape, elem);
    it = raw_weights_.emplace(id, t).first;
  }
  if (!as_f32) return it->second;
  auto f = f32_weights_.find(id);
  if (f == f32_weights_.end()) f = f32_weights_.emplace(id, Convert(it->second, "f32")).first;
  return f->second;
}

// Attention is lowered per KV head group: scores [KV, S*G, T] from a dot_general batched over
// KV heads. With one KV head (Gemma 3 270M) the batch dim is left out entirely: IREE rewrites a
// unit-batch dot_general into reshapes that it cannot type when T is dynamic.
T FnEmitter::QueryRows(const T& q, int64_t KV) {
  const int64_t S = q.shape[0], Hq = q.shape[1], D = q.shape[2], G = Hq / KV;
  if (KV == 1) return Reshape(q, {S * G, D});
  return Reshape(Transpose(Reshape(q, {S, KV, G, D}), {1, 0, 2, 3}), {KV, S * G, D});
}

T FnEmitter::Scores(const T& qt, const T& k, int64_t KV, float scale) {
  const int64_t rows = qt.shape[KV == 1 ? 0 : 1], T_ = k.shape[KV == 1 ? 0 : 1];
  T sc = KV == 1 ? Hlo("dot_general", {qt, k}, {rows, T_}, "f32",
                       "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
                       "rhs_contracting_dimensions = [1]>")
                 : Hlo("dot_general", {qt, k}, {KV, rows, T_}, "f32",
                       "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], "
                       "rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], "
                       "rhs_contracting_dimensions = [2]>");
  return Binary("multiply", sc, Splat(ConstF32(scale), sc.shape, &sc));
}

// vis i1 [S, T] -> the scores' layout ([S*G, T] or [KV, S*G, T]).
T FnEmitter::SpreadMask(const T& vis, int64_t KV, int64_t G, const DynDims& t_dyn) {
  const int64_t S = vis.shape[0], T_ = vis.shape[1];
  if (KV == 1) return Reshape(BroadcastDyn(vis, {S, G, T_}, {0, 2}, t_dyn), {S * G, T_}, t_dyn);
  return Reshape(BroadcastDyn(vis, {KV, S, G, T_}, {1, 3}, t_dyn), {KV, S * G, T_}, t_dyn);
}

T FnEmitter::Attention(const Node& n) {
  // q [S,Hq,D]; caches [R,KV,D]; the key at position k sits in row k % R. For the query at p,
  // row r holds the latest position k <= p with k = r (mod R): k = p - ((p - r) mod R); the
  // key is visible iff k >= max(0, p - W + 1) (window W) or k >= 0 (global). The executor
  // checks that no needed key was overwritten, so this is the set it reads.
  T q = Val(n.inputs[0]);
  T kc = Val(n.inputs[1]);
  T vc = Val(n.inputs[2]);
  T pos = Val(n.inputs[3]);
  const int64_t S = q.shape[0], Hq = q.shape[1], D = q.shape[2];
  const int64_t R = kc.shape[0], KV = kc.shape[1], G = Hq / KV;
  T kt = KV == 1 ? Reshape(kc, {R, D}) : Transpose(kc, {1, 0, 2});  // [KV, R, D]
  T vt = KV == 1 ? Reshape(vc, {R, D}) : Transpose(vc, {1, 0, 2});
  T scores = Scores(QueryRows(q, KV), kt, KV, n.scale);
  // Visibility [S, R].
  const Shape sr{S, R};
  T p = Broadcast(pos, sr, {0});
  T r = Iota(sr, 1);
  T Rc = Splat(ConstI32(R), sr);
  T diff = Binary("remainder", Binary("add", Binary("remainder", Binary("subtract", p, r), Rc), Rc), Rc);
  T k = Binary("subtract", p, diff);
  T lo = Splat(ConstI32(0), sr);
  if (n.window > 0) {
    T first = Binary("subtract", p, Splat(ConstI32(n.window - 1), sr));
    lo = Binary("maximum", first, lo);
  }
  T vis = SpreadMask(Compare("GE", k, lo), KV, G, {});
  T masked = Select(vis, scores, Splat(ConstF32(-INFINITY), scores.shape));
  return Attend(masked, vt, S, G, KV, D);
}

T FnEmitter::Attend(const T& scores, const T& v, int64_t S, int64_t G, int64_t KV, int64_t D) {
  T probs = Softmax(scores);
  if (KV == 1) {
    T o = Hlo("dot_general", {probs, v}, {S * G, D}, "f32",
              "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
              "rhs_contracting_dimensions = [0]>");
    return Reshape(o, {S, G * D});
  }
  T o = Hlo("dot_general", {probs, v}, {KV, S * G, D}, "f32",
            "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], "
            "rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], "
            "rhs_contracting_dimensions = [1]>");
  T o4 = Transpose(Reshape(o, {KV, S, G, D}), {1, 0, 2, 3});  // [S, KV, G, D]
  return Reshape(o4, {S, KV * G * D});
}

// Row block `index` of dim `dim` of x, dropped: select(iota == index, x, 0) summed over `dims`
// (dim and the unit dims beside it). A reshape-free slice: IREE cannot legalize reshapes or
// the reshapes its dot_general canonicalization adds once a dim is dynamic.
T FnEmitter::PickBlock(const T& x, int64_t dim, int64_t index, const Shape& dims) {
  T y = x;
  if (x.shape[dim] > 1) {
    const DynDims dyn = Like(&x, x.shape);
    T it = Iota(x.shape, dim, dyn);
    T mine = Compare("EQ", it, Splat(ConstI32(index), x.shape, &x));
    y = Select(mine, x, Splat(ConstF32(0.0f), x.shape, &x));
  }
  return Reduce(y, ConstF32(0.0f), "add", dims);
}

T FnEmitter::AttentionKV(const Node& n) {
  // q [S,Hq,D]; k, v [1,KV,T,D] (T may be dynamic); optional additive mask [1,Hq,S,T].
  // Without a mask query i sits at key index T-S+i and sees keys j with
  // 0 <= (T-S+i) - j (< window when window > 0).
  // One query head at a time, with plain 2-D dot_generals ([S,D] x [T,D] -> [S,T] and
  // [S,T] x [T,D] -> [S,D]) and no reshape of a dynamic tensor (see PickBlock).
  T q = Val(n.inputs[0]);
  T k = Val(n.inputs[1]);
  T v = Val(n.inputs[2]);
  const bool has_mask = n.inputs.size() > 3;
  const int64_t S = q.shape[0], Hq = q.shape[1], D = q.shape[2];
  const int64_t KV = k.shape[1], T_ = k.shape[2], G = Hq / KV;
  std::vector<T> k2, v2;
  for (int64_t h = 0; h < KV; ++h) {
    k2.push_back(PickBlock(k, 1, h, {0, 1}));  // [T, D]
    v2.push_back(PickBlock(v, 1, h, {0, 1}));
  }
  // One query row (decode): vectors [T] and elementwise products reduced over D / T instead
  // of dot_generals, which IREE turns into matvecs through reshapes of the dynamic operand.
  const bool row = S == 1;
  const Shape st = row ? Shape{T_} : Shape{S, T_};
  const DynDims t_dyn = T_ == kDynamic ? DynDims{{k, 2}} : DynDims{};
  T vis;
  if (!has_mask) {
    T j = Iota(st, row ? 0 : 1, t_dyn);
    T tsize = T_ == kDynamic ? Hlo("get_dimension_size", {k}, {}, "i32", "dimension = 2 : i64")
                             : ConstI32(T_);
    // d = (T - S + i) - j
    T d = Binary("subtract", Splat(tsize, st, &j), Splat(ConstI32(S), st, &j));
    if (!row) d = Binary("add", d, Iota(st, 0, t_dyn));
    d = Binary("subtract", d, j);
    vis = Compare("GE", d, Splat(ConstI32(0), st, &j));
    if (n.window > 0) {
      T in_window = Compare("LT", d, Splat(ConstI32(n.window), st, &j));
      vis = Hlo("and", {vis, in_window}, st, "i1");
    }
  }
  std::vector<T> heads;
  for (int64_t h = 0; h < Hq; ++h) {
    const int64_t kvh = h / G;
    T qh = Reshape(Slice(q, {0, h, 0}, {S, h + 1, D}), row ? Shape{D} : Shape{S, D});
    T sc;
    if (row) {
      const T& kk = k2[kvh];
      sc = Reduce(Binary("multiply", kk, Broadcast(qh, kk.shape, {1}, &kk)), ConstF32(0.0f), "add", {1});
    } else {
      sc = Hlo("dot_general", {qh, k2[kvh]}, st, "f32",
               "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
               "rhs_contracting_dimensions = [1]>");
    }
    sc = Binary("multiply", sc, Splat(ConstF32(n.scale), sc.shape, &sc));
    if (has_mask) {
      sc = Binary("add", sc, PickBlock(Val(n.inputs[3]), 1, h, row ? Shape{0, 1, 2} : Shape{0, 1}));
    } else {
      sc = Select(vis, sc, Splat(ConstF32(-INFINITY), sc.shape, &sc));
    }
    T p = Softmax(sc);
    if (row) {
      const T& vv = v2[kvh];
      T o = Reduce(Binary("multiply", vv, Broadcast(p, vv.shape, {0}, &vv)), ConstF32(0.0f), "add", {0});
      heads.push_back(Reshape(o, {1, D}));
    } else {
      heads.push_back(Hlo("dot_general", {p, v2[kvh]}, {S, D}, "f32",
                          "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
                          "rhs_contracting_dimensions = [0]>"));
    }
  }
  if (heads.size() == 1) return heads[0];
  return Hlo("concatenate", heads, {S, Hq * D}, "f32", "dimension = 1 : i64");
}

Status FnEmitter::Lower(const Node& n) {
  const Value& out = g_.value(n.output);
  switch (n.op) {
    case OpKind::kInput:
    case OpKind::kState:
      return OkStatus();  // function arguments, bound in Emit
    case OpKind::kWeight:
      return OkStatus();  // loaded on first use
    case OpKind::kEmbedding: {
      // Gather the stored rows first, then convert: the table is never widened to f32.
      T table = Weight(n.inputs[0], false);
      T rows = Convert(GatherRows(table, Val(n.inputs[1])), "f32");
      vals_[n.output] = Binary("multiply", rows, Splat(ConstF32(n.scale), rows.shape));
      return OkStatus();
    }
    case OpKind::kRmsNorm: {
      T x = Val(n.inputs[0]);
      const int64_t last = static_cast<int64_t>(x.shape.size()) - 1;
      const int64_t width = x.shape[last];
      Shape keep;
      for (int64_t i = 0; i < last; ++i) keep.push_back(i);
      T ss = Reduce(Binary("multiply", x, x), ConstF32(0.0f), "add", {last});
      T mean = Binary("divide", ss, Splat(ConstF32(static_cast<float>(width)), ss.shape, &ss));
      T inv = Unary("rsqrt", Binary("add", mean, Splat(ConstF32(n.eps), ss.shape, &ss)));
      T w = g_.value(n.inputs[1]).type == ValueType::kStored ? Weight(n.inputs[1], true) : Val(n.inputs[1]);
      T y = Binary("multiply", x, Broadcast(inv, x.shape, keep, &x));
      vals_[n.output] = Binary("multiply", y, Broadcast(w, x.shape, {last}, &x));
      return OkStatus();
    }
    case OpKind::kMatMul: {
      T x = Val(n.inputs[0]);
      T w = Weight(n.inputs[1], true);
      vals_[n.output] = Hlo("dot_general", {x, w}, out.shape, "f32",
                            "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
                            "rhs_contracting_dimensions = [1]>");
      return OkStatus();
    }
    case OpKind::kReshape: {
      T x = Val(n.inputs[0]);
      if (HasDynamic(out.shape)) {
        return InvalidArgumentError("stablehlo: reshape '" + out.name + "' to a dynamic shape (graphs never build one)");
      }
      vals_[n.output] = Reshape(x, out.shape);
      return OkStatus();
    }
    case OpKind::kRope: {
      // angle[s][i] = pos[s] * base^(-2i/D) in f32 (the factors are computed in double).
      T x = Val(n.inputs[0]);
      const int64_t S = x.shape[0], H = x.shape[1], D = x.shape[2], half = D / 2;
      std::vector<float> freq(half);
      for (int64_t i = 0; i < half; ++i) {
        freq[i] = static_cast<float>(std::pow(n.rope_base, -2.0 * static_cast<double>(i) / D));
      }
      T posf = Convert(Val(n.inputs[1]), "f32");
      T ang = Binary("multiply", Broadcast(posf, {S, half}, {0}),
                     Broadcast(ConstF32Vector(freq), {S, half}, {1}));
      T c = Broadcast(Unary("cosine", ang), {S, H, half}, {0, 2});
      T s = Broadcast(Unary("sine", ang), {S, H, half}, {0, 2});
      T x1 = Slice(x, {0, 0, 0}, {S, H, half});
      T x2 = Slice(x, {0, 0, half}, {S, H, D});
      T y1 = Binary("subtract", Binary("multiply", x1, c), Binary("multiply", x2, s));
      T y2 = Binary("add", Binary("multiply", x2, c), Binary("multiply", x1, s));
      vals_[n.output] = Hlo("concatenate", {y1, y2}, x.shape, "f32", "dimension = 2 : i64");
      return OkStatus();
    }
    case OpKind::kCacheWrite: {
      // Row pos % R of the cache takes the new row (a functional update: scatter).
      T cache = Val(n.inputs[0]);
      T x = Val(n.inputs[1]);
      T pos = Val(n.inputs[2]);
      const int64_t R = cache.shape[0];
      T rows = Binary("remainder", pos, Splat(ConstI32(R), pos.shape));
      T idx = Reshape(rows, {pos.shape[0], 1});
      const std::string st = "tensor<f32>";
      const std::string a = "%r" + std::to_string(next_), b = "%s" + std::to_string(next_);
      std::string rhs = "\"stablehlo.scatter\"(" + cache.ssa + ", " + idx.ssa + ", " + x.ssa + ") ({\n";
      rhs += "    ^bb0(" + a + ": " + st + ", " + b + ": " + st + "):\n";
      rhs += "      \"stablehlo.return\"(" + b + ") : (" + st + ") -> ()\n";
      rhs += "    }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], "
             "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
             "indices_are_sorted = false, unique_indices = false} : (" +
             cache.type() + ", " + idx.type() + ", " + x.type() + ") -> " + cache.type();
      vals_[n.output] = Op(rhs, cache.shape, "f32");
      return OkStatus();
    }
    case OpKind::kAttention:
      vals_[n.output] = Attention(n);
      return OkStatus();
    case OpKind::kGeluMul: {
      // ref: src/kernels/ops.cc GeluTanhMul: g / (1 + exp(g (c0 + c1 g^2))) * up.
      constexpr double kSqrt2OverPi = 0.79788456080286535588;
      const float c0 = static_cast<float>(-2.0 * kSqrt2OverPi);
      const float c1 = static_cast<float>(-2.0 * kSqrt2OverPi * 0.044715);
      T gt = Val(n.inputs[0]);
      T up = Val(n.inputs[1]);
      const T* ref = &gt;
      T g2 = Binary("multiply", gt, gt);
      T inner = Binary("add", Splat(ConstF32(c0), gt.shape, ref),
                       Binary("multiply", Splat(ConstF32(c1), gt.shape, ref), g2));
      T z = Unary("exponential", Binary("multiply", gt, inner));
      T den = Binary("add", Splat(ConstF32(1.0f), gt.shape, ref), z);
      vals_[n.output] = Binary("multiply", Binary("divide", gt, den), up);
      return OkStatus();
    }
    case OpKind::kAdd:
      vals_[n.output] = Binary("add", Val(n.inputs[0]), Val(n.inputs[1]));
      return OkStatus();
    case OpKind::kSelectRows:
      vals_[n.output] = GatherRows(Val(n.inputs[0]), Val(n.inputs[1]));
      return OkStatus();
    case OpKind::kArgmax: {
      // First index of the maximum: min over {i : x[i] == max}.
      T x = Val(n.inputs[0]);
      const int64_t N = x.shape[1];
      T m = Reduce(x, ConstF32(-INFINITY), "maximum", {1});
      T eq = Compare("EQ", x, Broadcast(m, x.shape, {0}, &x));
      T idx = Iota(x.shape, 1, Like(&x, x.shape));
      T cand = Select(eq, idx, Splat(ConstI32(N), x.shape, &x));
      vals_[n.output] = Reduce(cand, ConstI32(N), "minimum", {1});
      return OkStatus();
    }
    case OpKind::kIota:
      vals_[n.output] = Iota(out.shape, 0);
      return OkStatus();
    case OpKind::kScale: {
      T x = Val(n.inputs[0]);
      vals_[n.output] = Binary("multiply", x, Splat(ConstF32(n.scale), x.shape, &x));
      return OkStatus();
    }
    case OpKind::kTranspose:
      vals_[n.output] = Transpose(Val(n.inputs[0]), n.perm);
      return OkStatus();
    case OpKind::kConcat: {
      T a = Val(n.inputs[0]);
      vals_[n.output] = Hlo("concatenate", {a, Val(n.inputs[1])}, out.shape, a.elem,
                            "dimension = " + std::to_string(n.axis) + " : i64");
      return OkStatus();
    }
    case OpKind::kRopeTable: {
      // y = x * cos + swap_halves(x) * sin; the tables [S,D] broadcast over heads.
      T x = Val(n.inputs[0]);
      const int64_t S = x.shape[0], H = x.shape[1], D = x.shape[2], half = D / 2;
      T c = Broadcast(Val(n.inputs[1]), x.shape, {0, 2});
      T s = Broadcast(Val(n.inputs[2]), x.shape, {0, 2});
      T swapped = Hlo("concatenate", {Slice(x, {0, 0, half}, {S, H, D}), Slice(x, {0, 0, 0}, {S, H, half})},
                      x.shape, "f32", "dimension = 2 : i64");
      vals_[n.output] = Binary("add", Binary("multiply", x, c), Binary("multiply", swapped, s));
      return OkStatus();
    }
    case OpKind::kAttentionKV:
      vals_[n.output] = AttentionKV(n);
      return OkStatus();
    case OpKind::kDot:
      vals_[n.output] = Hlo("dot_general", {Val(n.inputs[0]), Val(n.inputs[1])}, out.shape, "f32",
                            "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
                            "rhs_contracting_dimensions = [0]>");
      return OkStatus();
    case OpKind::kLowRank: {
      // y + scale * (x w): x's columns contract with w's rows.
      T xw = Hlo("dot_general", {Val(n.inputs[0]), Weight(n.inputs[1], true)}, out.shape, "f32",
                 "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], "
                 "rhs_contracting_dimensions = [0]>");
      if (n.scale != 1.0f) xw = Binary("multiply", xw, Splat(ConstF32(n.scale), out.shape, &xw));
      vals_[n.output] = n.inputs.size() > 2 ? Binary("add", Val(n.inputs[2]), xw) : xw;
      return OkStatus();
    }
    case OpKind::kRmsNormBack:
    case OpKind::kRopeBack:
    case OpKind::kCacheRead:
    case OpKind::kAttentionBack:
    case OpKind::kSlice:
    case OpKind::kGeluMulBack:
    case OpKind::kScatterRows:
    case OpKind::kCrossEntropy:
    case OpKind::kCrossEntropyBack:
    case OpKind::kDotTN:
    case OpKind::kCandidateLogits:
    case OpKind::kCandidateLogitsBack:
    case OpKind::kHeadCrossEntropyBack:
      return UnimplementedError("stablehlo: '" + g_.value(n.output).name + "' is a " +
                                std::string(graph::OpName(n.op)) +
                                " (a training op; training graphs are not exported)");
  }
  return InternalError("stablehlo: unknown op");
}

StatusOr<std::string> FnEmitter::Emit(const std::string& name) {
  std::string sig;
  int arg = 0;
  std::vector<int> args(g_.inputs());
  args.insert(args.end(), g_.states().begin(), g_.states().end());
  for (int id : args) {
    const Value& v = g_.value(id);
    T t{"%arg" + std::to_string(arg++), v.shape, ElemOf(v.type)};
    sig += (sig.empty() ? "" : ", ") + t.ssa + ": " + t.type();
    vals_[id] = t;
  }
  for (const Node& n : g_.nodes()) {
    FG_RETURN_IF_ERROR(Lower(n).WithContext("stablehlo: function " + name));
  }
  std::string ret, ret_types;
  for (int id : g_.outputs()) {
    auto it = vals_.find(id);
    if (it == vals_.end()) {
      return InvalidArgumentError("stablehlo: output '" + g_.value(id).name + "' is never computed");
    }
    T t = it->second;
    // Outputs are typed by the graph (a weight output would be a stored type: refuse).
    if (g_.value(id).type == ValueType::kStored) {
      return InvalidArgumentError("stablehlo: output '" + g_.value(id).name + "' is a weight");
    }
    ret += (ret.empty() ? "" : ", ") + t.ssa;
    ret_types += (ret_types.empty() ? "" : ", ") + t.type();
  }
  std::string text = "  func.func public @" + name + "(" + sig + ") -> (" + ret_types + ") {\n";
  text += body_;
  text += "    return " + ret + " : " + ret_types + "\n  }\n";
  return text;
}

}  // namespace

StatusOr<std::string> EmitModule(std::span<const EmitFunction> functions, const EmitOptions& options) {
  // One global per distinct weight name, shared by every function.
  std::map<std::string, std::string> globals;
  std::map<std::string, WeightType> types;
  std::map<std::string, Shape> shapes;
  std::vector<std::string> order;
  for (const EmitFunction& f : functions) {
    if (f.graph == nullptr) return InvalidArgumentError("stablehlo: function '" + f.name + "' has no graph");
    for (int id : f.graph->weights()) {
      const Value& v = f.graph->value(id);
      auto it = shapes.find(v.name);
      if (it != shapes.end()) {
        if (it->second != v.shape) {
          return InvalidArgumentError("stablehlo: weight '" + v.name + "' has two shapes");
        }
        continue;
      }
      if (v.name.find('"') != std::string::npos || v.name.find('\\') != std::string::npos) {
        return InvalidArgumentError("stablehlo: weight name '" + v.name + "' cannot be a parameter key");
      }
      shapes[v.name] = v.shape;
      types[v.name] = StoredWeightType(v.shape, options.weight_type);
      globals[v.name] = "\"" + v.name + "\"";
      order.push_back(v.name);
    }
  }
  std::string text = "module @module {\n";
  for (const std::string& name : order) {
    text += "  util.global private @" + globals[name] + " = #flow.parameter.named<\"" +
            std::string(kParameterScope) + "\"::\"" + name + "\"> : " +
            Ty(shapes[name], WeightTypeName(types[name])) + "\n";
  }
  for (const EmitFunction& f : functions) {
    FnEmitter e(*f.graph, globals, types);
    FG_ASSIGN_OR_RETURN(std::string fn, e.Emit(f.name));
    text += fn;
  }
  text += "}\n";
  return text;
}

}  // namespace fg::exporter
