#include "src/kernels/grad.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "src/kernels/attention.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/quant.h"

namespace fg::kernels {

namespace {

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluK = 0.044715;

}  // namespace

void RmsNormBackRow(const ElementOps& ops, const float* x, const float* w, const float* dy,
                    float* dx, int64_t n, float eps) {
  if (w != nullptr) {
    ops.mul(w, dy, dx, n);
  } else {
    std::memcpy(dx, dy, n * sizeof(float));
  }
  const float s = ops.dot(dx, x, n);
  const float r = 1.0f / std::sqrt(ops.dot(x, x, n) / static_cast<float>(n) + eps);
  ops.scale(dx, r, n);
  ops.axpy(-r * r * r * s / static_cast<float>(n), x, dx, n);
}

void GeluMulBack(const ElementOps& ops, const float* gate, const float* up, const float* dy,
                 float* out, int64_t n, int operand) {
  constexpr int64_t kChunk = 256;
  float e[kChunk];
  const float c = static_cast<float>(kGeluC), k = static_cast<float>(kGeluK);
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    const float* g = gate + i0;
    for (int64_t i = 0; i < m; ++i) e[i] = -2.0f * c * (g[i] + k * g[i] * g[i] * g[i]);
    ops.exp(e, e, m);  // exp(-2a): finite or +inf, never NaN for finite g
    for (int64_t i = 0; i < m; ++i) {
      const float s = 1.0f / (1.0f + e[i]);
      if (operand == 1) {
        out[i0 + i] = dy[i0 + i] * g[i] * s;
      } else {
        const float ds = 2.0f * s * (1.0f - s) * c * (1.0f + 3.0f * k * g[i] * g[i]);
        out[i0 + i] = dy[i0 + i] * up[i0 + i] * (s + g[i] * ds);
      }
    }
  }
}

float CrossEntropyRow(const ElementOps& ops, const float* x, int64_t n, int32_t target) {
  float m = x[ops.argmax(x, n)];
  constexpr int64_t kChunk = 1024;
  float e[kChunk];
  double sum = 0;  // n is a vocabulary (262144): one double per chunk keeps it exact enough
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t c = std::min(kChunk, n - i0);
    for (int64_t i = 0; i < c; ++i) e[i] = x[i0 + i] - m;
    ops.exp(e, e, c);
    float part = 0;
    for (int64_t i = 0; i < c; ++i) part += e[i];
    sum += part;
  }
  return static_cast<float>(std::log(sum) + m - x[target]);
}

void CrossEntropyBackRow(const ElementOps& ops, const float* x, int64_t n, int32_t target,
                         float dloss, float* dx) {
  std::memcpy(dx, x, n * sizeof(float));
  ops.softmax(dx, n);
  ops.scale(dx, dloss, n);
  dx[target] -= dloss;
}

namespace {

// The tokens of S (HeadCrossEntropyBackRow): those with logit >= cut, the target left out, the
// max_tokens largest when more (ties: the lower id), in id order.
void HeadTokens(const float* logits, int64_t V, double cut, int32_t target, int64_t max_tokens,
                std::vector<int32_t>& ids) {
  ids.clear();
  for (int64_t v = 0; v < V; ++v) {
    if (logits[v] >= cut && v != target) ids.push_back(static_cast<int32_t>(v));
  }
  if (static_cast<int64_t>(ids.size()) > max_tokens) {
    auto before = [logits](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    };
    std::nth_element(ids.begin(), ids.begin() + max_tokens, ids.end(), before);
    ids.resize(static_cast<size_t>(max_tokens));
    std::sort(ids.begin(), ids.end());
  }
}

}  // namespace

float HeadCrossEntropyBackRow(const ElementOps& ops, const HeadBackArgs& a, const float* logits,
                              int32_t target, float loss, float dloss, float* dx) {
  const TypeOps* to = a.rows != nullptr ? a.rows : GetTypeOps(a.type);
  const float lse = loss + logits[target];
  thread_local std::vector<int32_t> ids;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(a.D));
  HeadTokens(logits, a.V, static_cast<double>(lse) + std::log(static_cast<double>(a.threshold)),
             target, a.max_tokens, ids);
  std::memset(dx, 0, a.D * sizeof(float));
  const float pt = std::exp(logits[target] - lse);
  double kept = pt;
  for (int32_t v : ids) {
    const float p = std::exp(logits[v] - lse);
    kept += p;
    to->dequantize_row(a.head + a.row_bytes * v, row.data(), a.D);
    ops.axpy(p, row.data(), dx, a.D);
  }
  to->dequantize_row(a.head + a.row_bytes * target, row.data(), a.D);
  ops.axpy(pt - 1.0f, row.data(), dx, a.D);
  const float tail = static_cast<float>(std::max(0.0, 1.0 - kept));
  if (a.mean != nullptr) ops.axpy(tail, a.mean, dx, a.D);
  ops.scale(dx, dloss, a.D);
  return tail;
}

void AttentionBack(const KernelSet& ks, const AttentionBackArgs& a, int64_t t_begin, int64_t t_end) {
  // Per KV head, over the key range the queries t_begin..t_end-1 read, as dense blocks:
  // scores P and dS [rows, keys] (rows: each query's heads of the group; entries outside a
  // query's window are 0), then dq = dS K, dK = dS^T Q, dV = P^T dout, each with the forward
  // pass's tiled kernels (K, V, Q read once per block instead of once per query and head).
  if (t_end <= t_begin) return;
  const ElementOps& ops = ks.element;
  const int64_t D = a.D, group = a.Hq / a.KV, T = t_end - t_begin, rows = T * group;
  int64_t jlo = INT64_MAX, jhi = -1;
  for (int64_t t = t_begin; t < t_end; ++t) {
    jlo = std::min(jlo, FirstKey(a.pos[t], a.window));
    jhi = std::max<int64_t>(jhi, a.pos[t]);
  }
  const int64_t nk = jhi - jlo + 1;
  const int64_t j0 = std::clamp<int64_t>(a.kv_from - jlo, 0, nk);  // the first key with dK/dV
  thread_local std::vector<float> buf;
  const size_t need = static_cast<size_t>(4 * nk * D + 2 * rows * D + 4 * rows * nk);
  if (buf.size() < need) buf.resize(need);
  float* Kb = buf.data();       // [nk, D] the keys in position order, when the ring wraps
  float* Vb = Kb + nk * D;      // [nk, D]
  float* dK = Vb + nk * D;      // [nk, D]
  float* dV = dK + nk * D;      // [nk, D]
  float* Q = dV + nk * D;       // [rows, D] the group's query rows
  float* dO = Q + rows * D;     // [rows, D]
  float* P = dO + rows * D;     // [rows, nk]
  float* dS = P + rows * nk;    // [rows, nk]
  float* PT = dS + rows * nk;   // [nk, rows]
  float* dST = PT + rows * nk;  // [nk, rows]
  // Keys in one run of the ring are read in place (row stride KV * D), else gathered.
  const bool in_place = jlo % a.R + nk <= a.R;
  const int64_t kst = in_place ? a.KV * D : D;
  for (int64_t kvh = 0; kvh < a.KV; ++kvh) {
    const float* K = Kb;
    const float* V = Vb;
    if (in_place) {
      K = a.k + ((jlo % a.R) * a.KV + kvh) * D;
      V = a.v + ((jlo % a.R) * a.KV + kvh) * D;
    } else {
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t row = (((jlo + j) % a.R) * a.KV + kvh) * D;
        std::memcpy(Kb + j * D, a.k + row, D * sizeof(float));
        std::memcpy(Vb + j * D, a.v + row, D * sizeof(float));
      }
    }
    std::memset(P, 0, 2 * rows * nk * sizeof(float));
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t p = a.pos[t], lo = FirstKey(p, a.window) - jlo, n = p - FirstKey(p, a.window) + 1;
      const int64_t r0 = (t - t_begin) * group;
      const float* qt = a.q + (t * a.Hq + kvh * group) * D;
      const float* dt = a.dout + (t * a.Hq + kvh * group) * D;
      std::memcpy(Q + r0 * D, qt, group * D * sizeof(float));
      std::memcpy(dO + r0 * D, dt, group * D * sizeof(float));
      AttnScores(ks, qt, group, D, K + lo * kst, kst, n, a.scale, P + r0 * nk + lo, nk);
      AttnScores(ks, dt, group, D, V + lo * kst, kst, n, 1.0f, dS + r0 * nk + lo, nk);
      for (int64_t g = 0; g < group; ++g) {
        float* pr = P + (r0 + g) * nk + lo;
        float* sr = dS + (r0 + g) * nk + lo;
        ops.softmax(pr, n);
        const float c = ops.dot(pr, sr, n);
        for (int64_t j = 0; j < n; ++j) sr[j] = a.scale * pr[j] * (sr[j] - c);
      }
      float* dq = a.dq + (t * a.Hq + kvh * group) * D;
      std::memset(dq, 0, group * D * sizeof(float));
      AttnWeightedSum(ks, dS + r0 * nk + lo, nk, group, K + lo * kst, kst, n, D, dq);
    }
    // dK = dS^T Q and dV = P^T dout for the keys from kv_from on (keys j0 .. nk-1).
    if (j0 >= nk) continue;
    const int64_t nkg = nk - j0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = j0; j < nk; ++j) {
        PT[(j - j0) * rows + r] = P[r * nk + j];
        dST[(j - j0) * rows + r] = dS[r * nk + j];
      }
    }
    std::memset(dK + j0 * D, 0, nkg * D * sizeof(float));
    std::memset(dV + j0 * D, 0, nkg * D * sizeof(float));
    AttnWeightedSum(ks, dST, rows, nkg, Q, D, rows, D, dK + j0 * D);
    AttnWeightedSum(ks, PT, rows, nkg, dO, D, rows, D, dV + j0 * D);
    for (int64_t j = j0; j < nk; ++j) {
      const int64_t row = (((jlo + j) % a.R) * a.KV + kvh) * D;
      ops.add(a.dk + row, dK + j * D, a.dk + row, D);
      ops.add(a.dv + row, dV + j * D, a.dv + row, D);
    }
  }
}

namespace scalar {

void RmsNormBackRow(const float* x, const float* w, const float* dy, float* dx, int64_t n,
                    float eps) {
  double ss = 0, s = 0;
  for (int64_t i = 0; i < n; ++i) {
    ss += static_cast<double>(x[i]) * x[i];
    s += (w ? static_cast<double>(w[i]) : 1.0) * dy[i] * x[i];
  }
  const double r = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = static_cast<float>(r * (w ? w[i] : 1.0) * dy[i] - x[i] * r * r * r * s / n);
  }
}

void GeluMulBack(const float* gate, const float* up, const float* dy, float* out, int64_t n,
                 int operand) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double s = 1.0 / (1.0 + std::exp(-2.0 * kGeluC * (g + kGeluK * g * g * g)));
    if (operand == 1) {
      out[i] = static_cast<float>(dy[i] * g * s);
    } else {
      const double ds = 2.0 * s * (1.0 - s) * kGeluC * (1.0 + 3.0 * kGeluK * g * g);
      out[i] = static_cast<float>(static_cast<double>(dy[i]) * up[i] * (s + g * ds));
    }
  }
}

float HeadCrossEntropyBackRow(const HeadBackArgs& a, const float* logits, int32_t target,
                              float loss, float dloss, float* dx) {
  const TypeOps* to = GetTypeOps(a.type, Isa::kScalar);
  const double lse = static_cast<double>(loss) + logits[target];
  std::vector<int32_t> ids;
  HeadTokens(logits, a.V, lse + std::log(static_cast<double>(a.threshold)), target, a.max_tokens,
             ids);
  std::vector<double> acc(static_cast<size_t>(a.D), 0.0);
  std::vector<float> row(static_cast<size_t>(a.D));
  auto add = [&](int32_t v, double c) {
    to->dequantize_row(a.head + a.row_bytes * v, row.data(), a.D);
    for (int64_t d = 0; d < a.D; ++d) acc[d] += c * row[d];
  };
  const double pt = std::exp(logits[target] - lse);
  double kept = pt;
  for (int32_t v : ids) {
    const double p = std::exp(logits[v] - lse);
    kept += p;
    add(v, p);
  }
  add(target, pt - 1.0);
  const double tail = std::max(0.0, 1.0 - kept);
  for (int64_t d = 0; d < a.D; ++d) {
    if (a.mean != nullptr) acc[d] += tail * a.mean[d];
    dx[d] = static_cast<float>(dloss * acc[d]);
  }
  return static_cast<float>(tail);
}

float CrossEntropyRow(const float* x, int64_t n, int32_t target) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max<double>(m, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - m);
  return static_cast<float>(std::log(sum) + m - x[target]);
}

void CrossEntropyBackRow(const float* x, int64_t n, int32_t target, float dloss, float* dx) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max<double>(m, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - m);
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = static_cast<float>(dloss * (std::exp(x[i] - m) / sum - (i == target ? 1.0 : 0.0)));
  }
}

void AttentionBack(const AttentionBackArgs& a, int64_t t_begin, int64_t t_end) {
  const int64_t D = a.D, group = a.Hq / a.KV;
  std::vector<double> P, dP, dq(D);
  for (int64_t t = t_begin; t < t_end; ++t) {
    const int64_t p = a.pos[t], lo = FirstKey(p, a.window), nk = p - lo + 1;
    P.assign(nk, 0);
    dP.assign(nk, 0);
    for (int64_t h = 0; h < a.Hq; ++h) {
      const int64_t kvh = h / group;
      const float* qh = a.q + (t * a.Hq + h) * D;
      const float* doh = a.dout + (t * a.Hq + h) * D;
      auto row = [&](int64_t j) { return (((lo + j) % a.R) * a.KV + kvh) * D; };
      double m = -INFINITY;
      for (int64_t j = 0; j < nk; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += static_cast<double>(qh[d]) * a.k[row(j) + d];
        P[j] = a.scale * s;
        m = std::max(m, P[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < nk; ++j) sum += (P[j] = std::exp(P[j] - m));
      double c = 0;
      for (int64_t j = 0; j < nk; ++j) {
        P[j] /= sum;
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += static_cast<double>(doh[d]) * a.v[row(j) + d];
        dP[j] = s;
        c += P[j] * s;
      }
      std::fill(dq.begin(), dq.end(), 0.0);
      for (int64_t j = 0; j < nk; ++j) {
        const double ds = a.scale * P[j] * (dP[j] - c);
        for (int64_t d = 0; d < D; ++d) dq[d] += ds * a.k[row(j) + d];
        if (lo + j < a.kv_from) continue;
        float* dk = a.dk + row(j);
        float* dv = a.dv + row(j);
        for (int64_t d = 0; d < D; ++d) {
          dk[d] = static_cast<float>(dk[d] + ds * qh[d]);
          dv[d] = static_cast<float>(dv[d] + P[j] * doh[d]);
        }
      }
      for (int64_t d = 0; d < D; ++d) a.dq[(t * a.Hq + h) * D + d] = static_cast<float>(dq[d]);
    }
  }
}

}  // namespace scalar

}  // namespace fg::kernels
