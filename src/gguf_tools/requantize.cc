#include "src/gguf_tools/requantize.h"

#include "src/kernels/quant.h"

namespace fg::gguf {

using tensor::DType;

DType RequantizedType(const RequantizeSpec& spec, std::string_view name,
                      const std::vector<int64_t>& shape, DType current) {
  if (shape.size() < 2) return current;
  DType t = spec.keep_types ? current : spec.type;
  for (const auto& [pattern, type] : spec.overrides) {
    if (name.find(pattern) != std::string_view::npos) {
      t = type;
      break;
    }
  }
  if (shape.back() % tensor::Info(t).block_elems != 0) {
    // ref: llama.cpp src/llama-quant.cpp, the fallback for rows that K blocks do not divide.
    switch (t) {
      case DType::kQ4_K: t = DType::kQ5_0; break;
      case DType::kQ5_K: t = DType::kQ5_1; break;
      case DType::kQ6_K: t = DType::kQ8_0; break;
      default: t = DType::kF16; break;
    }
    if (shape.back() % tensor::Info(t).block_elems != 0) t = DType::kF16;
  }
  return t;
}

uint32_t LlamaFileType(DType t) {
  // ref: llama.cpp include/llama.h enum llama_ftype.
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ4_K: return 14;  // Q4_K_S
    case DType::kQ5_K: return 16;  // Q5_K_S
    case DType::kQ6_K: return 18;
    case DType::kIQ4_NL: return 25;
    case DType::kBF16: return 32;
    default: return 1024;  // LLAMA_FTYPE_GUESSED
  }
}

StatusOr<Writer> BuildRequantized(const File& in, const RequantizeSpec& spec) {
  if (!spec.keep_types &&
      (!tensor::Info(spec.type).supported || kernels::GetTypeOps(spec.type) == nullptr)) {
    return UnimplementedError("quantize: fgemma has no kernels for type " +
                              std::string(tensor::DTypeName(spec.type)));
  }
  for (const auto& [pattern, t] : spec.overrides) {
    if (!tensor::Info(t).supported) {
      return UnimplementedError("quantize: fgemma has no kernels for type " +
                                std::string(tensor::DTypeName(t)) + " (for '" + pattern + "')");
    }
  }
  Writer w(in.alignment());
  for (const KeyValue& kv : in.metadata()) {
    if (kv.key == "general.alignment") continue;  // the writer records its own
    FG_RETURN_IF_ERROR(w.SetValue(kv.key, kv.value));
  }
  if (!spec.keep_types) {
    w.SetUint32("general.file_type", LlamaFileType(spec.type));
    w.SetUint32("general.quantization_version", 2);
  }
  const size_t count = in.tensors().size();
  for (size_t i = 0; i < count; ++i) {
    const TensorInfo& t = in.tensors()[i];
    const DType to = RequantizedType(spec, t.name, t.shape, t.type);
    std::string name(t.name);
    const bool rewrite = spec.rewrite && spec.rewrite(t.name);
    if (to == t.type && !rewrite) {
      FG_RETURN_IF_ERROR(w.AddTensorView(t.name, t.type, t.shape,
                                         std::span<const uint8_t>(t.data, t.size_bytes)));
      if (spec.progress) {
        // Reported at build time for kept tensors: they cost nothing to write.
        spec.progress(i, count, name, t.type, to);
      }
      continue;
    }
    if (kernels::GetTypeOps(t.type) == nullptr) {
      return UnimplementedError("quantize: tensor '" + name + "' has type " +
                                std::string(tensor::DTypeName(t.type)) + ", which fgemma cannot read");
    }
    const int64_t cols = t.shape.back();
    const int64_t rows = t.n_elements / cols;
    const size_t in_row = static_cast<size_t>(*tensor::RowBytes(t.type, cols));
    const size_t out_row = static_cast<size_t>(*tensor::RowBytes(to, cols));
    const uint8_t* src = t.data;
    const DType from = t.type;
    auto progress = spec.progress;
    ThreadPool* pool = spec.pool;
    auto transform = rewrite ? spec.transform : nullptr;
    FG_RETURN_IF_ERROR(w.AddTensorGenerated(
        t.name, to, t.shape,
        [=](std::span<uint8_t> out) -> Status {
          if (progress) progress(i, count, name, from, to);
          const kernels::TypeOps* deq = kernels::GetTypeOps(from);
          const kernels::TypeOps* q = kernels::GetTypeOps(to);
          auto work = [&](int64_t b, int64_t e) {
            std::vector<float> row(static_cast<size_t>(cols));
            for (int64_t r = b; r < e; ++r) {
              deq->dequantize_row(src + r * in_row, row.data(), cols);
              if (transform) transform(name, r, row.data());
              q->quantize_row(row.data(), out.data() + r * out_row, cols);
            }
          };
          if (pool != nullptr) {
            pool->ParallelFor(rows, work, 16);
          } else {
            work(0, rows);
          }
          return OkStatus();
        }));
  }
  return w;
}

}  // namespace fg::gguf
