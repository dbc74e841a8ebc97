// The call grammar's alphabet (internal to CallGrammar): what its automaton steps on. Bytes are
// 0..255; the special tokens the grammar knows are atomic symbols above them.
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_SYMBOLS_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_SYMBOLS_H_

#include "src/text/call_grammar.h"

namespace fg::text::grammar {

using State = CallGrammar::State;

inline constexpr int kSymEscape = 256;
inline constexpr int kSymStartCall = 257;
inline constexpr int kSymEndCall = 258;
inline constexpr int kSymEnd = 259;    // compact <end>
inline constexpr int kSymTool0 = 260;  // compact <tool_N> is kSymTool0 + N

}  // namespace fg::text::grammar

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_SYMBOLS_H_
