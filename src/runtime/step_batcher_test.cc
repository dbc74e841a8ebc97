// Continuous batching (StepBatcher): sessions appending on their own threads, run as one forward
// pass per step, get bit for bit what the same sessions get alone; and the batcher's waiting
// rules (a lone session never waits, every participant is waited for).
#include "src/runtime/step_batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/base/thread_pool.h"
#include "src/runtime/session.h"
#include "src/runtime/test_models.h"

namespace fg::runtime {
namespace {

using ::fg::testing::StatusIs;
using tensor::DType;

using test::Tokens;

std::unique_ptr<Model> MakeModel(const std::string& preset, DType type) {
  return test::MakeModel("batcher", preset, type);
}

std::unique_ptr<Session> NewSession(const Model& m, ThreadPool* pool, StepBatcher* batcher) {
  SessionOptions o;
  o.context = 96;
  o.max_chunk = 8;
  o.pool = pool;
  o.batcher = batcher;
  auto s = Session::Create(m, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// What one session saw after each Append: full logits, row logits, the last hidden state.
struct Trace {
  std::vector<std::vector<float>> logits, rows, hidden;
  std::vector<int32_t> chosen;
};

// Session `i`'s script: a prompt of its own length (several chunks), then decoding steps that
// take turns asking for the full head, a few rows, nothing, and two drafted rows; the next
// token is the argmax of what the step computed, so any difference changes the rest.
Status Script(Session& s, int i, int64_t vocab, Trace* t) {
  const std::vector<int32_t> prompt = Tokens(5 + 7 * i, vocab, 17u + i);
  const std::vector<int32_t> rows = {3, 9, 46, 52, static_cast<int32_t>(vocab - 1), 9, 100};
  FG_RETURN_IF_ERROR(s.Append(prompt));
  int32_t next = 0;
  for (int step = 0; step < 10; ++step) {
    const auto& l = s.logits();
    t->logits.emplace_back(l.begin(), l.end());
    t->rows.emplace_back(s.row_logits().begin(), s.row_logits().end());
    t->hidden.emplace_back(s.last_hidden().begin(), s.last_hidden().end());
    if (!l.empty()) {
      const auto last = l.subspan(l.size() - static_cast<size_t>(vocab));
      next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    } else if (!s.row_logits().empty()) {
      next = rows[std::max_element(s.row_logits().begin(), s.row_logits().end()) -
                  s.row_logits().begin()];
    } else {
      next = static_cast<int32_t>(7 + (next + 13) % (vocab - 7));
    }
    t->chosen.push_back(next);
    const std::vector<int32_t> two = {next, static_cast<int32_t>(7 + next % (vocab - 7))};
    switch ((step + i) % 4) {
      case 0: FG_RETURN_IF_ERROR(s.Append(std::span<const int32_t>(&next, 1))); break;
      case 1:
        FG_RETURN_IF_ERROR(s.Append(std::span<const int32_t>(&next, 1), LogitsRequest::Rows(rows)));
        break;
      case 2:
        FG_RETURN_IF_ERROR(s.Append(std::span<const int32_t>(&next, 1), LogitsRequest::None()));
        break;
      default: FG_RETURN_IF_ERROR(s.Append(two, LogitsRequest::Full(2))); break;
    }
  }
  return OkStatus();
}

void ExpectSameBits(const Trace& a, const Trace& b, int i) {
  ASSERT_EQ(a.chosen, b.chosen) << "session " << i;
  ASSERT_EQ(a.logits.size(), b.logits.size());
  for (size_t k = 0; k < a.logits.size(); ++k) {
    ASSERT_EQ(a.logits[k].size(), b.logits[k].size()) << "session " << i << " step " << k;
    if (!a.logits[k].empty()) {
      EXPECT_EQ(0, std::memcmp(a.logits[k].data(), b.logits[k].data(),
                               a.logits[k].size() * sizeof(float)))
          << "session " << i << " step " << k;
    }
    EXPECT_EQ(a.rows[k], b.rows[k]) << "session " << i << " step " << k;
    EXPECT_EQ(a.hidden[k], b.hidden[k]) << "session " << i << " step " << k;
  }
}

struct Case {
  std::string preset;
  DType type;
};

class Batched : public ::testing::TestWithParam<Case> {};

// Four sessions on four threads, every one a participant: each step waits for all of them,
// so the batches mix prompts' chunks, single tokens and drafted pairs with every head kind.
// Every session's logits, row logits and hidden states equal a lone session's, bit for bit.
TEST_P(Batched, SameBitsAsAlone) {
  auto m = MakeModel(GetParam().preset, GetParam().type);
  ASSERT_NE(m, nullptr);
  const int64_t vocab = m->config().vocab;
  constexpr int kSessions = 4;
  ThreadPool pool(2);
  std::vector<Trace> alone(kSessions), batched(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    auto s = NewSession(*m, &pool, nullptr);
    ASSERT_NE(s, nullptr);
    FG_ASSERT_OK(Script(*s, i, vocab, &alone[i]));
  }
  StepBatcher::Options bo;
  bo.pool = &pool;
  bo.wait = std::chrono::seconds(30);  // never reached: every participant comes
  auto batcher = StepBatcher::Create(*m, bo);
  FG_ASSERT_OK(batcher.status());
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < kSessions; ++i) {
    sessions.push_back(NewSession(*m, nullptr, batcher->get()));
    ASSERT_NE(sessions.back(), nullptr);
  }
  std::vector<Status> status(kSessions);
  {
    for (int i = 0; i < kSessions; ++i) (*batcher)->Enter();
    std::vector<std::thread> threads;
    for (int i = 0; i < kSessions; ++i) {
      threads.emplace_back([&, i] {
        status[i] = Script(*sessions[i], i, vocab, &batched[i]);
        (*batcher)->Exit();
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int i = 0; i < kSessions; ++i) {
    FG_EXPECT_OK(status[i]);
    ExpectSameBits(alone[i], batched[i], i);
  }
  const StepBatcher::Stats st = (*batcher)->stats();
  EXPECT_EQ(st.max_sequences, kSessions);  // the first step waited for all four
  EXPECT_GT(st.sequences, st.steps);
  EXPECT_GT(st.graphs, 0);
}

INSTANTIATE_TEST_SUITE_P(Types, Batched,
                         ::testing::Values(Case{"tiny", DType::kF32}, Case{"tiny", DType::kQ8_0},
                                           Case{"small", DType::kQ4_0}),
                         [](const auto& info) {
                           return info.param.preset + "_" +
                                  std::string(tensor::DTypeName(info.param.type));
                         });

// Without participants a session's chunk runs at once (no waiting), one per step.
TEST(StepBatcher, LoneSessionRunsAtOnce) {
  auto m = MakeModel("tiny", DType::kQ8_0);
  ASSERT_NE(m, nullptr);
  StepBatcher::Options bo;
  bo.wait = std::chrono::seconds(60);  // a wait would time the test out
  auto batcher = StepBatcher::Create(*m, bo);
  FG_ASSERT_OK(batcher.status());
  auto s = NewSession(*m, nullptr, batcher->get());
  auto alone = NewSession(*m, nullptr, nullptr);
  const std::vector<int32_t> prompt = Tokens(19, m->config().vocab, 5);
  FG_ASSERT_OK(s->Append(prompt));
  FG_ASSERT_OK(alone->Append(prompt));
  ASSERT_EQ(s->logits().size(), alone->logits().size());
  EXPECT_EQ(0, std::memcmp(s->logits().data(), alone->logits().data(),
                           s->logits().size() * sizeof(float)));
  EXPECT_EQ((*batcher)->stats().steps, 3);  // 8 + 8 + 3 tokens
  EXPECT_EQ((*batcher)->stats().max_sequences, 1);
  EXPECT_EQ(s->head_stats().full, 1);
}

// A participant that does not come delays the others by `wait`, not forever.
TEST(StepBatcher, AbsentParticipantCostsTheWaitOnly) {
  auto m = MakeModel("tiny", DType::kQ8_0);
  ASSERT_NE(m, nullptr);
  StepBatcher::Options bo;
  bo.wait = std::chrono::milliseconds(5);
  auto batcher = StepBatcher::Create(*m, bo);
  FG_ASSERT_OK(batcher.status());
  (*batcher)->Enter();  // absent: never appends
  (*batcher)->Enter();  // present: the session below
  auto s = NewSession(*m, nullptr, batcher->get());
  const Status st = s->Append(Tokens(3, m->config().vocab, 8));
  (*batcher)->Exit();
  (*batcher)->Exit();
  FG_ASSERT_OK(st);
  EXPECT_EQ((*batcher)->stats().steps, 1);
}

TEST(StepBatcher, RefusesAnotherModelsSession) {
  auto a = MakeModel("tiny", DType::kQ8_0);
  auto b = MakeModel("tiny", DType::kF32);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto batcher = StepBatcher::Create(*a, {});
  FG_ASSERT_OK(batcher.status());
  SessionOptions o;
  o.context = 64;
  o.batcher = batcher->get();
  EXPECT_THAT(Session::Create(*b, o).status(),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("another model")));
  StepBatcher::Options bad;
  bad.max_tokens = 0;
  EXPECT_THAT(StepBatcher::Create(*a, bad).status(),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("max_tokens")));
}

}  // namespace
}  // namespace fg::runtime
