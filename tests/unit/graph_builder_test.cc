// The graph builder's error model: the first error is kept, later ops add nothing, Finish()
// returns the error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/graph/graph.h"

namespace fg {
namespace {

using ::fg::testing::StatusIs;
using graph::Builder;
using graph::ValueId;
using graph::ValueType;
using ::testing::HasSubstr;

TEST(GraphBuilderTest, BuildsAndFinishes) {
  Builder b;
  ValueId x = b.Input("x", {2, 3}, ValueType::kF32);
  ValueId y = b.Scale("y", x, 2.0f);
  b.MarkOutput(y, "out");
  EXPECT_TRUE(b.ok());
  FG_ASSERT_OK_AND_ASSIGN(graph::Graph g, b.Finish());
  EXPECT_EQ(g.Find("y"), y);
  EXPECT_FALSE(g.Find("nothing").valid());
  EXPECT_EQ(g.outputs(), std::vector<int>{y.index()});
  EXPECT_EQ(g.output_names(), std::vector<std::string>{"out"});
}

TEST(GraphBuilderTest, KeepsTheFirstErrorAndAddsNothingAfterIt) {
  Builder b;
  ValueId x = b.Input("x", {2, 3}, ValueType::kF32);
  ValueId y = b.Input("y", {3, 2}, ValueType::kF32);
  ValueId bad = b.Add("sum", x, y);  // shapes differ: the first error
  EXPECT_FALSE(bad.valid());
  EXPECT_FALSE(b.ok());
  const size_t n_values = b.graph().values().size();
  // Later ops, even well-formed ones and ones on the invalid id, return no value.
  EXPECT_FALSE(b.Scale("z", x, 2.0f).valid());
  EXPECT_FALSE(b.Argmax("am", bad).valid());
  EXPECT_FALSE(b.Transpose("t", x, {0, 0}).valid());  // a second, different error
  b.MarkOutput(bad);
  EXPECT_EQ(b.graph().values().size(), n_values);
  EXPECT_THAT(b.Finish().status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("add 'sum': [2, 3] + [3, 2]")));
}

TEST(GraphBuilderTest, AnIdOfNoValueIsAnError) {
  Builder b;
  b.Scale("s", ValueId(), 1.0f);
  EXPECT_THAT(b.status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("no value with id -1")));
  Builder b2;
  b2.Scale("s", ValueId(7), 1.0f);
  EXPECT_THAT(b2.Finish().status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("graph: s: no value with id 7")));
}

TEST(GraphBuilderTest, DuplicateNamesAndOutputsAreErrors) {
  Builder b;
  b.Input("x", {2}, ValueType::kF32);
  b.Input("x", {2}, ValueType::kF32);
  EXPECT_THAT(b.status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate value name")));
  Builder b2;
  ValueId x2 = b2.Input("x", {2}, ValueType::kF32);
  b2.MarkOutput(x2, "o");
  b2.MarkOutput(x2, "o");
  EXPECT_THAT(b2.Finish().status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate output name 'o'")));
}

TEST(GraphBuilderTest, FailKeepsOnlyTheFirst) {
  Builder b;
  EXPECT_FALSE(b.Fail(InvalidArgumentError("first")).valid());
  b.Fail(InternalError("second"));
  EXPECT_THAT(b.Finish().status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("first")));
}

}  // namespace
}  // namespace fg
