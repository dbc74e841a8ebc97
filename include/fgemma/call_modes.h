// The prompt dialect and the output constraint of function calling (FunctionCallerOptions,
// the call grammar), with their names for flags and messages.
#ifndef FGEMMA_CALL_MODES_H_
#define FGEMMA_CALL_MODES_H_

#include <string_view>

#include "fgemma/status.h"

namespace fg {

// kOfficial: FunctionGemma's prompt (a developer turn declaring every tool, then the user turn).
// kCompact: the seed fine-tune's (just the user turn; tools are <tool_N> vocabulary tokens).
enum class Dialect { kOfficial, kCompact };
// kCall: the output must be one or more calls. kAuto: free text before the first call, and any
// call that is started is constrained. kOff: no grammar.
enum class ConstrainMode { kOff, kCall, kAuto };

// "official" / "compact"; InvalidArgument naming the choices otherwise.
StatusOr<Dialect> ParseDialect(std::string_view name);
// "call" / "auto" / "off"; InvalidArgument naming the choices otherwise.
StatusOr<ConstrainMode> ParseConstrainMode(std::string_view name);

}  // namespace fg

#endif  // FGEMMA_CALL_MODES_H_
