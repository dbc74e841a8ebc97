// Session logits requests (full / none / a few rows) and Truncate, on synthetic models: sparse
// logits are the matching entries of the full logits, skipping the head never changes later
// logits, and a rewound session continues exactly like a fresh one.
#include "src/runtime/session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/runtime/model.h"
#include "src/runtime/test_models.h"

namespace fg::runtime {
namespace {

using ::fg::testing::StatusIs;
using tensor::DType;

using test::Tokens;

std::unique_ptr<Model> MakeModel(const std::string& preset, DType type) {
  return test::MakeModel("session", preset, type);
}

std::unique_ptr<Session> NewSession(const Model& m, ThreadPool* pool, int64_t chunk,
                                    bool reference = false) {
  SessionOptions o;
  o.context = 256;
  o.max_chunk = chunk;
  o.pool = pool;
  o.reference = reference;
  auto s = Session::Create(m, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

struct Case {
  std::string preset;
  DType type;
  bool reference;
};

class SessionLogits : public ::testing::TestWithParam<Case> {};

// Rows (scattered, consecutive runs, unsorted, duplicated) get exactly the full logits' values.
TEST_P(SessionLogits, RowsEqualTheFullLogitsEntries) {
  const Case& c = GetParam();
  auto m = MakeModel(c.preset, c.type);
  ASSERT_NE(m, nullptr);
  const int64_t vocab = m->config().vocab;
  ThreadPool pool(2);
  auto full = NewSession(*m, &pool, 16, c.reference);
  auto sparse = NewSession(*m, &pool, 16, c.reference);
  std::vector<int32_t> rows = {0,   1,   2,   3,   4,   46,  52,  7,
                               100, 101, 102, 103, 104, 105, 106, static_cast<int32_t>(vocab - 1),
                               52,  300, 9};
  std::vector<int32_t> prompt = Tokens(37, vocab, 3);  // three chunks, the last partial
  FG_ASSERT_OK(full->Append(prompt));
  FG_ASSERT_OK(sparse->Append(prompt, LogitsRequest::Rows(rows)));
  for (int step = 0; step < 6; ++step) {
    ASSERT_EQ(sparse->row_logits().size(), rows.size());
    EXPECT_TRUE(sparse->logits().empty());
    EXPECT_EQ(sparse->last_hidden().size(), static_cast<size_t>(m->config().hidden));
    ASSERT_EQ(full->logits().size(), static_cast<size_t>(vocab));
    for (size_t j = 0; j < rows.size(); ++j) {
      EXPECT_EQ(sparse->row_logits()[j], full->logits()[rows[j]]) << "row " << rows[j];
    }
    const int32_t next = static_cast<int32_t>(
        std::max_element(full->logits().begin(), full->logits().end()) - full->logits().begin());
    FG_ASSERT_OK(full->Append(std::span<const int32_t>(&next, 1)));
    FG_ASSERT_OK(sparse->Append(std::span<const int32_t>(&next, 1), LogitsRequest::Rows(rows)));
  }
  EXPECT_EQ(sparse->head_stats().sparse, 7);
  EXPECT_EQ(sparse->head_stats().sparse_rows, 7 * static_cast<int64_t>(rows.size()));
  EXPECT_EQ(sparse->head_stats().full, 0);
  EXPECT_EQ(full->head_stats().full, 7);
}

// Skipping the head (kNone) on some Appends leaves every later full logit vector unchanged.
TEST_P(SessionLogits, NoneThenFullEqualsAlwaysFull) {
  const Case& c = GetParam();
  auto m = MakeModel(c.preset, c.type);
  ASSERT_NE(m, nullptr);
  const int64_t vocab = m->config().vocab;
  ThreadPool pool(2);
  auto always = NewSession(*m, &pool, 8, c.reference);
  auto mixed = NewSession(*m, &pool, 8, c.reference);
  std::vector<int32_t> toks = Tokens(40, vocab, 11);
  // Pieces of lengths 13, 1, 1, 5, 1, 19: chunks split, single tokens, runs of forced tokens.
  const int cuts[] = {13, 1, 1, 5, 1, 19};
  size_t at = 0;
  for (int i = 0; i < 6; ++i) {
    std::span<const int32_t> piece(toks.data() + at, cuts[i]);
    at += cuts[i];
    FG_ASSERT_OK(always->Append(piece));
    const bool skip = i % 2 == 0;
    FG_ASSERT_OK(mixed->Append(piece, skip ? LogitsRequest::None() : LogitsRequest::Full()));
    if (skip) {
      EXPECT_TRUE(mixed->logits().empty());
      EXPECT_TRUE(mixed->row_logits().empty());
      continue;
    }
    ASSERT_EQ(mixed->logits().size(), always->logits().size());
    for (int64_t v = 0; v < vocab; ++v) ASSERT_EQ(mixed->logits()[v], always->logits()[v]) << v;
  }
  EXPECT_EQ(mixed->head_stats().none, 3);
  EXPECT_EQ(mixed->head_stats().full, 3);
  EXPECT_EQ(mixed->position(), always->position());
}

// Full(k): the logits of the last k tokens of one Append (checking drafted tokens in one run).
// Each row is bit for bit the logits of an Append that ended there: every kernel gives a token
// the same bits whatever the batch (see kernels/panel.h), so the chunk shape does not matter.
TEST_P(SessionLogits, LastRowsMatchAppendsEndingThere) {
  const Case& c = GetParam();
  auto m = MakeModel(c.preset, c.type);
  ASSERT_NE(m, nullptr);
  const int64_t vocab = m->config().vocab;
  ThreadPool pool(2);
  std::vector<int32_t> toks = Tokens(21, vocab, 13);
  const std::span<const int32_t> head(toks.data(), 16), tail(toks.data() + 16, 5);
  auto multi = NewSession(*m, &pool, 8, c.reference);
  FG_ASSERT_OK(multi->Append(head, LogitsRequest::None()));
  FG_ASSERT_OK(multi->Append(tail, LogitsRequest::Full(4)));
  ASSERT_EQ(multi->logits().size(), static_cast<size_t>(4 * vocab));
  EXPECT_EQ(multi->position(), 21);
  EXPECT_EQ(multi->head_stats().full, 1);
  for (int64_t j = 0; j < 4; ++j) {
    // Row j is the logits after tail[0 .. 1 + j].
    auto one = NewSession(*m, &pool, 8, c.reference);
    FG_ASSERT_OK(one->Append(head, LogitsRequest::None()));
    const size_t n = static_cast<size_t>(2 + j);
    FG_ASSERT_OK(one->Append(tail.subspan(0, n), LogitsRequest::Full()));
    const std::span<const float> got = multi->logits().subspan(j * vocab, vocab);
    const std::span<const float> want = one->logits();
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "row " << j;
  }
  // count must fit the Append's last chunk.
  auto bad = NewSession(*m, &pool, 8, c.reference);
  EXPECT_THAT(bad->Append(tail, LogitsRequest::Full(6)),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("last 6 tokens")));
  EXPECT_THAT(bad->Append(tail, LogitsRequest::Full(0)),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(bad->Append(head, LogitsRequest::Full(9)),  // 16 tokens: two chunks of 8
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("has 8")));
  EXPECT_EQ(bad->position(), 0);
  FG_ASSERT_OK(bad->Append(head, LogitsRequest::Full(8)));
}

// Hidden(count): the final-norm hidden states of the last count tokens, row j the one a kNone
// Append ending at that token gives; the same limits as Full(count).
TEST_P(SessionLogits, HiddenRowsMatchAppendsEndingThere) {
  const Case& c = GetParam();
  auto m = MakeModel(c.preset, c.type);
  ASSERT_NE(m, nullptr);
  const int64_t vocab = m->config().vocab, hidden = m->config().hidden;
  ThreadPool pool(2);
  std::vector<int32_t> toks = Tokens(21, vocab, 17);
  const std::span<const int32_t> head(toks.data(), 16), tail(toks.data() + 16, 5);
  auto multi = NewSession(*m, &pool, 8, c.reference);
  FG_ASSERT_OK(multi->Append(head, LogitsRequest::None()));
  FG_ASSERT_OK(multi->Append(tail, LogitsRequest::Hidden(4)));
  ASSERT_EQ(multi->last_hidden().size(), static_cast<size_t>(4 * hidden));
  EXPECT_TRUE(multi->logits().empty());
  EXPECT_EQ(multi->position(), 21);
  for (int64_t j = 0; j < 4; ++j) {
    auto one = NewSession(*m, &pool, 8, c.reference);
    FG_ASSERT_OK(one->Append(head, LogitsRequest::None()));
    FG_ASSERT_OK(one->Append(tail.subspan(0, static_cast<size_t>(2 + j)), LogitsRequest::None()));
    const std::span<const float> got = multi->last_hidden().subspan(j * hidden, hidden);
    const std::span<const float> want = one->last_hidden();
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "row " << j;
  }
  auto bad = NewSession(*m, &pool, 8, c.reference);
  EXPECT_THAT(bad->Append(tail, LogitsRequest::Hidden(6)),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("hidden states")));
  EXPECT_THAT(bad->Append(tail, LogitsRequest::Hidden(0)),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_EQ(bad->position(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, SessionLogits,
                         ::testing::Values(Case{"tiny", DType::kF32, false},
                                           Case{"tiny", DType::kQ8_0, false},
                                           Case{"small", DType::kQ4_0, false},
                                           Case{"tiny", DType::kQ8_0, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return i.param.preset + "_" +
                                  std::string(tensor::DTypeName(i.param.type)) +
                                  (i.param.reference ? "_reference" : "");
                         });

TEST(Session, BadLogitRowsAreRefusedBeforeRunning) {
  auto m = MakeModel("tiny", DType::kF32);
  ASSERT_NE(m, nullptr);
  auto s = NewSession(*m, nullptr, 8);
  std::vector<int32_t> toks = Tokens(5, m->config().vocab, 5);
  std::vector<int32_t> bad = {3, static_cast<int32_t>(m->config().vocab)};
  EXPECT_THAT(s->Append(toks, LogitsRequest::Rows(bad)),
              StatusIs(StatusCode::kOutOfRange, ::testing::_));
  EXPECT_EQ(s->position(), 0);
  std::vector<int32_t> negative = {-1};
  EXPECT_THAT(s->Append(toks, LogitsRequest::Rows(negative)),
              StatusIs(StatusCode::kOutOfRange, ::testing::_));
  EXPECT_EQ(s->position(), 0);
  // No rows at all is allowed (an empty result).
  FG_ASSERT_OK(s->Append(toks, LogitsRequest::Rows({})));
  EXPECT_TRUE(s->row_logits().empty());
  EXPECT_EQ(s->position(), 5);
}

// A session rewound to a shared prefix continues exactly like one that never saw the old
// continuation, also once the sliding layers' ring has wrapped.
TEST(Session, TruncateThenAppendEqualsFresh) {
  auto m = MakeModel("small", DType::kF32);
  ASSERT_NE(m, nullptr);
  const int64_t vocab = m->config().vocab;
  ASSERT_LT(m->config().sliding_window, 30);
  ThreadPool pool(2);
  const int64_t chunk = 8;
  auto s = NewSession(*m, &pool, chunk);
  auto fresh = NewSession(*m, &pool, chunk);
  std::vector<int32_t> prefix = Tokens(30, vocab, 1);
  std::vector<int32_t> old_tail = Tokens(6, vocab, 2);
  std::vector<int32_t> new_tail = Tokens(9, vocab, 3);
  FG_ASSERT_OK(s->Append(prefix));
  FG_ASSERT_OK(s->Append(old_tail));
  FG_ASSERT_OK(s->Truncate(30));
  EXPECT_EQ(s->position(), 30);
  EXPECT_TRUE(s->logits().empty());
  FG_ASSERT_OK(s->Append(new_tail));
  FG_ASSERT_OK(fresh->Append(prefix));
  FG_ASSERT_OK(fresh->Append(new_tail));
  ASSERT_EQ(s->logits().size(), fresh->logits().size());
  for (int64_t v = 0; v < vocab; ++v) ASSERT_EQ(s->logits()[v], fresh->logits()[v]) << v;

  // Too far back once the ring has wrapped: refused, nothing changes.
  const int64_t pos = s->position();
  std::vector<int32_t> more = Tokens(40, vocab, 4);
  FG_ASSERT_OK(s->Append(more));
  EXPECT_THAT(s->Truncate(pos), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_EQ(s->position(), pos + 40);
  EXPECT_THAT(s->Truncate(pos + 41), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  FG_EXPECT_OK(s->Truncate(0));  // position 0 needs no earlier keys
  EXPECT_EQ(s->position(), 0);
}

// A pinned position stays reachable by Truncate however far the session went on (the ring rows
// it needs are copied aside before being overwritten), and the rewound session continues
// exactly like a fresh one and like one restored from a snapshot. Without the pin the same
// rewind is refused.
TEST(Session, PinnedTruncateEqualsFreshAndRestore) {
  auto m = MakeModel("small", DType::kF32);
  ASSERT_NE(m, nullptr);
  const int64_t vocab = m->config().vocab;
  const int64_t window = m->config().sliding_window;
  ASSERT_LT(window, 30);
  ThreadPool pool(2);
  const int64_t chunk = 8;
  auto s = NewSession(*m, &pool, chunk);
  auto unpinned = NewSession(*m, &pool, chunk);
  auto fresh = NewSession(*m, &pool, chunk);
  auto restored = NewSession(*m, &pool, chunk);
  const std::vector<int32_t> prefix = Tokens(30, vocab, 11);
  FG_ASSERT_OK(s->Append(prefix));
  FG_ASSERT_OK(unpinned->Append(prefix));
  const Session::Snapshot snap = s->Save();
  EXPECT_EQ(s->pinned(), -1);
  s->Pin();
  EXPECT_EQ(s->pinned(), 30);
  const size_t bytes_at_pin = s->cache_bytes();

  // Continuations far longer than the ring (window + chunk - 1 rows): one big Append, then one
  // token at a time, then a short one that does not wrap the ring past the pinned rows.
  const int64_t ring = window + chunk - 1;
  const std::vector<int32_t> long_tail = Tokens(static_cast<int>(3 * ring), vocab, 12);
  const std::vector<int32_t> steps = Tokens(static_cast<int>(ring + 5), vocab, 13);
  const std::vector<int32_t> short_tail = Tokens(3, vocab, 14);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    if (round == 0) {
      FG_ASSERT_OK(s->Append(long_tail));
      FG_ASSERT_OK(unpinned->Append(long_tail));
      EXPECT_THAT(unpinned->Truncate(30), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
      EXPECT_GT(s->cache_bytes(), bytes_at_pin);  // the pinned rows were copied aside
    } else if (round == 1) {
      for (int32_t t : steps) FG_ASSERT_OK(s->Append(std::span<const int32_t>(&t, 1)));
    } else {
      FG_ASSERT_OK(s->Append(short_tail));
    }
    FG_ASSERT_OK(s->Truncate(30));
    EXPECT_EQ(s->position(), 30);
    EXPECT_EQ(s->pinned(), 30);
    EXPECT_EQ(s->cache_bytes(), bytes_at_pin);
    const std::vector<int32_t> tail = Tokens(static_cast<int>(ring + 3), vocab, 20 + round);
    FG_ASSERT_OK(s->Append(tail));
    fresh->Reset();
    FG_ASSERT_OK(fresh->Append(prefix));
    FG_ASSERT_OK(fresh->Append(tail));
    FG_ASSERT_OK(restored->Restore(snap));
    FG_ASSERT_OK(restored->Append(tail));
    ASSERT_EQ(s->logits().size(), static_cast<size_t>(vocab));
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_EQ(s->logits()[v], fresh->logits()[v]) << v;
      ASSERT_EQ(s->logits()[v], restored->logits()[v]) << v;
    }
  }

  // Another position than the pinned one follows the ring rule; going below the pin, Reset
  // and Restore drop the pin.
  FG_ASSERT_OK(s->Truncate(30));
  FG_ASSERT_OK(s->Append(long_tail));
  EXPECT_THAT(s->Truncate(31), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_EQ(s->pinned(), 30);
  FG_ASSERT_OK(s->Truncate(30));
  FG_ASSERT_OK(s->Truncate(29));
  EXPECT_EQ(s->pinned(), -1);
  FG_ASSERT_OK(s->Append(long_tail));
  EXPECT_THAT(s->Truncate(30), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  s->Pin();
  s->Reset();
  EXPECT_EQ(s->pinned(), -1);
  s->Pin();
  FG_ASSERT_OK(s->Restore(snap));
  EXPECT_EQ(s->pinned(), -1);
}

}  // namespace
}  // namespace fg::runtime
