#include "src/text/call_grammar_machine.h"

#include <algorithm>
#include <utility>

#include "src/text/function_prompt.h"

namespace fg::text::grammar {
namespace {

constexpr uint32_t kMaxIntDigits = 18;   // fits int64 (the parser's INTEGER reading)
constexpr uint32_t kMaxFracDigits = 18;
constexpr uint32_t kMaxExpDigits = 2;    // with <= 18 integer digits the value stays finite

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

bool RequiredMet(const VNode& v, const uint32_t* seen) {
  for (int i = 0; i < v.nwords; ++i) {
    if ((v.required[i] & ~seen[i]) != 0) return false;
  }
  return true;
}

bool KeyOpen(const LitTrie::Node& n, const uint32_t* seen, int nwords) {
  for (int i = 0; i < nwords; ++i) {
    if ((n.mask[i] & ~seen[i]) != 0) return true;
  }
  return false;
}

bool IsFreeKeyChar(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

void Matcher::Build(std::string p) {
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

Machine::Machine(const CompiledSchema& schema) : g_(schema) {
  free_matcher_.Build(g_.compact ? std::string("<tool_") : std::string(kStartCall));
  esc_matcher_.Build(std::string(kEscape));
}

State Machine::Start() const {
  State s;
  s.stack = {g_.opts.mode == ConstrainMode::kAuto ? kTopFree : kTopExpectCall, Hdr(kTop, 0)};
  return s;
}

void Machine::PushValue(std::vector<uint32_t>& st, int node) const {
  const VNode& v = g_.vnodes[node];
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

bool Machine::Step(State& s, int sym) const {
  const CompiledSchema& g = g_;
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
          if (s.calls_done >= g.opts.max_calls) return false;
          if (phase == kTopExpectCall || phase == kTopAfterCall ||
              phase == kTopFree) {
            st[sub_at] = kTopAfterCall;
            if (g.compact) {
              const size_t n = static_cast<size_t>(sym - kSymTool0);
              if (n >= g.compact_tool.size()) return false;
              st.push_back(0);
              st.push_back(Hdr(kCallEnd, 0));
              PushValue(st, g.tool_args[g.compact_tool[n]]);
            } else {
              st.push_back(0);
              st.push_back(Hdr(kCallHdr, 0));
            }
            return true;
          }
          return false;
        }
        if (phase != kTopFree || sym > 255) return false;
        const uint32_t k = free_matcher_.next[(sub >> 8) & 0xFF][sym];
        if (k == free_matcher_.full()) return false;
        st[sub_at] = kTopFree | (k << 8);
        return true;
      }
      case kCallHdr: {
        const LitTrie& t = g.lits[g.call_lit];
        const int c = t.Child(static_cast<int>(sub), sym);
        if (c < 0) return false;
        const int tool = t.nodes[c].terminal;
        if (tool < 0) {
          st[sub_at] = static_cast<uint32_t>(c);
          return true;
        }
        st[sub_at] = 0;
        st[sub_at + 1] = Hdr(kCallEnd, 0);
        PushValue(st, g.tool_args[tool]);
        st[st.size() - 2] = kObjAfterOpen;  // the '{' was part of the header
        return true;
      }
      case kCallEnd:
        if (sym != (g.compact ? kSymEnd : kSymEndCall)) return false;
        Pop(st);
        ++s.calls_done;
        if (s.calls_done >= g.opts.max_calls) s.done = true;
        return true;
      case kObj: {
        const VNode& v = g.vnodes[node];
        const size_t seen_at = sub_at - v.nwords;
        const uint32_t phase = sub & 0xF;
        const int open = v.args && g.compact ? '(' : '{';
        const int close = v.args && g.compact ? ')' : '}';
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
              const LitTrie::Node& root = g.lits[v.lit].nodes[0];
              if (!KeyOpen(root, &st[seen_at], v.nwords)) return false;
              st[sub_at] = g.compact ? kObjAfterComma : kObjKey;
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
        const LitTrie& t = g.lits[v.lit];
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
        const VNode& v = g.vnodes[node];
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
            if (sym != static_cast<int>(g.kv_sep)) return false;
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
        const VNode& v = g.vnodes[node];
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
            if (g.compact && sym == ' ') {
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
          if (sym != g.str_open) return false;
          st[sub_at] = 1;
          return true;
        }
        if (!g.compact) {
          if (sym == kSymEscape) {
            if (u != 0) return false;
            Pop(st);
            return true;
          }
          if (sym > 255) return false;
          const int nu = Utf8Step(static_cast<int>(u), static_cast<uint8_t>(sym));
          if (nu < 0) return false;
          const uint32_t k = esc_matcher_.next[(sub >> 8) & 0xFF][sym];
          if (k == esc_matcher_.full()) return false;
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
        const LitTrie& t = g.lits[g.vnodes[node].lit];
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
        const bool integer = g.vnodes[node].type == VNode::kInteger;
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
        const int d = g.vnodes[node].depth;
        int target;
        if (sym == g.str_open) {
          target = g.str_node;
        } else if (sym == '-' || (sym >= '0' && sym <= '9')) {
          target = g.num_node;
        } else if (sym == 't' || sym == 'f') {
          target = g.bool_node;
        } else if (sym == '[' && d < kMaxValueDepth) {
          target = g.any_arr[d];
        } else if (sym == '{' && d < kMaxValueDepth) {
          target = g.any_obj[d];
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

}  // namespace fg::text::grammar
