#include "src/text/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <queue>
#include <string>
#include <utility>

namespace fg::text {
namespace {

// FNV-1a, for the token-text index.
size_t TextHash(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

constexpr std::string_view kSpaceEscape = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// Texts llama.cpp treats as control tokens whatever the GGUF type says (EOT, EOM, FIM and EOG
// detection by text). ref: llama.cpp src/llama-vocab.cpp llama_vocab::impl::load, "auto-detect
// special tokens by text" and "maintain a list of tokens that cause end-of-generation".
constexpr std::string_view kControlLookingTexts[] = {
    // EOT
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>",
    // EOM
    "<|eom_id|>",
    // FIM prefix / suffix / middle / pad / repo / file separator
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<\xef\xbd\x9c"
    "fim\xe2\x96\x81"
    "begin\xef\xbd\x9c>",
    "<PRE>",
    "\xe2\x96\x81<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<\xef\xbd\x9c"
    "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>",
    "\xe2\x96\x81<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<\xef\xbd\x9c"
    "fim\xe2\x96\x81"
    "end\xef\xbd\x9c>",
    "<MID>",
    "\xe2\x96\x81<MID>",
    "<|code_middle|>",
    "<|middle|>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "[PAD]",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
    // EOG
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "</s>",
    "[EOS]",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "[e~[",
};

uint32_t AttrFromType(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kByte:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

// Length of the UTF-8 sequence a byte starts, from its high nibble only (continuation bytes
// count as 1). ref: llama.cpp src/unicode.cpp unicode_len_utf8.
inline size_t Utf8LenFromLead(uint8_t c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

// Reads an optional uint special id; absent keeps `*id`. Out of range is an error naming the key.
Status ReadSpecialId(const gguf::File& file, std::string_view key, size_t n_tokens, int32_t* id) {
  if (file.Find(key) == nullptr) {
    // llama.cpp disables a default id that is outside the vocabulary.
    if (*id >= 0 && static_cast<size_t>(*id) >= n_tokens) *id = -1;
    return OkStatus();
  }
  StatusOr<uint64_t> v = file.GetUint(key);
  if (!v.ok()) return v.status().WithContext("tokenizer");
  if (*v >= n_tokens) {
    return InvalidArgumentError("tokenizer: " + std::string(key) + " = " + std::to_string(*v) +
                                " is out of range (vocabulary has " + std::to_string(n_tokens) +
                                " tokens)");
  }
  *id = static_cast<int32_t>(*v);
  return OkStatus();
}

Status ReadOptionalBool(const gguf::File& file, std::string_view key, bool* out) {
  if (file.Find(key) == nullptr) return OkStatus();
  StatusOr<bool> v = file.GetBool(key);
  if (!v.ok()) return v.status().WithContext("tokenizer");
  *out = *v;
  return OkStatus();
}

}  // namespace

StatusOr<Vocab> LoadVocab(const gguf::File& file) {
  Vocab v;
  StatusOr<std::string_view> model = file.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.status().WithContext("tokenizer");
  v.model = std::string(*model);

  StatusOr<const gguf::StringList*> tokens = file.GetStringList("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status().WithContext("tokenizer");
  const size_t n = (*tokens)->size();
  if (n == 0) return InvalidArgumentError("tokenizer: tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgumentError("tokenizer: tokenizer.ggml.tokens has too many entries");
  }
  v.tokens.reserve(n);
  for (std::string_view t : **tokens) v.tokens.emplace_back(t);

  // Scores: float32, or int32 as llama.cpp also accepts.
  const gguf::Value* sv = file.Find("tokenizer.ggml.scores");
  if (sv == nullptr) return NotFoundError("tokenizer: key 'tokenizer.ggml.scores' not found");
  if (sv->type == gguf::ValueType::kArray && sv->elem_type == gguf::ValueType::kInt32) {
    StatusOr<std::vector<int32_t>> iscores = file.GetInt32Array("tokenizer.ggml.scores");
    if (!iscores.ok()) return iscores.status().WithContext("tokenizer");
    v.scores.assign(iscores->begin(), iscores->end());
  } else {
    StatusOr<std::vector<float>> scores = file.GetFloatArray("tokenizer.ggml.scores");
    if (!scores.ok()) return scores.status().WithContext("tokenizer");
    v.scores = std::move(*scores);
  }
  if (v.scores.size() != n) {
    return InvalidArgumentError("tokenizer: tokenizer.ggml.scores has " +
                                std::to_string(v.scores.size()) + " entries, tokens has " +
                                std::to_string(n));
  }
  StatusOr<std::vector<int32_t>> types = file.GetInt32Array("tokenizer.ggml.token_type");
  if (!types.ok()) return types.status().WithContext("tokenizer");
  v.types = std::move(*types);
  if (v.types.size() != n) {
    return InvalidArgumentError("tokenizer: tokenizer.ggml.token_type has " +
                                std::to_string(v.types.size()) + " entries, tokens has " +
                                std::to_string(n));
  }

  FG_RETURN_IF_ERROR(ReadSpecialId(file, "tokenizer.ggml.bos_token_id", n, &v.bos));
  FG_RETURN_IF_ERROR(ReadSpecialId(file, "tokenizer.ggml.eos_token_id", n, &v.eos));
  FG_RETURN_IF_ERROR(ReadSpecialId(file, "tokenizer.ggml.unknown_token_id", n, &v.unk));
  FG_RETURN_IF_ERROR(ReadSpecialId(file, "tokenizer.ggml.padding_token_id", n, &v.pad));
  FG_RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_bos_token", &v.add_bos));
  FG_RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_eos_token", &v.add_eos));
  FG_RETURN_IF_ERROR(
      ReadOptionalBool(file, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));
  return v;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  FG_RETURN_IF_ERROR(t->Init());
  return t;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::File& file) {
  FG_ASSIGN_OR_RETURN(Vocab vocab, LoadVocab(file));
  return Create(std::move(vocab));
}

Status Tokenizer::Init() {
  Vocab& v = vocab_;
  if (v.model == "gpt2") {
    return UnimplementedError(
        "tokenizer: tokenizer.ggml.model 'gpt2' (byte-level BPE with merges) is not supported; "
        "fgemma implements 'llama' (SentencePiece BPE)");
  }
  if (v.model != "llama") {
    return UnimplementedError("tokenizer: tokenizer.ggml.model '" + v.model +
                              "' is not supported; fgemma implements 'llama' (SentencePiece BPE)");
  }
  const size_t n = v.tokens.size();
  if (n == 0) return InvalidArgumentError("tokenizer: the vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgumentError("tokenizer: the vocabulary has too many tokens");
  }
  if (v.scores.empty()) v.scores.assign(n, 0.0f);
  if (v.types.empty()) v.types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  if (v.scores.size() != n || v.types.size() != n) {
    return InvalidArgumentError("tokenizer: " + std::to_string(n) + " tokens but " +
                                std::to_string(v.scores.size()) + " scores and " +
                                std::to_string(v.types.size()) + " token types");
  }
  const std::pair<const char*, int32_t> ids[] = {
      {"bos", v.bos}, {"eos", v.eos}, {"unk", v.unk}, {"pad", v.pad}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return InvalidArgumentError(std::string("tokenizer: ") + name + " id " + std::to_string(id) +
                                  " is out of range (vocabulary has " + std::to_string(n) +
                                  " tokens)");
    }
  }
  if (v.add_bos && v.bos < 0) {
    return InvalidArgumentError("tokenizer: add_bos_token is true but there is no bos token");
  }
  if (v.add_eos && v.eos < 0) {
    return InvalidArgumentError("tokenizer: add_eos_token is true but there is no eos token");
  }

  // Texts, index, attributes. ref: llama_vocab::impl::load.
  size_t slots = 1;
  while (slots < n * 2) slots <<= 1;
  index_.assign(slots, -1);
  index_mask_ = slots - 1;
  attrs_.resize(n);
  // The texts packed in one buffer: a std::string per token would take 32 bytes plus the heap
  // block of a long text, 8.8 MB on a 262k vocabulary, against 3 MB here.
  size_t bytes = 0;
  for (const std::string& t : v.tokens) bytes += t.size();
  texts_.reserve(bytes);
  text_off_.resize(n + 1);
  for (size_t i = 0; i < n; ++i) {
    text_off_[i] = static_cast<uint32_t>(texts_.size());
    if (v.tokens[i].empty()) {
      texts_ += "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    } else {
      texts_ += v.tokens[i];
    }
    attrs_[i] = static_cast<uint8_t>(AttrFromType(v.types[i]));
    if (texts_.size() > UINT32_MAX) {
      return InvalidArgumentError("tokenizer: the token texts exceed 4 GiB");
    }
  }
  text_off_[n] = static_cast<uint32_t>(texts_.size());
  std::vector<std::string>().swap(v.tokens);
  std::vector<int32_t>().swap(v.types);  // attrs_ holds what they say (1 MB on 262k tokens)
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    size_t slot = TextHash(text(id)) & index_mask_;
    for (; index_[slot] >= 0; slot = (slot + 1) & index_mask_) {
      if (text(index_[slot]) == text(id)) {
        return InvalidArgumentError("tokenizer: duplicate token text in the vocabulary: ids " +
                                    std::to_string(index_[slot]) + " and " + std::to_string(i));
      }
    }
    index_[slot] = static_cast<int32_t>(i);
  }
  for (std::string_view text : kControlLookingTexts) {
    if (auto id = Find(text)) attrs_[*id] |= kAttrControl;
  }
  for (size_t i = 0; i < n; ++i) {
    if ((attrs_[i] & kAttrControl) &&
        text(static_cast<int32_t>(i)).find("unused") != std::string_view::npos) {
      attrs_[i] |= kAttrUnused;
    }
  }
  // llama.cpp's model-specific fixes (gpt-oss, gemma4/paddleocr) that depend only on texts.
  for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (auto id = Find(text)) attrs_[*id] = kAttrUserDefined;
  }
  if (auto end = Find("<|end|>")) {
    const bool harmony = Find("<|return|>") && Find("<|call|>");
    const bool solar = Find("<|calls|>") && Find("<|flush|>");
    if (harmony || solar) attrs_[*end] = kAttrUserDefined;
  }
  if (auto s = Find("</s>"); s && Find("<|tool_response>")) attrs_[*s] = kAttrNormal;

  // Byte fallback: <0xNN>, else the one-byte token, else <unk>. ref: llama_vocab::byte_to_token
  // (llama.cpp throws when neither exists; we fall back to <unk> or refuse the vocabulary).
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    std::optional<int32_t> id = Find(std::string_view(name, 6));
    if (!id) id = Find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (!id && v.unk >= 0) id = v.unk;
    if (!id) {
      return InvalidArgumentError("tokenizer: the vocabulary has no token for byte 0x" +
                                  std::string(name + 3, 2) + " and no <unk> token");
    }
    byte_token_[b] = *id;
  }

  // Special tokens in llama.cpp's order: ids ascending, then std::sort by length (longest
  // first). std::sort is not stable, but it is deterministic for a given input, so the same
  // input and comparator give llama.cpp's exact order of equal-length tokens.
  std::vector<int32_t> specials;
  for (size_t i = 0; i < n; ++i) {
    if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      specials.push_back(static_cast<int32_t>(i));
    }
  }
  std::sort(specials.begin(), specials.end(),
            [&](int32_t a, int32_t b) { return text(a).size() > text(b).size(); });
  trie_.assign(1, TrieNode{});
  for (size_t r = 0; r < specials.size(); ++r) {
    const int32_t id = specials[r];
    const std::string_view t = text(id);
    starts_special_[static_cast<uint8_t>(t[0])] = true;
    int32_t node = 0;
    for (char ch : t) {
      const uint8_t c = static_cast<uint8_t>(ch);
      auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, INT32_MIN));
      if (it != next.end() && it->first == c) {
        node = it->second;
      } else {
        const int32_t child = static_cast<int32_t>(trie_.size());
        next.insert(it, {c, child});
        trie_.emplace_back();
        node = child;
      }
    }
    trie_[node].token = id;
    trie_[node].rank = static_cast<int32_t>(r);
  }
  return OkStatus();
}

int32_t Tokenizer::Lookup(std::string_view text) const {
  for (size_t slot = TextHash(text) & index_mask_;; slot = (slot + 1) & index_mask_) {
    const int32_t id = index_[slot];
    if (id < 0 || this->text(id) == text) return id;
  }
}

std::optional<int32_t> Tokenizer::Find(std::string_view text) const {
  const int32_t id = Lookup(text);
  if (id < 0) return std::nullopt;
  return id;
}

// ref: llama_vocab::impl::tokenizer_st_partition. llama.cpp takes the special tokens one at a
// time (in rank order) and cuts each leftmost occurrence that lies wholly inside a fragment not
// yet cut. Equivalently: gather every occurrence of every special token, visit them by (rank,
// position) and accept one when none of its bytes is already covered by an accepted one.
void Tokenizer::SplitSpecial(std::string_view text, bool parse_special,
                             std::vector<Match>* out) const {
  out->clear();
  struct Occurrence {
    int32_t rank;
    int32_t id;
    size_t pos;
    size_t len;
  };
  std::vector<Occurrence> occ;
  const size_t n = text.size();
  for (size_t p = 0; p < n; ++p) {
    if (!starts_special_[static_cast<uint8_t>(text[p])]) continue;
    int32_t node = 0;
    for (size_t q = p; q < n; ++q) {
      const uint8_t c = static_cast<uint8_t>(text[q]);
      const auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, INT32_MIN));
      if (it == next.end() || it->first != c) break;
      node = it->second;
      const int32_t id = trie_[node].token;
      if (id < 0) continue;
      if (!parse_special && (attrs_[id] & (kAttrControl | kAttrUnknown))) continue;
      occ.push_back({trie_[node].rank, id, p, q - p + 1});
    }
  }
  if (occ.empty()) return;
  std::sort(occ.begin(), occ.end(), [](const Occurrence& a, const Occurrence& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
  });
  std::vector<uint8_t> covered(n, 0);
  for (const Occurrence& o : occ) {
    const uint8_t* c = covered.data() + o.pos;
    if (std::memchr(c, 1, o.len) != nullptr) continue;
    std::memset(covered.data() + o.pos, 1, o.len);
    out->push_back({o.pos, o.len, o.id});
  }
  std::sort(out->begin(), out->end(), [](const Match& a, const Match& b) { return a.pos < b.pos; });
}

// ref: llm_tokenizer_spm_session::tokenize. Same symbol split, same priority queue comparator
// and the same push order, so even ties between stale and live queue entries resolve alike.
void Tokenizer::EncodeFragment(std::string_view fragment, bool add_prefix,
                               std::vector<int32_t>* out) const {
  std::string buf;
  buf.reserve(fragment.size() + 16);
  if (add_prefix) buf.append(kSpaceEscape);
  for (char c : fragment) {
    if (c == ' ') {
      buf.append(kSpaceEscape);
    } else {
      buf.push_back(c);
    }
  }
  if (buf.empty()) return;

  struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t off;
    uint32_t n;
  };
  std::vector<Symbol> sym;
  sym.reserve(buf.size());
  for (size_t off = 0; off < buf.size();) {
    const size_t len = std::min(Utf8LenFromLead(static_cast<uint8_t>(buf[off])), buf.size() - off);
    const int32_t index = static_cast<int32_t>(sym.size());
    off += len;
    sym.push_back({index - 1, off == buf.size() ? -1 : index + 1, static_cast<uint32_t>(off - len),
                   static_cast<uint32_t>(len)});
  }

  struct Bigram {
    int32_t left;
    int32_t right;
    float score;
    size_t size;
  };
  struct Less {  // highest score first; ties: leftmost first
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.score < r.score || (l.score == r.score && l.left > r.left);
    }
  };
  std::vector<Bigram> storage;
  storage.reserve(sym.size() * 2);
  std::priority_queue<Bigram, std::vector<Bigram>, Less> queue(Less{}, std::move(storage));
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view text(buf.data() + sym[left].off, sym[left].n + sym[right].n);
    const int32_t id = Lookup(text);
    if (id < 0) return;
    queue.push({left, right, vocab_.scores[id], text.size()});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale entry
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = sym[i].next) {
    const std::string_view text(buf.data() + sym[i].off, sym[i].n);
    if (const int32_t id = Lookup(text); id >= 0) {
      out->push_back(id);
    } else {
      for (char c : text) out->push_back(byte_token_[static_cast<uint8_t>(c)]);
    }
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  std::vector<Match> matches;
  SplitSpecial(text, parse_special, &matches);
  bool prev_special = true;  // a dummy prefix goes at the start and after special tokens
  size_t cursor = 0;
  for (const Match& m : matches) {
    if (m.pos > cursor) {
      EncodeFragment(text.substr(cursor, m.pos - cursor), vocab_.add_space_prefix && prev_special,
                     &out);
    }
    out.push_back(m.id);
    prev_special = true;
    cursor = m.pos + m.len;
  }
  if (cursor < text.size()) {
    EncodeFragment(text.substr(cursor), vocab_.add_space_prefix && prev_special, &out);
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

std::string Tokenizer::TokenToPiece(int32_t id, bool special) const {
  if (id < 0 || id >= size()) return {};
  const uint32_t a = attrs_[id];
  if (!special && (a & (kAttrUnknown | kAttrControl))) return {};
  const std::string_view text = this->text(id);
  if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return std::string(text);
  if (a & kAttrNormal) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpaceEscape.size(), kSpaceEscape) == 0) {
        out.push_back(' ');
        i += kSpaceEscape.size();
      } else {
        out.push_back(text[i++]);
      }
    }
    return out;
  }
  if (a & kAttrByte) {
    // ref: llama_vocab::impl::token_to_byte: strtol(text.substr(3, 2), 16).
    unsigned value = 0;
    for (size_t i = 3; i < 5 && i < text.size(); ++i) {
      const char c = text[i];
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        break;
      }
      value = value * 16 + static_cast<unsigned>(d);
    }
    return std::string(1, static_cast<char>(value));
  }
  return {};
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool special) const {
  std::string out;
  bool strip_space = vocab_.add_space_prefix;  // ref: llama_vocab::impl::detokenize
  for (int32_t id : ids) {
    std::string piece = TokenToPiece(id, special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t c = static_cast<uint8_t>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 1;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 4;
    }
    return need > back ? n - back : n;
  }
  return n;
}

std::string StreamDecoder::Push(int32_t id) {
  pending_ += tokenizer_.TokenToPiece(id, special_);
  const size_t k = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, k);
  pending_.erase(0, k);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  const size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d >> 6) != 0x2) return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string ToValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace fg::text
