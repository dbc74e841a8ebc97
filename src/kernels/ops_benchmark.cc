// Element kernels per ISA at the sizes of the 270M model: hidden 640, FFN 2048, head_dim 256,
// vocab 262144 (Argmax / Softmax over the LM head output).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "src/kernels/ops.h"

namespace fg::kernels {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void BM_RmsNorm(benchmark::State& st, Isa isa) {
  const int64_t n = st.range(0);
  const auto x = Random(n, 1), w = Random(n, 2);
  std::vector<float> y(n);
  const auto& ops = GetElementOps(isa);
  for (auto _ : st) {
    ops.rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * n * 3 * 4);
}

void BM_Argmax(benchmark::State& st, Isa isa) {
  const int64_t n = st.range(0);
  const auto x = Random(n, 3);
  const auto& ops = GetElementOps(isa);
  for (auto _ : st) benchmark::DoNotOptimize(ops.argmax(x.data(), n));
  st.SetBytesProcessed(st.iterations() * n * 4);
}

void BM_Softmax(benchmark::State& st, Isa isa) {
  const int64_t n = st.range(0);
  const auto x0 = Random(n, 4);
  auto x = x0;
  const auto& ops = GetElementOps(isa);
  for (auto _ : st) {
    ops.softmax(x.data(), n);  // softmax of a softmax stays finite; the work is the same
    benchmark::DoNotOptimize(x.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
}

void BM_GeluTanhMul(benchmark::State& st, Isa isa) {
  const int64_t n = st.range(0);
  const auto g = Random(n, 5), u = Random(n, 6);
  std::vector<float> y(n);
  const auto& ops = GetElementOps(isa);
  for (auto _ : st) {
    ops.gelu_tanh_mul(g.data(), u.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
}

void BM_Rope(benchmark::State& st, Isa isa) {
  const int64_t heads = st.range(0), d = 256;
  auto x = Random(heads * d, 7);
  std::vector<float> c(d / 2), s(d / 2);
  RopeTable(1000, d, 1e6, c.data(), s.data());
  const auto& ops = GetElementOps(isa);
  for (auto _ : st) {
    ops.apply_rope(x.data(), heads, d, c.data(), s.data());
    benchmark::DoNotOptimize(x.data());
  }
  st.SetItemsProcessed(st.iterations() * heads * d);
}

void BM_Dot(benchmark::State& st, Isa isa) {
  const int64_t n = st.range(0);
  const auto a = Random(n, 8), b = Random(n, 9);
  const auto& ops = GetElementOps(isa);
  for (auto _ : st) benchmark::DoNotOptimize(ops.dot(a.data(), b.data(), n));
  st.SetItemsProcessed(st.iterations() * n);
}

void BM_Axpy(benchmark::State& st, Isa isa) {
  const int64_t n = st.range(0);
  const auto x = Random(n, 10);
  auto y = Random(n, 11);
  const auto& ops = GetElementOps(isa);
  for (auto _ : st) {
    ops.axpy(1e-3f, x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
}

void BM_RopeTable(benchmark::State& st) {
  std::vector<float> c(128), s(128);
  for (auto _ : st) {
    RopeTable(4097, 256, 1e6, c.data(), s.data());
    benchmark::DoNotOptimize(c.data());
  }
}
BENCHMARK(BM_RopeTable);

// Appends rather than operator+: g++ 12 reports a false -Wrestrict on "/" + std::string.
std::string Name(const char* base, Isa isa) {
  std::string r = base;
  r += '/';
  r.append(IsaName(isa));
  return r;
}

int RegisterAll() {
  for (Isa isa : AvailableIsas()) {
    benchmark::RegisterBenchmark(Name("BM_RmsNorm", isa).c_str(), BM_RmsNorm, isa)
        ->Arg(640)
        ->Arg(2048)
        ->Arg(262144);
    benchmark::RegisterBenchmark(Name("BM_Argmax", isa).c_str(), BM_Argmax, isa)
        ->Arg(640)
        ->Arg(2048)
        ->Arg(262144);
    benchmark::RegisterBenchmark(Name("BM_Softmax", isa).c_str(), BM_Softmax, isa)
        ->Arg(640)
        ->Arg(2048)
        ->Arg(262144);
    benchmark::RegisterBenchmark(Name("BM_GeluTanhMul", isa).c_str(), BM_GeluTanhMul, isa)
        ->Arg(2048)
        ->Arg(262144);
    benchmark::RegisterBenchmark(Name("BM_Rope", isa).c_str(), BM_Rope, isa)->Arg(1)->Arg(4);
    benchmark::RegisterBenchmark(Name("BM_Dot", isa).c_str(), BM_Dot, isa)->Arg(256)->Arg(2048);
    benchmark::RegisterBenchmark(Name("BM_Axpy", isa).c_str(), BM_Axpy, isa)->Arg(256)->Arg(2048);
  }
  return 0;
}
const int kRegistered = RegisterAll();

}  // namespace
}  // namespace fg::kernels
