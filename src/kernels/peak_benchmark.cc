// The machine's arithmetic peak: the most multiply-adds per second the vector units give, with
// no memory traffic at all (every operand stays in registers). A ceiling for any kernel: the
// int8 matmuls (vpdpbusd), the f32 attention and LoRA products (vfmadd231ps), and what bf16
// products (vdpbf16ps) would give. docs/tuning.md uses it to bound the trainer's tokens/s.
//
//   fg_kernels_benchmark --benchmark_filter=Peak
//
// GOP/s counts a multiply-add as two operations, as the matmul benchmarks' GFLOP/s do.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "src/base/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fg::kernels {
namespace {

#if defined(__x86_64__)

ThreadPool& PeakPool(int threads) {
  static ThreadPool pool1(1), pool2(2);
  return threads == 1 ? pool1 : pool2;
}

// 12 independent accumulators hide the instructions' latency (4-5 cycles on current cores, at
// most 2 issued a cycle); kRounds rounds of 12 per call.
constexpr int64_t kRounds = 1 << 16;
constexpr int64_t kChains = 12;

// Every function returns a lane of its sum so that the compiler keeps every instruction.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int32_t Int8Loop(int32_t seed) {
  const __m512i a = _mm512_set1_epi8(static_cast<char>(seed | 1));
  const __m512i b = _mm512_set1_epi8(static_cast<char>(seed + 3));
  __m512i acc[kChains];
  for (int64_t c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(static_cast<int32_t>(c));
  for (int64_t r = 0; r < kRounds; ++r) {
    for (int64_t c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  }
  __m512i s = acc[0];
  for (int64_t c = 1; c < kChains; ++c) s = _mm512_add_epi32(s, acc[c]);
  int32_t lanes[16];
  _mm512_storeu_si512(lanes, s);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx512f"))) int32_t F32Loop(int32_t seed) {
  const __m512 a = _mm512_set1_ps(1.f + 1e-7f * static_cast<float>(seed));
  const __m512 b = _mm512_set1_ps(1e-9f);
  __m512 acc[kChains];
  for (int64_t c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t r = 0; r < kRounds; ++r) {
    for (int64_t c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int64_t c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  return static_cast<int32_t>(lanes[0] + lanes[15]);
}

__attribute__((target("avx512f,avx512bf16"))) int32_t Bf16Loop(int32_t seed) {
  const __m512bh a =
      _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.f), _mm512_set1_ps(static_cast<float>(seed)));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-9f), _mm512_set1_ps(1e-9f));
  __m512 acc[kChains];
  for (int64_t c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t r = 0; r < kRounds; ++r) {
    for (int64_t c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int64_t c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  return static_cast<int32_t>(lanes[0] + lanes[15]);
}

// `macs`: multiply-adds of one instruction (64 int8 pairs, 16 f32 lanes, 32 bf16 pairs).
void BM_Peak(benchmark::State& state, int32_t (*loop)(int32_t), bool supported, int64_t macs) {
  if (!supported) {
    state.SkipWithError("this CPU lacks the instruction");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  ThreadPool& pool = PeakPool(threads);
  int32_t sink[2] = {0, 0};
  for (auto _ : state) {
    pool.RunOnAll([&](int t, int) { sink[t] += loop(t + 1); });
    benchmark::DoNotOptimize(sink[0] + sink[1]);
  }
  state.counters["GOP/s"] =
      benchmark::Counter(2e-9 * static_cast<double>(threads * kRounds * kChains * macs),
                         benchmark::Counter::kIsIterationInvariantRate);
}

bool Registered() {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  const struct {
    const char* name;
    int32_t (*loop)(int32_t);
    bool supported;
    int64_t macs;
  } peaks[] = {
      {"Peak/int8_vpdpbusd", Int8Loop, avx512 && __builtin_cpu_supports("avx512vnni"), 64},
      {"Peak/f32_vfmadd231ps", F32Loop, avx512, 16},
      {"Peak/bf16_vdpbf16ps", Bf16Loop, avx512 && __builtin_cpu_supports("avx512bf16"), 32},
  };
  for (const auto& p : peaks) {
    benchmark::RegisterBenchmark(p.name, BM_Peak, p.loop, p.supported, p.macs)
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
  }
  return true;
}

const bool registered = Registered();

#endif  // __x86_64__

}  // namespace
}  // namespace fg::kernels
