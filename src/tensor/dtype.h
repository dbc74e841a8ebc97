// Tensor element types, numbered as ggml numbers them (the GGUF on-disk type ids), and their
// block geometry. Only the types listed as supported have kernels; every other id is known by
// name so errors can say what a file holds.
#ifndef FGEMMA_TENSOR_DTYPE_H_
#define FGEMMA_TENSOR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace fg::tensor {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  std::string_view name;   // ggml's spelling: "Q4_K", "BF16"
  int64_t block_elems;     // elements per block (1 for plain types)
  int64_t block_bytes;     // bytes per block
  bool supported;          // fgemma has dequantize + matmul kernels for it
};

// Info for a GGUF type id, or nullopt if the id is not a ggml type at all.
std::optional<DTypeInfo> LookupDType(uint32_t id);
// Info for a known type (never fails for enum values above).
const DTypeInfo& Info(DType t);
std::string_view DTypeName(DType t);
// Parses "q4_k", "Q4_K", "bf16"...; nullopt if unknown.
std::optional<DType> ParseDType(std::string_view name);

// Bytes of one row of `n` elements; nullopt if n is not a multiple of the block size.
std::optional<int64_t> RowBytes(DType t, int64_t n);

// Weight types with kernels, in a fixed order (tests and benchmarks iterate over it).
inline constexpr DType kSupportedWeightTypes[] = {
    DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
    DType::kQ5_0, DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL,
};

}  // namespace fg::tensor

#endif  // FGEMMA_TENSOR_DTYPE_H_
