// Requantizing a GGUF to another weight type (what llama-quantize does, without an importance
// matrix): every 2-D weight is dequantized row by row and quantized again with fgemma's
// round-to-nearest quantizers (the same numerics as ggml's *_ref ones); 1-D tensors (norms)
// stay as they are; metadata is copied in order with general.file_type updated.
#ifndef FGEMMA_GGUF_TOOLS_REQUANTIZE_H_
#define FGEMMA_GGUF_TOOLS_REQUANTIZE_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/gguf/reader.h"
#include "src/gguf/writer.h"
#include "src/tensor/dtype.h"

namespace fg::gguf {

struct RequantizeSpec {
  tensor::DType type = tensor::DType::kQ8_0;  // target of every 2-D weight
  // (pattern, type): the first pattern that is a substring of a tensor's name wins.
  std::vector<std::pair<std::string, tensor::DType>> overrides;
  // Every tensor keeps its own type unless an override names it (`type` is not used, nor is
  // general.file_type changed): with `transform`, a merge that requantizes to the base's types.
  bool keep_types = false;
  // When set, the tensors it accepts are dequantized, passed row by row to `transform` (row
  // index, values; called from several threads at once) and quantized again, even when their
  // type stays the same; the others are copied byte for byte unless their type changes.
  std::function<bool(std::string_view name)> rewrite;
  std::function<void(std::string_view name, int64_t row, float* values)> transform;
  ThreadPool* pool = nullptr;  // rows are requantized in parallel when given
  // Called once per tensor as it is written: index, count, name, old and new type.
  std::function<void(size_t, size_t, const std::string&, tensor::DType, tensor::DType)> progress;
};

// The type `name` gets: the override or target type; if its block does not divide the row
// length (Q4_K with rows of 640), the nearest block-32 type llama-quantize falls back to
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0); 1-D tensors keep `current`.
tensor::DType RequantizedType(const RequantizeSpec& spec, std::string_view name,
                              const std::vector<int64_t>& shape, tensor::DType current);

// llama.cpp's general.file_type value for a file whose main weight type is `t`.
uint32_t LlamaFileType(tensor::DType t);

// A writer holding `in` requantized (tensor data is produced at write time; `in` must outlive
// the writer). Errors: a target type without kernels, a tensor whose type cannot be read.
StatusOr<Writer> BuildRequantized(const File& in, const RequantizeSpec& spec);

}  // namespace fg::gguf

#endif  // FGEMMA_GGUF_TOOLS_REQUANTIZE_H_
