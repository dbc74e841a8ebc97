// Matmul micro-benchmarks at the shapes of Gemma 3 270M (hidden 640, FFN 2048, attention
// projections 1024/256, LM head 262144 x 640), and the memory read bandwidth for the roofline.
//
//   fg_kernels_benchmark --benchmark_filter=MatVec --benchmark_min_time=0.2
//
// GB/s counts the weight bytes read per call (the activations are tiny next to them), so a
// matvec at the memory bandwidth is as fast as the machine allows. FGEMMA_ISA picks the ISA.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>

#include "src/base/thread_pool.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/matmul.h"
#include "src/kernels/quant.h"

namespace fg::kernels {
namespace {

using tensor::DType;

ThreadPool& Pool(int threads) {
  static ThreadPool pool1(1), pool2(2);
  return threads == 1 ? pool1 : pool2;
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g(rng);
  return v;
}

struct Weights {
  std::vector<uint8_t> data;
  WeightMatrix w;
};

// A weight matrix of `rows` x `cols`: 64 distinct quantized random rows tiled over the whole
// matrix (every byte is still read from memory; building 262144 distinct rows would take far
// longer than the benchmark). Matrices over 64 MiB are not cached, so at most one is alive.
const Weights& GetWeights(DType t, int64_t rows, int64_t cols) {
  static std::map<std::tuple<int, int64_t, int64_t>, std::unique_ptr<Weights>> cache;
  static std::unique_ptr<Weights> big;
  static std::tuple<int, int64_t, int64_t> big_key{-1, 0, 0};
  const auto key = std::make_tuple(static_cast<int>(t), rows, cols);
  if (auto it = cache.find(key); it != cache.end()) return *it->second;
  if (big != nullptr && big_key == key) return *big;
  const size_t rb = static_cast<size_t>(*tensor::RowBytes(t, cols));
  const bool is_big = rb * static_cast<size_t>(rows) > (64u << 20);
  if (is_big) big.reset();  // free the previous big matrix first
  auto w = std::make_unique<Weights>();
  w->data.resize(rb * static_cast<size_t>(rows));
  const TypeOps* ops = GetTypeOps(t);
  const int64_t distinct = rows < 64 ? rows : 64;
  const std::vector<float> f = Random(distinct * cols, 1);
  for (int64_t r = 0; r < distinct; ++r) ops->quantize_row(f.data() + r * cols, w->data.data() + r * rb, cols);
  for (int64_t r = distinct; r < rows; ++r) {
    std::memcpy(w->data.data() + r * rb, w->data.data() + (r % distinct) * rb, rb);
  }
  w->w = {t, w->data.data(), rows, cols, rb};
  if (is_big) {
    big = std::move(w);
    big_key = key;
    return *big;
  }
  return *(cache[key] = std::move(w));
}

// `prepacked`: with the matrix's panels packed once (PackPanels, as fgemma serve and call
// --prepack run), so that only the products are timed, not the packing each call does.
void MatMulLoop(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t m,
                bool prepacked) {
  const int threads = static_cast<int>(state.range(0));
  const Weights& w = GetWeights(t, rows, cols);
  const std::vector<float> x = Random(m * cols, 2);
  std::vector<float> y(static_cast<size_t>(m * rows));
  ThreadPool& pool = Pool(threads);
  WeightMatrix wm = w.w;
  std::vector<uint8_t> panels;
  if (prepacked) {
    const KernelSet& ks = ActiveKernelSet();
    const size_t bytes = PanelBytes(ks, wm);
    if (bytes == 0) {
      state.SkipWithError("this kernel set packs no panels for this type");
      return;
    }
    panels.resize(bytes + 64);
    uint8_t* aligned = panels.data() + (64 - reinterpret_cast<uintptr_t>(panels.data()) % 64) % 64;
    PackPanels(ks, wm, aligned, &pool);
    wm.panels = aligned;
    wm.panel_set = PanelSetOf(ks, wm);
  }
  for (auto _ : state) {
    MatMul(wm, x.data(), m, y.data(), rows, &pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(w.data.size());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(m * rows * cols),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(IsaName(ActiveIsa())));
}

void BM_MatMul(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t m) {
  MatMulLoop(state, t, rows, cols, m, false);
}
void BM_MatMulPrepacked(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t m) {
  MatMulLoop(state, t, rows, cols, m, true);
}

// Sum of a 512 MiB buffer: the read bandwidth a matvec can reach at best.
void BM_MemoryRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr size_t kWords = (512u << 20) / sizeof(uint64_t);
  static std::vector<uint64_t> buf(kWords, 1);
  ThreadPool& pool = Pool(threads);
  for (auto _ : state) {
    uint64_t partial[2] = {0, 0};
    pool.RunOnAll([&](int t, int n) {
      const size_t b = kWords * t / n, e = kWords * (t + 1) / n;
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = b; i + 4 <= e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      partial[t] = s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(partial[0] + partial[1]);
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kWords * sizeof(uint64_t)) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

struct Shape {
  int64_t rows, cols;
};

bool Registered() {
  // Decode matvecs of one layer: q (1024x640), k/v (256x640), gate/up (2048x640),
  // down (640x2048), o (640x1024).
  const Shape layer[] = {{1024, 640}, {256, 640}, {2048, 640}, {640, 2048}, {640, 1024}};
  for (DType t : tensor::kSupportedWeightTypes) {
    if (GetTypeOps(t) == nullptr) continue;  // not built yet
    const std::string tn(tensor::DTypeName(t));
    for (const Shape& s : layer) {
      // K-quants need cols % 256 == 0 (GGUF files store such tensors in another type).
      if (!tensor::RowBytes(t, s.cols).has_value()) continue;
      const std::string name =
          "MatVec/" + tn + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, t, s.rows, s.cols, int64_t{1})
          ->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
    }
  }
  // The LM head (tied embedding), only in the types a model would keep it in.
  for (DType t : {DType::kQ8_0, DType::kF16, DType::kBF16, DType::kF32, DType::kQ4_0, DType::kQ5_0}) {
    const std::string name = "MatVec/" + std::string(tensor::DTypeName(t)) + "/262144x640";
    benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, t, int64_t{262144}, int64_t{640},
                                 int64_t{1})
        ->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
  }
  // The LM head over a training example's loss rows (~15 in a per-app tune).
  benchmark::RegisterBenchmark("MatMul/Q8_0/262144x640/m16", BM_MatMul, DType::kQ8_0,
                               int64_t{262144}, int64_t{640}, int64_t{16})
      ->ArgName("threads")
      ->Arg(1)
      ->Arg(2)
      ->UseRealTime();
  benchmark::RegisterBenchmark("MatMul/Q8_0/262144x640/m16/prepacked", BM_MatMulPrepacked,
                               DType::kQ8_0, int64_t{262144}, int64_t{640}, int64_t{16})
      ->ArgName("threads")
      ->Arg(1)
      ->Arg(2)
      ->UseRealTime();
  // Batches: the few tokens a grammar forces at once, and prefill chunks.
  for (DType t : tensor::kSupportedWeightTypes) {
    if (GetTypeOps(t) == nullptr) continue;
    for (const Shape& s : {Shape{2048, 640}, Shape{640, 2048}}) {
      if (!tensor::RowBytes(t, s.cols).has_value()) continue;
      for (int64_t m : {2, 3, 4, 8, 16, 32, 64, 512}) {
        const std::string name = "MatMul/" + std::string(tensor::DTypeName(t)) + "/" +
                                 std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 "/m" + std::to_string(m);
        benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, t, s.rows, s.cols, m)
            ->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
      }
    }
  }
  benchmark::RegisterBenchmark("MemoryRead/512MiB", BM_MemoryRead)
      ->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
  return true;
}

const bool registered = Registered();

}  // namespace
}  // namespace fg::kernels
