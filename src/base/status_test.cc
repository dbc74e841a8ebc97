#include "fgemma/status.h"

#include <memory>

#include "src/base/status_matchers.h"

namespace fg {
namespace {

using ::fg::testing::IsOk;
using ::fg::testing::StatusIs;
using ::testing::HasSubstr;

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_THAT(s, IsOk());
}

TEST(StatusTest, ContextIsPrependedOutermostFirst) {
  Status s = DataLossError("offset past end of file")
                 .WithContext("tensor 'blk.3.attn_q.weight'")
                 .WithContext("gguf");
  EXPECT_EQ(s.message(), "gguf: tensor 'blk.3.attn_q.weight': offset past end of file");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "DATA_LOSS: gguf: tensor 'blk.3.attn_q.weight': offset past end of file");
}

TEST(StatusTest, ContextOnOkStaysOk) {
  EXPECT_TRUE(OkStatus().WithContext("ignored").ok());
  EXPECT_EQ(OkStatus().WithContext("ignored").message(), "");
}

TEST(StatusTest, OkCodeDropsMessage) {
  Status s(StatusCode::kOk, "text");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  FG_ASSIGN_OR_RETURN(int h, Half(x));
  FG_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  FG_RETURN_IF_ERROR(Half(x).status());
  return OkStatus();
}

TEST(StatusOrTest, ValueAndErrorPropagate) {
  EXPECT_THAT(Quarter(8), IsOk());
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(6), StatusIs(StatusCode::kInvalidArgument, HasSubstr("odd: 3")));
  EXPECT_THAT(CheckEven(3), StatusIs(StatusCode::kInvalidArgument, "odd: 3"));
  EXPECT_THAT(CheckEven(4), IsOk());
}

TEST(StatusOrTest, HoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> v = std::move(p).value();
  EXPECT_EQ(*v, 7);
}

TEST(StatusOrTest, AssertMacroAssigns) {
  FG_ASSERT_OK_AND_ASSIGN(int q, Quarter(16));
  EXPECT_EQ(q, 4);
}

TEST(StatusOrDeathTest, ValueOfErrorAborts) {
  StatusOr<int> s = NotFoundError("x");
  EXPECT_DEATH((void)s.value(), "");
}

TEST(StatusCodeTest, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    EXPECT_NE(StatusCodeName(static_cast<StatusCode>(c)), "UNKNOWN") << c;
  }
}

}  // namespace
}  // namespace fg
