#include "src/train/lora_params.h"

#include <cmath>
#include <sstream>

#include "src/base/splitmix.h"

namespace fg::train {

StatusOr<std::vector<std::string>> ParseModules(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  std::string m;
  while (std::getline(ss, m, ',')) {
    if (m == "attn_o") m = "attn_output";
    bool known = false;
    for (const char* k : model::kLoraModules) known = known || m == k;
    if (!known) {
      return InvalidArgumentError("unknown LoRA module '" + m +
                                  "' (attn_q, attn_k, attn_v, attn_o, ffn_gate, ffn_up, ffn_down)");
    }
    for (const std::string& seen : out) {
      if (seen == m) return InvalidArgumentError("LoRA module '" + m + "' given twice");
    }
    out.push_back(m);
  }
  if (out.empty()) return InvalidArgumentError("no LoRA modules given");
  return out;
}

StatusOr<std::unique_ptr<LoraParams>> LoraParams::Build(const gguf::File& base,
                                                        std::vector<uint8_t> bytes) {
  auto p = std::unique_ptr<LoraParams>(new LoraParams());
  p->adapter_bytes_ = std::move(bytes);
  FG_ASSIGN_OR_RETURN(auto file, gguf::File::FromBytes(p->adapter_bytes_));
  FG_ASSIGN_OR_RETURN(p->adapter_, model::LoraAdapter::FromFile(std::move(file), base));
  p->arch_ = "gemma3";
  if (base.Find("general.architecture") != nullptr) {
    FG_ASSIGN_OR_RETURN(std::string_view arch, base.GetString("general.architecture"));
    p->arch_ = std::string(arch);
  }
  for (const model::LoraPair& pair : p->adapter_->pairs()) {
    if (pair.base == "token_embd.weight") {
      return InvalidArgumentError("train: token_embd adapters are not trained");
    }
    FG_ASSIGN_OR_RETURN(std::vector<float> a, model::LoraValues(*pair.a, false));
    FG_ASSIGN_OR_RETURN(std::vector<float> bt, model::LoraValues(*pair.b, true));
    p->tensors_.push_back({model::LoraWeightName(pair.a->name, 0), pair.a->shape, std::move(a), false});
    p->tensors_.push_back({model::LoraTransposedName(pair.b->name, 0),
                           {pair.b->shape[1], pair.b->shape[0]}, std::move(bt), true});
  }
  return p;
}

StatusOr<std::unique_ptr<LoraParams>> LoraParams::Create(const gguf::File& base,
                                                         const LoraTrainSpec& spec) {
  if (spec.rank <= 0) return InvalidArgumentError("LoRA rank must be > 0");
  if (!std::isfinite(spec.alpha) || spec.alpha <= 0) {
    return InvalidArgumentError("LoRA alpha must be finite and > 0");
  }
  // The file layout (names, shapes) from the synthetic adapter writer; values set below.
  model::SyntheticLoraSpec s;
  s.rank = spec.rank;
  s.alpha = spec.alpha;
  s.modules = spec.modules;
  s.type = tensor::DType::kF32;
  FG_ASSIGN_OR_RETURN(gguf::Writer w, model::SyntheticLora(base, s));
  FG_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, w.ToBytes());
  FG_ASSIGN_OR_RETURN(auto p, Build(base, std::move(bytes)));
  uint64_t state = spec.seed;
  for (Tensor& t : p->tensors_) {
    if (t.is_b) {
      std::fill(t.values.begin(), t.values.end(), 0.0f);
      continue;
    }
    const double bound = 1.0 / std::sqrt(static_cast<double>(t.shape[1]));
    for (float& v : t.values) {
      const double u = static_cast<double>(SplitMix64(state) >> 11) / 9007199254740992.0;  // [0,1)
      v = static_cast<float>((2.0 * u - 1.0) * bound);
    }
  }
  return p;
}

StatusOr<std::unique_ptr<LoraParams>> LoraParams::FromAdapter(const gguf::File& base,
                                                              const std::string& path) {
  FG_ASSIGN_OR_RETURN(auto file, gguf::File::Open(path));
  const auto span = file->bytes();
  return Build(base, std::vector<uint8_t>(span.begin(), span.end()));
}

int64_t LoraParams::parameters() const {
  int64_t n = 0;
  for (const Tensor& t : tensors_) n += static_cast<int64_t>(t.values.size());
  return n;
}

exec::WeightResolver LoraParams::Resolver(exec::WeightResolver next) const {
  const auto* tensors = &tensors_;
  return [tensors, next = std::move(next)](std::string_view name) -> StatusOr<exec::WeightData> {
    for (const Tensor& t : *tensors) {
      if (t.name != name) continue;
      exec::WeightData w;
      w.type = tensor::DType::kF32;
      w.shape = t.shape;
      w.data = t.values.data();
      w.size_bytes = t.values.size() * sizeof(float);
      return w;
    }
    return next(name);
  };
}

StatusOr<gguf::Writer> LoraParams::ToWriter(
    const std::vector<std::vector<float>>* values,
    std::span<const std::vector<std::vector<float>>> averaged) const {
  // The members: the others', then this adapter's (`values`, else the current ones).
  const int64_t count = static_cast<int64_t>(averaged.size()) + 1;
  auto member = [&](int64_t m, size_t k) -> const std::vector<float>& {
    if (m < count - 1) return averaged[static_cast<size_t>(m)][k];
    return values != nullptr ? (*values)[k] : tensors_[k].values;
  };
  for (const auto& m : averaged) {
    if (m.size() != tensors_.size()) {
      return InvalidArgumentError("an averaged adapter has " + std::to_string(m.size()) +
                                  " tensors, not " + std::to_string(tensors_.size()));
    }
    for (size_t k = 0; k < tensors_.size(); ++k) {
      if (m[k].size() != tensors_[k].values.size()) {
        return InvalidArgumentError("an averaged adapter's " + tensors_[k].name +
                                    " has another shape");
      }
    }
  }
  if (count > 1 && adapter_->alpha() == 0.0f) {
    return InvalidArgumentError(
        "an adapter without alpha (scale 1 at any rank) cannot be averaged");
  }
  std::vector<model::LoraTensorValues> out;
  size_t i = 0;
  for (const model::LoraPair& pair : adapter_->pairs()) {
    const Tensor& a = tensors_[i];
    const Tensor& bt = tensors_[i + 1];
    const int64_t r = bt.shape[0], n = bt.shape[1], rs = r * count;
    std::vector<float> a_values;  // [N r, K]: the members' A, one under the other
    std::vector<float> b(static_cast<size_t>(rs * n));  // [n, N r]: their B side by side
    for (int64_t m = 0; m < count; ++m) {
      const std::vector<float>& am = member(m, i);
      const std::vector<float>& btm = member(m, i + 1);
      a_values.insert(a_values.end(), am.begin(), am.end());
      for (int64_t k = 0; k < r; ++k) {
        for (int64_t j = 0; j < n; ++j) b[j * rs + m * r + k] = btm[k * n + j];
      }
    }
    out.push_back(
        {std::string(pair.a->name), {rs, a.shape[1]}, std::move(a_values), tensor::DType::kF32});
    out.push_back({std::string(pair.b->name), {n, rs}, std::move(b), tensor::DType::kF32});
    i += 2;
  }
  return model::LoraWriter(arch_, adapter_->alpha(), out);
}

}  // namespace fg::train
