// Executors with a caller-owned activation arena (ExecOptions::external_arena): nothing runs
// before UseArena, a too small or misaligned arena is refused, and two executors sharing one
// arena (run one after the other, as a session's graphs are) give exactly what executors with
// their own arenas give, also after moving to another arena.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/exec/executor.h"
#include "src/graph/graph.h"
#include "tests/testing/exec_inputs.h"

namespace fg {
namespace {

using ::fg::testing::NoWeights;
using ::fg::testing::Random;
using ::fg::testing::StatusIs;
using graph::Builder;
using graph::ValueType;

// y = concat(transpose(x), x) along axis 0 ([n, n] -> [2n, n]): several
// intermediate values, so the arena holds more than the input.
graph::Graph MakeGraph(int64_t n) {
  Builder b;
  graph::ValueId x = b.Input("x", {n, n}, ValueType::kF32);
  graph::ValueId t = b.Transpose("t", x, {1, 0});
  b.MarkOutput(b.Concat("c", t, x, 0), "y");
  auto g = b.Finish();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *std::move(g) : graph::Graph{};
}

std::vector<float> RunY(exec::Executor& e, const std::vector<float>& x) {
  EXPECT_TRUE(e.SetInput("x", std::span<const float>(x)).ok());
  Status s = e.Run();
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto r = e.OutputF32("y");
  EXPECT_TRUE(r.ok());
  return r.ok() ? std::vector<float>(r->begin(), r->end()) : std::vector<float>{};
}

TEST(ExecutorArena, SharedArenaGivesTheOwnArenaResults) {
  exec::ExecOptions own;
  exec::ExecOptions ext;
  ext.external_arena = true;
  FG_ASSERT_OK_AND_ASSIGN(auto small_own, exec::Executor::Create(MakeGraph(5), NoWeights(),
                                                                 nullptr, own));
  FG_ASSERT_OK_AND_ASSIGN(auto big_own, exec::Executor::Create(MakeGraph(9), NoWeights(),
                                                               nullptr, own));
  FG_ASSERT_OK_AND_ASSIGN(auto small, exec::Executor::Create(MakeGraph(5), NoWeights(),
                                                             nullptr, ext));
  FG_ASSERT_OK_AND_ASSIGN(auto big, exec::Executor::Create(MakeGraph(9), NoWeights(),
                                                           nullptr, ext));
  ASSERT_GT(big->arena_bytes(), small->arena_bytes());

  // Nothing runs or takes inputs without an arena; an own-arena executor refuses UseArena.
  const std::vector<float> xs = Random(25, 1), xb = Random(81, 2);
  EXPECT_THAT(small->SetInput("x", std::span<const float>(xs)),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(small->Run(), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  alignas(64) static uint8_t buf_a[1 << 16];
  alignas(64) static uint8_t buf_b[1 << 16];
  ASSERT_LE(big->arena_bytes(), sizeof(buf_a));
  EXPECT_THAT(small_own->UseArena(buf_a, sizeof(buf_a)),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(big->UseArena(buf_a, small->arena_bytes()),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(big->UseArena(buf_a + 4, sizeof(buf_a) - 64),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));

  FG_ASSERT_OK(small->UseArena(buf_a, big->arena_bytes()));
  FG_ASSERT_OK(big->UseArena(buf_a, big->arena_bytes()));
  const std::vector<float> want_s = RunY(*small_own, xs), want_b = RunY(*big_own, xb);
  ASSERT_EQ(want_s.size(), 50u);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(RunY(*small, xs), want_s);
    EXPECT_EQ(RunY(*big, xb), want_b);
  }
  // Moved to another arena (the old one scribbled over): the same results.
  FG_ASSERT_OK(small->UseArena(buf_b, sizeof(buf_b)));
  FG_ASSERT_OK(big->UseArena(buf_b, sizeof(buf_b)));
  std::fill(std::begin(buf_a), std::end(buf_a), uint8_t{0xff});
  EXPECT_EQ(RunY(*big, xb), want_b);
  EXPECT_EQ(RunY(*small, xs), want_s);
}

}  // namespace
}  // namespace fg
