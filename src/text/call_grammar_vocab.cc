#include "src/text/call_grammar_vocab.h"

#include <algorithm>
#include <optional>

#include "src/text/function_prompt.h"

namespace fg::text::grammar {

Status VocabIndex::Build(const Tokenizer& tok, bool compact, size_t tools) {
  vocab_size_ = tok.size();
  tok_class_.assign(vocab_size_, kTokNever);
  auto find = [&](std::string_view text) -> int32_t {
    std::optional<int32_t> id = tok.Find(text);
    return id ? *id : -1;
  };
  std::vector<std::pair<std::string, int>> named;
  if (compact) {
    named.emplace_back("<end>", kSymEnd);
    for (size_t n = 0; n < tools; ++n) {
      named.emplace_back("<tool_" + std::to_string(n) + ">", kSymTool0 + static_cast<int>(n));
    }
  } else {
    named.emplace_back(std::string(kStartCall), kSymStartCall);
    named.emplace_back(std::string(kEndCall), kSymEndCall);
    named.emplace_back(std::string(kEscape), kSymEscape);
  }
  for (const auto& [text, sym] : named) {
    const int32_t id = find(text);
    if (id < 0) {
      return InvalidArgumentError("the vocabulary has no token \"" + text + "\" (needed by the " +
                                  (compact ? "compact" : "official") + " dialect)");
    }
    tok_class_[id] = sym;
    special_.emplace_back(id, sym);
  }
  for (std::string_view text : {std::string_view("<eos>"), kEndOfTurn, kStartResponse}) {
    const int32_t id = find(text);
    if (id >= 0 && tok_class_[id] == kTokNever) tok_class_[id] = kTokStop;
  }
  const int32_t eos = tok.vocab().eos;
  if (eos >= 0 && eos < vocab_size_ && tok_class_[eos] == kTokNever) tok_class_[eos] = kTokStop;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (tok_class_[id] == kTokStop) stops_.push_back(id);
  }
  if (stops_.empty()) return InvalidArgumentError("the vocabulary has no stop token");

  // Text tokens and their pieces (by id for now; kept below in sorted order only).
  std::vector<uint32_t> piece_off(vocab_size_ + 1, 0);
  std::string piece_buf;
  std::vector<int32_t> text_ids;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    piece_off[id] = static_cast<uint32_t>(piece_buf.size());
    if (tok_class_[id] != kTokNever) continue;
    const uint32_t a = tok.attr(id);
    if (a & (kAttrControl | kAttrUnknown | kAttrUnused)) continue;
    if (!(a & (kAttrNormal | kAttrUserDefined | kAttrByte))) continue;
    if (compact && (a & kAttrUserDefined) &&
        (tok.text(id).starts_with("<tool_") || tok.text(id) == "<end>")) {
      continue;  // a tool token outside the tool map: never text
    }
    // The piece as the detokenizer gives it (U+2581 -> ' ', <0xNN> -> the byte).
    const size_t start = piece_buf.size();
    piece_buf += tok.TokenToPiece(id, /*special=*/false);
    if (piece_buf.size() == start) continue;
    tok_class_[id] = kTokText;
    max_piece_ = std::max(max_piece_, piece_buf.size() - start);
    if (compact && piece_buf.find('"', start) != std::string::npos) quote_tokens_.push_back(id);
    text_ids.push_back(id);
  }
  piece_off[vocab_size_] = static_cast<uint32_t>(piece_buf.size());
  auto piece = [&](int32_t id) {
    return std::string_view(piece_buf).substr(piece_off[id], piece_off[id + 1] - piece_off[id]);
  };
  // Sort by piece; an 8-byte big-endian prefix decides most comparisons without memcmp.
  struct Entry {
    uint64_t prefix;
    int32_t id;
  };
  std::vector<Entry> entries;
  entries.reserve(text_ids.size());
  for (int32_t id : text_ids) {
    const std::string_view p = piece(id);
    uint64_t prefix = 0;
    for (size_t k = 0; k < 8; ++k) {
      prefix = (prefix << 8) | (k < p.size() ? static_cast<uint8_t>(p[k]) : 0u);
    }
    entries.push_back({prefix, id});
  }
  std::sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return piece(a.id) < piece(b.id);
  });
  const uint32_t n = static_cast<uint32_t>(entries.size());
  sorted_tok_.resize(n);
  sorted_off_.resize(n + 1);
  sorted_buf_.reserve(piece_buf.size());
  rank_.assign(vocab_size_, -1);
  for (uint32_t i = 0; i < n; ++i) {
    sorted_tok_[i] = entries[i].id;
    sorted_off_[i] = static_cast<uint32_t>(sorted_buf_.size());
    sorted_buf_ += piece(entries[i].id);
    rank_[entries[i].id] = static_cast<int32_t>(i);
  }
  sorted_off_[n] = static_cast<uint32_t>(sorted_buf_.size());
  return OkStatus();
}

bool VocabIndex::IsPiece(std::string_view w) const {
  uint32_t lo = 0, hi = count();
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (SortedPiece(mid) < w) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < count() && SortedPiece(lo) == w;
}

}  // namespace fg::text::grammar
