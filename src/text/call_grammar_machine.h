// The call grammar's automaton (internal to CallGrammar): a stack machine over a compiled
// schema that steps one symbol at a time. A state's stack is a sequence of frames, each a
// header word (kind << 24 | value node) on top of a sub-state word (phase and counters) and,
// for a declared object, its seen-key mask words below that.
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_MACHINE_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_MACHINE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/text/call_grammar.h"
#include "src/text/call_grammar_schema.h"
#include "src/text/call_grammar_symbols.h"
#include "src/text/call_grammar_vocab.h"

namespace fg::text::grammar {

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
inline constexpr uint32_t kTopExpectCall = 0;  // kCall before the first call
inline constexpr uint32_t kTopAfterCall = 1;   // a call just ended: another call or stop
inline constexpr uint32_t kTopFree = 2;  // kAuto free text (bits 8..15: forbidden-pattern match)
// kObj phases (bits 8..31: key trie node in kObjKey).
inline constexpr uint32_t kObjOpen = 0, kObjAfterOpen = 1, kObjAfterComma = 2, kObjKey = 3,
                          kObjAfterValue = 4;
inline constexpr uint32_t kFreeOpen = 0, kFreeAfterOpen = 1, kFreeKey = 2, kFreeAfterValue = 3;
// kArr phases (bits 8..31: items so far).
inline constexpr uint32_t kArrOpen = 0, kArrAfterOpen = 1, kArrAfterValue = 2,
                          kArrAfterComma = 3, kArrItem = 4;
// kStr: bit 0 body, bits 4..7 UTF-8 state, bits 8..15 pattern match, bit 16 backslash pending.
// kNum phases (bits 8..: digit count).
inline constexpr uint32_t kNumStart = 0, kNumMinus = 1, kNumZero = 2, kNumInt = 3, kNumDot = 4,
                          kNumFrac = 5, kNumE = 6, kNumESign = 7, kNumExp = 8;

constexpr uint32_t Hdr(Kind k, uint32_t node) { return (static_cast<uint32_t>(k) << 24) | node; }

// Substring matcher (KMP as a DFA): next[state][byte]; reaching pat.size() is a match.
struct Matcher {
  std::string pat;
  std::vector<std::array<uint8_t, 256>> next;
  void Build(std::string p);
  uint32_t full() const { return static_cast<uint32_t>(pat.size()); }
};

class Machine {
 public:
  // `schema` must outlive the machine.
  explicit Machine(const CompiledSchema& schema);
  const CompiledSchema& schema() const { return g_; }

  State Start() const;

  // Feeds one symbol; false (state garbage) when it is not allowed.
  bool Step(State& s, int sym) const;

  // One token on a state: its symbol or its piece's bytes; false (state garbage) when it is not
  // allowed. Stop tokens are not stepped (they end the output: CanStop).
  bool StepToken(const VocabIndex& vocab, State& t, int32_t id) const {
    const int32_t cls = vocab.Class(id);
    return cls >= 256 ? Step(t, cls) : cls == kTokText && vocab.WalkPiece(t, id, stepper());
  }
  // Step as a function object for VocabIndex::Walk / WalkPiece.
  struct Stepper {
    const Machine* m;
    bool operator()(State& s, int sym) const { return m->Step(s, sym); }
  };
  Stepper stepper() const { return {this}; }

  // The output so far is complete: a stop token may follow.
  bool CanStop(const State& s) const {
    if (s.done) return true;
    if (s.stack.size() != 2) return false;
    const uint32_t phase = s.stack[0] & 0xF;
    return phase == kTopAfterCall || phase == kTopFree;
  }

  // The top frame is a string, in its body (past the opening).
  static bool InStringBody(const State& s) {
    return s.stack.size() >= 2 && (s.stack.back() >> 24) == kStr &&
           (s.stack[s.stack.size() - 2] & 1) != 0;
  }
  // The top frame's sub-state word (with a stack).
  static uint32_t TopSub(const State& s) { return s.stack[s.stack.size() - 2]; }

  // The part of the state that determines which symbol strings it accepts, hence its allowed
  // set (and its completion costs).
  void Key(const State& s, std::vector<uint32_t>* key) const {
    key->clear();
    const std::vector<uint32_t>& st = s.stack;
    if (!g_.compact && st.size() >= 2 && (st.back() >> 24) == kStr) {
      // Inside an official string only <escape> (atomic) leaves it: the rest of the stack
      // cannot influence which tokens are allowed.
      key->push_back(0xFFFFFFFFu);
      key->push_back(st[st.size() - 2]);
      return;
    }
    key->assign(st.begin(), st.end());
    if (st.size() == 2) key->push_back(s.calls_done < g_.opts.max_calls ? 1 : 0);
  }

  // Words of the frame whose header is `hdr`.
  uint32_t FrameSize(uint32_t hdr) const {
    if ((hdr >> 24) == kObj) return 2 + g_.vnodes[hdr & 0xFFFFFF].nwords;
    return 2;
  }

 private:
  void Pop(std::vector<uint32_t>& st) const { st.resize(st.size() - FrameSize(st.back())); }
  void PushValue(std::vector<uint32_t>& st, int node) const;
  bool IsCallStart(int sym) const { return g_.compact ? sym >= kSymTool0 : sym == kSymStartCall; }

  const CompiledSchema& g_;
  Matcher free_matcher_;  // forbidden in free text (would start a call in the parser)
  Matcher esc_matcher_;   // "<escape>": forbidden inside official strings
};

}  // namespace fg::text::grammar

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_MACHINE_H_
