// K-quant kernels per ISA at the 270M model's shapes: the decode matvec of attn_output
// (Q4_K, 640 rows of 1024) and ffn_down (Q6_K in half the layers, 640 rows of 2048), through
// MatMulIsa with 1 and 2 threads (GB/s of weight bytes read), the bare vec_dot over the same rows
// (the kernel without the driver), and the Q8_K activation quantizer.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "src/base/thread_pool.h"
#include "src/kernels/matmul.h"
#include "src/kernels/quant.h"
#include "src/tensor/dtype.h"

namespace fg::kernels {
namespace {

using tensor::DType;

std::vector<float> Gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 0.05f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Weights {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

Weights MakeWeights(DType t, int64_t rows, int64_t cols) {
  Weights r;
  const int64_t rb = *tensor::RowBytes(t, cols);
  r.bytes.resize(static_cast<size_t>(rows * rb));
  const std::vector<float> f = Gaussian(rows * cols, 1);
  const TypeOps* ops = GetTypeOps(t, Isa::kScalar);
  for (int64_t i = 0; i < rows; ++i) ops->quantize_row(f.data() + i * cols, r.bytes.data() + i * rb, cols);
  r.w = {t, r.bytes.data(), rows, cols, static_cast<size_t>(rb)};
  return r;
}

void BM_MatVec(benchmark::State& st, DType t, Isa isa, int threads) {
  const int64_t rows = st.range(0), cols = st.range(1);
  const Weights w = MakeWeights(t, rows, cols);
  const std::vector<float> x = Gaussian(cols, 2);
  std::vector<float> y(rows);
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  for (auto _ : st) {
    MatMulIsa(isa, w.w, x.data(), 1, y.data(), rows, pool.get());
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(w.bytes.size()));
}

void BM_VecDotRows(benchmark::State& st, DType t, Isa isa) {
  const int64_t rows = st.range(0), cols = st.range(1);
  const Weights w = MakeWeights(t, rows, cols);
  const TypeOps* ops = GetTypeOps(t, isa);
  const TypeOps* q8 = GetTypeOps(ops->dot_type, isa);
  const std::vector<float> x = Gaussian(cols, 2);
  std::vector<uint8_t> xq(*tensor::RowBytes(ops->dot_type, cols));
  q8->quantize_row(x.data(), xq.data(), cols);
  std::vector<float> y(rows);
  for (auto _ : st) {
    for (int64_t r = 0; r < rows; ++r) ops->vec_dot(cols, w.w.row(r), xq.data(), &y[r]);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(w.bytes.size()));
}

void BM_QuantizeQ8K(benchmark::State& st, Isa isa) {
  const int64_t n = st.range(0);
  const std::vector<float> x = Gaussian(n, 3);
  std::vector<uint8_t> q(*tensor::RowBytes(DType::kQ8_K, n));
  const TypeOps* ops = GetTypeOps(DType::kQ8_K, isa);
  for (auto _ : st) {
    ops->quantize_row(x.data(), q.data(), n);
    benchmark::DoNotOptimize(q.data());
  }
  st.SetBytesProcessed(st.iterations() * n * 4);
}

// Appends rather than operator+ (g++ 12 reports a false -Wrestrict on "/" + std::string).
std::string Name(const char* base, DType t, Isa isa) {
  std::string r = base;
  r += '/';
  r.append(tensor::DTypeName(t));
  r += '/';
  r.append(IsaName(isa));
  return r;
}

int RegisterAll() {
  struct Shape {
    DType type;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{DType::kQ4_K, 640, 1024}, {DType::kQ6_K, 640, 2048}, {DType::kQ5_K, 640, 1024}};
  for (Isa isa : AvailableIsas()) {
    for (const Shape& s : shapes) {
      for (int threads : {1, 2}) {
        std::string name = Name("BM_KQuantMatVec", s.type, isa);
        name += "/threads:";
        name += std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_MatVec, s.type, isa, threads)
            ->Args({s.rows, s.cols})
            ->UseRealTime();
      }
      benchmark::RegisterBenchmark(Name("BM_KQuantVecDotRows", s.type, isa).c_str(), BM_VecDotRows,
                                   s.type, isa)
          ->Args({s.rows, s.cols});
    }
    benchmark::RegisterBenchmark(Name("BM_QuantizeRow", DType::kQ8_K, isa).c_str(), BM_QuantizeQ8K, isa)
        ->Arg(1024)
        ->Arg(2048);
  }
  return 0;
}

const int kRegistered = RegisterAll();

}  // namespace
}  // namespace fg::kernels
