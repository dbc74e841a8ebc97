// Instruction-set selection. Kernels are compiled per ISA (files *_avx2.cc, *_avx512.cc,
// *_neon.cc get their own compiler flags) and chosen at run time from what the CPU reports.
#ifndef FGEMMA_KERNELS_CPU_H_
#define FGEMMA_KERNELS_CPU_H_

#include <optional>
#include <string_view>
#include <vector>

namespace fg::kernels {

enum class Isa {
  kScalar = 0,  // portable C++, the twin every SIMD kernel is tested against
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (+ BF16 where present)
  kNeon = 3,    // aarch64 / armv7 NEON
};

std::string_view IsaName(Isa isa);
std::optional<Isa> ParseIsa(std::string_view name);

// The ISAs usable on this CPU with this build, scalar first, best last.
const std::vector<Isa>& AvailableIsas();
// The best available ISA, unless FGEMMA_ISA (scalar|avx2|avx512|neon) asks for a lower one.
Isa DefaultIsa();
// The process-wide active ISA used by the dispatching entry points. Tests switch it.
Isa ActiveIsa();
void SetActiveIsa(Isa isa);  // must be one of AvailableIsas()

// CPU feature bits (x86: from cpuid + xgetbv; false elsewhere).
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool neon = false;
};
const CpuFeatures& GetCpuFeatures();

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_CPU_H_
