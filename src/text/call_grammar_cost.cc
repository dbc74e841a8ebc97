#include "src/text/call_grammar_cost.h"

#include <string>

namespace fg::text::grammar {
namespace {

bool Bit(const std::vector<uint32_t>& words, int i) { return (words[i / 32] >> (i % 32)) & 1; }
bool Bit(const uint32_t* words, int i) { return (words[i / 32] >> (i % 32)) & 1; }

}  // namespace

Costs::Costs(const CompiledSchema& schema, const VocabIndex& vocab, const Machine& machine)
    : g_(schema), vocab_(vocab), machine_(machine) {
  Build();
}

// c[k]: the fewest tokens that spell syms[k..] (kInf when no tokens do).
std::vector<int> Costs::SuffixCosts(const std::vector<int>& syms) const {
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
    for (size_t j = i; j < n && syms[j] <= 255 && w.size() < vocab_.max_piece(); ++j) {
      w += static_cast<char>(syms[j]);
      if (vocab_.IsPiece(w)) c[i] = std::min(c[i], Sat(int64_t{1} + c[j + 1]));
    }
  }
  return c;
}

// Fills trie_[lit]: per member its suffix costs, per node the fewest tokens to the end of a
// member below it plus extra[member].
void Costs::CostTrie(int lit, const std::vector<int>& extra) {
  const LitTrie& t = g_.lits[lit];
  TrieCosts& c = trie_[lit];
  c.rest.assign(t.nodes.size(), kInf);
  c.suffix.assign(t.members.size(), {});
  for (size_t i = 0; i < t.members.size(); ++i) {
    if (t.paths[i].empty()) continue;
    c.suffix[i] = SuffixCosts(t.members[i]);
    for (size_t k = 0; k < t.paths[i].size(); ++k) {
      int& r = c.rest[t.paths[i][k]];
      r = std::min(r, Sat(int64_t{c.suffix[i][k]} + extra[i]));
    }
  }
}

int Costs::ObjClose(const VNode& v) const {
  const int close = v.args && g_.compact ? ')' : '}';
  return byte_cost_[close];
}

int Costs::ObjOpen(const VNode& v) const {
  if (v.args && !g_.compact) return 0;  // the '{' ends the call's header
  const int open = v.args ? '(' : '{';
  return byte_cost_[open];
}

// The required keys of object `node` not in `seen` (nullptr: none seen) other than `also`, each
// with its shortest value and a comma (one fewer right after the opening), then the close.
int Costs::Tail(int node, const uint32_t* seen, int also, bool after_value) const {
  const VNode& v = g_.vnodes[node];
  const std::vector<int>& keyval = keyval_[node];
  int64_t sum = 0;
  int64_t count = 0;
  for (int i = 0; i < static_cast<int>(v.values.size()); ++i) {
    if (!Bit(v.required, i) || i == also || (seen != nullptr && Bit(seen, i))) continue;
    sum += keyval[i];
    ++count;
  }
  if (count == 0) return ObjClose(v);
  return Sat(sum + (after_value ? count : count - 1) * byte_cost_[','] + ObjClose(v));
}

// Inside a key (trie node tn; 0 right after a comma): the rest of the best unseen key through
// tn, its shortest value, then what the object still needs.
int Costs::KeyRest(int node, const uint32_t* seen, int tn) const {
  const VNode& v = g_.vnodes[node];
  const LitTrie& keys = g_.lits[v.lit];
  const std::vector<std::vector<int>>& suffix = trie_[v.lit].suffix;
  const int depth = keys.nodes[tn].depth;
  int best = kInf;
  for (int i = 0; i < static_cast<int>(v.values.size()); ++i) {
    if (Bit(seen, i) || !keys.Through(i, tn)) continue;
    best = std::min(best, Sat(int64_t{suffix[i][depth]} + vcost_[v.values[i]] +
                              Tail(node, seen, i, /*after_value=*/true)));
  }
  return best;
}

int Costs::StrRest(uint32_t sub) const {
  if ((sub & 1) == 0) return empty_str_;
  if (g_.compact && (sub & (1u << 16)) != 0) return str_backslash_;
  return str_rest_[(sub >> 4) & 7];
}

// The rest of the frame ending at st[end - 1] (its header).
int Costs::FrameRest(const std::vector<uint32_t>& st, size_t end) const {
  const uint32_t h = st[end - 1];
  const uint32_t node = h & 0xFFFFFF;
  const uint32_t sub = st[end - 2];
  switch (static_cast<Kind>(h >> 24)) {
    case kTop:
      return (sub & 0xF) == kTopExpectCall ? call_cost_ : 0;
    case kCallHdr:
      return trie_[g_.call_lit].rest[sub];
    case kCallEnd:
      return 1;
    case kObj: {
      const VNode& v = g_.vnodes[node];
      const int n = static_cast<int>(node);
      const uint32_t* seen = &st[end - 2 - v.nwords];
      switch (sub & 0xF) {
        case kObjOpen:
          return Sat(int64_t{ObjOpen(v)} + Tail(n, seen, -1, false));
        case kObjAfterOpen:
          return Tail(n, seen, -1, false);
        case kObjAfterValue:
          return Tail(n, seen, -1, true);
        case kObjAfterComma:
          return KeyRest(n, seen, 0);
        case kObjKey:
          return KeyRest(n, seen, static_cast<int>(sub >> 8));
        default:
          return kInf;
      }
    }
    case kFreeObj: {
      const VNode& v = g_.vnodes[node];
      if (sub == kFreeOpen) return empty_obj_;
      if (sub == kFreeKey) {
        return Sat(int64_t{byte_cost_[g_.kv_sep]} + vcost_[v.item] + byte_cost_['}']);
      }
      return byte_cost_['}'];
    }
    case kArr: {
      const VNode& v = g_.vnodes[node];
      switch (sub & 0xFF) {
        case kArrOpen:
          return empty_arr_;
        case kArrAfterComma:
        case kArrItem:
          return Sat(int64_t{vcost_[v.item]} + byte_cost_[']']);
        default:
          return byte_cost_[']'];
      }
    }
    case kStr:
      return StrRest(sub);
    case kLit:
      return trie_[g_.vnodes[node].lit].rest[sub];
    case kNum: {
      const uint32_t phase = sub & 0xFF;
      const bool digit_needed = phase == kNumStart || phase == kNumMinus || phase == kNumDot ||
                                phase == kNumE || phase == kNumESign;
      return digit_needed ? num_cost_ : 0;
    }
    case kAny:
      return vcost_[node];
  }
  return kInf;
}

int Costs::Finish(const State& s) const {
  if (s.done) return 0;
  int64_t total = 0;
  for (size_t end = s.stack.size(); end >= 2; end -= machine_.FrameSize(s.stack[end - 1])) {
    total += FrameRest(s.stack, end);
  }
  return Sat(total);
}

// The shortest complete value of a node, fresh (memoized in vcost_; -1 not yet).
int Costs::VCost(int node) {
  if (vcost_[node] >= 0) return vcost_[node];
  const VNode& v = g_.vnodes[node];
  int c = kInf;
  switch (v.type) {
    case VNode::kString:
      c = empty_str_;
      break;
    case VNode::kLiteral:
      c = trie_[v.lit].rest[0];
      break;
    case VNode::kInteger:
    case VNode::kNumber:
      c = num_cost_;
      break;
    case VNode::kArray:
      c = empty_arr_;
      break;
    case VNode::kFreeObject:
      c = empty_obj_;
      break;
    case VNode::kAny:
      c = std::min({empty_str_, num_cost_, VCost(g_.bool_node)});
      if (v.depth < kMaxValueDepth) {
        c = std::min({c, VCost(g_.any_arr[v.depth]), VCost(g_.any_obj[v.depth])});
      }
      break;
    case VNode::kObject: {
      const std::vector<std::vector<int>>& suffix = trie_[v.lit].suffix;
      std::vector<int> keyval(v.values.size());
      for (size_t i = 0; i < v.values.size(); ++i) {
        keyval[i] = Sat(int64_t{suffix[i][0]} + VCost(v.values[i]));
      }
      keyval_[node] = std::move(keyval);
      c = Sat(int64_t{ObjOpen(v)} + Tail(node, nullptr, -1, false));
      break;
    }
  }
  vcost_[node] = c;
  return c;
}

// A bound on the rests of a node's frame and of every frame that can be above it.
int Costs::MaxD(int node) {
  if (maxd_[node] >= 0) return maxd_[node];
  const VNode& v = g_.vnodes[node];
  int64_t m = vcost_[node];
  auto child = [&](int n) { return n >= 0 ? int64_t{MaxD(n)} : 0; };
  switch (v.type) {
    case VNode::kString:
      for (int r : str_rest_) m = std::max<int64_t>(m, r);
      if (g_.compact) m = std::max<int64_t>(m, str_backslash_);
      break;
    case VNode::kLiteral:
      for (int r : trie_[v.lit].rest) m = std::max<int64_t>(m, r);
      break;
    case VNode::kInteger:
    case VNode::kNumber:
      break;
    case VNode::kArray:
      if (v.item >= 0) {
        m = std::max<int64_t>(m, int64_t{vcost_[v.item]} + byte_cost_[']']) + child(v.item);
      }
      break;
    case VNode::kFreeObject:
      if (v.item >= 0) {
        m = std::max<int64_t>(
                m, int64_t{byte_cost_[g_.kv_sep]} + vcost_[v.item] + byte_cost_['}']) +
            child(v.item);
      }
      break;
    case VNode::kAny:
      for (int n : {g_.str_node, g_.num_node, g_.bool_node}) m = std::max(m, child(n));
      if (v.depth < kMaxValueDepth) {
        m = std::max({m, child(g_.any_arr[v.depth]), child(g_.any_obj[v.depth])});
      }
      break;
    case VNode::kObject: {
      const std::vector<std::vector<int>>& suffix = trie_[v.lit].suffix;
      int64_t req = 0, nreq = 0, key = 0, below = 0;
      for (size_t i = 0; i < v.values.size(); ++i) {
        if (Bit(v.required, static_cast<int>(i))) {
          req += keyval_[node][i];
          ++nreq;
        }
        const int worst = *std::max_element(suffix[i].begin(), suffix[i].end());
        key = std::max(key, int64_t{worst} + vcost_[v.values[i]]);
        below = std::max(below, child(v.values[i]));
      }
      m = int64_t{ObjOpen(v)} + ObjClose(v) + (nreq + 1) * byte_cost_[','] + req + key + below;
      break;
    }
  }
  maxd_[node] = Sat(m);
  return maxd_[node];
}

void Costs::Build() {
  for (int b = 0; b < 256; ++b) {
    byte_cost_[b] = vocab_.IsPiece(std::string(1, static_cast<char>(b))) ? 1 : kInf;
  }
  num_cost_ = *std::min_element(byte_cost_ + '0', byte_cost_ + '9' + 1);
  empty_arr_ = Cost(Bytes("[]"));
  empty_obj_ = Cost(Bytes("{}"));
  const int close = g_.compact ? '"' : kSymEscape;
  empty_str_ = Cost({g_.str_open, close});
  // Continuation bytes a UTF-8 state still needs (the machine's Utf8Step states), then the
  // close.
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
    str_rest_[u] = Cost(syms);
  }
  str_backslash_ = std::min(Cost(Bytes("\"\"")), Cost(Bytes("\\\"")));
  trie_.resize(g_.lits.size());
  for (size_t l = 0; l < g_.lits.size(); ++l) {
    CostTrie(static_cast<int>(l), std::vector<int>(g_.lits[l].members.size(), 0));
  }
  vcost_.assign(g_.vnodes.size(), -1);
  keyval_.assign(g_.vnodes.size(), {});
  for (size_t n = 0; n < g_.vnodes.size(); ++n) VCost(static_cast<int>(n));
  maxd_.assign(g_.vnodes.size(), -1);
  int64_t args_max = 0;
  for (int n : g_.tool_args) args_max = std::max<int64_t>(args_max, MaxD(n));
  int64_t hdr_max = 0;
  if (g_.compact) {
    call_cost_ = kInf;
    for (int tool : g_.compact_tool) {
      call_cost_ = std::min(call_cost_, Sat(int64_t{2} + vcost_[g_.tool_args[tool]]));
    }
  } else {
    // A tool's header node: the rest of its header, its required arguments, '}', the end.
    const LitTrie& calls = g_.lits[g_.call_lit];
    std::vector<int> extra(calls.members.size());
    for (size_t i = 0; i < extra.size(); ++i) {
      extra[i] = Sat(int64_t{Tail(g_.tool_args[i], nullptr, -1, false)} + 1);
    }
    CostTrie(g_.call_lit, extra);
    call_cost_ = Sat(int64_t{1} + trie_[g_.call_lit].rest[0]);
    for (int r : trie_[g_.call_lit].rest) hdr_max = std::max<int64_t>(hdr_max, r);
  }
  max_finish_ = Sat(std::max({int64_t{call_cost_}, hdr_max, 1 + args_max}));
}

}  // namespace fg::text::grammar
