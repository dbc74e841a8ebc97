#include "src/export/contract.h"

#include <cmath>

namespace fg::exporter {

namespace {

struct Names {
  Function f;
  std::string_view fn, graph;
};
constexpr Names kNames[] = {
    {Function::kRedecode, "gemma", "redecode"},
    {Function::kRedecodeAt, "gemma_at", "redecode_at"},
    {Function::kPrefill, "gemma_prefill", "prefill"},
    {Function::kPrefillAt, "gemma_prefill_at", "prefill_at"},
    {Function::kWithPast, "gemma_with_past", "with_past"},
    {Function::kPrefillWithPast, "gemma_prefill_with_past", "prefill_with_past"},
};

std::string L(int64_t l, const char* kv) { return "l" + std::to_string(l) + "." + kv; }

}  // namespace

std::string_view FunctionName(Function f) {
  for (const Names& n : kNames) {
    if (n.f == f) return n.fn;
  }
  return "?";
}

std::string_view GraphName(Function f) {
  for (const Names& n : kNames) {
    if (n.f == f) return n.graph;
  }
  return "?";
}

std::optional<Function> ParseGraphName(std::string_view name) {
  for (const Names& n : kNames) {
    if (n.graph == name) return n.f;
  }
  return std::nullopt;
}

std::optional<Function> ParseFunctionName(std::string_view name) {
  if (name.rfind("module.", 0) == 0) name.remove_prefix(7);
  for (const Names& n : kNames) {
    if (n.fn == name) return n.f;
  }
  return std::nullopt;
}

std::string Qualified(std::string_view fn) {
  if (fn.find('.') != std::string_view::npos) return std::string(fn);
  return "module." + std::string(fn);
}

StatusOr<Signature> GetSignature(Function f, const model::Config& c, const SignatureOptions& o) {
  if (o.seq < 1 || o.seq > 65536) {
    return InvalidArgumentError("contract: seq " + std::to_string(o.seq) + " is outside [1, 65536]");
  }
  if (o.chunk < 1 || o.chunk > 65536) {
    return InvalidArgumentError("contract: chunk " + std::to_string(o.chunk) +
                                " is outside [1, 65536]");
  }
  const int64_t S = o.seq, C = o.chunk, KV = c.n_kv_heads, D = c.head_dim, H = c.hidden;
  Signature s;
  s.function = f;
  auto in = [&](std::string name, std::vector<int64_t> shape, ArgType t, int64_t layer = -1) {
    s.args.push_back({std::move(name), std::move(shape), t, layer});
  };
  auto out = [&](std::string name, std::vector<int64_t> shape, ArgType t, int64_t layer = -1) {
    s.results.push_back({std::move(name), std::move(shape), t, layer});
  };
  // Per-layer K/V results: fixed S rows (prefill) or the past extended by n rows.
  auto kv_results = [&](int64_t rows) {
    for (int64_t l = 0; l < c.n_layers; ++l) {
      out(L(l, "k"), {1, KV, rows, D}, ArgType::kF32, l);
      out(L(l, "v"), {1, KV, rows, D}, ArgType::kF32, l);
    }
  };
  switch (f) {
    case Function::kRedecode:
      in("tokens", {1, S}, ArgType::kI32);
      if (o.emb_input) in("emb", {S, H}, ArgType::kF32);
      out("tokens", {S}, ArgType::kI32);
      break;
    case Function::kRedecodeAt:
      in("tokens", {1, S}, ArgType::kI32);
      if (o.emb_input) in("emb", {S, H}, ArgType::kF32);
      in("select", {1, S}, ArgType::kF32);
      out("token", {1}, ArgType::kI32);
      break;
    case Function::kPrefill:
      in("tokens", {S}, ArgType::kI32);
      if (o.emb_input) in("emb", {S, H}, ArgType::kF32);
      kv_results(S);
      out("tokens", {S}, ArgType::kI32);
      break;
    case Function::kPrefillAt:
      in("tokens", {S}, ArgType::kI32);
      if (o.emb_input) in("emb", {S, H}, ArgType::kF32);
      in("select", {1, S}, ArgType::kF32);
      kv_results(S);
      out("token", {1}, ArgType::kI32);
      break;
    case Function::kWithPast:
    case Function::kPrefillWithPast: {
      const bool chunked = f == Function::kPrefillWithPast;
      const int64_t n = chunked ? C : 1;
      if (chunked) {
        in("tokens", {C}, ArgType::kI32);
      } else {
        in("token", {1}, ArgType::kI32);
      }
      if (o.emb_input) in("emb", {n, H}, ArgType::kF32);
      bool seen_global = false, seen_sliding = false;
      for (int64_t l = 0; l < c.n_layers; ++l) {
        const bool global = c.IsGlobal(l);
        bool& seen = global ? seen_global : seen_sliding;
        const bool first = !seen;
        seen = true;
        const std::string type = global ? "Global" : "Sliding";
        // Argument order rule: the order in which a trace first meets each input.
        if (first) {
          in("cos" + type, {n, D}, ArgType::kF32);
          in("sin" + type, {n, D}, ArgType::kF32);
        }
        in(L(l, "k"), {1, KV, kDynamic, D}, ArgType::kF32, l);
        in(L(l, "v"), {1, KV, kDynamic, D}, ArgType::kF32, l);
        if (chunked && first) in("mask" + type, {1, c.n_heads, C, kDynamic}, ArgType::kF32);
      }
      if (chunked) in("select", {1, C}, ArgType::kF32);
      kv_results(kDynamic);
      out("token", {1}, ArgType::kI32);
      break;
    }
  }
  return s;
}

void ContractRopeRows(int64_t pos, int64_t n, int64_t head_dim, double base,
                      std::vector<float>* cos, std::vector<float>* sin) {
  const int64_t half = head_dim / 2;
  cos->assign(static_cast<size_t>(n * head_dim), 0.0f);
  sin->assign(static_cast<size_t>(n * head_dim), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    const double p = static_cast<double>(pos + r);
    for (int64_t i = 0; i < half; ++i) {
      const double a = p * std::pow(base, -2.0 * static_cast<double>(i) / head_dim);
      const float c = static_cast<float>(std::cos(a));
      const float s = static_cast<float>(std::sin(a));
      (*cos)[r * head_dim + i] = c;
      (*cos)[r * head_dim + i + half] = c;
      (*sin)[r * head_dim + i] = -s;
      (*sin)[r * head_dim + i + half] = s;
    }
  }
}

std::vector<float> ContractChunkMask(int64_t pos, int64_t past, int64_t chunk, int64_t n_real,
                                     int64_t window, int64_t heads) {
  const int64_t keys = past + chunk;
  std::vector<float> row_block(static_cast<size_t>(chunk * keys), kMaskedValue);
  for (int64_t i = 0; i < chunk; ++i) {
    float* row = row_block.data() + i * keys;
    if (i >= n_real) {
      row[past + i] = 0.0f;  // padding attends only to itself: no row is fully masked
      continue;
    }
    const int64_t a = pos + i;
    for (int64_t j = 0; j < keys; ++j) {
      const int64_t key = pos - past + j;
      const bool visible = key <= a && (window == 0 || key >= a - window + 1);
      if (visible) row[j] = 0.0f;
    }
  }
  std::vector<float> mask;
  mask.reserve(row_block.size() * heads);
  for (int64_t h = 0; h < heads; ++h) mask.insert(mask.end(), row_block.begin(), row_block.end());
  return mask;
}

}  // namespace fg::exporter
