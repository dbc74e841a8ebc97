#include "src/runtime/model.h"

namespace fg::runtime {

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  FG_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(path));
  auto m = FromFile(std::move(file));
  if (!m.ok()) return m.status().WithContext("'" + path + "'");
  return m;
}

StatusOr<std::unique_ptr<Model>> Model::FromFile(std::unique_ptr<gguf::File> file) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::move(file);
  FG_ASSIGN_OR_RETURN(m->config_, model::ConfigFromGguf(*m->file_));
  FG_ASSIGN_OR_RETURN(m->weights_, model::BindWeights(*m->file_, m->config_));
  return m;
}

exec::WeightResolver Model::resolver() const {
  const gguf::File* f = file_.get();
  return [f](std::string_view name) -> StatusOr<exec::WeightData> {
    const gguf::TensorInfo* t = f->FindTensor(name);
    if (t == nullptr) return NotFoundError("model has no tensor '" + std::string(name) + "'");
    exec::WeightData w;
    w.type = t->type;
    w.shape = t->shape;
    w.data = t->data;
    w.size_bytes = t->size_bytes;
    return w;
  };
}

}  // namespace fg::runtime
