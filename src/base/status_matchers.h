// GoogleTest matchers for fg::Status / fg::StatusOr.
//   EXPECT_THAT(s, IsOk());
//   EXPECT_THAT(s, StatusIs(StatusCode::kDataLoss, HasSubstr("offset past end")));
//   FG_ASSERT_OK_AND_ASSIGN(auto file, gguf::File::Open(path));
#ifndef FGEMMA_BASE_STATUS_MATCHERS_H_
#define FGEMMA_BASE_STATUS_MATCHERS_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fgemma/status.h"

namespace fg::testing {

inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
const Status& GetStatus(const StatusOr<T>& s) { return s.status(); }

MATCHER(IsOk, "is OK") {
  const Status& s = ::fg::testing::GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s.ToString();
  return s.ok();
}

MATCHER_P2(StatusIs, code, message_matcher, "") {
  const Status& s = ::fg::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, s.message(), result_listener);
}

}  // namespace fg::testing

#define FG_ASSERT_OK(expr) ASSERT_THAT((expr), ::fg::testing::IsOk())
#define FG_EXPECT_OK(expr) EXPECT_THAT((expr), ::fg::testing::IsOk())
#define FG_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  FG_ASSERT_OK_AND_ASSIGN_IMPL_(FG_STATUS_CONCAT_(fg_test_statusor_, __LINE__), lhs, expr)
#define FG_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  ASSERT_THAT(tmp, ::fg::testing::IsOk());            \
  lhs = std::move(tmp).value()

#endif  // FGEMMA_BASE_STATUS_MATCHERS_H_
