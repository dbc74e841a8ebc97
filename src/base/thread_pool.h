// One persistent pool of worker threads. The calling thread takes part in every job, so a pool
// of size 1 runs everything inline with no synchronization at all.
//
// Jobs are static splits: ParallelFor(n, fn) hands thread t the contiguous range
// [t*n/T, (t+1)*n/T). Kernels are balanced by construction (rows of a matrix), so static splits
// beat work stealing and need one barrier per job. Workers spin briefly before sleeping, since a
// decode step issues a few hundred short jobs back to back.
#ifndef FGEMMA_BASE_THREAD_POOL_H_
#define FGEMMA_BASE_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace fg {

class ThreadPool {
 public:
  // n_threads >= 1 counts the caller; n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on every thread of the pool and waits for all.
  template <typename F>
  void RunOnAll(F&& fn) {
    auto thunk = [](void* ctx, int t, int n) { (*static_cast<F*>(ctx))(t, n); };
    Dispatch(thunk, &fn);
  }

  // Calls fn(begin, end) on contiguous, near-equal, non-empty ranges covering [0, n).
  // `grain` is the smallest range worth a thread of its own.
  template <typename F>
  void ParallelFor(int64_t n, F&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    int64_t max_parts = grain > 0 ? (n + grain - 1) / grain : n;
    int parts = static_cast<int>(max_parts < n_threads_ ? max_parts : n_threads_);
    if (parts <= 1) {
      fn(int64_t{0}, n);
      return;
    }
    RunOnAll([&](int t, int) {
      if (t >= parts) return;
      int64_t b = n * t / parts, e = n * (t + 1) / parts;
      if (b < e) fn(b, e);
    });
  }

  // Default thread count: the number of cores this process may run on.
  static int DefaultThreads();

 private:
  using Thunk = void (*)(void*, int, int);
  void Dispatch(Thunk thunk, void* ctx);
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace fg

#endif  // FGEMMA_BASE_THREAD_POOL_H_
