// The call grammar's vocabulary index on its own: token classes, the sorted pieces (the
// implicit byte trie), IsPiece, and Walk / WalkPiece against brute force over every token.
#include "src/text/call_grammar_vocab.h"

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"
#include "src/text/grammar_test_util.h"

namespace fg::text::grammar {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using namespace grammar_test;  // NOLINT

const std::vector<std::string> kWords = {"call", "hello", "help", "he", "h\"q", "caf\xC3\xA9",
                                         " room", "1234"};

bool Has(const std::vector<uint64_t>& bits, int32_t id) { return (bits[id >> 6] >> (id & 63)) & 1; }

// Every text token's piece, by id ("" for the others).
std::vector<std::string> Pieces(const VocabIndex& v) {
  std::vector<std::string> out(v.size());
  for (uint32_t i = 0; i < v.count(); ++i) out[v.Token(i)] = std::string(v.SortedPiece(i));
  return out;
}

TEST(VocabIndex, ClassesOfficial) {
  auto tok = SmallTokenizer(kWords, 0);
  VocabIndex v;
  FG_ASSERT_OK(v.Build(*tok, /*compact=*/false, 0));
  EXPECT_EQ(v.size(), tok->size());
  EXPECT_EQ(v.Class(Id(*tok, "<start_function_call>")), kSymStartCall);
  EXPECT_EQ(v.Class(Id(*tok, "<end_function_call>")), kSymEndCall);
  EXPECT_EQ(v.Class(Id(*tok, "<escape>")), kSymEscape);
  EXPECT_EQ(v.special().size(), 3u);
  for (const char* stop : {"<eos>", "<end_of_turn>", "<start_function_response>"}) {
    EXPECT_EQ(v.Class(Id(*tok, stop)), kTokStop) << stop;
  }
  EXPECT_EQ(v.stops().size(), 3u);
  for (const char* never : {"<pad>", "<bos>", "<unk>", "<mask>", "<unused0>"}) {
    EXPECT_EQ(v.Class(Id(*tok, never)), kTokNever) << never;
  }
  EXPECT_EQ(v.Class(Id(*tok, "hello")), kTokText);
  EXPECT_EQ(v.Class(Id(*tok, "<0x41>")), kTokText);  // byte tokens are text
  EXPECT_TRUE(v.quote_tokens().empty());             // official: not collected
  int text = 0;
  for (int32_t id = 0; id < v.size(); ++id) text += v.Class(id) == kTokText;
  EXPECT_EQ(static_cast<int>(v.count()), text);
}

TEST(VocabIndex, ClassesCompact) {
  auto tok = SmallTokenizer(kWords, 3);
  VocabIndex v;
  FG_ASSERT_OK(v.Build(*tok, /*compact=*/true, 2));  // <tool_2> is outside the tool map
  EXPECT_EQ(v.Class(Id(*tok, "<end>")), kSymEnd);
  EXPECT_EQ(v.Class(Id(*tok, "<tool_0>")), kSymTool0);
  EXPECT_EQ(v.Class(Id(*tok, "<tool_1>")), kSymTool0 + 1);
  EXPECT_EQ(v.Class(Id(*tok, "<tool_2>")), kTokNever);
  // The official tokens are controls there: never allowed.
  EXPECT_EQ(v.Class(Id(*tok, "<escape>")), kTokNever);
  const std::vector<std::string> pieces = Pieces(v);
  std::set<int32_t> quotes;
  for (int32_t id = 0; id < v.size(); ++id) {
    if (pieces[id].find('"') != std::string::npos) quotes.insert(id);
  }
  EXPECT_EQ(std::set<int32_t>(v.quote_tokens().begin(), v.quote_tokens().end()), quotes);
  EXPECT_TRUE(quotes.count(Id(*tok, "h\"q")));
}

TEST(VocabIndex, MissingTokens) {
  auto plain = SmallTokenizer(kWords, 0, /*function_tokens=*/false);
  VocabIndex v;
  EXPECT_THAT(v.Build(*plain, false, 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("<start_function_call>")));
  VocabIndex c;
  EXPECT_THAT(c.Build(*plain, true, 1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("<end>")));
}

TEST(VocabIndex, SortedPiecesAndRuns) {
  auto tok = SmallTokenizer(kWords, 0);
  VocabIndex v;
  FG_ASSERT_OK(v.Build(*tok, false, 0));
  size_t longest = 0;
  for (uint32_t i = 0; i < v.count(); ++i) {
    const std::string_view p = v.SortedPiece(i);
    longest = std::max(longest, p.size());
    ASSERT_FALSE(p.empty());
    EXPECT_EQ(p, tok->TokenToPiece(v.Token(i), false));
    EXPECT_TRUE(v.IsPiece(p));
    if (i > 0) {
      EXPECT_LE(v.SortedPiece(i - 1).compare(p), 0) << i;  // bytes compared unsigned
    }
  }
  EXPECT_EQ(v.max_piece(), longest);
  EXPECT_TRUE(v.IsPiece("hel"));
  EXPECT_TRUE(v.IsPiece(" room"));  // U+2581 read as a space
  EXPECT_FALSE(v.IsPiece("helz"));
  EXPECT_FALSE(v.IsPiece(""));
  // The runs of equal first byte partition the sorted pieces.
  uint32_t runs = 0;
  for (uint32_t i = 0; i < v.count(); ++runs) {
    const uint32_t end = v.RunEnd(i, v.count(), 0);
    ASSERT_GT(end, i);
    for (uint32_t j = i; j < end; ++j) EXPECT_EQ(v.PieceByte(j, 0), v.PieceByte(i, 0));
    if (end < v.count()) {
      EXPECT_NE(v.PieceByte(end, 0), v.PieceByte(i, 0));
    }
    i = end;
  }
  EXPECT_EQ(runs, 256u);  // every byte starts a piece (the byte tokens)
}

// A step that accepts the prefixes of `target`: the state's stack holds the position.
struct PrefixStep {
  std::string_view target;
  bool operator()(State& s, int sym) const {
    uint32_t& at = s.stack[0];
    if (sym > 255 || at >= target.size() || static_cast<uint8_t>(target[at]) != sym) {
      return false;
    }
    ++at;
    return true;
  }
};

TEST(VocabIndex, WalkMatchesBruteForce) {
  auto tok = SmallTokenizer(kWords, 0);
  VocabIndex v;
  FG_ASSERT_OK(v.Build(*tok, false, 0));
  const std::vector<std::string> pieces = Pieces(v);
  for (std::string_view target : {"hello", "help me", "caf\xC3\xA9!", " room1234", "zz", ""}) {
    const PrefixStep step{target};
    std::vector<uint64_t> bits((v.size() + 63) / 64, 0);
    State start;
    start.stack = {0};
    v.Walk(start, step, bits);
    for (int32_t id = 0; id < v.size(); ++id) {
      const bool want = !pieces[id].empty() && target.starts_with(pieces[id]);
      EXPECT_EQ(Has(bits, id), want) << "target \"" << target << "\" token " << id;
      if (pieces[id].empty()) continue;
      State t = start;
      EXPECT_EQ(v.WalkPiece(t, id, step), want);
      if (want) {
        EXPECT_EQ(t.stack[0], pieces[id].size());
      }
    }
  }
  // A step that takes any byte but 'l': the tokens without one.
  auto no_l = [](State&, int sym) { return sym != 'l'; };
  std::vector<uint64_t> bits((v.size() + 63) / 64, 0);
  v.Walk(State{}, no_l, bits);
  for (int32_t id = 0; id < v.size(); ++id) {
    const bool want = !pieces[id].empty() && pieces[id].find('l') == std::string::npos;
    EXPECT_EQ(Has(bits, id), want) << id;
  }
}

}  // namespace
}  // namespace fg::text::grammar
