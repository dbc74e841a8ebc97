// GetTypeOps (the type kernels of a KernelSet) and the checked row helpers.
#include "src/kernels/quant.h"

#include <string>

#include "src/base/check.h"
#include "src/kernels/kernel_set.h"

namespace fg::kernels {
namespace {

Status CheckRow(DType t, int64_t n, const TypeOps** ops) {
  *ops = GetTypeOps(t);
  if (*ops == nullptr) {
    return UnimplementedError("no kernels for tensor type " + std::string(tensor::DTypeName(t)));
  }
  const int64_t block = tensor::Info(t).block_elems;
  if (n < 0 || n % block != 0) {
    return InvalidArgumentError("row of " + std::to_string(n) + " elements is not a multiple of " +
                                std::string(tensor::DTypeName(t)) + "'s block of " +
                                std::to_string(block));
  }
  return OkStatus();
}

}  // namespace

const TypeOps* GetTypeOps(DType t, Isa isa) {
  // Never hand out code this CPU cannot run.
  bool available = false;
  for (Isa a : AvailableIsas()) available |= a == isa;
  if (!available) return nullptr;
  return GetKernelSet(isa).type_ops(t);
}

Status DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const TypeOps* ops;
  FG_RETURN_IF_ERROR(CheckRow(t, n, &ops));
  ops->dequantize_row(src, dst, n);
  return OkStatus();
}

Status QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  const TypeOps* ops;
  FG_RETURN_IF_ERROR(CheckRow(t, n, &ops));
  if (ops->quantize_row == nullptr) {
    return UnimplementedError("no quantizer for tensor type " + std::string(tensor::DTypeName(t)));
  }
  ops->quantize_row(src, dst, n);
  return OkStatus();
}

}  // namespace fg::kernels
