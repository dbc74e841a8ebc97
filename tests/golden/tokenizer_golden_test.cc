// fgemma's tokenizer against llama.cpp on the real Gemma 3 vocabulary: every golden string in
// three modes (BOS + special, BOS + no special, no BOS + special), detokenization, streaming
// decoding, the piece of every token (digest) and llama.cpp's token attributes.
// Goldens: tests/data/tokenizer_goldens.json, written by scripts/gen_goldens_tokenizer.py.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/text/tokenizer.h"

namespace fg::text {
namespace {

using nlohmann::json;

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string ToHex(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

uint64_t Fnv1a(uint64_t h, const std::string& piece) {
  const uint32_t len = static_cast<uint32_t>(piece.size());
  std::string chunk(reinterpret_cast<const char*>(&len), 4);  // little-endian hosts only
  chunk += piece;
  for (unsigned char b : chunk) {
    h ^= b;
    h *= 0x100000001B3ull;
  }
  return h;
}

class TokenizerGoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("FGEMMA_MODEL");
    if (path == nullptr || *path == '\0') {
      skip_reason_ = new std::string("FGEMMA_MODEL is not set");
      return;
    }
    if (std::ifstream(path).fail()) {
      skip_reason_ = new std::string(std::string("FGEMMA_MODEL does not exist: ") + path);
      return;
    }
    auto file = gguf::File::Open(path);
    ASSERT_THAT(file, testing::IsOk());
    file_ = std::move(*file).release();
    auto tok = Tokenizer::FromGguf(*file_);
    ASSERT_THAT(tok, testing::IsOk());
    tok_ = std::move(*tok).release();
    std::ifstream in(std::string(FG_SOURCE_DIR) + "/tests/data/tokenizer_goldens.json");
    ASSERT_TRUE(in.good()) << "missing tests/data/tokenizer_goldens.json";
    goldens_ = new json(json::parse(in));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete file_;
    delete goldens_;
    delete skip_reason_;
    tok_ = nullptr;
    file_ = nullptr;
    goldens_ = nullptr;
    skip_reason_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_ != nullptr) GTEST_SKIP() << *skip_reason_;
    ASSERT_NE(tok_, nullptr);
    ASSERT_NE(goldens_, nullptr);
  }

  static inline gguf::File* file_ = nullptr;
  static inline Tokenizer* tok_ = nullptr;
  static inline json* goldens_ = nullptr;
  static inline std::string* skip_reason_ = nullptr;
};

TEST_F(TokenizerGoldenTest, VocabularySize) {
  EXPECT_EQ(tok_->size(), (*goldens_)["n_vocab"].get<int>());
  EXPECT_EQ(tok_->vocab().bos, 2);
  EXPECT_EQ(tok_->vocab().eos, 1);
  EXPECT_FALSE(tok_->vocab().add_space_prefix);
}

TEST_F(TokenizerGoldenTest, EncodeMatchesLlamaCpp) {
  const json& cases = (*goldens_)["cases"];
  ASSERT_GE(cases.size(), 60u);
  int checked = 0;
  for (const json& c : cases) {
    const std::string text = FromHex(c["text_hex"].get<std::string>());
    SCOPED_TRACE("case " + c["name"].get<std::string>());
    EXPECT_EQ(tok_->Encode(text, true, true), c["bos_special"].get<std::vector<int32_t>>())
        << "mode: add_bos, parse_special";
    EXPECT_EQ(tok_->Encode(text, true, false), c["bos_nospecial"].get<std::vector<int32_t>>())
        << "mode: add_bos, no parse_special";
    EXPECT_EQ(tok_->Encode(text, false, true), c["nobos_special"].get<std::vector<int32_t>>())
        << "mode: no bos, parse_special";
    checked += 3;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()) * 3);
}

TEST_F(TokenizerGoldenTest, LongTextIsLong) {
  for (const json& c : (*goldens_)["cases"]) {
    if (c["name"] == "long_1200") {
      EXPECT_GE(c["bos_special"].size(), 1200u);
      return;
    }
  }
  FAIL() << "no long_1200 case";
}

TEST_F(TokenizerGoldenTest, DecodeMatchesLlamaCpp) {
  for (const json& c : (*goldens_)["cases"]) {
    SCOPED_TRACE("case " + c["name"].get<std::string>());
    const auto ids = c["bos_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(ToHex(tok_->Decode(ids, false)), c["decode_hex"].get<std::string>());
    EXPECT_EQ(ToHex(tok_->Decode(ids, true)), c["decode_special_hex"].get<std::string>());
  }
}

TEST_F(TokenizerGoldenTest, StreamingDecodeEqualsDecode) {
  for (const json& c : (*goldens_)["cases"]) {
    SCOPED_TRACE("case " + c["name"].get<std::string>());
    const auto ids = c["bos_special"].get<std::vector<int32_t>>();
    StreamDecoder dec(*tok_);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string part = dec.Push(id);
      // Every emitted chunk of a valid-UTF-8 case ends on a sequence boundary.
      if (c.contains("text")) {
        EXPECT_EQ(CompleteUtf8Prefix(part), part.size());
      }
      streamed += part;
    }
    streamed += dec.Flush();
    EXPECT_EQ(ToHex(streamed), c["decode_hex"].get<std::string>());
  }
}

TEST_F(TokenizerGoldenTest, PiecesMatchLlamaCpp) {
  for (const json& p : (*goldens_)["pieces"]) {
    const int32_t id = p["id"].get<int32_t>();
    EXPECT_EQ(ToHex(tok_->TokenToPiece(id, false)), p["piece_hex"].get<std::string>()) << id;
    EXPECT_EQ(ToHex(tok_->TokenToPiece(id, true)), p["piece_special_hex"].get<std::string>()) << id;
  }
}

TEST_F(TokenizerGoldenTest, EveryPieceMatchesDigest) {
  uint64_t plain = 0xCBF29CE484222325ull, special = 0xCBF29CE484222325ull;
  for (int32_t id = 0; id < tok_->size(); ++id) {
    plain = Fnv1a(plain, tok_->TokenToPiece(id, false));
    special = Fnv1a(special, tok_->TokenToPiece(id, true));
  }
  char buf[2][17];
  std::snprintf(buf[0], sizeof(buf[0]), "%016llx", static_cast<unsigned long long>(plain));
  std::snprintf(buf[1], sizeof(buf[1]), "%016llx", static_cast<unsigned long long>(special));
  EXPECT_EQ(buf[0], (*goldens_)["pieces_fnv1a64"].get<std::string>());
  EXPECT_EQ(buf[1], (*goldens_)["pieces_special_fnv1a64"].get<std::string>());
}

TEST_F(TokenizerGoldenTest, AttributesMatchLlamaCpp) {
  // The token types as stored (the tokenizer keeps only the attributes made from them).
  auto vocab = LoadVocab(*file_);
  ASSERT_THAT(vocab, testing::IsOk());
  ASSERT_EQ(vocab->types.size(), static_cast<size_t>(tok_->size()));
  std::vector<int64_t> expected(tok_->size(), -1);
  for (const json& run : (*goldens_)["attr_overrides"]) {  // [first_id, last_id, attr]
    for (int32_t id = run[0].get<int32_t>(); id <= run[1].get<int32_t>(); ++id) {
      expected[id] = run[2].get<int64_t>();
    }
  }
  static constexpr uint32_t kFromType[] = {kAttrUndefined, kAttrNormal,      kAttrUnknown,
                                           kAttrControl,   kAttrUserDefined, kAttrUnused,
                                           kAttrByte};
  int mismatches = 0;
  for (int32_t id = 0; id < tok_->size(); ++id) {
    const int32_t type = vocab->types[id];
    const uint32_t want = expected[id] >= 0          ? static_cast<uint32_t>(expected[id])
                          : (type >= 0 && type <= 6) ? kFromType[type]
                                                     : kAttrUndefined;
    if (tok_->attr(id) != want && ++mismatches <= 10) {
      ADD_FAILURE() << "token " << id << " '" << tok_->text(id) << "': attr " << tok_->attr(id)
                    << ", llama.cpp " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Runs the fgemma binary through the shell; returns the exit code and stdout.
int RunCli(const std::string& args, std::string* out) {
  const std::string cmd = std::string(FG_CLI_PATH) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  out->clear();
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(TokenizerGoldenTest, CliPrintsTheSameIds) {
  const std::string model = std::getenv("FGEMMA_MODEL");
  std::string out;
  ASSERT_EQ(RunCli("tokenize -m '" + model + "' --ids '<start_of_turn>user  hi</footer>'", &out),
            0);
  EXPECT_EQ(out, "2 105 2364 138 2202 237\n");
  ASSERT_EQ(RunCli("tokenize -m '" + model + "' --ids --no-bos --no-special '<bos>'", &out), 0);
  std::string want;
  for (int32_t id : tok_->Encode("<bos>", false, false)) {
    want += (want.empty() ? "" : " ") + std::to_string(id);
  }
  EXPECT_EQ(out, want + "\n");
  ASSERT_EQ(RunCli("tokenize -m '" + model + "' --show-pieces 'a\tb'", &out), 0);
  std::string lines;
  for (int32_t id : tok_->Encode("a\tb")) {
    lines += std::to_string(id) + "\t";
    const std::string piece = tok_->TokenToPiece(id, true);
    lines += piece == "\t" ? "\\t" : piece;
    lines += "\n";
  }
  EXPECT_EQ(out, lines);
}

TEST(TokenizerCliTest, ExitCodes) {
  std::string out;
  EXPECT_EQ(RunCli("tokenize -m /nonexistent/model.gguf", &out), 2);        // no text: usage
  EXPECT_EQ(RunCli("tokenize -m /nonexistent/model.gguf hello", &out), 1);  // bad model
  EXPECT_EQ(RunCli("tokenize --bogus-flag hello", &out), 2);
}

// Random small vocabularies tokenized by llama.cpp (no model needed): overlapping special
// tokens of equal length, tied scores, missing characters, with and without a dummy prefix.
TEST(TokenizerSyntheticGoldenTest, RandomVocabulariesMatchLlamaCpp) {
  std::ifstream in(std::string(FG_SOURCE_DIR) + "/tests/data/tokenizer_goldens.json");
  ASSERT_TRUE(in.good()) << "missing tests/data/tokenizer_goldens.json";
  const json goldens = json::parse(in);
  const json& synthetic = goldens["synthetic"];
  ASSERT_GE(synthetic.size(), 10u);
  int checked = 0;
  for (size_t k = 0; k < synthetic.size(); ++k) {
    const json& s = synthetic[k];
    Vocab v;
    v.model = "llama";
    v.tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
    v.types = {3, 3, 3, 2};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      v.tokens.push_back(name);
      v.types.push_back(6);
    }
    v.scores.assign(v.tokens.size(), 0.0f);
    for (const auto& t : s["extra_tokens"]) v.tokens.push_back(t.get<std::string>());
    for (const auto& x : s["extra_scores"]) v.scores.push_back(x.get<float>());
    for (const auto& x : s["extra_types"]) v.types.push_back(x.get<int32_t>());
    v.pad = 0;
    v.eos = 1;
    v.bos = 2;
    v.unk = 3;
    v.add_bos = true;
    v.add_space_prefix = s["add_space_prefix"].get<bool>();
    auto tok = Tokenizer::Create(std::move(v));
    ASSERT_THAT(tok, testing::IsOk());
    for (const json& c : s["cases"]) {
      const std::string text = FromHex(c["text_hex"].get<std::string>());
      SCOPED_TRACE("vocabulary " + std::to_string(k) + ", text hex " +
                   c["text_hex"].get<std::string>());
      EXPECT_EQ((*tok)->Encode(text, true, true), c["bos_special"].get<std::vector<int32_t>>());
      EXPECT_EQ((*tok)->Encode(text, true, false), c["bos_nospecial"].get<std::vector<int32_t>>());
      checked += 2;
    }
  }
  EXPECT_GE(checked, 1000);
}

}  // namespace
}  // namespace fg::text
