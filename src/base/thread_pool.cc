#include "src/base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

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

using Clock = std::chrono::steady_clock;

// An idle worker spins (pause) for kSpin: longer than the gap between two jobs of one decode
// step, so back-to-back jobs find it awake. Then it yields for up to kYield, which hands its
// core to whoever else wants it (other processes, or this pool's own threads when there are
// more threads than cores), and then sleeps on the futex. Time-based, not iteration counts:
// `pause` takes from ~10 to ~140 cycles depending on the core.
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr auto kYield = std::chrono::microseconds(2000);
// The caller, once every task is claimed, waits for the ones other threads are running:
// spin for a while, then yield (a running task holds a preempted thread's core).
constexpr auto kCallerSpin = std::chrono::microseconds(20);

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

void ThreadPool::Dispatch(Thunk thunk, void* ctx, int64_t n_tasks) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1) {
    thunk(ctx, 0, n_tasks, n_tasks, 0);
    return;
  }
  // Only this (the calling) thread writes generation_, so a plain load is the current job.
  uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  if (gen == 0) gen = 1;  // 0 means "no job yet" to a fresh worker
  Slot& s = slots_[gen & 1];
  s.thunk.store(thunk, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.n_tasks.store(n_tasks, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);  // publishes s
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();  // no system call unless a worker sleeps
  RunTasks(gen, 0);
  // Every task is claimed; wait for those still running on other threads.
  if (done_.load(std::memory_order_acquire) != n_tasks) {
    const auto start = Clock::now();
    bool yield = false;
    for (int i = 0; done_.load(std::memory_order_acquire) != n_tasks; ++i) {
      if (yield) {
        std::this_thread::yield();
      } else {
        FG_CPU_RELAX();
        if ((i & 31) == 31 && Clock::now() - start > kCallerSpin) yield = true;
      }
    }
  }
}

void ThreadPool::RunTasks(uint32_t gen, int thread) {
  const Slot& s = slots_[gen & 1];
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(c >> 32) != gen) return;  // a later job: this one is over
    // Read before claiming; only trusted if the claim below succeeds, which proves the slot
    // still describes generation `gen` (its reuse needs a newer generation in claim_).
    const Thunk thunk = s.thunk.load(std::memory_order_relaxed);
    void* const ctx = s.ctx.load(std::memory_order_relaxed);
    const int64_t n = s.n_tasks.load(std::memory_order_relaxed);
    const int64_t task = static_cast<int64_t>(static_cast<uint32_t>(c));
    if (task >= n) return;  // all claimed
    const int64_t take = std::max<int64_t>(1, (n - task) / (2 * n_threads_));
    if (claim_.compare_exchange_weak(c, c + static_cast<uint64_t>(take),
                                     std::memory_order_acq_rel, std::memory_order_acquire)) {
      thunk(ctx, task, task + take, n, thread);
      done_.fetch_add(take, std::memory_order_acq_rel);
      c = claim_.load(std::memory_order_acquire);
    }
  }
}

void ThreadPool::WorkerLoop(int index) {
  // Generation 0 is the pool's start: a job dispatched before this thread first runs is still
  // seen as new (loading the counter here would miss it).
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto start = Clock::now();
      for (int i = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++i) {
        if ((i & 31) != 31) {
          FG_CPU_RELAX();
          continue;
        }
        const auto idle = Clock::now() - start;
        if (idle < kSpin) continue;
        if (idle < kYield) {
          std::this_thread::yield();
        } else {
          generation_.wait(seen, std::memory_order_acquire);
        }
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    RunTasks(g, index);
  }
}

}  // namespace fg
