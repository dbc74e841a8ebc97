#include "src/tensor/dtype.h"

#include <cctype>
#include <string>

namespace fg::tensor {

namespace {

// ref: ggml/src/ggml.c type_traits (block sizes and byte sizes per type).
constexpr DTypeInfo kInfos[] = {
    {DType::kF32, "F32", 1, 4, true},
    {DType::kF16, "F16", 1, 2, true},
    {DType::kQ4_0, "Q4_0", 32, 18, true},
    {DType::kQ4_1, "Q4_1", 32, 20, true},
    {DType::kQ5_0, "Q5_0", 32, 22, true},
    {DType::kQ5_1, "Q5_1", 32, 24, true},
    {DType::kQ8_0, "Q8_0", 32, 34, true},
    {DType::kQ8_1, "Q8_1", 32, 36, false},
    {DType::kQ2_K, "Q2_K", 256, 84, false},
    {DType::kQ3_K, "Q3_K", 256, 110, false},
    {DType::kQ4_K, "Q4_K", 256, 144, true},
    {DType::kQ5_K, "Q5_K", 256, 176, true},
    {DType::kQ6_K, "Q6_K", 256, 210, true},
    {DType::kQ8_K, "Q8_K", 256, 292, false},
    {DType::kIQ2_XXS, "IQ2_XXS", 256, 66, false},
    {DType::kIQ2_XS, "IQ2_XS", 256, 74, false},
    {DType::kIQ3_XXS, "IQ3_XXS", 256, 98, false},
    {DType::kIQ1_S, "IQ1_S", 256, 50, false},
    {DType::kIQ4_NL, "IQ4_NL", 32, 18, true},
    {DType::kIQ3_S, "IQ3_S", 256, 110, false},
    {DType::kIQ2_S, "IQ2_S", 256, 82, false},
    {DType::kIQ4_XS, "IQ4_XS", 256, 136, false},
    {DType::kI8, "I8", 1, 1, false},
    {DType::kI16, "I16", 1, 2, false},
    {DType::kI32, "I32", 1, 4, false},
    {DType::kI64, "I64", 1, 8, false},
    {DType::kF64, "F64", 1, 8, false},
    {DType::kIQ1_M, "IQ1_M", 256, 56, false},
    {DType::kBF16, "BF16", 1, 2, true},
    {DType::kTQ1_0, "TQ1_0", 256, 54, false},
    {DType::kTQ2_0, "TQ2_0", 256, 66, false},
    {DType::kMXFP4, "MXFP4", 32, 17, false},
};

}  // namespace

std::optional<DTypeInfo> LookupDType(uint32_t id) {
  for (const auto& i : kInfos) {
    if (static_cast<uint32_t>(i.type) == id) return i;
  }
  return std::nullopt;
}

const DTypeInfo& Info(DType t) {
  for (const auto& i : kInfos) {
    if (i.type == t) return i;
  }
  return kInfos[0];  // unreachable for enum values
}

std::string_view DTypeName(DType t) { return Info(t).name; }

std::optional<DType> ParseDType(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& i : kInfos) {
    if (i.name == upper) return i.type;
  }
  return std::nullopt;
}

std::optional<int64_t> RowBytes(DType t, int64_t n) {
  const DTypeInfo& i = Info(t);
  if (n < 0 || n % i.block_elems != 0) return std::nullopt;
  return n / i.block_elems * i.block_bytes;
}

}  // namespace fg::tensor
