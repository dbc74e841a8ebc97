// The exact Gemma tokenizer: SentencePiece-BPE over a GGUF vocabulary (tokenizer.ggml.model =
// "llama"), reproducing llama.cpp's tokenization id for id.
//
// ref: llama.cpp src/llama-vocab.cpp (llama_vocab::impl::load, tokenizer_st_partition,
//      llm_tokenizer_spm_session, token_to_piece, detokenize). Summary of what is reproduced:
//   * Token attributes come from tokenizer.ggml.token_type, then llama.cpp's text heuristics:
//     EOT/EOM/FIM/EOG-looking texts ("<end_of_turn>", "</s>", "<|endoftext|>", ...) gain the
//     control bit, control tokens whose text contains "unused" gain the unused bit.
//   * Special-token splitting: every token with the control, user-defined or unknown attribute
//     is a special token (control and unknown ones only when parse_special); they are taken in
//     llama.cpp's order (std::sort by text length, longest first) and, token by token, every
//     leftmost non-overlapping occurrence inside a not-yet-split fragment is cut out. This is
//     NOT leftmost-longest matching; the order matters when occurrences overlap.
//   * Each remaining fragment: optional dummy-prefix space (add_space_prefix, after BOS or a
//     special token only), ' ' -> U+2581, split into UTF-8 "characters" by the lead byte alone
//     (llama.cpp's unicode_len_utf8; invalid UTF-8 is not rejected, it is split the same way and
//     ends up as byte tokens), then repeatedly merge the adjacent pair whose concatenation is a
//     token with the highest score (ties: leftmost). Pieces that are no token become <0xNN>.
//   * BOS is prepended when add_special && add_bos; EOS appended when add_special && add_eos.
//
// "gpt2" (byte-level BPE with merges) and other tokenizer models are refused (Unimplemented).
#ifndef FGEMMA_TEXT_TOKENIZER_H_
#define FGEMMA_TEXT_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/gguf/reader.h"

namespace fg::text {

// tokenizer.ggml.token_type values (SentencePiece piece types).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// llama.cpp's llama_token_attr bits (same values), derived from the type plus text heuristics.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

// A tokenizer vocabulary as stored in GGUF (tokenizer.ggml.*).
struct Vocab {
  std::string model = "llama";      // tokenizer.ggml.model
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens
  std::vector<float> scores;        // tokenizer.ggml.scores (empty: all 0)
  std::vector<int32_t> types;       // tokenizer.ggml.token_type (empty: all normal)
  // Special ids; -1 = none. llama.cpp's SPM defaults apply when a key is absent.
  int32_t bos = 1;
  int32_t eos = 2;
  int32_t unk = 0;
  int32_t pad = -1;
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;
};

// Reads tokenizer.ggml.* from a GGUF file. Errors name the key: missing or mistyped arrays,
// arrays of different lengths, special ids out of range.
StatusOr<Vocab> LoadVocab(const gguf::File& file);

class Tokenizer {
 public:
  // Validates `vocab` and builds the lookup tables. InvalidArgument for inconsistent vocabularies
  // (array lengths, ids out of range, duplicate texts, a byte that can be neither a <0xNN> token,
  // a one-byte token nor <unk>); Unimplemented for tokenizer models other than "llama".
  static StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);
  // LoadVocab + Create.
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const gguf::File& file);

  // Text (any bytes; UTF-8 expected) -> ids. add_special: BOS/EOS as the vocabulary asks.
  // parse_special: control/unknown token texts in `text` become those tokens (user-defined
  // tokens such as "\n" or "<table>" are always matched, as in llama.cpp).
  std::vector<int32_t> Encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;

  // The bytes a token stands for (llama.cpp token_to_piece with lstrip 0): normal tokens with
  // U+2581 -> ' ', byte tokens -> their byte, user-defined tokens -> their text, control and
  // unknown tokens -> their text when `special`, else nothing; unused/undefined -> nothing.
  // Out-of-range ids give an empty string.
  std::string TokenToPiece(int32_t id, bool special = false) const;

  // Concatenated pieces (llama_detokenize with remove_special = false, unparse_special =
  // `special`): with add_space_prefix the first piece loses one leading space.
  std::string Decode(std::span<const int32_t> ids, bool special = false) const;

  // The id of a token text, if any.
  std::optional<int32_t> Find(std::string_view text) const;

  int32_t size() const { return static_cast<int32_t>(text_off_.size()) - 1; }
  // The vocabulary as given to Create, except `tokens` and `types`, which are emptied once read
  // (use text() and attr()).
  const Vocab& vocab() const { return vocab_; }
  uint32_t attr(int32_t id) const { return attrs_[id]; }
  // A token's text as stored (an empty one reads "[EMPTY_<id>]", as in llama.cpp).
  std::string_view text(int32_t id) const {
    return std::string_view(texts_).substr(text_off_[id], text_off_[id + 1] - text_off_[id]);
  }
  bool IsControl(int32_t id) const {
    return id >= 0 && id < size() && (attrs_[id] & (kAttrControl | kAttrUnknown)) != 0;
  }

 private:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  Status Init();

  struct Match {  // one accepted special-token occurrence
    size_t pos;
    size_t len;
    int32_t id;
  };
  void SplitSpecial(std::string_view text, bool parse_special, std::vector<Match>* out) const;
  void EncodeFragment(std::string_view fragment, bool add_prefix, std::vector<int32_t>* out) const;

  Vocab vocab_;
  std::string texts_;               // all token texts, packed
  std::vector<uint32_t> text_off_;  // token i is texts_[text_off_[i], text_off_[i + 1])
  std::vector<uint8_t> attrs_;      // TokenAttr bits (all below 1 << 8)
  // Text -> id: open addressing with linear probing over token ids (-1: empty slot), a power
  // of two at least twice the vocabulary (4 bytes a slot, no allocation per token).
  int32_t Lookup(std::string_view text) const;
  std::vector<int32_t> index_;
  size_t index_mask_ = 0;
  int32_t byte_token_[256];

  // Special tokens: a byte trie over their texts; rank is llama.cpp's processing order.
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t token = -1;                             // token ending here, or -1
    int32_t rank = -1;                              // its rank
  };
  std::vector<TrieNode> trie_;
  bool starts_special_[256] = {};
};

// Turns a stream of ids into text that never splits a UTF-8 sequence: bytes of an incomplete
// sequence are held until the token that completes it (a byte-fallback emoji arrives as four
// <0xNN> tokens). Invalid bytes are passed through unchanged, so the concatenation of every
// Push() and the final Flush() equals Tokenizer::Decode of the same ids (without the
// add_space_prefix strip).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool special = false)
      : tokenizer_(tokenizer), special_(special) {}
  // The text that is complete after `id`.
  std::string Push(int32_t id);
  // Bytes still held (an incomplete sequence at the end of the stream).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool special_;
  std::string pending_;
};

// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence which could
// still be completed by more bytes (exposed for tests).
size_t CompleteUtf8Prefix(std::string_view bytes);

// Length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 if the bytes there are not
// one (bad lead byte, truncated, overlong, surrogate, past U+10FFFF).
size_t Utf8SequenceLength(std::string_view s, size_t i);

// Strict UTF-8 validity of the whole string (user text: requests, prompts).
bool IsValidUtf8(std::string_view s);

// `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD (as JSON
// output needs: raw model text can end inside a character or hold stray bytes).
std::string ToValidUtf8(std::string_view s);

}  // namespace fg::text

#endif  // FGEMMA_TEXT_TOKENIZER_H_
