// CallGrammar: the pieces below put together (docs/architecture.md "The call grammar").
//
//   call_grammar_schema   the catalog compiled into value nodes and literal tries
//   call_grammar_vocab    the vocabulary index: token classes, pieces sorted as a byte trie
//   call_grammar_machine  the automaton: one symbol (or token) at a time over the schema
//   call_grammar_cost     the budget: the fewest tokens that complete the output
//   call_grammar_memo     allowed sets (and budget cuts) per state key, computed once
#include "src/text/call_grammar.h"

#include <string>
#include <utility>

#include "src/text/call_grammar_cost.h"
#include "src/text/call_grammar_machine.h"
#include "src/text/call_grammar_memo.h"
#include "src/text/call_grammar_schema.h"
#include "src/text/call_grammar_vocab.h"

namespace fg::text {

using grammar::kTokNever;
using grammar::kTokStop;
using grammar::Machine;

struct CallGrammar::Impl {
  Impl(grammar::CompiledSchema s, grammar::VocabIndex v)
      : schema(std::move(s)),
        vocab(std::move(v)),
        machine(schema),
        costs(schema, vocab, machine),
        memo(machine, vocab, costs) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Each refers to those above it.
  const grammar::CompiledSchema schema;
  const grammar::VocabIndex vocab;
  const grammar::Machine machine;
  const grammar::Costs costs;
  const grammar::Memo memo;
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
  FG_ASSIGN_OR_RETURN(grammar::CompiledSchema schema,
                      grammar::CompiledSchema::Compile(catalog, options));
  grammar::VocabIndex vocab;
  FG_RETURN_IF_ERROR(vocab.Build(tokenizer, schema.compact, options.tool_map.size()));
  return std::unique_ptr<CallGrammar>(
      new CallGrammar(std::make_unique<Impl>(std::move(schema), std::move(vocab))));
}

CallGrammar::State CallGrammar::Start() const { return impl_->machine.Start(); }

std::span<const int32_t> CallGrammar::Allowed(const State& s) const {
  return impl_->memo.Allowed(s);
}

std::span<const int32_t> CallGrammar::Allowed(const State& s, int64_t budget) const {
  return impl_->memo.Allowed(s, budget);
}

Status CallGrammar::Advance(State* s, int32_t token) const {
  const Impl& g = *impl_;
  if (s->done) return InvalidArgumentError("grammar: the output is complete");
  if (token < 0 || token >= g.vocab.size()) {
    return InvalidArgumentError("grammar: token " + std::to_string(token) + " out of range");
  }
  const int32_t cls = g.vocab.Class(token);
  if (cls == kTokStop) {
    if (!g.machine.CanStop(*s)) {
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
  if (!g.machine.StepToken(g.vocab, t, token)) {
    return InvalidArgumentError("grammar: token " + std::to_string(token) + " not allowed here");
  }
  *s = std::move(t);
  return OkStatus();
}

int CallGrammar::MinTokensToFinish(const State& s) const { return impl_->costs.Finish(s); }

bool CallGrammar::CanStop(const State& s) const { return impl_->machine.CanStop(s); }

bool CallGrammar::InFreeString(const State& s) const {
  if (impl_->schema.compact || s.done || !Machine::InStringBody(s)) return false;
  return ((Machine::TopSub(s) >> 4) & 0xF) == 0;  // no UTF-8 sequence open
}

bool CallGrammar::InNumber(const State& s) const {
  return !s.done && s.stack.size() >= 2 && (s.stack.back() >> 24) == grammar::kNum;
}

size_t CallGrammar::memoized_states() const { return impl_->memo.size(); }

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
