#include "src/text/call_grammar.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "src/text/call_parser.h"
#include "src/text/function_prompt.h"

namespace fg::text {
namespace {

using nlohmann::json;

// Symbols walked by the automaton: 0..255 are bytes, the rest atomic special tokens.
constexpr int kSymEscape = 256;
constexpr int kSymStartCall = 257;
constexpr int kSymEndCall = 258;
constexpr int kSymEnd = 259;    // compact <end>
constexpr int kSymTool0 = 260;  // compact <tool_N> is kSymTool0 + N

// Token classes (per id) besides special symbols (>= 256).
constexpr int32_t kTokText = -1;   // walked by its bytes
constexpr int32_t kTokNever = -2;  // never allowed (controls, unused, empty pieces)
constexpr int32_t kTokStop = -3;   // 1 / 106 / 50: allowed when the output is complete

// Frame kinds (high byte of a frame header; the low 24 bits name a value node).
enum Kind : uint32_t {
  kTop = 1,
  kCallHdr = 2,   // official "call:NAME{" (sub: literal trie node)
  kCallEnd = 3,   // expects <end_function_call> / <end>
  kObj = 4,       // object with declared properties (or tool arguments)
  kFreeObj = 5,   // object without declared properties: at most one free key
  kArr = 6,
  kStr = 7,
  kLit = 8,       // one of a set of literals (enum members, true/false)
  kNum = 9,
  kAny = 10,      // any value; becomes one of the above on its first symbol
};

// kTop phases.
constexpr uint32_t kTopExpectCall = 0;  // kCall before the first call
constexpr uint32_t kTopAfterCall = 1;   // a call just ended: another call or stop
constexpr uint32_t kTopFree = 2;        // kAuto free text (bits 8..15: forbidden-pattern match)
// kObj phases (bits 8..31: key trie node in kObjKey).
constexpr uint32_t kObjOpen = 0, kObjAfterOpen = 1, kObjAfterComma = 2, kObjKey = 3,
                   kObjAfterValue = 4;
constexpr uint32_t kFreeOpen = 0, kFreeAfterOpen = 1, kFreeKey = 2, kFreeAfterValue = 3;
// kArr phases (bits 8..31: items so far).
constexpr uint32_t kArrOpen = 0, kArrAfterOpen = 1, kArrAfterValue = 2, kArrAfterComma = 3,
                   kArrItem = 4;
constexpr uint32_t kMaxArrayItemsLimit = (1u << 23) - 1;  // what the frame's bits can count
// kStr: bit 0 body, bits 4..7 UTF-8 state, bits 8..15 pattern match, bit 16 backslash pending.
// kNum phases (bits 8..: digit count).
constexpr uint32_t kNumStart = 0, kNumMinus = 1, kNumZero = 2, kNumInt = 3, kNumDot = 4,
                   kNumFrac = 5, kNumE = 6, kNumESign = 7, kNumExp = 8;
constexpr uint32_t kMaxIntDigits = 18;   // fits int64 (the parser's INTEGER reading)
constexpr uint32_t kMaxFracDigits = 18;
constexpr uint32_t kMaxExpDigits = 2;    // with <= 18 integer digits the value stays finite

constexpr int kInf = CallGrammar::kNoFinish;  // a token count no completion reaches
int Sat(int64_t n) { return static_cast<int>(std::min<int64_t>(n, kInf)); }

constexpr uint32_t Hdr(Kind k, uint32_t node) { return (static_cast<uint32_t>(k) << 24) | node; }

// UTF-8 validation as a small automaton (same acceptance as the parser's Utf8SequenceLength):
// 0 complete; 1/2/3 continuation bytes left; 4 after E0, 5 after ED, 6 after F0, 7 after F4.
int Utf8Step(int u, uint8_t b) {
  const bool cont = (b & 0xC0) == 0x80;
  switch (u) {
    case 0:
      if (b < 0x80) return 0;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 4;
      if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return 2;
      if (b == 0xED) return 5;
      if (b == 0xF0) return 6;
      if (b >= 0xF1 && b <= 0xF3) return 3;
      if (b == 0xF4) return 7;
      return -1;
    case 1:
      return cont ? 0 : -1;
    case 2:
      return cont ? 1 : -1;
    case 3:
      return cont ? 2 : -1;
    case 4:
      return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 5:
      return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 6:
      return b >= 0x90 && b <= 0xBF ? 2 : -1;
    case 7:
      return b >= 0x80 && b <= 0x8F ? 2 : -1;
    default:
      return -1;
  }
}

// Substring matcher (KMP as a DFA): next[state][byte]; reaching pat.size() is a match.
struct Matcher {
  std::string pat;
  std::vector<std::array<uint8_t, 256>> next;
  void Build(std::string p) {
    pat = std::move(p);
    next.assign(pat.size() + 1, {});
    for (size_t s = 0; s <= pat.size(); ++s) {
      for (int b = 0; b < 256; ++b) {
        std::string cur = pat.substr(0, std::min(s, pat.size())) + static_cast<char>(b);
        size_t k = std::min(cur.size(), pat.size());
        while (k > 0 && cur.compare(cur.size() - k, k, pat, 0, k) != 0) --k;
        next[s][b] = static_cast<uint8_t>(k);
      }
    }
  }
  uint32_t full() const { return static_cast<uint32_t>(pat.size()); }
};

// A set of symbol strings; per node the key indices below it (for keys seen once).
struct LitTrie {
  struct Node {
    std::vector<std::pair<int, int>> next;  // (symbol, child) sorted by symbol
    int terminal = -1;
    std::vector<uint32_t> mask;
    int depth = 0;  // symbols from the root
    int rest = 0;   // fewest tokens from here to the end of a member, plus its extra (CostTrie)
  };
  std::vector<Node> nodes = std::vector<Node>(1);
  // Per member index: its symbols, the node after each prefix (path[k] after k symbols) and the
  // fewest tokens that spell the rest (suffix[k] for symbols k..end; Impl::CostTrie).
  std::vector<std::vector<int>> members, paths, suffix;

  int Child(int n, int sym) const {
    const auto& v = nodes[n].next;
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(sym, -1));
    return it != v.end() && it->first == sym ? it->second : -1;
  }
  void Add(const std::vector<int>& syms, int index, int nwords) {
    int n = 0;
    auto mark = [&](int at) {
      if (nwords == 0) return;
      nodes[at].mask.resize(nwords);
      nodes[at].mask[index / 32] |= 1u << (index % 32);
    };
    mark(0);
    if (members.size() <= static_cast<size_t>(index)) {
      members.resize(index + 1);
      paths.resize(index + 1);
    }
    members[index] = syms;
    paths[index] = {0};
    for (int sym : syms) {
      int c = Child(n, sym);
      if (c < 0) {
        c = static_cast<int>(nodes.size());
        nodes.emplace_back();
        nodes[c].depth = nodes[n].depth + 1;
        auto& v = nodes[n].next;
        v.insert(std::lower_bound(v.begin(), v.end(), std::make_pair(sym, -1)), {sym, c});
      }
      n = c;
      mark(n);
      paths[index].push_back(n);
    }
    if (nodes[n].terminal < 0) nodes[n].terminal = index;
  }
  // True if member `index` passes through `node`.
  bool Through(int index, int node) const {
    const std::vector<int>& p = paths[index];
    const size_t d = static_cast<size_t>(nodes[node].depth);
    return d < p.size() && p[d] == node;
  }
};

struct VNode {
  enum Type { kString, kLiteral, kInteger, kNumber, kArray, kObject, kFreeObject, kAny };
  Type type = kString;
  int depth = 0;
  int lit = -1;   // kLiteral: the members; kObject: the keys (each followed by its separator)
  int item = -1;  // kArray: item node (-1: only [] is possible); kFreeObject: value node
  uint32_t max_items = 0;           // kArray: items at most (with item >= 0)
  std::vector<int> values;          // kObject: value node per key index
  std::vector<uint32_t> required;   // kObject: mask words
  int nwords = 0;                   // kObject: seen-mask words kept in the frame
  bool args = false;                // kObject: the tool's arguments
  std::vector<int> keyval;          // kObject: tokens of "key:" plus the shortest value, per key
};

struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::span<const uint32_t> k) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t w : k) h = (h ^ w) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
  size_t operator()(const std::vector<uint32_t>& k) const {
    return (*this)(std::span<const uint32_t>(k));
  }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(std::span<const uint32_t> a, std::span<const uint32_t> b) const {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
};

std::string EscapeCompact(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

struct CallGrammar::Impl {
  GrammarOptions opts;
  bool compact = false;
  uint32_t kv_sep = ':';
  int str_open = kSymEscape;

  std::vector<VNode> vnodes;
  std::vector<LitTrie> lits;
  int call_lit = -1;                // official: "call:NAME{" -> tool index
  std::vector<int> tool_args;       // per catalog tool: its arguments node
  std::vector<int> compact_tool;    // per N: catalog tool index
  int str_node = -1, int_node = -1, num_node = -1, bool_node = -1;
  std::array<int, kMaxValueDepth + 2> any_node{}, any_arr{}, any_obj{};
  Matcher free_matcher;             // forbidden in free text (would start a call in the parser)
  Matcher esc_matcher;              // "<escape>": forbidden inside official strings

  // Vocabulary.
  int32_t vocab_size = 0;
  std::vector<int32_t> tok_class;   // kTok* or a symbol >= 256
  std::vector<std::pair<int32_t, int>> special;  // (id, symbol)
  std::vector<int32_t> stops;
  // Text tokens sorted by piece (bytes compared unsigned): the i-th has id sorted_tok[i] and
  // piece sorted_buf[sorted_off[i], sorted_off[i + 1]); rank[id] is its i (text tokens only).
  // This order is the vocabulary's trie, implicitly (see Walk): 5 MB with the pieces on the
  // 262k vocabulary, where an explicit node trie took 1.1M nodes, 22 MB more.
  std::string sorted_buf;
  std::vector<uint32_t> sorted_off;
  std::vector<int32_t> sorted_tok;
  std::vector<int32_t> rank;
  size_t max_piece = 0;

  std::vector<int32_t> quote_tokens;  // compact: text tokens whose piece contains '"'
  mutable std::mutex base_mu;
  mutable std::unordered_map<uint32_t, std::unique_ptr<const std::vector<uint64_t>>> string_base;

  mutable std::mutex mu;
  mutable std::unordered_map<std::vector<uint32_t>, std::unique_ptr<const std::vector<int32_t>>,
                             KeyHash, KeyEq>
      memo;

  // The budget (see MinTokensToFinish). Costs count tokens; kInf where nothing spells it.
  int byte_cost[256] = {};           // 1 when a text token is exactly that byte, else kInf
  int num_cost = kInf;               // one digit
  int empty_arr = kInf, empty_obj = kInf, empty_str = kInf;  // [] {} and an empty string
  int str_rest[8] = {};              // in a string body with UTF-8 state u: the rest, closed
  int str_backslash = kInf;          // compact: after a backslash
  std::vector<int> vcost;            // per value node: its shortest complete value, fresh
  std::vector<int> maxd;             // per value node: bound on the finish of its frames
  int call_cost = kInf;              // a whole call, from kTopExpectCall
  int max_finish = kInf;             // bound on MinTokensToFinish over every state
  // Per key of `memo` whose budget was asked: the change of MinTokensToFinish per allowed token
  // and, per slack, the tokens that fit it.
  struct Deltas {
    std::vector<int> delta;  // parallel to the allowed set
    int max_delta = -kInf;
    std::unordered_map<int, std::unique_ptr<const std::vector<int32_t>>> fit;
  };
  mutable std::unordered_map<std::vector<uint32_t>, std::unique_ptr<Deltas>, KeyHash, KeyEq>
      deltas;

  // ---- construction ----
  int AddNode(VNode v) {
    vnodes.push_back(std::move(v));
    return static_cast<int>(vnodes.size()) - 1;
  }
  int AddLit(LitTrie t) {
    lits.push_back(std::move(t));
    return static_cast<int>(lits.size()) - 1;
  }
  std::vector<int> Bytes(std::string_view s) const {
    std::vector<int> out;
    for (char c : s) out.push_back(static_cast<uint8_t>(c));
    return out;
  }
  std::vector<int> LiteralSymbols(const json& v) const {
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (compact) return Bytes("\"" + EscapeCompact(s) + "\"");
      std::vector<int> out{kSymEscape};
      for (int b : Bytes(s)) out.push_back(b);
      out.push_back(kSymEscape);
      return out;
    }
    return Bytes(v.dump());
  }

  // Items an array takes at most: the schema's maxItems, else the grammar's default.
  uint32_t ArrayLimit(int64_t max_items) const {
    const int64_t n = max_items >= 0 ? max_items : opts.max_array_items;
    return static_cast<uint32_t>(std::min<int64_t>(n, kMaxArrayItemsLimit));
  }

  StatusOr<int> Compile(const Schema& s, int depth, const std::string& path) {
    if (depth > kMaxValueDepth) {
      return InvalidArgumentError(path + ": nested deeper than the parser accepts");
    }
    if (!s.enum_values.empty()) {
      LitTrie t;
      for (size_t i = 0; i < s.enum_values.size(); ++i) {
        t.Add(LiteralSymbols(s.enum_values[i]), static_cast<int>(i), 0);
      }
      VNode v;
      v.type = VNode::kLiteral;
      v.depth = depth;
      v.lit = AddLit(std::move(t));
      return AddNode(std::move(v));
    }
    if (s.type == "STRING") return str_node;
    if (s.type == "INTEGER") return int_node;
    if (s.type == "NUMBER") return num_node;
    if (s.type == "BOOLEAN") return bool_node;
    if (s.type == "ARRAY") {
      VNode v;
      v.type = VNode::kArray;
      v.depth = depth;
      v.max_items = ArrayLimit(s.max_items);
      if (depth + 1 <= kMaxValueDepth) {
        if (s.items != nullptr) {
          FG_ASSIGN_OR_RETURN(v.item, Compile(*s.items, depth + 1, path + "[]"));
        } else {
          v.item = any_node[depth + 1];
        }
      }
      return AddNode(std::move(v));
    }
    if (s.type == "OBJECT") {
      if (s.properties.empty()) return any_obj[depth];
      return CompileObject(s, depth, path, false);
    }
    return InvalidArgumentError(path + ": unsupported type \"" + s.type + "\"");
  }

  StatusOr<int> CompileObject(const Schema& s, int depth, const std::string& path, bool args) {
    VNode v;
    v.type = VNode::kObject;
    v.depth = depth;
    v.args = args;
    const int n = static_cast<int>(s.properties.size());
    v.nwords = (n + 31) / 32;
    v.required.assign(v.nwords, 0);
    LitTrie keys;
    int i = 0;
    for (const auto& [key, child] : s.properties) {
      if (compact && (key.find('=') != std::string::npos || key.find(' ') != std::string::npos)) {
        return InvalidArgumentError(path + "." + key +
                                    ": key cannot be written in the compact dialect");
      }
      std::vector<int> syms = Bytes(key);
      syms.push_back(static_cast<int>(kv_sep));
      keys.Add(syms, i, v.nwords);
      FG_ASSIGN_OR_RETURN(int child_node, Compile(child, depth + 1, path + "." + key));
      v.values.push_back(child_node);
      if (std::find(s.required.begin(), s.required.end(), key) != s.required.end()) {
        v.required[i / 32] |= 1u << (i % 32);
      }
      ++i;
    }
    v.lit = AddLit(std::move(keys));
    return AddNode(std::move(v));
  }

  Status Build(const ToolCatalog& catalog) {
    // Shared scalar nodes.
    auto scalar = [&](VNode::Type type) {
      VNode v;
      v.type = type;
      return AddNode(std::move(v));
    };
    str_node = scalar(VNode::kString);
    int_node = scalar(VNode::kInteger);
    num_node = scalar(VNode::kNumber);
    {
      LitTrie t;
      t.Add(Bytes("true"), 0, 0);
      t.Add(Bytes("false"), 1, 0);
      VNode v;
      v.type = VNode::kLiteral;
      v.lit = AddLit(std::move(t));
      bool_node = AddNode(std::move(v));
    }
    // Free values by depth (deepest first so each can name the next level).
    any_node.fill(-1);
    any_arr.fill(-1);
    any_obj.fill(-1);
    for (int d = kMaxValueDepth; d >= 1; --d) {
      VNode any;
      any.type = VNode::kAny;
      any.depth = d;
      any_node[d] = AddNode(any);
      VNode arr;
      arr.type = VNode::kArray;
      arr.depth = d;
      arr.max_items = ArrayLimit(-1);
      arr.item = d + 1 <= kMaxValueDepth ? any_node[d + 1] : -1;
      any_arr[d] = AddNode(arr);
      VNode obj;
      obj.type = VNode::kFreeObject;
      obj.depth = d;
      obj.item = d + 1 <= kMaxValueDepth ? any_node[d + 1] : -1;
      any_obj[d] = AddNode(obj);
    }
    for (const Tool& t : catalog.tools) {
      FG_ASSIGN_OR_RETURN(int node, CompileObject(t.parameters, 1, t.name, true));
      tool_args.push_back(node);
    }
    if (!compact) {
      LitTrie calls;
      for (size_t i = 0; i < catalog.tools.size(); ++i) {
        calls.Add(Bytes("call:" + catalog.tools[i].name + "{"), static_cast<int>(i), 0);
      }
      call_lit = AddLit(std::move(calls));
    }
    if (vnodes.size() >= (1u << 24)) return InvalidArgumentError("catalog too large for a grammar");
    return OkStatus();
  }

  Status BuildVocab(const Tokenizer& tok) {
    vocab_size = tok.size();
    tok_class.assign(vocab_size, kTokNever);
    auto find = [&](std::string_view text) -> int32_t {
      std::optional<int32_t> id = tok.Find(text);
      return id ? *id : -1;
    };
    std::vector<std::pair<std::string, int>> named;
    if (compact) {
      named.emplace_back("<end>", kSymEnd);
      for (size_t n = 0; n < opts.tool_map.size(); ++n) {
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
      tok_class[id] = sym;
      special.emplace_back(id, sym);
    }
    for (std::string_view text : {std::string_view("<eos>"), kEndOfTurn, kStartResponse}) {
      const int32_t id = find(text);
      if (id >= 0 && tok_class[id] == kTokNever) tok_class[id] = kTokStop;
    }
    const int32_t eos = tok.vocab().eos;
    if (eos >= 0 && eos < vocab_size && tok_class[eos] == kTokNever) tok_class[eos] = kTokStop;
    for (int32_t id = 0; id < vocab_size; ++id) {
      if (tok_class[id] == kTokStop) stops.push_back(id);
    }
    if (stops.empty()) return InvalidArgumentError("the vocabulary has no stop token");

    // Text tokens and their pieces (by id for now; kept below in sorted order only).
    std::vector<uint32_t> piece_off(vocab_size + 1, 0);
    std::string piece_buf;
    std::vector<int32_t> text_ids;
    for (int32_t id = 0; id < vocab_size; ++id) {
      piece_off[id] = static_cast<uint32_t>(piece_buf.size());
      if (tok_class[id] != kTokNever) continue;
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
      tok_class[id] = kTokText;
      max_piece = std::max(max_piece, piece_buf.size() - start);
      if (compact && piece_buf.find('"', start) != std::string::npos) quote_tokens.push_back(id);
      text_ids.push_back(id);
    }
    piece_off[vocab_size] = static_cast<uint32_t>(piece_buf.size());
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
    sorted_tok.resize(n);
    sorted_off.resize(n + 1);
    sorted_buf.reserve(piece_buf.size());
    rank.assign(vocab_size, -1);
    for (uint32_t i = 0; i < n; ++i) {
      sorted_tok[i] = entries[i].id;
      sorted_off[i] = static_cast<uint32_t>(sorted_buf.size());
      sorted_buf += piece(entries[i].id);
      rank[entries[i].id] = static_cast<int32_t>(i);
    }
    sorted_off[n] = static_cast<uint32_t>(sorted_buf.size());
    return OkStatus();
  }

  // ---- the automaton ----
  uint32_t FrameSize(uint32_t hdr) const {
    if ((hdr >> 24) == kObj) return 2 + vnodes[hdr & 0xFFFFFF].nwords;
    return 2;
  }
  void Pop(std::vector<uint32_t>& st) const { st.resize(st.size() - FrameSize(st.back())); }
  void PushValue(std::vector<uint32_t>& st, int node) const {
    const VNode& v = vnodes[node];
    const uint32_t n = static_cast<uint32_t>(node);
    switch (v.type) {
      case VNode::kString:
        st.push_back(0);
        st.push_back(Hdr(kStr, n));
        break;
      case VNode::kLiteral:
        st.push_back(0);
        st.push_back(Hdr(kLit, n));
        break;
      case VNode::kInteger:
      case VNode::kNumber:
        st.push_back(kNumStart);
        st.push_back(Hdr(kNum, n));
        break;
      case VNode::kArray:
        st.push_back(kArrOpen);
        st.push_back(Hdr(kArr, n));
        break;
      case VNode::kObject:
        st.insert(st.end(), v.nwords, 0u);
        st.push_back(kObjOpen);
        st.push_back(Hdr(kObj, n));
        break;
      case VNode::kFreeObject:
        st.push_back(kFreeOpen);
        st.push_back(Hdr(kFreeObj, n));
        break;
      case VNode::kAny:
        st.push_back(0);
        st.push_back(Hdr(kAny, n));
        break;
    }
  }
  static bool RequiredMet(const VNode& v, const uint32_t* seen) {
    for (int i = 0; i < v.nwords; ++i) {
      if ((v.required[i] & ~seen[i]) != 0) return false;
    }
    return true;
  }
  bool KeyOpen(const LitTrie::Node& n, const uint32_t* seen, int nwords) const {
    for (int i = 0; i < nwords; ++i) {
      if ((n.mask[i] & ~seen[i]) != 0) return true;
    }
    return false;
  }
  static bool IsFreeKeyChar(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  bool IsCallStart(int sym) const {
    return compact ? sym >= kSymTool0 : sym == kSymStartCall;
  }

  // Feeds one symbol; false (state garbage) when it is not allowed.
  bool Step(State& s, int sym) const {
    std::vector<uint32_t>& st = s.stack;
    while (true) {
      if (st.size() < 2) return false;
      const uint32_t h = st.back();
      const uint32_t node = h & 0xFFFFFF;
      const size_t sub_at = st.size() - 2;
      const uint32_t sub = st[sub_at];
      switch (static_cast<Kind>(h >> 24)) {
        case kTop: {
          const uint32_t phase = sub & 0xF;
          if (IsCallStart(sym)) {
            if (s.calls_done >= opts.max_calls) return false;
            if (phase == kTopExpectCall || phase == kTopAfterCall ||
                phase == kTopFree) {
              st[sub_at] = kTopAfterCall;
              if (compact) {
                const size_t n = static_cast<size_t>(sym - kSymTool0);
                if (n >= compact_tool.size()) return false;
                st.push_back(0);
                st.push_back(Hdr(kCallEnd, 0));
                PushValue(st, tool_args[compact_tool[n]]);
              } else {
                st.push_back(0);
                st.push_back(Hdr(kCallHdr, 0));
              }
              return true;
            }
            return false;
          }
          if (phase != kTopFree || sym > 255) return false;
          const uint32_t k = free_matcher.next[(sub >> 8) & 0xFF][sym];
          if (k == free_matcher.full()) return false;
          st[sub_at] = kTopFree | (k << 8);
          return true;
        }
        case kCallHdr: {
          const LitTrie& t = lits[call_lit];
          const int c = t.Child(static_cast<int>(sub), sym);
          if (c < 0) return false;
          const int tool = t.nodes[c].terminal;
          if (tool < 0) {
            st[sub_at] = static_cast<uint32_t>(c);
            return true;
          }
          st[sub_at] = 0;
          st[sub_at + 1] = Hdr(kCallEnd, 0);
          PushValue(st, tool_args[tool]);
          st[st.size() - 2] = kObjAfterOpen;  // the '{' was part of the header
          return true;
        }
        case kCallEnd:
          if (sym != (compact ? kSymEnd : kSymEndCall)) return false;
          Pop(st);
          ++s.calls_done;
          if (s.calls_done >= opts.max_calls) s.done = true;
          return true;
        case kObj: {
          const VNode& v = vnodes[node];
          const size_t seen_at = sub_at - v.nwords;
          const uint32_t phase = sub & 0xF;
          const int open = v.args && compact ? '(' : '{';
          const int close = v.args && compact ? ')' : '}';
          uint32_t tn = 0;
          switch (phase) {
            case kObjOpen:
              if (sym != open) return false;
              st[sub_at] = kObjAfterOpen;
              return true;
            case kObjAfterOpen:
              if (sym == close && RequiredMet(v, &st[seen_at])) {
                Pop(st);
                return true;
              }
              break;
            case kObjAfterComma:
              if (sym == ' ') {
                st[sub_at] = kObjKey;
                return true;
              }
              break;
            case kObjKey:
              tn = sub >> 8;
              break;
            case kObjAfterValue:
              if (sym == ',') {
                const LitTrie::Node& root = lits[v.lit].nodes[0];
                if (!KeyOpen(root, &st[seen_at], v.nwords)) return false;
                st[sub_at] = compact ? kObjAfterComma : kObjKey;
                return true;
              }
              if (sym == close && RequiredMet(v, &st[seen_at])) {
                Pop(st);
                return true;
              }
              return false;
            default:
              return false;
          }
          const LitTrie& t = lits[v.lit];
          const int c = t.Child(static_cast<int>(tn), sym);
          if (c < 0 || !KeyOpen(t.nodes[c], &st[seen_at], v.nwords)) return false;
          const int key = t.nodes[c].terminal;
          if (key < 0) {
            st[sub_at] = kObjKey | (static_cast<uint32_t>(c) << 8);
            return true;
          }
          st[seen_at + key / 32] |= 1u << (key % 32);
          st[sub_at] = kObjAfterValue;
          PushValue(st, v.values[key]);
          return true;
        }
        case kFreeObj: {
          const VNode& v = vnodes[node];
          switch (sub) {
            case kFreeOpen:
              if (sym != '{') return false;
              st[sub_at] = kFreeAfterOpen;
              return true;
            case kFreeAfterOpen:
              if (sym == '}') {
                Pop(st);
                return true;
              }
              if (v.item < 0 || !IsFreeKeyChar(sym)) return false;
              st[sub_at] = kFreeKey;
              return true;
            case kFreeKey:
              if (IsFreeKeyChar(sym)) return true;
              if (sym != static_cast<int>(kv_sep)) return false;
              st[sub_at] = kFreeAfterValue;
              PushValue(st, v.item);
              return true;
            case kFreeAfterValue:
              if (sym != '}') return false;
              Pop(st);
              return true;
            default:
              return false;
          }
        }
        case kArr: {
          const VNode& v = vnodes[node];
          const uint32_t items = sub >> 8;
          switch (sub & 0xFF) {
            case kArrOpen:
              if (sym != '[') return false;
              st[sub_at] = kArrAfterOpen;
              return true;
            case kArrAfterOpen:
              if (sym == ']') {
                Pop(st);
                return true;
              }
              if (v.item < 0 || v.max_items == 0) return false;
              st[sub_at] = kArrAfterValue | (1u << 8);
              PushValue(st, v.item);
              continue;
            case kArrAfterValue:
              if (sym == ',' && v.item >= 0 && items < v.max_items) {
                st[sub_at] = kArrAfterComma | (items << 8);
                return true;
              }
              if (sym == ']') {
                Pop(st);
                return true;
              }
              return false;
            case kArrAfterComma:
              if (compact && sym == ' ') {
                st[sub_at] = kArrItem | (items << 8);
                return true;
              }
              [[fallthrough]];
            case kArrItem:
              st[sub_at] = kArrAfterValue | ((items + 1) << 8);
              PushValue(st, v.item);
              continue;
            default:
              return false;
          }
        }
        case kStr: {
          const uint32_t u = (sub >> 4) & 0xF;
          if ((sub & 1) == 0) {
            if (sym != str_open) return false;
            st[sub_at] = 1;
            return true;
          }
          if (!compact) {
            if (sym == kSymEscape) {
              if (u != 0) return false;
              Pop(st);
              return true;
            }
            if (sym > 255) return false;
            const int nu = Utf8Step(static_cast<int>(u), static_cast<uint8_t>(sym));
            if (nu < 0) return false;
            const uint32_t k = esc_matcher.next[(sub >> 8) & 0xFF][sym];
            if (k == esc_matcher.full()) return false;
            st[sub_at] = 1 | (static_cast<uint32_t>(nu) << 4) | (k << 8);
            return true;
          }
          if (sym > 255) return false;
          if (sub & (1u << 16)) {
            if (sym != '"' && sym != '\\') return false;
            st[sub_at] = 1;
            return true;
          }
          if (u == 0 && sym == '"') {
            Pop(st);
            return true;
          }
          if (u == 0 && sym == '\\') {
            st[sub_at] = 1 | (1u << 16);
            return true;
          }
          const int nu = Utf8Step(static_cast<int>(u), static_cast<uint8_t>(sym));
          if (nu < 0) return false;
          st[sub_at] = 1 | (static_cast<uint32_t>(nu) << 4);
          return true;
        }
        case kLit: {
          const LitTrie& t = lits[vnodes[node].lit];
          const int c = t.Child(static_cast<int>(sub), sym);
          if (c >= 0) {
            st[sub_at] = static_cast<uint32_t>(c);
            return true;
          }
          if (t.nodes[sub].terminal < 0) return false;
          Pop(st);
          continue;
        }
        case kNum: {
          const bool integer = vnodes[node].type == VNode::kInteger;
          const uint32_t phase = sub & 0xFF;
          const uint32_t cnt = sub >> 8;
          const bool digit = sym >= '0' && sym <= '9';
          auto set = [&](uint32_t p, uint32_t c) { st[sub_at] = p | (c << 8); };
          switch (phase) {
            case kNumStart:
              if (sym == '-') {
                set(kNumMinus, 0);
                return true;
              }
              [[fallthrough]];
            case kNumMinus:
              if (sym == '0') {
                set(kNumZero, 0);
                return true;
              }
              if (digit) {
                set(kNumInt, 1);
                return true;
              }
              return false;
            case kNumZero:
            case kNumInt:
              if (digit && phase == kNumInt && cnt < kMaxIntDigits) {
                set(kNumInt, cnt + 1);
                return true;
              }
              if (!integer && sym == '.') {
                set(kNumDot, 0);
                return true;
              }
              if (!integer && (sym == 'e' || sym == 'E')) {
                set(kNumE, 0);
                return true;
              }
              break;
            case kNumDot:
              if (!digit) return false;
              set(kNumFrac, 1);
              return true;
            case kNumFrac:
              if (digit && cnt < kMaxFracDigits) {
                set(kNumFrac, cnt + 1);
                return true;
              }
              if (sym == 'e' || sym == 'E') {
                set(kNumE, 0);
                return true;
              }
              break;
            case kNumE:
              if (sym == '+' || sym == '-') {
                set(kNumESign, 0);
                return true;
              }
              [[fallthrough]];
            case kNumESign:
              if (!digit) return false;
              set(kNumExp, 1);
              return true;
            case kNumExp:
              if (digit && cnt < kMaxExpDigits) {
                set(kNumExp, cnt + 1);
                return true;
              }
              break;
            default:
              return false;
          }
          Pop(st);  // a complete number ends; the symbol belongs to the enclosing value
          continue;
        }
        case kAny: {
          const int d = vnodes[node].depth;
          int target;
          if (sym == str_open) {
            target = str_node;
          } else if (sym == '-' || (sym >= '0' && sym <= '9')) {
            target = num_node;
          } else if (sym == 't' || sym == 'f') {
            target = bool_node;
          } else if (sym == '[' && d < kMaxValueDepth) {
            target = any_arr[d];
          } else if (sym == '{' && d < kMaxValueDepth) {
            target = any_obj[d];
          } else {
            return false;
          }
          Pop(st);
          PushValue(st, target);
          continue;
        }
        default:
          return false;
      }
    }
  }

  bool CanStop(const State& s) const {
    if (s.done) return true;
    if (s.stack.size() != 2) return false;
    const uint32_t phase = s.stack[0] & 0xF;
    return phase == kTopAfterCall || phase == kTopFree;
  }

  // The part of the state that determines the allowed set.
  void Key(const State& s, std::vector<uint32_t>* key) const {
    key->clear();
    const std::vector<uint32_t>& st = s.stack;
    if (!compact && st.size() >= 2 && (st.back() >> 24) == kStr) {
      // Inside an official string only <escape> (atomic) leaves it: the rest of the stack
      // cannot influence which tokens are allowed.
      key->push_back(0xFFFFFFFFu);
      key->push_back(st[st.size() - 2]);
      return;
    }
    key->assign(st.begin(), st.end());
    if (st.size() == 2) key->push_back(s.calls_done < opts.max_calls ? 1 : 0);
  }

  uint32_t PieceLen(uint32_t i) const { return sorted_off[i + 1] - sorted_off[i]; }
  uint8_t PieceByte(uint32_t i, uint32_t depth) const {
    return static_cast<uint8_t>(sorted_buf[sorted_off[i] + depth]);
  }

  // The end of the run of pieces in [i, hi) whose byte at `depth` equals i's (all are longer
  // than `depth`, and sorted, so the run is a prefix of [i, hi)). Galloping, not bisecting
  // [i, hi): most runs are one or two pieces long, and a walk meets about one run per trie node.
  uint32_t RunEnd(uint32_t i, uint32_t hi, uint32_t depth) const {
    const uint8_t b = PieceByte(i, depth);
    uint32_t same = i;   // the last index known to be in the run
    uint32_t other = hi;  // the first index known to be past it
    for (uint32_t step = 1; same + step < hi; step *= 2) {
      if (PieceByte(same + step, depth) != b) {
        other = same + step;
        break;
      }
      same += step;
    }
    while (other - same > 1) {
      const uint32_t mid = same + (other - same) / 2;
      if (PieceByte(mid, depth) == b) {
        same = mid;
      } else {
        other = mid;
      }
    }
    return other;
  }

  // Marks every text token whose bytes the automaton accepts from buf[depth]. The pieces
  // [lo, hi) share their first `depth` bytes (buf[depth] is the state after them): they are a
  // node of the vocabulary's trie. Those of exactly that length sort first and end here; the
  // rest form one child per run of equal byte at `depth`, visited only if the automaton takes
  // that byte, so a state that refuses a byte never looks at the pieces that start with it.
  void Walk(uint32_t lo, uint32_t hi, uint32_t depth, std::vector<State>& buf,
            std::vector<uint64_t>& bits) const {
    uint32_t i = lo;
    for (; i < hi && PieceLen(i) == depth; ++i) {
      const int32_t id = sorted_tok[i];
      bits[id >> 6] |= 1ull << (id & 63);
    }
    while (i < hi) {
      const uint32_t end = RunEnd(i, hi, depth);
      State& ns = buf[depth + 1];
      ns.stack.assign(buf[depth].stack.begin(), buf[depth].stack.end());
      ns.calls_done = buf[depth].calls_done;
      ns.done = false;
      if (end - i == 1) {
        // One piece below: nothing branches any more, so its remaining bytes are stepped in
        // one state instead of a copy per byte.
        uint32_t d = depth;
        while (d < PieceLen(i) && Step(ns, PieceByte(i, d))) ++d;
        if (d == PieceLen(i)) bits[sorted_tok[i] >> 6] |= 1ull << (sorted_tok[i] & 63);
      } else if (Step(ns, PieceByte(i, depth))) {
        Walk(i, end, depth + 1, buf, bits);
      }
      i = end;
    }
  }
  void WalkVocab(const State& s, std::vector<uint64_t>& bits) const {
    std::vector<State> buf(max_piece + 2);
    buf[0] = s;
    Walk(0, static_cast<uint32_t>(sorted_tok.size()), 0, buf, bits);
  }

  // Compact strings end on a '"' byte, so their allowed set depends on what encloses them and
  // is memoized per context. Most of it does not: the tokens without '"' that stay inside the
  // string depend only on the string's own state. That part is computed once per string state
  // (a walk of the whole trie); a context then only walks the few tokens that contain '"'.
  const std::vector<uint64_t>& CompactStringBase(uint32_t hdr, uint32_t sub) const {
    {
      std::lock_guard<std::mutex> lock(base_mu);
      auto it = string_base.find(sub);
      if (it != string_base.end()) return *it->second;
    }
    auto bits = std::make_unique<std::vector<uint64_t>>((vocab_size + 63) / 64, 0);
    State alone;
    alone.stack = {sub, hdr};  // the string alone: a '"' empties the stack
    WalkVocab(alone, *bits);
    for (int32_t id : quote_tokens) (*bits)[id >> 6] &= ~(1ull << (id & 63));
    std::lock_guard<std::mutex> lock(base_mu);
    return *string_base.try_emplace(sub, std::move(bits)).first->second;
  }

  bool WalkPiece(State& t, int32_t id) const {
    const uint32_t i = static_cast<uint32_t>(rank[id]);
    for (uint32_t d = 0; d < PieceLen(i); ++d) {
      if (!Step(t, PieceByte(i, d))) return false;
    }
    return true;
  }

  std::vector<int32_t> Compute(const State& s) const {
    std::vector<uint64_t> bits;
    const uint32_t top = s.stack.size() >= 2 ? s.stack.back() : 0;
    if (compact && (top >> 24) == kStr && (s.stack[s.stack.size() - 2] & 1) != 0) {
      bits = CompactStringBase(top, s.stack[s.stack.size() - 2]);
      for (int32_t id : quote_tokens) {
        State t = s;
        if (WalkPiece(t, id)) bits[id >> 6] |= 1ull << (id & 63);
      }
    } else {
      bits.assign((vocab_size + 63) / 64, 0);
      WalkVocab(s, bits);
    }
    for (const auto& [id, sym] : special) {
      State t = s;
      if (Step(t, sym)) bits[id >> 6] |= 1ull << (id & 63);
    }
    if (CanStop(s)) {
      for (int32_t id : stops) bits[id >> 6] |= 1ull << (id & 63);
    }
    std::vector<int32_t> out;
    for (size_t w = 0; w < bits.size(); ++w) {
      uint64_t b = bits[w];
      while (b) {
        out.push_back(static_cast<int32_t>(w * 64 + std::countr_zero(b)));
        b &= b - 1;
      }
    }
    return out;
  }

  // ---- the budget: the fewest tokens that complete the output ----
  //
  // A frame's rest is exact within each literal it still has to write (a key with its
  // separator, an enum member, a tool's header: the fewest text tokens whose pieces spell it,
  // atomic tokens one each) and takes the shortest value for each value it still needs;
  // MinTokensToFinish adds the rests of the stack's frames. A token spanning two frames ("}}")
  // may finish sooner, so the sum is an upper bound, but one always reached: from a state with
  // a finite sum, the first token of its plan is allowed and lowers the sum by one.

  std::string_view SortedPiece(uint32_t i) const {
    return std::string_view(sorted_buf).substr(sorted_off[i], PieceLen(i));
  }
  // Whether some text token's piece is exactly `w` (the pieces are sorted bytewise).
  bool IsPiece(std::string_view w) const {
    uint32_t lo = 0, hi = static_cast<uint32_t>(sorted_tok.size());
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (SortedPiece(mid) < w) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo < sorted_tok.size() && SortedPiece(lo) == w;
  }
  // c[k]: the fewest tokens that spell syms[k..] (kInf when no tokens do).
  std::vector<int> SuffixCosts(const std::vector<int>& syms) const {
    const size_t n = syms.size();
    std::vector<int> c(n + 1, kInf);
    c[n] = 0;
    std::string w;
    for (size_t i = n; i-- > 0;) {
      if (syms[i] > 255) {  // an atomic token (every special symbol has one)
        c[i] = Sat(int64_t{1} + c[i + 1]);
        continue;
      }
      w.clear();
      for (size_t j = i; j < n && syms[j] <= 255 && w.size() < max_piece; ++j) {
        w += static_cast<char>(syms[j]);
        if (IsPiece(w)) c[i] = std::min(c[i], Sat(int64_t{1} + c[j + 1]));
      }
    }
    return c;
  }
  int Cost(const std::vector<int>& syms) const { return SuffixCosts(syms)[0]; }

  // Fills t.suffix and every node's rest: the fewest tokens to the end of a member below it
  // plus extra[member].
  void CostTrie(LitTrie& t, const std::vector<int>& extra) const {
    for (LitTrie::Node& n : t.nodes) n.rest = kInf;
    t.suffix.assign(t.members.size(), {});
    for (size_t i = 0; i < t.members.size(); ++i) {
      if (t.paths[i].empty()) continue;
      t.suffix[i] = SuffixCosts(t.members[i]);
      for (size_t k = 0; k < t.paths[i].size(); ++k) {
        int& r = t.nodes[t.paths[i][k]].rest;
        r = std::min(r, Sat(int64_t{t.suffix[i][k]} + extra[i]));
      }
    }
  }

  static bool Bit(const std::vector<uint32_t>& words, int i) {
    return (words[i / 32] >> (i % 32)) & 1;
  }
  static bool Bit(const uint32_t* words, int i) { return (words[i / 32] >> (i % 32)) & 1; }
  int ObjClose(const VNode& v) const {
    const int close = v.args && compact ? ')' : '}';
    return byte_cost[close];
  }
  int ObjOpen(const VNode& v) const {
    if (v.args && !compact) return 0;  // the '{' ends the call's header
    const int open = v.args ? '(' : '{';
    return byte_cost[open];
  }
  // The required keys not in `seen` (nullptr: none seen) other than `also`, each with its
  // shortest value and a comma (one fewer right after the opening), then the close.
  int Tail(const VNode& v, const uint32_t* seen, int also, bool after_value) const {
    int64_t sum = 0;
    int64_t count = 0;
    for (int i = 0; i < static_cast<int>(v.values.size()); ++i) {
      if (!Bit(v.required, i) || i == also || (seen != nullptr && Bit(seen, i))) continue;
      sum += v.keyval[i];
      ++count;
    }
    if (count == 0) return ObjClose(v);
    return Sat(sum + (after_value ? count : count - 1) * byte_cost[','] + ObjClose(v));
  }
  // Inside a key (trie node tn; 0 right after a comma): the rest of the best unseen key through
  // tn, its shortest value, then what the object still needs.
  int KeyRest(const VNode& v, const uint32_t* seen, int tn) const {
    const LitTrie& keys = lits[v.lit];
    const int depth = keys.nodes[tn].depth;
    int best = kInf;
    for (int i = 0; i < static_cast<int>(v.values.size()); ++i) {
      if (Bit(seen, i) || !keys.Through(i, tn)) continue;
      best = std::min(best, Sat(int64_t{keys.suffix[i][depth]} + vcost[v.values[i]] +
                                Tail(v, seen, i, /*after_value=*/true)));
    }
    return best;
  }
  int StrRest(uint32_t sub) const {
    if ((sub & 1) == 0) return empty_str;
    if (compact && (sub & (1u << 16)) != 0) return str_backslash;
    return str_rest[(sub >> 4) & 7];
  }

  // The rest of the frame ending at st[end - 1] (its header).
  int FrameRest(const std::vector<uint32_t>& st, size_t end) const {
    const uint32_t h = st[end - 1];
    const uint32_t node = h & 0xFFFFFF;
    const uint32_t sub = st[end - 2];
    switch (static_cast<Kind>(h >> 24)) {
      case kTop:
        return (sub & 0xF) == kTopExpectCall ? call_cost : 0;
      case kCallHdr:
        return lits[call_lit].nodes[sub].rest;
      case kCallEnd:
        return 1;
      case kObj: {
        const VNode& v = vnodes[node];
        const uint32_t* seen = &st[end - 2 - v.nwords];
        switch (sub & 0xF) {
          case kObjOpen:
            return Sat(int64_t{ObjOpen(v)} + Tail(v, seen, -1, false));
          case kObjAfterOpen:
            return Tail(v, seen, -1, false);
          case kObjAfterValue:
            return Tail(v, seen, -1, true);
          case kObjAfterComma:
            return KeyRest(v, seen, 0);
          case kObjKey:
            return KeyRest(v, seen, static_cast<int>(sub >> 8));
          default:
            return kInf;
        }
      }
      case kFreeObj: {
        const VNode& v = vnodes[node];
        if (sub == kFreeOpen) return empty_obj;
        if (sub == kFreeKey) {
          return Sat(int64_t{byte_cost[kv_sep]} + vcost[v.item] + byte_cost['}']);
        }
        return byte_cost['}'];
      }
      case kArr: {
        const VNode& v = vnodes[node];
        switch (sub & 0xFF) {
          case kArrOpen:
            return empty_arr;
          case kArrAfterComma:
          case kArrItem:
            return Sat(int64_t{vcost[v.item]} + byte_cost[']']);
          default:
            return byte_cost[']'];
        }
      }
      case kStr:
        return StrRest(sub);
      case kLit:
        return lits[vnodes[node].lit].nodes[sub].rest;
      case kNum: {
        const uint32_t phase = sub & 0xFF;
        const bool digit_needed = phase == kNumStart || phase == kNumMinus || phase == kNumDot ||
                                  phase == kNumE || phase == kNumESign;
        return digit_needed ? num_cost : 0;
      }
      case kAny:
        return vcost[node];
    }
    return kInf;
  }

  int Finish(const State& s) const {
    if (s.done) return 0;
    int64_t total = 0;
    for (size_t end = s.stack.size(); end >= 2; end -= FrameSize(s.stack[end - 1])) {
      total += FrameRest(s.stack, end);
    }
    return Sat(total);
  }

  // One token on a copy of the state; false when it is not allowed (stop tokens aside).
  bool StepToken(State& t, int32_t id) const {
    const int32_t cls = tok_class[id];
    return cls >= 256 ? Step(t, cls) : cls == kTokText && WalkPiece(t, id);
  }
  int FinishAfter(const State& s, int32_t id) const {
    if (tok_class[id] == kTokStop) return CanStop(s) ? 0 : kInf;
    State t = s;
    return StepToken(t, id) ? Finish(t) : kInf;
  }

  // The shortest complete value of a node, fresh (memoized in vcost; -1 not yet).
  int VCost(int node) {
    if (vcost[node] >= 0) return vcost[node];
    VNode& v = vnodes[node];
    int c = kInf;
    switch (v.type) {
      case VNode::kString:
        c = empty_str;
        break;
      case VNode::kLiteral:
        c = lits[v.lit].nodes[0].rest;
        break;
      case VNode::kInteger:
      case VNode::kNumber:
        c = num_cost;
        break;
      case VNode::kArray:
        c = empty_arr;
        break;
      case VNode::kFreeObject:
        c = empty_obj;
        break;
      case VNode::kAny:
        c = std::min({empty_str, num_cost, VCost(bool_node)});
        if (v.depth < kMaxValueDepth) {
          c = std::min({c, VCost(any_arr[v.depth]), VCost(any_obj[v.depth])});
        }
        break;
      case VNode::kObject: {
        const LitTrie& keys = lits[v.lit];
        std::vector<int> keyval(v.values.size());
        for (size_t i = 0; i < v.values.size(); ++i) {
          keyval[i] = Sat(int64_t{keys.suffix[i][0]} + VCost(v.values[i]));
        }
        vnodes[node].keyval = std::move(keyval);
        c = Sat(int64_t{ObjOpen(vnodes[node])} + Tail(vnodes[node], nullptr, -1, false));
        break;
      }
    }
    vcost[node] = c;
    return c;
  }

  // A bound on the rests of a node's frame and of every frame that can be above it.
  int MaxD(int node) {
    if (maxd[node] >= 0) return maxd[node];
    const VNode& v = vnodes[node];
    int64_t m = vcost[node];
    auto child = [&](int n) { return n >= 0 ? int64_t{MaxD(n)} : 0; };
    switch (v.type) {
      case VNode::kString:
        for (int r : str_rest) m = std::max<int64_t>(m, r);
        if (compact) m = std::max<int64_t>(m, str_backslash);
        break;
      case VNode::kLiteral:
        for (const LitTrie::Node& n : lits[v.lit].nodes) m = std::max<int64_t>(m, n.rest);
        break;
      case VNode::kInteger:
      case VNode::kNumber:
        break;
      case VNode::kArray:
        if (v.item >= 0) {
          m = std::max<int64_t>(m, int64_t{vcost[v.item]} + byte_cost[']']) + child(v.item);
        }
        break;
      case VNode::kFreeObject:
        if (v.item >= 0) {
          m = std::max<int64_t>(m, int64_t{byte_cost[kv_sep]} + vcost[v.item] + byte_cost['}']) +
              child(v.item);
        }
        break;
      case VNode::kAny:
        for (int n : {str_node, num_node, bool_node}) m = std::max(m, child(n));
        if (v.depth < kMaxValueDepth) {
          m = std::max({m, child(any_arr[v.depth]), child(any_obj[v.depth])});
        }
        break;
      case VNode::kObject: {
        const LitTrie& keys = lits[v.lit];
        int64_t req = 0, nreq = 0, key = 0, below = 0;
        for (size_t i = 0; i < v.values.size(); ++i) {
          if (Bit(v.required, static_cast<int>(i))) {
            req += v.keyval[i];
            ++nreq;
          }
          const int worst = *std::max_element(keys.suffix[i].begin(), keys.suffix[i].end());
          key = std::max(key, int64_t{worst} + vcost[v.values[i]]);
          below = std::max(below, child(v.values[i]));
        }
        m = int64_t{ObjOpen(v)} + ObjClose(v) + (nreq + 1) * byte_cost[','] + req + key + below;
        break;
      }
    }
    maxd[node] = Sat(m);
    return maxd[node];
  }

  void BuildCosts() {
    for (int b = 0; b < 256; ++b) {
      byte_cost[b] = IsPiece(std::string(1, static_cast<char>(b))) ? 1 : kInf;
    }
    num_cost = *std::min_element(byte_cost + '0', byte_cost + '9' + 1);
    empty_arr = Cost(Bytes("[]"));
    empty_obj = Cost(Bytes("{}"));
    const int close = compact ? '"' : kSymEscape;
    empty_str = Cost({str_open, close});
    // Continuation bytes a UTF-8 state still needs (Utf8Step's states), then the close.
    static const std::vector<int> kPending[8] = {{},
                                                  {0x80},
                                                  {0x80, 0x80},
                                                  {0x80, 0x80, 0x80},
                                                  {0xA0, 0x80},
                                                  {0x80, 0x80},
                                                  {0x90, 0x80, 0x80},
                                                  {0x80, 0x80, 0x80}};
    for (int u = 0; u < 8; ++u) {
      std::vector<int> syms = kPending[u];
      syms.push_back(close);
      str_rest[u] = Cost(syms);
    }
    str_backslash = std::min(Cost(Bytes("\"\"")), Cost(Bytes("\\\"")));
    for (LitTrie& t : lits) CostTrie(t, std::vector<int>(t.members.size(), 0));
    vcost.assign(vnodes.size(), -1);
    for (size_t n = 0; n < vnodes.size(); ++n) VCost(static_cast<int>(n));
    maxd.assign(vnodes.size(), -1);
    int64_t args_max = 0;
    for (int n : tool_args) args_max = std::max<int64_t>(args_max, MaxD(n));
    int64_t hdr_max = 0;
    if (compact) {
      call_cost = kInf;
      for (int tool : compact_tool) {
        call_cost = std::min(call_cost, Sat(int64_t{2} + vcost[tool_args[tool]]));
      }
    } else {
      // A tool's header node: the rest of its header, its required arguments, '}', the end.
      LitTrie& calls = lits[call_lit];
      std::vector<int> extra(calls.members.size());
      for (size_t i = 0; i < extra.size(); ++i) {
        extra[i] = Sat(int64_t{Tail(vnodes[tool_args[i]], nullptr, -1, false)} + 1);
      }
      CostTrie(calls, extra);
      call_cost = Sat(int64_t{1} + calls.nodes[0].rest);
      for (const LitTrie::Node& n : calls.nodes) hdr_max = std::max<int64_t>(hdr_max, n.rest);
    }
    max_finish = Sat(std::max({int64_t{call_cost}, hdr_max, 1 + args_max}));
  }
};

CallGrammar::CallGrammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CallGrammar::~CallGrammar() = default;

StatusOr<std::unique_ptr<CallGrammar>> CallGrammar::Create(const ToolCatalog& catalog,
                                                           const Tokenizer& tokenizer,
                                                           const GrammarOptions& options) {
  if (options.mode == ConstrainMode::kOff) {
    return InvalidArgumentError("grammar: mode off has no grammar");
  }
  if (options.max_calls < 1) return InvalidArgumentError("grammar: max_calls must be >= 1");
  if (options.max_array_items < 0) {
    return InvalidArgumentError("grammar: max_array_items must be >= 0");
  }
  if (catalog.tools.empty()) return InvalidArgumentError("grammar: the catalog has no tools");
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  impl->compact = options.dialect == Dialect::kCompact;
  impl->kv_sep = impl->compact ? '=' : ':';
  impl->str_open = impl->compact ? '"' : kSymEscape;
  if (impl->compact) {
    if (options.tool_map.empty()) {
      return InvalidArgumentError("grammar: the compact dialect needs a tool map");
    }
    for (size_t n = 0; n < options.tool_map.size(); ++n) {
      const std::string& name = options.tool_map[n];
      const Tool* tool = catalog.Find(name);
      if (tool == nullptr) {
        return InvalidArgumentError("grammar: tool map entry " + std::to_string(n) + " (\"" +
                                    name + "\") is not in the catalog");
      }
      impl->compact_tool.push_back(static_cast<int>(tool - catalog.tools.data()));
    }
    impl->free_matcher.Build("<tool_");
  } else {
    impl->free_matcher.Build(std::string(kStartCall));
  }
  impl->esc_matcher.Build(std::string(kEscape));
  FG_RETURN_IF_ERROR(impl->Build(catalog));
  FG_RETURN_IF_ERROR(impl->BuildVocab(tokenizer));
  impl->BuildCosts();
  return std::unique_ptr<CallGrammar>(new CallGrammar(std::move(impl)));
}

CallGrammar::State CallGrammar::Start() const {
  State s;
  s.stack = {impl_->opts.mode == ConstrainMode::kAuto ? kTopFree : kTopExpectCall,
             Hdr(kTop, 0)};
  return s;
}

std::span<const int32_t> CallGrammar::Allowed(const State& s) const {
  if (s.done) return {};
  thread_local std::vector<uint32_t> key;
  impl_->Key(s, &key);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->memo.find(std::span<const uint32_t>(key));
    if (it != impl_->memo.end()) return *it->second;
  }
  auto set = std::make_unique<const std::vector<int32_t>>(impl_->Compute(s));
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto [it, inserted] = impl_->memo.try_emplace(key, std::move(set));
  return *it->second;
}

Status CallGrammar::Advance(State* s, int32_t token) const {
  const Impl& g = *impl_;
  if (s->done) return InvalidArgumentError("grammar: the output is complete");
  if (token < 0 || token >= g.vocab_size) {
    return InvalidArgumentError("grammar: token " + std::to_string(token) + " out of range");
  }
  const int32_t cls = g.tok_class[token];
  if (cls == kTokStop) {
    if (!g.CanStop(*s)) {
      return InvalidArgumentError("grammar: stop token " + std::to_string(token) +
                                  " before the output is complete");
    }
    s->done = true;
    return OkStatus();
  }
  if (cls == kTokNever) {
    return InvalidArgumentError("grammar: token " + std::to_string(token) + " is never allowed");
  }
  State t = *s;
  if (!g.StepToken(t, token)) {
    return InvalidArgumentError("grammar: token " + std::to_string(token) + " not allowed here");
  }
  *s = std::move(t);
  return OkStatus();
}

std::span<const int32_t> CallGrammar::Allowed(const State& s, int64_t budget) const {
  const std::span<const int32_t> all = Allowed(s);
  const Impl& g = *impl_;
  if (all.empty() || budget < 1 || budget - 1 >= g.max_finish) return all;
  const int need = g.Finish(s);
  if (need > budget) return all;  // no completion fits: nothing to keep within reach
  const int slack = static_cast<int>(budget - 1 - need);
  // The deltas depend on the same part of the state as the allowed set (inside an official
  // string, only <escape> leaves it, and it leaves the enclosing frames as they were).
  thread_local std::vector<uint32_t> key;
  g.Key(s, &key);
  Impl::Deltas* d = nullptr;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.deltas.find(std::span<const uint32_t>(key));
    if (it != g.deltas.end()) d = it->second.get();
  }
  if (d == nullptr) {
    auto nd = std::make_unique<Impl::Deltas>();
    nd->delta.reserve(all.size());
    for (int32_t id : all) {
      const int64_t delta = int64_t{g.FinishAfter(s, id)} - need;
      nd->delta.push_back(static_cast<int>(std::min<int64_t>(delta, kInf)));
      nd->max_delta = std::max(nd->max_delta, nd->delta.back());
    }
    std::lock_guard<std::mutex> lock(g.mu);
    d = g.deltas.try_emplace(key, std::move(nd)).first->second.get();
  }
  if (slack >= d->max_delta) return all;
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = d->fit.find(slack);
  if (it == d->fit.end()) {
    auto fit = std::make_unique<std::vector<int32_t>>();
    for (size_t j = 0; j < all.size(); ++j) {
      if (d->delta[j] <= slack) fit->push_back(all[j]);
    }
    it = d->fit.try_emplace(slack, std::move(fit)).first;
  }
  return *it->second;
}

int CallGrammar::MinTokensToFinish(const State& s) const { return impl_->Finish(s); }

bool CallGrammar::CanStop(const State& s) const { return impl_->CanStop(s); }

bool CallGrammar::InFreeString(const State& s) const {
  if (impl_->compact || s.done || s.stack.size() < 2 || (s.stack.back() >> 24) != kStr) {
    return false;
  }
  const uint32_t sub = s.stack[s.stack.size() - 2];
  return (sub & 1) != 0 && ((sub >> 4) & 0xF) == 0;  // in the body, no UTF-8 sequence open
}

size_t CallGrammar::memoized_states() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->memo.size();
}

}  // namespace fg::text

namespace fg {

StatusOr<Dialect> ParseDialect(std::string_view name) {
  if (name == "official") return Dialect::kOfficial;
  if (name == "compact") return Dialect::kCompact;
  return InvalidArgumentError("unknown dialect \"" + std::string(name) +
                              "\" (expected official or compact)");
}

StatusOr<ConstrainMode> ParseConstrainMode(std::string_view name) {
  if (name == "off") return ConstrainMode::kOff;
  if (name == "call") return ConstrainMode::kCall;
  if (name == "auto") return ConstrainMode::kAuto;
  return InvalidArgumentError("unknown constrain mode \"" + std::string(name) +
                              "\" (expected off, call or auto)");
}

}  // namespace fg
