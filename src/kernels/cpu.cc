#include "src/kernels/cpu.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace fg::kernels {

namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t Xgetbv() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = Xgetbv();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_os) return f;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  if (zmm_os) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512bf16 = (a1 >> 5) & 1;
  }
#elif defined(__ARM_NEON) || defined(__aarch64__)
  f.neon = true;
#endif
  return f;
}

std::vector<Isa> DetectIsas() {
  std::vector<Isa> v = {Isa::kScalar};
  const CpuFeatures& f = GetCpuFeatures();
#if defined(__x86_64__) || defined(__i386__)
  if (f.avx2 && f.fma && f.f16c) {
    v.push_back(Isa::kAvx2);
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni) {
      v.push_back(Isa::kAvx512);
    }
  }
#else
  if (f.neon) v.push_back(Isa::kNeon);
#endif
  return v;
}

std::atomic<int> g_active{-1};

}  // namespace

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "unknown";
}

std::optional<Isa> ParseIsa(std::string_view name) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (IsaName(i) == name) return i;
  }
  return std::nullopt;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures f = Detect();
  return f;
}

const std::vector<Isa>& AvailableIsas() {
  static const std::vector<Isa> v = DetectIsas();
  return v;
}

Isa DefaultIsa() {
  const auto& v = AvailableIsas();
  Isa best = v.back();
  if (const char* env = std::getenv("FGEMMA_ISA"); env != nullptr && *env != '\0') {
    auto want = ParseIsa(env);
    bool ok = false;
    if (want) {
      for (Isa i : v) ok |= (i == *want);
    }
    if (ok) return *want;
    std::fprintf(stderr, "fgemma: FGEMMA_ISA=%s is not available on this CPU; using %s\n", env,
                 std::string(IsaName(best)).c_str());
  }
  return best;
}

Isa ActiveIsa() {
  int a = g_active.load(std::memory_order_relaxed);
  if (a < 0) {
    a = static_cast<int>(DefaultIsa());
    g_active.store(a, std::memory_order_relaxed);
  }
  return static_cast<Isa>(a);
}

void SetActiveIsa(Isa isa) { g_active.store(static_cast<int>(isa), std::memory_order_relaxed); }

}  // namespace fg::kernels
