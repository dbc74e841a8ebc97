#include "src/base/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace fg {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        EXPECT_LT(b, e);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
    }
  }
}

TEST(ThreadPoolTest, GrainLimitsTheNumberOfParts) {
  ThreadPool pool(4);
  std::atomic<int> parts{0};
  pool.ParallelFor(10, [&](int64_t, int64_t) { parts.fetch_add(1); }, /*grain=*/8);
  EXPECT_EQ(parts.load(), 2);
}

TEST(ThreadPoolTest, RunOnAllCallsEveryIndexOnce) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 100; ++rep) {
    std::vector<std::atomic<int>> seen(3);
    pool.RunOnAll([&](int t, int n) {
      EXPECT_EQ(n, 3);
      seen[t].fetch_add(1);
    });
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  }
}

TEST(ThreadPoolTest, ManyBackToBackJobs) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int j = 0; j < 20000; ++j) {
    pool.ParallelFor(4, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  }
  EXPECT_EQ(sum.load(), 80000);
}

TEST(ThreadPoolTest, MoreThreadsThanCoresStillCompletes) {
  ThreadPool pool(16);
  std::atomic<int64_t> sum{0};
  for (int j = 0; j < 200; ++j) {
    pool.ParallelFor(100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
  }
  EXPECT_EQ(sum.load(), 200 * 4950);
}

TEST(ThreadPoolTest, OtherThreadsTakeOverTheShareOfAStalledThread) {
  // The first range a worker runs stalls until every other index has been done (as if the OS
  // had preempted that worker). With claimed ranges the caller does all the rest, and the
  // stalled range is at most 1/(2 * threads) of the job (a static split would give the worker
  // half the job to hold up). The stall gives up after 20 s so a regression fails instead of
  // hanging.
  ThreadPool pool(2);
  constexpr int64_t kN = 1000;
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int64_t> finished{0}, stalled_len{0};
    std::atomic<bool> timed_out{false};
    pool.ParallelForThread(kN, [&](int64_t b, int64_t e, int thread) {
      if (thread != 0 && stalled_len.load() == 0) {
        stalled_len.store(e - b);
        const auto start = std::chrono::steady_clock::now();
        while (finished.load() < kN - (e - b)) {
          if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
            timed_out.store(true);
            break;
          }
          std::this_thread::yield();
        }
      }
      finished.fetch_add(e - b);
    });
    EXPECT_EQ(finished.load(), kN);
    EXPECT_FALSE(timed_out.load()) << "rep " << rep;
    EXPECT_LE(stalled_len.load(), kN / 4) << "rep " << rep;
  }
}

TEST(ThreadPoolTest, ConcurrentRangesHaveDistinctThreadIndices) {
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> busy(threads);
    std::atomic<int> clashes{0}, bad_index{0};
    std::atomic<int64_t> covered{0};
    for (int j = 0; j < 200; ++j) {
      pool.ParallelForThread(1000, [&](int64_t b, int64_t e, int t) {
        if (t < 0 || t >= threads) {
          bad_index.fetch_add(1);
          return;
        }
        if (busy[t].fetch_add(1) != 0) clashes.fetch_add(1);
        covered.fetch_add(e - b);
        busy[t].fetch_sub(1);
      });
    }
    EXPECT_EQ(clashes.load(), 0);
    EXPECT_EQ(bad_index.load(), 0);
    EXPECT_EQ(covered.load(), 200 * 1000);
  }
}

TEST(ThreadPoolTest, FewLongRangesForALargeJob) {
  // Guided claims: at most kTasksPerThread ranges per thread, none shorter than one task.
  ThreadPool pool(2);
  constexpr int64_t kN = 1 << 20;
  std::atomic<int> parts{0};
  std::atomic<int64_t> shortest{kN};
  pool.ParallelFor(kN, [&](int64_t b, int64_t e) {
    parts.fetch_add(1);
    int64_t cur = shortest.load();
    while (e - b < cur && !shortest.compare_exchange_weak(cur, e - b)) {
    }
  });
  EXPECT_LE(parts.load(), 2 * ThreadPool::kTasksPerThread);
  EXPECT_GE(shortest.load(), kN / (2 * ThreadPool::kTasksPerThread));
}

TEST(ThreadPoolTest, DefaultThreadsIsPositive) { EXPECT_GE(ThreadPool::DefaultThreads(), 1); }

}  // namespace
}  // namespace fg
