#include "src/text/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/gguf/writer.h"

namespace fg::text {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StatusIs;

constexpr int32_t N = 1, CTRL = 3, UD = 4, UNUSED = 5, BYTE = 6;

struct Tok {
  std::string text;
  float score = 0.0f;
  int32_t type = N;
};

// A vocabulary of <pad> <eos> <bos> <unk>, the 256 byte tokens (ids 4..259), then `extra`.
Vocab MakeVocab(const std::vector<Tok>& extra, bool with_bytes = true) {
  Vocab v;
  v.model = "llama";
  auto add = [&](const std::string& t, float s, int32_t type) {
    v.tokens.push_back(t);
    v.scores.push_back(s);
    v.types.push_back(type);
  };
  add("<pad>", 0, CTRL);
  add("<eos>", 0, CTRL);
  add("<bos>", 0, CTRL);
  add("<unk>", 0, 2);
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(name, 0, BYTE);
    }
  }
  for (const Tok& t : extra) add(t.text, t.score, t.type);
  v.pad = 0;
  v.eos = 1;
  v.bos = 2;
  v.unk = 3;
  v.add_bos = true;
  v.add_space_prefix = false;
  return v;
}

bool IsValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80                   ? 1
                       : (c >= 0xC2 && c <= 0xDF) ? 2
                       : (c >= 0xE0 && c <= 0xEF) ? 3
                       : (c >= 0xF0 && c <= 0xF4) ? 4
                                                  : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

class TokenizerTest : public ::testing::Test {
 protected:
  void Build(const std::vector<Tok>& extra, bool space_prefix = false) {
    Vocab v = MakeVocab(extra);
    v.add_space_prefix = space_prefix;
    auto t = Tokenizer::Create(std::move(v));
    ASSERT_THAT(t, testing::IsOk());
    tok_ = std::move(*t);
  }
  int32_t Id(const std::string& text) const {
    auto id = tok_->Find(text);
    EXPECT_TRUE(id.has_value()) << text;
    return id.value_or(-1);
  }
  static int32_t Byte(int b) { return 4 + b; }
  std::vector<int32_t> Enc(const std::string& s, bool special = true) const {
    return tok_->Encode(s, /*add_special=*/false, special);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(TokenizerTest, MergesHighestScoreFirst) {
  Build({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -5}, {"bc", -2}});
  EXPECT_THAT(Enc("abc"), ElementsAre(Id("a"), Id("bc")));
  Build({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -2}, {"bc", -5}});
  EXPECT_THAT(Enc("abc"), ElementsAre(Id("ab"), Id("c")));
}

TEST_F(TokenizerTest, MergesRepeatUntilNoPairIsAToken) {
  Build({{"a", -1}, {"b", -1}, {"c", -1}, {"d", -1}, {"ab", -2}, {"cd", -3}, {"abcd", -4}});
  EXPECT_THAT(Enc("abcd"), ElementsAre(Id("abcd")));
  // "abc" is no token, so after "ab" the pair (ab, c) never merges.
  EXPECT_THAT(Enc("abc"), ElementsAre(Id("ab"), Id("c")));
}

TEST_F(TokenizerTest, EqualScoresMergeLeftmostFirst) {
  Build({{"a", -1}, {"aa", -2}});
  EXPECT_THAT(Enc("aaa"), ElementsAre(Id("aa"), Id("a")));
  EXPECT_THAT(Enc("aaaaa"), ElementsAre(Id("aa"), Id("aa"), Id("a")));
}

TEST_F(TokenizerTest, MergesAreByScoreNotByLength) {
  // "aaa" scores higher than "aa": but merges only grow pairwise, so "aaa" forms from (aa, a).
  Build({{"a", -1}, {"aa", -3}, {"aaa", -2}});
  EXPECT_THAT(Enc("aaaa"), ElementsAre(Id("aaa"), Id("a")));
}

TEST_F(TokenizerTest, UnknownCharactersFallBackToBytes) {
  Build({{"a", -1}});
  // U+00E9 (C3 A9) and U+1F600 (F0 9F 98 80) are not in the vocabulary.
  EXPECT_THAT(Enc("a\xc3\xa9"), ElementsAre(Id("a"), Byte(0xC3), Byte(0xA9)));
  EXPECT_THAT(Enc("\xf0\x9f\x98\x80"), ElementsAre(Byte(0xF0), Byte(0x9F), Byte(0x98), Byte(0x80)));
}

TEST_F(TokenizerTest, MultiByteCharacterThatIsATokenStaysWhole) {
  Build({{"\xc3\xa9", -1}});
  EXPECT_THAT(Enc("\xc3\xa9\xc3\xa9"), ElementsAre(Id("\xc3\xa9"), Id("\xc3\xa9")));
}

TEST_F(TokenizerTest, SpacesBecomeU2581WithoutDummyPrefix) {
  Build({{"a", -1},
         {"b", -1},
         {"\xe2\x96\x81", -1},
         {"\xe2\x96\x81"
          "b",
          -2}});
  EXPECT_THAT(Enc("a b"), ElementsAre(Id("a"), Id("\xe2\x96\x81"
                                                  "b")));
  EXPECT_THAT(Enc("b"), ElementsAre(Id("b")));  // no dummy prefix
  EXPECT_THAT(Enc(" "), ElementsAre(Id("\xe2\x96\x81")));
}

TEST_F(TokenizerTest, DummyPrefixWhenTheVocabularyAsksForIt) {
  Build({{"a", -1},
         {"b", -1},
         {"<x>", 0, CTRL},
         {"\xe2\x96\x81", -1},
         {"\xe2\x96\x81"
          "b",
          -2}},
        /*space_prefix=*/true);
  EXPECT_THAT(Enc("b"), ElementsAre(Id("\xe2\x96\x81"
                                       "b")));
  // After a special token the next fragment gets the prefix again.
  EXPECT_THAT(Enc("b<x>b"), ElementsAre(Id("\xe2\x96\x81"
                                           "b"),
                                        Id("<x>"),
                                        Id("\xe2\x96\x81"
                                           "b")));
  // Decode drops one leading space of the first piece.
  EXPECT_EQ(tok_->Decode(Enc("b")), "b");
}

TEST_F(TokenizerTest, BosAndEos) {
  Build({{"a", -1}});
  EXPECT_THAT(tok_->Encode("a", true, true), ElementsAre(2, Id("a")));
  EXPECT_THAT(tok_->Encode("a", false, true), ElementsAre(Id("a")));
  EXPECT_THAT(tok_->Encode("", true, true), ElementsAre(2));
  EXPECT_THAT(tok_->Encode("", false, true), ElementsAre());
  // BOS is added once even when the text starts with "<bos>" (llama.cpp only warns).
  EXPECT_THAT(tok_->Encode("<bos>a", true, true), ElementsAre(2, 2, Id("a")));

  Vocab v = MakeVocab({{"a", -1}});
  v.add_bos = false;
  v.add_eos = true;
  auto t = Tokenizer::Create(std::move(v));
  ASSERT_THAT(t, testing::IsOk());
  EXPECT_THAT((*t)->Encode("a", true, true), ElementsAre(4 + 256, 1));
}

TEST_F(TokenizerTest, SpecialTokensAreSplitOutFirst) {
  Build({{"a", -1}, {"b", -1}, {"ab", -2}, {"<s>", 0, CTRL}, {"<t>", 0, CTRL}});
  // Without the split, "a" and "b" around "<s>" would not merge anyway; here "ab" must not span it.
  EXPECT_THAT(Enc("a<s>b"), ElementsAre(Id("a"), Id("<s>"), Id("b")));
  EXPECT_THAT(Enc("<s>ab<t>"), ElementsAre(Id("<s>"), Id("ab"), Id("<t>")));    // start and end
  EXPECT_THAT(Enc("<s><t><s>"), ElementsAre(Id("<s>"), Id("<t>"), Id("<s>")));  // adjacent
  EXPECT_THAT(Enc("<s"), ElementsAre(Byte('<'), Byte('s')));  // near miss is plain text
}

TEST_F(TokenizerTest, LongerSpecialTokensWin) {
  Build({{"x", -1}, {"\n", 0, UD}, {"\n\n", 0, UD}, {"\n\n\n", 0, UD}});
  EXPECT_THAT(Enc("\n\n\n\n\n"), ElementsAre(Id("\n\n\n"), Id("\n\n")));
  EXPECT_THAT(Enc("x\n\nx\n"), ElementsAre(Id("x"), Id("\n\n"), Id("x"), Id("\n")));
}

TEST_F(TokenizerTest, SplitFollowsLlamaCppOrderNotLeftmostLongest) {
  // llama.cpp cuts every occurrence of the longest special token first, then shorter ones in
  // what is left: in "abcd" the 3-byte "bcd" wins over the earlier 2-byte "ab".
  Build({{"a", -1}, {"b", -1}, {"ab", 0, UD}, {"bcd", 0, UD}});
  EXPECT_THAT(Enc("abcd"), ElementsAre(Id("a"), Id("bcd")));
  EXPECT_THAT(Enc("abab"), ElementsAre(Id("ab"), Id("ab")));
}

TEST_F(TokenizerTest, ParseSpecialOffKeepsUserDefinedTokens) {
  Build({{"a", -1}, {"<c>", 0, CTRL}, {"<u>", 0, UD}});
  EXPECT_THAT(Enc("<c><u>", true), ElementsAre(Id("<c>"), Id("<u>")));
  EXPECT_THAT(Enc("<c><u>", false), ElementsAre(Byte('<'), Byte('c'), Byte('>'), Id("<u>")));
  // <unk> is special only when parsing specials.
  EXPECT_THAT(Enc("<unk>", true), ElementsAre(3));
}

TEST_F(TokenizerTest, ControlLookingTextsBecomeControl) {
  // llama.cpp marks "</s>" (an EOG text) control even if the file says user-defined; control
  // tokens named "unused" gain the unused attribute.
  Build({{"</s>", 0, UD}, {"<unused3>", 0, CTRL}, {"<end_of_turn>", 0, N}});
  EXPECT_EQ(tok_->attr(Id("</s>")), kAttrControl | kAttrUserDefined);
  EXPECT_EQ(tok_->attr(Id("<unused3>")), kAttrControl | kAttrUnused);
  EXPECT_EQ(tok_->attr(Id("<end_of_turn>")), kAttrNormal | kAttrControl);
  EXPECT_THAT(Enc("</s>", false), ElementsAre(Byte('<'), Byte('/'), Byte('s'), Byte('>')));
  EXPECT_THAT(Enc("</s>", true), ElementsAre(Id("</s>")));
  EXPECT_EQ(tok_->TokenToPiece(Id("</s>"), false), "");
}

TEST_F(TokenizerTest, InvalidUtf8IsSplitByLeadByteLikeLlamaCpp) {
  Build({{"a", -1}, {"b", -1}});
  // 0xC3 announces 2 bytes, so it swallows the 'a': the symbol "\xC3a" is no token and both
  // bytes fall back to byte tokens (what llama.cpp does; no error).
  EXPECT_THAT(Enc("\xc3"
                  "ab"),
              ElementsAre(Byte(0xC3), Byte('a'), Id("b")));
  EXPECT_THAT(Enc("a\x80"), ElementsAre(Id("a"), Byte(0x80)));  // lone continuation byte
  EXPECT_THAT(Enc("a\xf0\x9f"), ElementsAre(Id("a"), Byte(0xF0), Byte(0x9F)));  // truncated end
}

TEST_F(TokenizerTest, TokenToPiece) {
  Build({{"\xe2\x96\x81hi\xe2\x96\x81", -1}, {"<c>", 0, CTRL}, {"\n", 0, UD}, {"<u0>", 0, UNUSED}});
  EXPECT_EQ(tok_->TokenToPiece(Id("\xe2\x96\x81hi\xe2\x96\x81")), " hi ");
  EXPECT_EQ(tok_->TokenToPiece(Byte(0x41)), "A");
  EXPECT_EQ(tok_->TokenToPiece(Byte(0xFF)), "\xff");
  EXPECT_EQ(tok_->TokenToPiece(Id("<c>"), false), "");
  EXPECT_EQ(tok_->TokenToPiece(Id("<c>"), true), "<c>");
  EXPECT_EQ(tok_->TokenToPiece(2, true), "<bos>");
  EXPECT_EQ(tok_->TokenToPiece(Id("\n"), false), "\n");
  EXPECT_EQ(tok_->TokenToPiece(Id("<u0>"), true), "");  // unused type: nothing
  EXPECT_EQ(tok_->TokenToPiece(-1), "");
  EXPECT_EQ(tok_->TokenToPiece(tok_->size()), "");
}

TEST_F(TokenizerTest, DecodeRoundTripsText) {
  Build({{"a", -1},
         {"\xe2\x96\x81", -1},
         {"\xe2\x96\x81"
          "a",
          -2},
         {"\n", 0, UD}});
  const std::string text = "a a\n\xc3\xa9 \xf0\x9f\x98\x80";
  const std::vector<int32_t> ids = tok_->Encode(text, true, true);
  EXPECT_EQ(tok_->Decode(ids), text);
  EXPECT_EQ(tok_->Decode(ids, /*special=*/true), "<bos>" + text);
}

TEST_F(TokenizerTest, RandomBytesRoundTrip) {
  // Any byte string (without a literal U+2581, which decodes to a space) survives
  // Encode -> Decode, and streaming decoding yields the same bytes.
  Build({{"a", -1},
         {"b", -1},
         {"ab", -2},
         {"\xe2\x96\x81", -1},
         {"\xe2\x96\x81"
          "a",
          -2},
         {"\xc3\xa9", -1},
         {"<c>", 0, CTRL},
         {"\n", 0, UD},
         {"\n\n", 0, UD}});
  // The first 8 entries are valid UTF-8 on their own; odd iterations use only those.
  const std::string alphabet[] = {
      "a",    "b",    " ",    "\n",   "<c>",  "<c",  "\xc3\xa9", "\xf0\x9f\x98\x80",
      "\xc3", "\xa9", "\xff", "\x00", "\xe2", "\x96"};
  uint32_t state = 12345;
  int valid = 0;
  for (int iter = 0; iter < 500; ++iter) {
    std::string text;
    const size_t n_symbols = iter % 2 ? 8 : std::size(alphabet);
    for (int k = 0, len = iter % 17; k < len; ++k) {
      state = state * 1664525u + 1013904223u;
      text += alphabet[(state >> 16) % n_symbols];
    }
    valid += IsValidUtf8(text);
    if (text.find("\xe2\x96\x81") != std::string::npos) continue;
    for (bool special : {true, false}) {
      const std::vector<int32_t> ids = tok_->Encode(text, false, special);
      const std::string decoded = tok_->Decode(ids, /*special=*/true);
      // In invalid UTF-8 a lead byte can swallow the first byte of an escaped space, which then
      // decodes as raw U+2581 bytes (llama.cpp does the same), so exactness needs valid UTF-8.
      if (IsValidUtf8(text)) {
        ASSERT_EQ(decoded, text) << "parse_special " << special;
      }
      StreamDecoder dec(*tok_, /*special=*/true);
      std::string streamed;
      for (int32_t id : ids) streamed += dec.Push(id);
      streamed += dec.Flush();
      ASSERT_EQ(streamed, decoded);
    }
  }
  EXPECT_GE(valid, 250);
}

TEST_F(TokenizerTest, StreamDecoderHoldsSplitUtf8) {
  Build({{"a", -1}});
  StreamDecoder dec(*tok_);
  EXPECT_EQ(dec.Push(Id("a")), "a");
  EXPECT_EQ(dec.Push(Byte(0xF0)), "");
  EXPECT_EQ(dec.Push(Byte(0x9F)), "");
  EXPECT_EQ(dec.Push(Byte(0x98)), "");
  EXPECT_EQ(dec.Push(Byte(0x80)), "\xf0\x9f\x98\x80");
  EXPECT_EQ(dec.Push(Byte(0xC3)), "");
  EXPECT_EQ(dec.Flush(), "\xc3");  // an incomplete sequence at the end comes out at Flush
  EXPECT_EQ(dec.Flush(), "");
}

TEST_F(TokenizerTest, StreamDecoderPassesInvalidBytesThrough) {
  Build({{"a", -1}});
  StreamDecoder dec(*tok_);
  EXPECT_EQ(dec.Push(Byte(0xE4)), "");
  EXPECT_EQ(dec.Push(Id("a")),
            "\xe4"
            "a");                           // 'a' cannot continue it: both bytes go out
  EXPECT_EQ(dec.Push(Byte(0x80)), "\x80");  // lone continuation byte
  EXPECT_EQ(dec.Push(Byte(0xFF)), "\xff");
  EXPECT_EQ(dec.Push(2), "");  // control token, special = false
}

TEST(CompleteUtf8PrefixTest, Boundaries) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xc3"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xc3\xa9"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xe4\xbd"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xf0\x9f\x98"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xf0\x9f\x98\x80"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("\x80\x80\x80\x80"), 4u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xff"), 2u);
}

TEST(TokenizerCreateTest, RejectsInconsistentVocabularies) {
  Vocab v = MakeVocab({{"a", -1}});
  v.scores.pop_back();
  EXPECT_THAT(Tokenizer::Create(v), StatusIs(StatusCode::kInvalidArgument, HasSubstr("scores")));

  v = MakeVocab({{"a", -1}, {"a", -2}});
  EXPECT_THAT(Tokenizer::Create(v),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate token")));

  v = MakeVocab({});
  v.bos = 100000;
  EXPECT_THAT(Tokenizer::Create(v), StatusIs(StatusCode::kInvalidArgument, HasSubstr("bos id")));

  v = MakeVocab({});
  v.bos = -1;
  EXPECT_THAT(Tokenizer::Create(v), StatusIs(StatusCode::kInvalidArgument, HasSubstr("add_bos")));

  v = MakeVocab({{"a", -1}}, /*with_bytes=*/false);
  v.unk = -1;
  EXPECT_THAT(Tokenizer::Create(v),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no token for byte 0x00")));

  v = MakeVocab({});
  v.model = "gpt2";
  EXPECT_THAT(Tokenizer::Create(v), StatusIs(StatusCode::kUnimplemented, HasSubstr("'gpt2'")));
  v.model = "bert";
  EXPECT_THAT(Tokenizer::Create(v), StatusIs(StatusCode::kUnimplemented, HasSubstr("'bert'")));
}

TEST(TokenizerCreateTest, ByteFallbackWithoutByteTokensUsesUnk) {
  Vocab v = MakeVocab({{"a", -1}}, /*with_bytes=*/false);
  auto t = Tokenizer::Create(v);
  ASSERT_THAT(t, testing::IsOk());
  EXPECT_THAT((*t)->Encode("ab", false, true), ElementsAre(4, 3));
}

// The texts are packed after Create: every id keeps its own text, Find inverts text(), and an
// empty text is named "[EMPTY_<id>]" as in llama.cpp.
TEST(TokenizerCreateTest, TextsSurviveThePacking) {
  Vocab v = MakeVocab({{"a", -1}, {"", -2}, {"\xE2\x96\x81" "b", -3}, {"<table>", 0, UD}});
  const size_t n = v.tokens.size();
  const std::vector<std::string> texts = v.tokens;
  auto t = Tokenizer::Create(v);
  ASSERT_THAT(t, testing::IsOk());
  ASSERT_EQ((*t)->size(), static_cast<int32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string want = texts[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : texts[i];
    EXPECT_EQ((*t)->text(id), want) << id;
    EXPECT_EQ((*t)->Find(want), id) << want;
  }
  EXPECT_EQ((*t)->TokenToPiece(static_cast<int32_t>(n) - 2), " b");
  EXPECT_EQ((*t)->TokenToPiece(static_cast<int32_t>(n) - 1), "<table>");
}

// ---- LoadVocab from an in-memory GGUF ----

gguf::Writer TokenizerGguf() {
  gguf::Writer w;
  w.SetString("general.architecture", "gemma3");
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "<unk>", "a", "\n"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0, 0, -1, 0});
  w.SetInt32Array("tokenizer.ggml.token_type", {3, 3, 3, 2, 1, 4});
  w.SetUint32("tokenizer.ggml.bos_token_id", 2);
  w.SetUint32("tokenizer.ggml.eos_token_id", 1);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 3);
  w.SetUint32("tokenizer.ggml.padding_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_space_prefix", false);
  return w;
}

StatusOr<Vocab> LoadFrom(const gguf::Writer& w, std::vector<uint8_t>* storage) {
  FG_ASSIGN_OR_RETURN(*storage, w.ToBytes());
  FG_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::FromBytes(*storage));
  return LoadVocab(*file);
}

TEST(LoadVocabTest, ReadsEveryField) {
  std::vector<uint8_t> bytes;
  FG_ASSERT_OK_AND_ASSIGN(Vocab v, LoadFrom(TokenizerGguf(), &bytes));
  EXPECT_EQ(v.model, "llama");
  EXPECT_THAT(v.tokens, ElementsAre("<pad>", "<eos>", "<bos>", "<unk>", "a", "\n"));
  EXPECT_THAT(v.scores, ElementsAre(0, 0, 0, 0, -1, 0));
  EXPECT_THAT(v.types, ElementsAre(3, 3, 3, 2, 1, 4));
  EXPECT_EQ(v.bos, 2);
  EXPECT_EQ(v.eos, 1);
  EXPECT_EQ(v.unk, 3);
  EXPECT_EQ(v.pad, 0);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
  FG_ASSERT_OK_AND_ASSIGN(auto tok, Tokenizer::Create(v));
  EXPECT_THAT(tok->Encode("a\na", true, true), ElementsAre(2, 4, 5, 4));
}

TEST(LoadVocabTest, DefaultsWhenOptionalKeysAreAbsent) {
  gguf::Writer w = TokenizerGguf();
  w.Remove("tokenizer.ggml.bos_token_id");
  w.Remove("tokenizer.ggml.padding_token_id");
  w.Remove("tokenizer.ggml.add_space_prefix");
  std::vector<uint8_t> bytes;
  FG_ASSERT_OK_AND_ASSIGN(Vocab v, LoadFrom(w, &bytes));
  EXPECT_EQ(v.bos, 1);  // llama.cpp's SPM defaults
  EXPECT_EQ(v.pad, -1);
  EXPECT_TRUE(v.add_space_prefix);
}

TEST(LoadVocabTest, Errors) {
  std::vector<uint8_t> bytes;
  {
    gguf::Writer w = TokenizerGguf();
    w.Remove("tokenizer.ggml.tokens");
    EXPECT_THAT(LoadFrom(w, &bytes),
                StatusIs(StatusCode::kNotFound, HasSubstr("tokenizer.ggml.tokens")));
  }
  {
    gguf::Writer w = TokenizerGguf();
    w.Remove("tokenizer.ggml.model");
    EXPECT_THAT(LoadFrom(w, &bytes),
                StatusIs(StatusCode::kNotFound, HasSubstr("tokenizer.ggml.model")));
  }
  {
    gguf::Writer w = TokenizerGguf();
    w.Remove("tokenizer.ggml.scores");
    EXPECT_THAT(LoadFrom(w, &bytes),
                StatusIs(StatusCode::kNotFound, HasSubstr("tokenizer.ggml.scores")));
  }
  {
    gguf::Writer w = TokenizerGguf();
    w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0});
    EXPECT_THAT(LoadFrom(w, &bytes),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("tokenizer.ggml.scores has 3")));
  }
  {
    gguf::Writer w = TokenizerGguf();
    w.SetInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1});
    EXPECT_THAT(LoadFrom(w, &bytes), StatusIs(StatusCode::kInvalidArgument,
                                              HasSubstr("tokenizer.ggml.token_type has 7")));
  }
  {
    gguf::Writer w = TokenizerGguf();
    w.SetFloat32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1});
    EXPECT_THAT(LoadFrom(w, &bytes),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("tokenizer.ggml.token_type")));
  }
  {
    gguf::Writer w = TokenizerGguf();
    w.SetUint32("tokenizer.ggml.eos_token_id", 6);
    EXPECT_THAT(LoadFrom(w, &bytes), StatusIs(StatusCode::kInvalidArgument,
                                              HasSubstr("tokenizer.ggml.eos_token_id = 6")));
  }
  {
    gguf::Writer w = TokenizerGguf();
    w.SetStringArray("tokenizer.ggml.tokens", {});
    w.SetFloat32Array("tokenizer.ggml.scores", {});
    w.SetInt32Array("tokenizer.ggml.token_type", {});
    EXPECT_THAT(LoadFrom(w, &bytes), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  }
}

TEST(LoadVocabTest, IntegerScoresAreAccepted) {
  gguf::Writer w = TokenizerGguf();
  w.SetInt32Array("tokenizer.ggml.scores", {0, 0, 0, 0, -7, 0});
  std::vector<uint8_t> bytes;
  FG_ASSERT_OK_AND_ASSIGN(Vocab v, LoadFrom(w, &bytes));
  EXPECT_EQ(v.scores[4], -7.0f);
}

}  // namespace
}  // namespace fg::text
