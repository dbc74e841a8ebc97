#include "src/base/thread_pool.h"

#include <atomic>
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

TEST(ThreadPoolTest, RunOnAllReachesEveryThread) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> seen(3);
  pool.RunOnAll([&](int t, int n) {
    EXPECT_EQ(n, 3);
    seen[t].fetch_add(1);
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
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

TEST(ThreadPoolTest, DefaultThreadsIsPositive) { EXPECT_GE(ThreadPool::DefaultThreads(), 1); }

}  // namespace
}  // namespace fg
