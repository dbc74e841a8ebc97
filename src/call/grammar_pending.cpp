// Temporary stand-in, compiled only while src/text/call_grammar.cc does not exist (see
// CMakeLists.txt): the flag parsers, and a CallGrammar that refuses to be created, so the
// unconstrained path (--constrain off) links and runs.
#include "src/text/call_grammar.h"

namespace fg::text {

StatusOr<Dialect> ParseDialect(std::string_view name) {
  if (name == "official") return Dialect::kOfficial;
  if (name == "compact") return Dialect::kCompact;
  return InvalidArgumentError("unknown dialect '" + std::string(name) +
                              "' (expected official or compact)");
}

StatusOr<ConstrainMode> ParseConstrainMode(std::string_view name) {
  if (name == "call") return ConstrainMode::kCall;
  if (name == "auto") return ConstrainMode::kAuto;
  if (name == "off") return ConstrainMode::kOff;
  return InvalidArgumentError("unknown constrain mode '" + std::string(name) +
                              "' (expected call, auto or off)");
}

struct CallGrammar::Impl {};
CallGrammar::CallGrammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CallGrammar::~CallGrammar() = default;

StatusOr<std::unique_ptr<CallGrammar>> CallGrammar::Create(const ToolCatalog&, const Tokenizer&,
                                                           const GrammarOptions&) {
  return UnimplementedError("the call grammar is not built yet; use --constrain off");
}
CallGrammar::State CallGrammar::Start() const { return {}; }
std::span<const int32_t> CallGrammar::Allowed(const State&) const { return {}; }
Status CallGrammar::Advance(State*, int32_t) const {
  return UnimplementedError("the call grammar is not built yet");
}
bool CallGrammar::CanStop(const State&) const { return false; }
size_t CallGrammar::memoized_states() const { return 0; }

}  // namespace fg::text
