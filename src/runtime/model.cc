#include "src/runtime/model.h"

#include <cmath>
#include <new>
#include <optional>

#include "src/kernels/kernel_set.h"
#include "src/kernels/matmul.h"

namespace fg::runtime {

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path,
                                             const std::vector<LoraSpec>& loras) {
  FG_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(path));
  auto m = FromFile(std::move(file));
  if (!m.ok()) return m.status().WithContext("'" + path + "'");
  for (const LoraSpec& l : loras) FG_RETURN_IF_ERROR((*m)->AddLora(l));
  return m;
}

Status Model::AddLora(const LoraSpec& spec) {
  FG_ASSIGN_OR_RETURN(std::unique_ptr<model::LoraAdapter> a,
                      model::LoraAdapter::Open(spec.path, *file_));
  return AddLora(std::move(a), spec.scale);
}

Status Model::AddLora(std::unique_ptr<model::LoraAdapter> adapter, float scale) {
  if (!std::isfinite(scale)) {
    return InvalidArgumentError("LoRA adapter '" + adapter->path() + "': scale is not finite");
  }
  const size_t index = adapters_.size();
  if (!adapters_.empty() && adapters_[0]->after_prefix() != adapter->after_prefix()) {
    return InvalidArgumentError("LoRA adapter '" + adapter->path() +
                                "': adapters trained with and without the base model's catalog "
                                "prefix (fgemma.lora.prefix) cannot be applied together");
  }
  if (!adapters_.empty() && adapters_[0]->channel() != adapter->channel()) {
    return InvalidArgumentError("LoRA adapter '" + adapter->path() +
                                "': adapters trained with and without the tool prior "
                                "(fgemma.lora.channel) cannot be applied together");
  }
  for (const model::LoraPair& p : adapter->pairs()) {
    // lora_a is read as stored (a matmul, or token_embd's row lookup); lora_b transposed, in
    // f32, by the graph's low_rank op: made once here, shared by every graph.
    lora_tensors_[model::LoraWeightName(p.a->name, index)] = p.a;
    FG_ASSIGN_OR_RETURN(std::vector<float> bt, model::LoraValues(*p.b, true));
    lora_f32_[model::LoraTransposedName(p.b->name, index)] = {{p.b->shape[1], p.b->shape[0]},
                                                              std::move(bt)};
    // The mapped B is not read again: its pages need not stay resident beside the copy.
    adapter->file().ReleasePages(*p.b);
  }
  weights_.loras.push_back({adapter.get(), scale});
  adapters_.push_back(std::move(adapter));
  return OkStatus();
}

StatusOr<std::unique_ptr<Model>> Model::FromFile(std::unique_ptr<gguf::File> file) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::move(file);
  FG_ASSIGN_OR_RETURN(m->config_, model::ConfigFromGguf(*m->file_));
  FG_ASSIGN_OR_RETURN(m->weights_, model::BindWeights(*m->file_, m->config_));
  return m;
}

StatusOr<std::unique_ptr<Model>> Model::Share(const Model& base,
                                              const std::vector<LoraSpec>& loras) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = base.file_;
  m->config_ = base.config_;
  m->panels_ = base.panels_;
  FG_ASSIGN_OR_RETURN(m->weights_, model::BindWeights(*m->file_, m->config_));
  for (const LoraSpec& l : loras) FG_RETURN_IF_ERROR(m->AddLora(l));
  return m;
}

StatusOr<kernels::WeightMatrix> WeightMatrixOf(const gguf::TensorInfo& t) {
  const auto row_bytes = t.shape.size() == 2 ? tensor::RowBytes(t.type, t.shape[1]) : std::nullopt;
  if (!row_bytes) {
    return InvalidArgumentError("'" + std::string(t.name) + "' is not a matrix of rows");
  }
  kernels::WeightMatrix w;
  w.type = t.type;
  w.data = t.data;
  w.rows = t.shape[0];
  w.cols = t.shape[1];
  w.row_bytes = static_cast<size_t>(*row_bytes);
  return w;
}

Status Model::PrepackPanels(ThreadPool* pool) const {
  std::vector<const gguf::TensorInfo*> tensors = {weights_.output};
  for (const model::LayerWeights& l : weights_.layers) {
    for (const gguf::TensorInfo* t : {l.attn_q, l.attn_k, l.attn_v, l.attn_output, l.ffn_gate,
                                      l.ffn_up, l.ffn_down}) {
      tensors.push_back(t);
    }
  }
  const kernels::KernelSet& ks = kernels::ActiveKernelSet();
  for (const gguf::TensorInfo* t : tensors) {
    if (t == nullptr || panels_->panels.count(std::string(t->name)) > 0) continue;
    const StatusOr<kernels::WeightMatrix> matrix = WeightMatrixOf(*t);
    if (!matrix.ok()) continue;
    const kernels::WeightMatrix& w = *matrix;
    const size_t bytes = kernels::PanelBytes(ks, w);
    if (bytes == 0) continue;
    Panels p;
    p.storage.reset(new (std::nothrow) uint8_t[bytes + 64]);
    if (!p.storage) {
      return ResourceExhaustedError("cannot allocate " + std::to_string(bytes) +
                                    " bytes of packed panels for '" + std::string(t->name) + "'");
    }
    const auto base = reinterpret_cast<uintptr_t>(p.storage.get());
    uint8_t* aligned = p.storage.get() + (64 - base % 64) % 64;
    kernels::PackPanels(ks, w, aligned, pool);
    p.data = aligned;
    p.set = kernels::PanelSetOf(ks, w);
    panels_->bytes += bytes;
    panels_->panels.emplace(std::string(t->name), std::move(p));
  }
  return OkStatus();
}

exec::WeightResolver Model::resolver() const {
  const gguf::File* f = file_.get();
  const auto* lora = &lora_tensors_;
  const auto* lora_f32 = &lora_f32_;
  const auto* panels = &panels_->panels;
  return [f, lora, lora_f32, panels](std::string_view name) -> StatusOr<exec::WeightData> {
    const gguf::TensorInfo* t = f->FindTensor(name);
    if (t == nullptr) {
      if (auto d = lora_f32->find(std::string(name)); d != lora_f32->end()) {
        exec::WeightData w;
        w.type = tensor::DType::kF32;
        w.shape = d->second.shape;
        w.data = d->second.values.data();
        w.size_bytes = d->second.values.size() * sizeof(float);
        return w;
      }
      auto it = lora->find(std::string(name));
      if (it != lora->end()) t = it->second;
    }
    if (t == nullptr) return NotFoundError("model has no tensor '" + std::string(name) + "'");
    exec::WeightData w;
    w.type = t->type;
    w.shape = t->shape;
    w.data = t->data;
    w.size_bytes = t->size_bytes;
    if (auto p = panels->find(std::string(name)); p != panels->end()) {
      w.panels = p->second.data;
      w.panel_set = p->second.set;
    }
    return w;
  };
}

}  // namespace fg::runtime
