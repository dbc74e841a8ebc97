#include "tests/testing/graph_double.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "src/kernels/quant.h"
#include "src/tensor/dtype.h"

namespace fg::testing {

namespace {

using graph::Node;
using graph::OpKind;
using graph::Value;
using graph::ValueType;

double GeluTanh(double g) {
  const double u = std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g);
  return 0.5 * g * (1.0 + std::tanh(u));
}

}  // namespace

GraphDouble::GraphDouble(const graph::Graph& graph, exec::WeightResolver weights)
    : graph_(graph), weights_(std::move(weights)) {
  const size_t nv = graph_.values().size();
  f_.resize(nv);
  i_.resize(nv);
  w_.resize(nv);
  state_.resize(nv);
  has_input_.assign(nv, false);
}

Status GraphDouble::SetInput(std::string_view name, std::span<const double> data) {
  const int id = graph_.Find(name);
  if (id < 0 || graph_.nodes()[graph_.value(id).producer].op != OpKind::kInput ||
      graph_.value(id).type != ValueType::kF32) {
    return NotFoundError("graph_double: no f32 input '" + std::string(name) + "'");
  }
  if (static_cast<int64_t>(data.size()) != graph_.value(id).elements()) {
    return InvalidArgumentError("graph_double: input '" + std::string(name) + "' size");
  }
  f_[id].assign(data.begin(), data.end());
  has_input_[id] = true;
  return OkStatus();
}

Status GraphDouble::SetInput(std::string_view name, std::span<const float> data) {
  std::vector<double> d(data.begin(), data.end());
  return SetInput(name, std::span<const double>(d));
}

Status GraphDouble::SetInput(std::string_view name, std::span<const int32_t> data) {
  const int id = graph_.Find(name);
  if (id < 0 || graph_.nodes()[graph_.value(id).producer].op != OpKind::kInput ||
      graph_.value(id).type != ValueType::kI32) {
    return NotFoundError("graph_double: no i32 input '" + std::string(name) + "'");
  }
  if (static_cast<int64_t>(data.size()) != graph_.value(id).elements()) {
    return InvalidArgumentError("graph_double: input '" + std::string(name) + "' size");
  }
  i_[id].assign(data.begin(), data.end());
  has_input_[id] = true;
  return OkStatus();
}

Status GraphDouble::SetState(std::string_view name, std::span<const double> data) {
  const int id = graph_.Find(name);
  if (id < 0 || graph_.nodes()[graph_.value(id).producer].op != OpKind::kState) {
    return NotFoundError("graph_double: no state '" + std::string(name) + "'");
  }
  if (static_cast<int64_t>(data.size()) != graph_.value(id).elements()) {
    return InvalidArgumentError("graph_double: state '" + std::string(name) + "' size");
  }
  state_[id].assign(data.begin(), data.end());
  return OkStatus();
}

Status GraphDouble::SetState(std::string_view name, std::span<const float> data) {
  std::vector<double> d(data.begin(), data.end());
  return SetState(name, std::span<const double>(d));
}

Status GraphDouble::EnsureWeight(int id) {
  if (!w_[id].empty()) return OkStatus();
  const Value& v = graph_.value(id);
  FG_ASSIGN_OR_RETURN(exec::WeightData wd, weights_(v.name));
  if (wd.shape != v.shape || wd.type != v.stored_dtype) {
    return InvalidArgumentError("graph_double: weight '" + v.name + "' is " +
                                graph::ShapeString(wd.shape) + ", the graph expects " +
                                graph::ShapeString(v.shape));
  }
  const int64_t cols = v.shape.back();
  const int64_t rows = v.elements() / std::max<int64_t>(cols, 1);
  const auto row_bytes = tensor::RowBytes(wd.type, cols);
  if (!row_bytes) return InvalidArgumentError("graph_double: weight '" + v.name + "' row size");
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<double> out(static_cast<size_t>(v.elements()));
  for (int64_t r = 0; r < rows; ++r) {
    FG_RETURN_IF_ERROR(kernels::DequantizeRow(
        wd.type, static_cast<const uint8_t*>(wd.data) + *row_bytes * r, row.data(), cols));
    std::copy(row.begin(), row.end(), out.begin() + r * cols);
  }
  w_[id] = std::move(out);
  return OkStatus();
}

Status GraphDouble::OverrideWeight(std::string_view name, std::span<const double> data) {
  const int id = graph_.Find(name);
  if (id < 0 || graph_.value(id).type != ValueType::kStored) {
    return NotFoundError("graph_double: no weight '" + std::string(name) + "'");
  }
  if (static_cast<int64_t>(data.size()) != graph_.value(id).elements()) {
    return InvalidArgumentError("graph_double: weight '" + std::string(name) + "' size");
  }
  w_[id].assign(data.begin(), data.end());
  return OkStatus();
}

StatusOr<std::vector<double>> GraphDouble::WeightValues(std::string_view name) {
  const int id = graph_.Find(name);
  if (id < 0 || graph_.value(id).type != ValueType::kStored) {
    return NotFoundError("graph_double: no weight '" + std::string(name) + "'");
  }
  FG_RETURN_IF_ERROR(EnsureWeight(id));
  return w_[id];
}

Status GraphDouble::Run(int until) {
  const int last = until < 0 ? static_cast<int>(graph_.nodes().size()) - 1
                             : graph_.value(until).producer;
  for (int i = 0; i <= last; ++i) {
    FG_RETURN_IF_ERROR(RunNode(graph_.nodes()[i]));
  }
  return OkStatus();
}

StatusOr<std::vector<double>> GraphDouble::Get(int id) const {
  if (id < 0 || id >= static_cast<int>(graph_.values().size())) {
    return NotFoundError("graph_double: no value " + std::to_string(id));
  }
  if (graph_.value(id).type == ValueType::kI32) {
    return std::vector<double>(i_[id].begin(), i_[id].end());
  }
  if (graph_.value(id).type == ValueType::kStored) return w_[id];
  return f_[id];
}

StatusOr<std::vector<double>> GraphDouble::Get(std::string_view name) const {
  const int id = graph_.Find(name);
  if (id < 0) return NotFoundError("graph_double: no value '" + std::string(name) + "'");
  return Get(id);
}

Status GraphDouble::RunNode(const Node& n) {
  const Value& out = graph_.value(n.output);
  const auto& in = n.inputs;
  auto shape = [&](int k) -> const std::vector<int64_t>& { return graph_.value(in[k]).shape; };
  std::vector<double>& y = f_[n.output];
  auto fresh = [&]() { y.assign(static_cast<size_t>(out.elements()), 0.0); };
  switch (n.op) {
    case OpKind::kInput:
      if (!has_input_[n.output]) {
        return FailedPreconditionError("graph_double: input '" + out.name + "' is not set");
      }
      return OkStatus();
    case OpKind::kWeight:
      return EnsureWeight(n.output);
    case OpKind::kState:
      if (static_cast<int64_t>(state_[n.output].size()) != out.elements()) {
        return FailedPreconditionError("graph_double: state '" + out.name + "' is not set");
      }
      y = state_[n.output];
      return OkStatus();

    case OpKind::kEmbedding: {
      FG_RETURN_IF_ERROR(EnsureWeight(in[0]));
      const std::vector<double>& w = w_[in[0]];
      const int64_t V = shape(0)[0], H = shape(0)[1];
      fresh();
      for (int64_t t = 0; t < out.shape[0]; ++t) {
        const int32_t id = i_[in[1]][t];
        if (id < 0 || id >= V) return OutOfRangeError("graph_double: token id out of range");
        for (int64_t j = 0; j < H; ++j) y[t * H + j] = w[id * H + j] * static_cast<double>(n.scale);
      }
      return OkStatus();
    }

    case OpKind::kRmsNorm: {
      FG_RETURN_IF_ERROR(EnsureWeight(in[1]));
      const std::vector<double>& x = D(in[0]);
      const std::vector<double>& w = w_[in[1]];
      const int64_t N = out.shape.back(), rows = out.elements() / N;
      fresh();
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t j = 0; j < N; ++j) ss += x[r * N + j] * x[r * N + j];
        const double s = 1.0 / std::sqrt(ss / N + static_cast<double>(n.eps));
        for (int64_t j = 0; j < N; ++j) y[r * N + j] = x[r * N + j] * s * w[j];
      }
      return OkStatus();
    }

    case OpKind::kMatMul: {
      FG_RETURN_IF_ERROR(EnsureWeight(in[1]));
      const std::vector<double>& x = D(in[0]);
      const std::vector<double>& w = w_[in[1]];
      const int64_t S = shape(0)[0], K = shape(0)[1], N = shape(1)[0];
      fresh();
      for (int64_t s = 0; s < S; ++s) {
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += x[s * K + k] * w[j * K + k];
          y[s * N + j] = acc;
        }
      }
      return OkStatus();
    }

    case OpKind::kReshape:
      if (graph_.value(in[0]).type == ValueType::kI32) {
        i_[n.output] = i_[in[0]];
      } else {
        y = D(in[0]);
      }
      return OkStatus();

    case OpKind::kRope: {
      const std::vector<double>& x = D(in[0]);
      const int64_t S = out.shape[0], H = out.shape[1], Dh = out.shape[2], half = Dh / 2;
      fresh();
      for (int64_t t = 0; t < S; ++t) {
        const int64_t p = i_[in[1]][t];
        if (p < 0) return OutOfRangeError("graph_double: negative position");
        for (int64_t i = 0; i < half; ++i) {
          const double f =
              std::pow(n.rope_base, -2.0 * static_cast<double>(i) / static_cast<double>(Dh));
          const double c = std::cos(static_cast<double>(p) * f), s = std::sin(static_cast<double>(p) * f);
          for (int64_t h = 0; h < H; ++h) {
            const int64_t o = (t * H + h) * Dh;
            const double x0 = x[o + i], x1 = x[o + i + half];
            y[o + i] = x0 * c - x1 * s;
            y[o + i + half] = x1 * c + x0 * s;
          }
        }
      }
      return OkStatus();
    }

    case OpKind::kCacheWrite: {
      y = D(in[0]);
      const std::vector<double>& x = D(in[1]);
      const int64_t R = out.shape[0], row = out.shape[1] * out.shape[2];
      for (int64_t t = 0; t < shape(1)[0]; ++t) {
        const int64_t p = i_[in[2]][t];
        if (p < 0) return OutOfRangeError("graph_double: negative position");
        std::copy(x.begin() + t * row, x.begin() + (t + 1) * row, y.begin() + (p % R) * row);
      }
      return OkStatus();
    }

    case OpKind::kAttention: {
      const std::vector<double>& q = D(in[0]);
      const std::vector<double>& k = D(in[1]);
      const std::vector<double>& v = D(in[2]);
      const int64_t S = shape(0)[0], Hq = shape(0)[1], Dh = shape(0)[2];
      const int64_t R = shape(1)[0], KV = shape(1)[1], group = Hq / KV;
      fresh();
      std::vector<double> p;
      for (int64_t t = 0; t < S; ++t) {
        const int64_t pos = i_[in[3]][t];
        const int64_t lo = n.window > 0 ? std::max<int64_t>(0, pos - n.window + 1) : 0;
        const int64_t nk = pos - lo + 1;
        if (nk > R) return OutOfRangeError("graph_double: more keys than cache rows");
        p.assign(static_cast<size_t>(nk), 0.0);
        for (int64_t h = 0; h < Hq; ++h) {
          const int64_t kvh = h / group;
          const double* qh = q.data() + (t * Hq + h) * Dh;
          double m = -INFINITY;
          for (int64_t j = 0; j < nk; ++j) {
            const double* kr = k.data() + (((lo + j) % R) * KV + kvh) * Dh;
            double s = 0;
            for (int64_t d = 0; d < Dh; ++d) s += qh[d] * kr[d];
            p[j] = s * static_cast<double>(n.scale);
            m = std::max(m, p[j]);
          }
          double sum = 0;
          for (int64_t j = 0; j < nk; ++j) sum += (p[j] = std::exp(p[j] - m));
          double* o = y.data() + (t * Hq + h) * Dh;
          for (int64_t j = 0; j < nk; ++j) {
            const double* vr = v.data() + (((lo + j) % R) * KV + kvh) * Dh;
            for (int64_t d = 0; d < Dh; ++d) o[d] += p[j] / sum * vr[d];
          }
        }
      }
      return OkStatus();
    }

    case OpKind::kGeluMul: {
      const std::vector<double>& g = D(in[0]);
      const std::vector<double>& u = D(in[1]);
      fresh();
      for (size_t i = 0; i < y.size(); ++i) y[i] = GeluTanh(g[i]) * u[i];
      return OkStatus();
    }

    case OpKind::kAdd: {
      const std::vector<double>& a = D(in[0]);
      const std::vector<double>& b = D(in[1]);
      fresh();
      for (size_t i = 0; i < y.size(); ++i) y[i] = a[i] + b[i];
      return OkStatus();
    }

    case OpKind::kSelectRows: {
      const std::vector<double>& x = D(in[0]);
      const int64_t S = shape(0)[0], N = shape(0)[1];
      fresh();
      for (int64_t r = 0; r < out.shape[0]; ++r) {
        const int32_t row = i_[in[1]][r];
        if (row < 0 || row >= S) return OutOfRangeError("graph_double: row out of range");
        std::copy(x.begin() + row * N, x.begin() + (row + 1) * N, y.begin() + r * N);
      }
      return OkStatus();
    }

    case OpKind::kIota:
      i_[n.output].resize(static_cast<size_t>(out.elements()));
      for (int64_t i = 0; i < out.elements(); ++i) i_[n.output][i] = static_cast<int32_t>(i);
      return OkStatus();

    case OpKind::kScale: {
      const std::vector<double>& x = D(in[0]);
      fresh();
      for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] * static_cast<double>(n.scale);
      return OkStatus();
    }

    case OpKind::kTranspose: {
      const std::vector<int64_t>& xs = shape(0);
      const size_t rank = xs.size();
      std::vector<int64_t> stride(rank, 1), idx(rank, 0);
      for (size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * xs[i];
      const bool i32 = graph_.value(in[0]).type == ValueType::kI32;
      if (i32) {
        i_[n.output].assign(static_cast<size_t>(out.elements()), 0);
      } else {
        fresh();
      }
      for (int64_t c = 0; c < out.elements(); ++c) {
        int64_t off = 0;
        for (size_t i = 0; i < rank; ++i) off += idx[i] * stride[n.perm[i]];
        if (i32) {
          i_[n.output][c] = i_[in[0]][off];
        } else {
          y[c] = D(in[0])[off];
        }
        for (size_t i = rank; i-- > 0;) {
          if (++idx[i] < out.shape[i]) break;
          idx[i] = 0;
        }
      }
      return OkStatus();
    }

    case OpKind::kDot: {
      const std::vector<double>& a = D(in[0]);
      const std::vector<double>& b = D(in[1]);
      const int64_t M = shape(0)[0], K = shape(0)[1], N = shape(1)[1];
      fresh();
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += a[m * K + k] * b[k * N + j];
          y[m * N + j] = acc;
        }
      }
      return OkStatus();
    }

    case OpKind::kLowRank: {
      FG_RETURN_IF_ERROR(EnsureWeight(in[1]));
      const std::vector<double>& x = D(in[0]);
      const std::vector<double>& w = w_[in[1]];
      const int64_t S = shape(0)[0], K = shape(0)[1], N = shape(1)[1];
      fresh();
      for (int64_t s = 0; s < S; ++s) {
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += x[s * K + k] * w[k * N + j];
          y[s * N + j] =
              (in.size() > 2 ? D(in[2])[s * N + j] : 0.0) + static_cast<double>(n.scale) * acc;
        }
      }
      return OkStatus();
    }

    case OpKind::kCrossEntropy: {
      const std::vector<double>& x = D(in[0]);
      const int64_t R = shape(0)[0], V = shape(0)[1];
      fresh();
      for (int64_t r = 0; r < R; ++r) {
        const int32_t t = i_[in[1]][r];
        if (t >= V) return OutOfRangeError("graph_double: target out of range");
        if (t < 0) continue;
        const double* xr = x.data() + r * V;
        const double m = *std::max_element(xr, xr + V);
        double sum = 0;
        for (int64_t j = 0; j < V; ++j) sum += std::exp(xr[j] - m);
        y[r] = std::log(sum) + m - xr[t];
      }
      return OkStatus();
    }

    case OpKind::kDotTN: {
      const std::vector<double>& a = D(in[0]);
      const std::vector<double>& b = D(in[1]);
      const int64_t K = shape(0)[0], M = shape(0)[1], N = shape(1)[1];
      fresh();
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += a[k * M + m] * b[k * N + j];
          y[m * N + j] = acc;
        }
      }
      return OkStatus();
    }

    case OpKind::kConcat: {  // f32 operands
      const std::vector<double>& a = D(in[0]);
      const std::vector<double>& b = D(in[1]);
      int64_t outer = 1;
      for (int64_t i = 0; i < n.axis; ++i) outer *= out.shape[i];
      const int64_t na = graph_.value(in[0]).elements() / outer;
      const int64_t nb = graph_.value(in[1]).elements() / outer;
      y.clear();
      for (int64_t o = 0; o < outer; ++o) {
        y.insert(y.end(), a.begin() + o * na, a.begin() + (o + 1) * na);
        y.insert(y.end(), b.begin() + o * nb, b.begin() + (o + 1) * nb);
      }
      return OkStatus();
    }

    case OpKind::kCandidateLogits: {
      FG_RETURN_IF_ERROR(EnsureWeight(in[1]));
      const std::vector<double>& x = D(in[0]);
      const std::vector<double>& w = w_[in[1]];
      const int64_t V = shape(1)[0], Dm = shape(1)[1], R = shape(2)[0], C = shape(2)[1];
      fresh();
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t c = 0; c < C; ++c) {
          const int32_t id = i_[in[2]][r * C + c];
          if (id >= V) return OutOfRangeError("graph_double: candidate out of range");
          if (id < 0) {
            y[r * C + c] = graph::kMaskedLogit;
            continue;
          }
          double acc = 0;
          for (int64_t j = 0; j < Dm; ++j) acc += x[r * Dm + j] * w[id * Dm + j];
          y[r * C + c] = acc;
        }
      }
      return OkStatus();
    }

    case OpKind::kArgmax:
    case OpKind::kRopeTable:
    case OpKind::kAttentionKV:
    case OpKind::kRmsNormBack:
    case OpKind::kRopeBack:
    case OpKind::kCacheRead:
    case OpKind::kAttentionBack:
    case OpKind::kSlice:
    case OpKind::kGeluMulBack:
    case OpKind::kScatterRows:
    case OpKind::kCrossEntropyBack:
    case OpKind::kCandidateLogitsBack:
    case OpKind::kHeadCrossEntropyBack:
      break;
  }
  return UnimplementedError("graph_double: op " + std::string(graph::OpName(n.op)) + " ('" +
                            out.name + "') is not interpreted");
}

double MaxGradError(std::span<const float> got, std::span<const double> want) {
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  const double floor = 1e-2 * scale;
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double den = std::fabs(want[i]) + floor;
    err = std::max(err, den > 0 ? d / den : d);
  }
  return err;
}

}  // namespace fg::testing
