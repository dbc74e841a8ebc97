#include "src/export/archive.h"

#include <cstring>
#include <set>

#include "src/kernels/quant.h"
#include "src/tensor/half.h"

namespace fg::exporter {

Status ConvertTensor(const gguf::TensorInfo& t, WeightType type, std::span<uint8_t> out) {
  const int64_t width = t.shape.empty() ? 1 : t.shape.back();
  const int64_t rows = width == 0 ? 0 : t.n_elements / width;
  const auto row_bytes = tensor::RowBytes(t.type, width);
  if (!row_bytes) {
    return InvalidArgumentError("export: tensor '" + std::string(t.name) + "' rows of " +
                                std::to_string(width) + " do not fit its type's blocks");
  }
  const int64_t eb = WeightTypeBytes(type);
  if (static_cast<int64_t>(out.size()) != t.n_elements * eb) {
    return InternalError("export: archive entry size mismatch for '" + std::string(t.name) + "'");
  }
  std::vector<float> row(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    FG_RETURN_IF_ERROR(
        kernels::DequantizeRow(t.type, t.data + r * *row_bytes, row.data(), width)
            .WithContext("export: tensor '" + std::string(t.name) + "'"));
    uint8_t* dst = out.data() + r * width * eb;
    switch (type) {
      case WeightType::kF32:
        std::memcpy(dst, row.data(), static_cast<size_t>(width) * 4);
        break;
      case WeightType::kBf16:
        for (int64_t i = 0; i < width; ++i) {
          const uint16_t h = tensor::Fp32ToBf16(row[i]);
          std::memcpy(dst + i * 2, &h, 2);
        }
        break;
      case WeightType::kF16:
        for (int64_t i = 0; i < width; ++i) {
          const uint16_t h = tensor::Fp32ToFp16(row[i]);
          std::memcpy(dst + i * 2, &h, 2);
        }
        break;
    }
  }
  return OkStatus();
}

Status AddGraphWeights(const gguf::File& file, std::span<const graph::Graph* const> graphs,
                       WeightType type, IrpaWriter* writer) {
  std::set<std::string> seen;
  for (const graph::Graph* g : graphs) {
    for (int id : g->weights()) {
      const graph::Value& v = g->value(id);
      if (!seen.insert(v.name).second) continue;
      const gguf::TensorInfo* t = file.FindTensor(v.name);
      if (t == nullptr) {
        return NotFoundError("export: the model has no tensor '" + v.name + "'");
      }
      if (t->shape != v.shape) {
        return InvalidArgumentError("export: tensor '" + v.name + "' is " +
                                    graph::ShapeString(t->shape) + ", the graph expects " +
                                    graph::ShapeString(v.shape));
      }
      const WeightType wt = StoredWeightType(v.shape, type);
      const uint64_t bytes = static_cast<uint64_t>(t->n_elements * WeightTypeBytes(wt));
      FG_RETURN_IF_ERROR(writer->Add(
          v.name, bytes, [t, wt](std::span<uint8_t> out) { return ConvertTensor(*t, wt, out); }));
    }
  }
  return OkStatus();
}

}  // namespace fg::exporter
