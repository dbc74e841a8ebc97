// The kernel sets: built once, for the ISAs this CPU has, from the fill functions of the kernel
// files (kernel_set.h).
#include "src/kernels/kernel_set.h"

#include "src/base/check.h"

namespace fg::kernels {
namespace {

constexpr int kNumIsas = 4;

KernelSet Build(Isa isa) {
  KernelSet ks;
  ks.isa = isa;
  internal::FillBasicScalar(ks);
  internal::FillKQuantScalar(ks);
  internal::FillElementOpsScalar(ks);
  switch (isa) {
    case Isa::kScalar:
      internal::FillAttentionScalar(ks);
      break;
    case Isa::kAvx2:
#if defined(__x86_64__) || defined(__i386__)
      internal::FillBasicAvx2(ks);
      internal::FillKQuantAvx2(ks);
      internal::FillElementOpsAvx2(ks);
      internal::FillPanelAvx2(ks);
      internal::FillAttentionAvx2(ks);
#endif
      break;
    case Isa::kAvx512:
#if defined(__x86_64__) || defined(__i386__)
      // AVX-512 machines run AVX2 code too: a block type the AVX-512 file leaves alone keeps
      // its AVX2 kernels. The K-quant and element fills of AVX-512 cover all of AVX2's.
      internal::FillBasicAvx2(ks);
      internal::FillBasicAvx512(ks);
      internal::FillKQuantAvx512(ks);
      internal::FillElementOpsAvx512(ks);
      internal::FillPanelAvx512(ks);
      internal::FillAttentionAvx512(ks);
#endif
      break;
    case Isa::kNeon:
#if defined(__ARM_NEON) || defined(__aarch64__)
      internal::FillBasicNeon(ks);
      internal::FillKQuantNeon(ks);
      internal::FillElementOpsNeon(ks);
#endif
      break;
  }
  return ks;
}

// The sets of the ISAs this CPU has (scalar always), and the reference set.
struct Sets {
  KernelSet by_isa[kNumIsas];
  bool built[kNumIsas] = {};
  KernelSet reference;
  Sets() {
    for (Isa isa : AvailableIsas()) {
      by_isa[static_cast<int>(isa)] = Build(isa);
      built[static_cast<int>(isa)] = true;
    }
    reference = Build(Isa::kScalar);
    reference.reference = true;
  }
};

const Sets& AllSets() {
  static const Sets sets;  // thread-safe one-time initialization
  return sets;
}

}  // namespace

const KernelSet& GetKernelSet(Isa isa) {
  const int i = static_cast<int>(isa);
  const Sets& sets = AllSets();
  FG_CHECK(i >= 0 && i < kNumIsas && sets.built[i]);  // callers pass one of AvailableIsas()
  return sets.by_isa[i];
}

const KernelSet& ReferenceKernelSet() { return AllSets().reference; }

namespace internal {

void SetTypeOps(KernelSet& ks, DType type, DType dot_type,
                void (*dequantize_row)(const void*, float*, int64_t),
                void (*quantize_row)(const float*, void*, int64_t),
                void (*vec_dot)(int64_t, const void*, const void*, float*)) {
  ks.types[static_cast<int>(type)].ops = {type, dot_type, dequantize_row, quantize_row, vec_dot};
}

}  // namespace internal

}  // namespace fg::kernels
