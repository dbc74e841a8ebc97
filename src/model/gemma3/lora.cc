#include "src/model/gemma3/lora.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "src/kernels/quant.h"

namespace fg::model {
namespace {

constexpr std::string_view kSuffixA = ".lora_a";
constexpr std::string_view kSuffixB = ".lora_b";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s = "{";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "}";
}

// A string key that must equal `want`; absent reads as "".
Status ExpectString(const gguf::File& f, std::string_view key, std::string_view want,
                    std::string_view what) {
  std::string_view got;
  if (f.Find(key) != nullptr) {
    FG_ASSIGN_OR_RETURN(got, f.GetString(key));
  }
  if (got != want) {
    return InvalidArgumentError(std::string(what) + ": " + std::string(key) + " is '" +
                                std::string(got) + "', expected '" + std::string(want) + "'");
  }
  return OkStatus();
}

// "blk.N.<module>.weight" for one of kLoraModules, or token_embd.weight.
bool Adaptable(std::string_view name) {
  if (name == "token_embd.weight") return true;
  if (name.substr(0, 4) != "blk.") return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string_view::npos) return false;
  const std::string_view rest = name.substr(dot + 1);
  for (const char* m : kLoraModules) {
    if (rest == std::string(m) + ".weight") return true;
  }
  return false;
}

bool AdapterType(tensor::DType t) {
  return t == tensor::DType::kF32 || t == tensor::DType::kF16 || t == tensor::DType::kBF16 ||
         t == tensor::DType::kQ8_0;
}

// Every value of `t` is finite (dequantized row by row).
Status CheckFinite(const gguf::TensorInfo& t) {
  FG_ASSIGN_OR_RETURN(std::vector<float> values, LoraValues(t, /*transposed=*/false));
  for (float v : values) {
    if (!std::isfinite(v)) {
      return InvalidArgumentError("tensor '" + std::string(t.name) + "' holds a non-finite value");
    }
  }
  return OkStatus();
}

Status CheckPair(const LoraPair& p, const gguf::TensorInfo& w) {
  const gguf::TensorInfo& a = *p.a;
  const gguf::TensorInfo& b = *p.b;
  for (const gguf::TensorInfo* t : {&a, &b}) {
    if (t->shape.size() != 2) {
      return InvalidArgumentError("tensor '" + std::string(t->name) + "' has shape " +
                                  Shape(t->shape) + "; LoRA tensors are matrices");
    }
    if (!AdapterType(t->type)) {
      return InvalidArgumentError("tensor '" + std::string(t->name) + "' has type " +
                                  std::string(tensor::Info(t->type).name) +
                                  "; LoRA tensors are F32, F16, BF16 or Q8_0");
    }
  }
  const bool embd = p.base == "token_embd.weight";
  // Outermost-first: W {n_out, n_in}; A {r, n_in}, B {n_out, r}; token_embd W {vocab, hidden},
  // A {vocab, r}, B {hidden, r}.
  const int64_t want_a0 = embd ? w.shape[0] : b.shape[1];
  const int64_t want_a1 = embd ? b.shape[1] : w.shape[1];
  const int64_t want_b0 = embd ? w.shape[1] : w.shape[0];
  if (a.shape[0] != want_a0 || a.shape[1] != want_a1 || b.shape[0] != want_b0) {
    return InvalidArgumentError(
        "LoRA pair for '" + p.base + "' does not fit the base tensor " + Shape(w.shape) +
        ": lora_a is " + Shape(a.shape) + ", lora_b " + Shape(b.shape) +
        (embd ? " (expected {vocab, r} and {hidden, r})" : " (expected {r, n_in} and {n_out, r})"));
  }
  return OkStatus();
}

}  // namespace

std::string LoraTransposedName(std::string_view name, size_t index) {
  return LoraWeightName(name, index) + ".T";
}

StatusOr<std::string_view> LoraMode(const gguf::File& f, std::string_view key,
                                    std::string_view absent) {
  if (f.Find(key) == nullptr) return absent;
  auto v = f.GetString(key);
  if (!v.ok() || (*v != "base" && *v != "adapted")) {
    return InvalidArgumentError(std::string(key) + " must be \"base\" or \"adapted\"");
  }
  return *v;
}

StatusOr<std::vector<float>> LoraValues(const gguf::TensorInfo& t, bool transposed) {
  const int64_t cols = t.shape.back(), rows = t.n_elements / cols;
  const size_t row_bytes = t.size_bytes / static_cast<size_t>(rows);
  std::vector<float> v(static_cast<size_t>(t.n_elements)), row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    FG_RETURN_IF_ERROR(kernels::DequantizeRow(t.type, t.data + r * row_bytes, row.data(), cols));
    for (int64_t c = 0; c < cols; ++c) v[transposed ? c * rows + r : r * cols + c] = row[c];
  }
  return v;
}

std::string LoraWeightName(std::string_view name, size_t index) {
  std::string s(name);
  if (index > 0) s += "@" + std::to_string(index);
  return s;
}

StatusOr<std::unique_ptr<LoraAdapter>> LoraAdapter::Open(const std::string& path,
                                                         const gguf::File& base) {
  auto file = gguf::File::Open(path);
  if (!file.ok()) return file.status().WithContext("LoRA adapter '" + path + "'");
  return FromFile(std::move(*file), base, path);
}

StatusOr<std::unique_ptr<LoraAdapter>> LoraAdapter::FromFile(std::unique_ptr<gguf::File> file,
                                                             const gguf::File& base,
                                                             std::string path) {
  std::unique_ptr<LoraAdapter> ad(new LoraAdapter());
  ad->path_ = std::move(path);
  ad->file_ = std::move(file);
  const gguf::File& f = *ad->file_;
  auto fail = [&](const Status& s) { return s.WithContext("LoRA adapter '" + ad->path_ + "'"); };

  Status s = ExpectString(f, "general.type", "adapter", "not an adapter");
  if (!s.ok()) return fail(s);
  std::string_view arch;
  if (base.Find("general.architecture") != nullptr) {
    auto a = base.GetString("general.architecture");
    if (!a.ok()) return fail(a.status());
    arch = *a;
  }
  s = ExpectString(f, "general.architecture", arch, "made for another architecture");
  if (!s.ok()) return fail(s);
  s = ExpectString(f, "adapter.type", "lora", "not a LoRA adapter");
  if (!s.ok()) return fail(s);
  if (f.Find("adapter.lora.alpha") != nullptr) {
    auto alpha = f.GetFloat("adapter.lora.alpha");
    if (!alpha.ok()) return fail(alpha.status());
    if (!std::isfinite(*alpha) || !std::isfinite(static_cast<float>(*alpha))) {
      return fail(InvalidArgumentError("adapter.lora.alpha is not finite"));
    }
    ad->alpha_ = static_cast<float>(*alpha);
  }
  auto prefix = LoraMode(f, "fgemma.lora.prefix", "adapted");
  if (!prefix.ok()) return fail(prefix.status());
  ad->after_prefix_ = *prefix == "base";
  auto channel = LoraMode(f, "fgemma.lora.channel", "base");
  if (!channel.ok()) return fail(channel.status());
  ad->channel_ = *channel == "adapted";

  std::map<std::string, LoraPair, std::less<>> pairs;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const bool is_a = EndsWith(t.name, kSuffixA);
    if (!is_a && !EndsWith(t.name, kSuffixB)) {
      if (EndsWith(t.name, "_norm.weight")) continue;  // llama.cpp skips norm vectors too
      return fail(InvalidArgumentError("tensor '" + std::string(t.name) +
                                       "' is neither a .lora_a nor a .lora_b tensor"));
    }
    const std::string base_name(t.name.substr(0, t.name.size() - kSuffixA.size()));
    if (EndsWith(base_name, "_norm.weight")) continue;
    LoraPair& p = pairs[base_name];
    p.base = base_name;
    (is_a ? p.a : p.b) = &t;
  }
  for (auto& [name, p] : pairs) {
    if (p.a == nullptr || p.b == nullptr) {
      return fail(InvalidArgumentError("LoRA pair for '" + name + "' has no " +
                                       (p.a == nullptr ? "lora_a" : "lora_b") + " tensor"));
    }
    const gguf::TensorInfo* w = base.FindTensor(name);
    if (w == nullptr) {
      return fail(InvalidArgumentError("tensor '" + name +
                                       "' of the LoRA pair is not in the base model"));
    }
    if (!Adaptable(name) || w->shape.size() != 2) {
      return fail(InvalidArgumentError(
          "tensor '" + name +
          "' cannot be adapted (fgemma applies LoRA to token_embd and the attn_q, attn_k, "
          "attn_v, attn_output, ffn_gate, ffn_up and ffn_down projections)"));
    }
    s = CheckPair(p, *w);
    if (!s.ok()) return fail(s);
    p.rank = p.b->shape[1];
    s = CheckFinite(*p.a);
    if (s.ok()) s = CheckFinite(*p.b);
    if (!s.ok()) return fail(s);
    ad->pairs_.push_back(std::move(p));
  }
  if (ad->pairs_.empty()) return fail(InvalidArgumentError("the adapter holds no LoRA pair"));
  return ad;
}

const LoraPair* LoraAdapter::Find(std::string_view base) const {
  auto it = std::lower_bound(pairs_.begin(), pairs_.end(), base,
                             [](const LoraPair& p, std::string_view n) { return p.base < n; });
  return it != pairs_.end() && it->base == base ? &*it : nullptr;
}

StatusOr<gguf::Writer> LoraWriter(std::string_view arch, float alpha,
                                  const std::vector<LoraTensorValues>& tensors) {
  gguf::Writer w;
  w.SetString("general.type", "adapter");
  w.SetString("general.architecture", arch);
  w.SetString("adapter.type", "lora");
  w.SetFloat32("adapter.lora.alpha", alpha);
  for (const LoraTensorValues& t : tensors) {
    if (t.shape.size() != 2 || t.shape[0] * t.shape[1] != static_cast<int64_t>(t.values.size())) {
      return InvalidArgumentError("LoRA tensor '" + t.name + "': " +
                                  std::to_string(t.values.size()) + " values for shape " +
                                  Shape(t.shape));
    }
    const auto row_bytes = tensor::RowBytes(t.type, t.shape[1]);
    if (!row_bytes.has_value()) {
      return InvalidArgumentError("LoRA tensor '" + t.name + "': rows of " +
                                  std::to_string(t.shape[1]) + " do not fit type " +
                                  std::string(tensor::Info(t.type).name));
    }
    std::vector<uint8_t> data(*row_bytes * static_cast<size_t>(t.shape[0]));
    for (int64_t r = 0; r < t.shape[0]; ++r) {
      FG_RETURN_IF_ERROR(kernels::QuantizeRow(t.type, t.values.data() + r * t.shape[1],
                                              data.data() + r * *row_bytes, t.shape[1]));
    }
    FG_RETURN_IF_ERROR(w.AddTensor(t.name, t.type, t.shape, std::move(data)));
  }
  return w;
}

StatusOr<gguf::Writer> SyntheticLora(const gguf::File& base, const SyntheticLoraSpec& spec) {
  std::string_view arch = "gemma3";
  if (base.Find("general.architecture") != nullptr) {
    FG_ASSIGN_OR_RETURN(arch, base.GetString("general.architecture"));
  }
  // mt19937_64 is specified exactly and the mapping to [-1, 1) is ours (the standard's
  // distributions are not), so a seed gives the same adapter everywhere.
  std::mt19937_64 rng(spec.seed);
  auto values = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
      const double u = static_cast<double>(rng() >> 40) / static_cast<double>(1 << 23) - 1.0;
      x = static_cast<float>(u * spec.amplitude);
    }
    return v;
  };
  auto type_for = [&](int64_t cols) {
    return tensor::RowBytes(spec.type, cols).has_value() ? spec.type : tensor::DType::kF16;
  };
  std::vector<LoraTensorValues> out;
  auto add = [&](const gguf::TensorInfo& w, bool embd) {
    const int64_t r = spec.rank;
    std::vector<int64_t> a_shape = embd ? std::vector<int64_t>{w.shape[0], r}
                                        : std::vector<int64_t>{r, w.shape[1]};
    std::vector<int64_t> b_shape = {embd ? w.shape[1] : w.shape[0], r};
    const std::string name(w.name);
    out.push_back({name + ".lora_a", a_shape, values(a_shape[0] * a_shape[1]), type_for(a_shape[1])});
    out.push_back({name + ".lora_b", b_shape, values(b_shape[0] * b_shape[1]), type_for(r)});
  };
  for (const std::string& m : spec.modules) {
    if (m == "token_embd") {
      const gguf::TensorInfo* t = base.FindTensor("token_embd.weight");
      if (t == nullptr) return InvalidArgumentError("synthetic LoRA: base has no token_embd");
      add(*t, true);
      continue;
    }
    int found = 0;
    for (int64_t l = 0;; ++l) {
      const gguf::TensorInfo* t = base.FindTensor("blk." + std::to_string(l) + "." + m + ".weight");
      if (t == nullptr) break;
      add(*t, false);
      ++found;
    }
    if (found == 0) return InvalidArgumentError("synthetic LoRA: base has no '" + m + "' tensors");
  }
  return LoraWriter(arch, spec.alpha, out);
}

StatusOr<gguf::Writer> BuildMerged(const gguf::File& base, const std::vector<LoraUse>& loras,
                                   gguf::RequantizeSpec spec) {
  // Per adapted tensor: (s, A f32, B f32, rank) of each adapter that adapts it.
  struct Term {
    float s;
    std::vector<float> a, b;
    int64_t rank, cols;
  };
  auto terms = std::make_shared<std::map<std::string, std::vector<Term>, std::less<>>>();
  const bool tied = base.FindTensor("output.weight") == nullptr;
  for (const LoraUse& u : loras) {
    if (u.scale == 0.0f) continue;
    for (const LoraPair& p : u.adapter->pairs()) {
      const bool embd = p.base == "token_embd.weight";
      if (embd && tied) {
        return InvalidArgumentError(
            "merge: LoRA adapter '" + u.adapter->path() +
            "' adapts token_embd, which is also the (tied) LM head: merging it would change the "
            "head, which the runtime applies no adapter to; use the adapter at run time instead");
      }
      Term t;
      t.s = u.adapter->Scale(p, u.scale);
      t.rank = p.rank;
      FG_ASSIGN_OR_RETURN(t.a, LoraValues(*p.a, false));
      FG_ASSIGN_OR_RETURN(t.b, LoraValues(*p.b, false));
      if (embd) {
        // E[v][h] += s sum_k A[v][k] B[h][k]: the same form as W[o][i] += s sum_k B'[o][k]
        // A'[k][i] with B' = A and A' = B transposed.
        std::vector<float> bt(t.b.size());
        const int64_t h = p.b->shape[0];
        for (int64_t i = 0; i < h; ++i) {
          for (int64_t k = 0; k < t.rank; ++k) bt[k * h + i] = t.b[i * t.rank + k];
        }
        t.b = std::move(t.a);
        t.a = std::move(bt);
        t.cols = h;
      } else {
        t.cols = p.a->shape[1];
      }
      (*terms)[p.base].push_back(std::move(t));
    }
  }
  spec.rewrite = [terms](std::string_view name) { return terms->find(name) != terms->end(); };
  spec.transform = [terms](std::string_view name, int64_t row, float* values) {
    for (const Term& t : terms->find(name)->second) {
      // Row `row` of W gains s * sum_k B[row][k] A[k][:], summed in double.
      for (int64_t i = 0; i < t.cols; ++i) {
        double acc = 0;
        for (int64_t k = 0; k < t.rank; ++k) {
          acc += static_cast<double>(t.b[row * t.rank + k]) * t.a[k * t.cols + i];
        }
        values[i] = static_cast<float>(values[i] + t.s * acc);
      }
    }
  };
  return gguf::BuildRequantized(base, spec);
}

float LoraAdapter::Scale(const LoraPair& p, float user_scale) const {
  return alpha_ != 0.0f ? user_scale * alpha_ / static_cast<float>(p.rank) : user_scale;
}

}  // namespace fg::model
