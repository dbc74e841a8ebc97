#include "src/base/thread_pool.h"

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FG_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define FG_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define FG_CPU_RELAX() ((void)0)
#endif

namespace fg {

namespace {
// About 20-50 us of spinning: longer than the gap between two jobs of one decode step, much
// shorter than the gap between two requests.
constexpr int kSpinIterations = 1 << 14;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

int ThreadPool::DefaultThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

void ThreadPool::Dispatch(Thunk thunk, void* ctx) {
  if (n_threads_ == 1) {
    thunk(ctx, 0, 1);
    return;
  }
  thunk_ = thunk;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);  // publishes thunk_/ctx_
  generation_.notify_all();
  thunk(ctx, 0, n_threads_);
  // Wait for the workers: spin, then yield (jobs are short; sleeping here costs more).
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < kSpinIterations) {
      FG_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::WorkerLoop(int index) {
  // Generation 0 is the pool's start: a job dispatched before this thread first runs is still
  // seen as new (loading the counter here would miss it and deadlock the caller).
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        FG_CPU_RELAX();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    thunk_(ctx_, index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace fg
