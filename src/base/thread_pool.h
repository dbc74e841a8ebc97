// One persistent pool of worker threads. The calling thread takes part in every job, so a pool
// of size 1 runs everything inline with no synchronization at all.
//
// A job is a list of tasks that threads claim from a shared counter (ParallelFor cuts [0, n)
// into at most kTasksPerThread contiguous ranges per thread), several at a time while many are
// left ("guided": 1/(2 * threads) of what remains, so a quiet machine sees few long contiguous
// runs, as with a static split) and one at a time near the end. Claiming instead of
// a static split matters on a loaded machine (or with more threads than cores): a worker the
// OS has not scheduled simply claims nothing and the others, the caller included, do its share,
// instead of the caller waiting a whole time slice for it. Results never depend on which
// thread ran a task: callers make every task's output independent of the split.
//
// Workers spin briefly after a job (a decode step issues a few hundred short jobs back to
// back), then yield, then sleep on a futex.
#ifndef FGEMMA_BASE_THREAD_POOL_H_
#define FGEMMA_BASE_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace fg {

class ThreadPool {
 public:
  // Ranges per thread ParallelFor cuts a job into at most: enough that a thread the OS
  // preempts holds up at most a small share, few enough that claiming costs nothing.
  static constexpr int kTasksPerThread = 8;
  // Work (in rough element operations) below which a job costs more than it saves: callers
  // run smaller work inline and ask for ranges of at least this much.
  static constexpr int64_t kMinWork = int64_t{1} << 15;
  // The grain (items per range) for items of `work_per_item` each.
  static constexpr int64_t GrainFor(int64_t work_per_item) {
    return work_per_item >= kMinWork ? 1 : kMinWork / (work_per_item > 0 ? work_per_item : 1);
  }

  // n_threads >= 1 counts the caller; n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(t, size()) once for every t in [0, size()) and waits for all. Each call runs on
  // some thread of the pool: normally thread t, but a thread that is not running at the time
  // has its call taken over by another (so fn must not rely on t being a thread identity that
  // runs concurrently with the others; using t to pick a scratch buffer or a share is fine).
  template <typename F>
  void RunOnAll(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    auto thunk = [](void* ctx, int64_t tb, int64_t te, int64_t n_tasks, int) {
      for (int64_t t = tb; t < te; ++t) {
        (*static_cast<Fn*>(ctx))(static_cast<int>(t), static_cast<int>(n_tasks));
      }
    };
    Dispatch(thunk, const_cast<void*>(static_cast<const void*>(&fn)), n_threads_);
  }

  // Calls fn(begin, end) on contiguous, non-empty ranges covering [0, n) exactly once.
  // `grain` is the smallest range worth a task of its own.
  template <typename F>
  void ParallelFor(int64_t n, F&& fn, int64_t grain = 1) {
    ParallelForThread(n, [&fn](int64_t b, int64_t e, int) { fn(b, e); }, grain);
  }

  // Same, fn(begin, end, thread): `thread` in [0, size()) is the index of the thread running
  // the range; ranges that run at the same time have different indices (per-thread scratch).
  template <typename F>
  void ParallelForThread(int64_t n, F&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t max_parts = (n + grain - 1) / grain;
    const int64_t cap = static_cast<int64_t>(n_threads_) * kTasksPerThread;
    const int64_t parts = max_parts < cap ? max_parts : cap;
    if (parts <= 1 || n_threads_ == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    struct Ctx {
      Fn* fn;
      int64_t n, parts;
    } ctx{&fn, n, parts};
    auto thunk = [](void* c, int64_t tb, int64_t te, int64_t, int thread) {
      const Ctx& x = *static_cast<const Ctx*>(c);
      const int64_t b = x.n * tb / x.parts, e = x.n * te / x.parts;  // one contiguous range
      if (b < e) (*x.fn)(b, e, thread);
    };
    Dispatch(thunk, &ctx, parts);
  }

  // Default thread count: the number of cores this process may run on.
  static int DefaultThreads();

 private:
  // Runs tasks [task_begin, task_end) of n_tasks on thread `thread`.
  using Thunk = void (*)(void* ctx, int64_t task_begin, int64_t task_end, int64_t n_tasks,
                         int thread);
  // One job's description. Two slots, alternating by generation: a late worker may still read
  // the previous job's slot, but the next job writes the other one, and a claim made with
  // stale data fails (the claim word holds the generation).
  struct Slot {
    std::atomic<Thunk> thunk{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<int64_t> n_tasks{0};
  };
  void Dispatch(Thunk thunk, void* ctx, int64_t n_tasks);
  void RunTasks(uint32_t gen, int thread);
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  Slot slots_[2];
  // (generation << 32) | next unclaimed task of the current job.
  alignas(64) std::atomic<uint64_t> claim_{0};
  // Tasks of the current job that have finished.
  alignas(64) std::atomic<int64_t> done_{0};
  // The current job's generation (workers wait on it); 0: none yet.
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace fg

#endif  // FGEMMA_BASE_THREAD_POOL_H_
