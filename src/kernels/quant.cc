// GetTypeOps: one table of kernels per ISA, assembled once from the kernel families.
#include "src/kernels/quant.h"

#include <string>

#include "src/base/check.h"
#include "src/kernels/registry.h"

namespace fg::kernels {
namespace {

using internal::OpsTable;

OpsTable BuildTable(Isa isa) {
  OpsTable t{};
  // Scalar first, then the ISA's specializations on top (see registry.h).
  internal::RegisterBasicOps(Isa::kScalar, t);
  internal::RegisterKQuantOps(Isa::kScalar, t);
  if (isa != Isa::kScalar) {
    internal::RegisterBasicOps(isa, t);
    internal::RegisterKQuantOps(isa, t);
  }
#if defined(__ARM_NEON) || defined(__aarch64__)
  if (isa == Isa::kNeon) internal::RegisterNeonOps(t);
#endif
  return t;
}

constexpr int kNumIsas = 4;

// The tables of the ISAs this CPU has (scalar always). The Register* functions of an ISA live
// in its *_avx2.cc / *_avx512.cc / *_neon.cc file, compiled with that ISA's flags (g++ may store
// the table with VEX or EVEX moves), so only an ISA of AvailableIsas() may run them: on a CPU
// without AVX, building the AVX2 table is SIGILL.
struct Tables {
  OpsTable by_isa[kNumIsas] = {};
  bool built[kNumIsas] = {};
  Tables() {
    for (Isa isa : AvailableIsas()) {
      by_isa[static_cast<int>(isa)] = BuildTable(isa);
      built[static_cast<int>(isa)] = true;
    }
  }
};

// Callers pass one of AvailableIsas().
const OpsTable& TableFor(Isa isa) {
  static const Tables tables;  // thread-safe one-time initialization
  FG_CHECK(tables.built[static_cast<int>(isa)]);
  return tables.by_isa[static_cast<int>(isa)];
}

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
  const int id = static_cast<int>(t);
  const int i = static_cast<int>(isa);
  if (id < 0 || id >= internal::kMaxTypeId || i < 0 || i >= kNumIsas) return nullptr;
  // Never hand out code this CPU cannot run.
  bool available = false;
  for (Isa a : AvailableIsas()) available |= a == isa;
  if (!available) return nullptr;
  const TypeOps& o = TableFor(isa).ops[id];
  return o.dequantize_row != nullptr ? &o : nullptr;
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
