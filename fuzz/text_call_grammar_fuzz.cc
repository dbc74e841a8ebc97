// libFuzzer target for the call grammar: the input drives a walk through one of four grammars
// (official/compact x call/auto, two calls at most) over a small vocabulary with tokens that span
// syntax boundaries, byte tokens and controls. Invariants (FG_FUZZ_CHECK aborts):
//   * Allowed() is sorted and never empty unless Done();
//   * for any token, Advance succeeds exactly when the token is in Allowed();
//   * whenever a walk becomes stoppable (CanStop() turns true, e.g. a call just closed) and
//     where it ends, the text so far parses (ParseModelOutput / ParseCompactOutput) and every
//     call names a catalog tool exactly and passes ValidateCall. Checking every stoppable step
//     would re-decode and re-parse the whole prefix each time (quadratic in kAuto's free text).
// Raw input to the parsers is text_call_parser_fuzz's job.
//   make fuzz-text FUZZ_SECONDS=60
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "src/text/call_grammar.h"
#include "src/text/call_parser.h"
#include "src/text/grammar_test_util.h"
#include "src/text/tool_catalog.h"

namespace {

using namespace fg::text;  // NOLINT

struct Setup {
  std::unique_ptr<Tokenizer> tok;
  ToolCatalog catalog;
  std::vector<std::string> tool_map;
  std::vector<std::unique_ptr<CallGrammar>> grammars;  // official call/auto, compact call/auto
};

const Setup& Get() {
  static const Setup* setup = [] {
    auto* s = new Setup;
    s->tok = grammar_test::SmallTokenizer(
        {"call:", "set_light", "get_weather", "{room", "},", "}", "room", "state", "on", "off",
         "tags", "color", "12", "3.", "e+", "[1", "],", "=\"", "\")", "\",", "true", "tru",
         "<start", "_function", "_call>", "<tool_", "escape", "\xC3\xA9t\xC3\xA9"},
        /*compact_tools=*/2);
    auto c = ParseToolCatalog(R"([
      {"name":"set_light","parameters":{"type":"object","properties":{
         "room":{"type":"string"},"state":{"type":"string","enum":["on","off"]},
         "level":{"type":"number"},"n":{"type":"integer","enum":[1,12]},
         "dim":{"type":"boolean"},"tags":{"type":"array"},"extra":{"type":"object"},
         "color":{"type":"object","properties":{"r":{"type":"integer"},
                  "rgb":{"type":"array","items":{"type":"number"}}},"required":["r"]}},
         "required":["room","state"]}},
      {"name":"get_weather","parameters":{"type":"object","properties":{
         "city":{"type":"string"}}}}])");
    FG_FUZZ_CHECK(c.ok());
    s->catalog = *std::move(c);
    s->tool_map = {"set_light", "get_weather"};
    for (Dialect d : {Dialect::kOfficial, Dialect::kCompact}) {
      for (ConstrainMode m : {ConstrainMode::kCall, ConstrainMode::kAuto}) {
        GrammarOptions o;
        o.dialect = d;
        o.mode = m;
        o.max_calls = 2;
        if (d == Dialect::kCompact) o.tool_map = s->tool_map;
        auto g = CallGrammar::Create(s->catalog, *s->tok, o);
        FG_FUZZ_CHECK(g.ok());
        s->grammars.push_back(*std::move(g));
      }
    }
    return s;
  }();
  return *setup;
}

void CheckParses(const Setup& s, bool compact, const std::vector<int32_t>& ids) {
  const std::string text = s.tok->Decode(ids, /*special=*/true);
  auto out = compact ? ParseCompactOutput(text, &s.catalog, s.tool_map)
                     : ParseModelOutput(text, &s.catalog);
  if (!out.ok()) std::fprintf(stderr, "%s\n%s\n", out.status().ToString().c_str(), text.c_str());
  FG_FUZZ_CHECK(out.ok());
  for (const Call& call : out->calls) {
    const Tool* tool = s.catalog.Find(call.name);
    FG_FUZZ_CHECK(tool != nullptr);
    FG_FUZZ_CHECK(ValidateCall(*tool, call.arguments).ok());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Setup& s = Get();
  if (size == 0) return 0;
  const size_t which = data[0] % s.grammars.size();
  const CallGrammar& g = *s.grammars[which];
  const bool compact = which >= 2;
  CallGrammar::State st = g.Start();
  std::vector<int32_t> ids;
  for (size_t i = 1; i < size && !g.Done(st); ++i) {
    std::span<const int32_t> allowed = g.Allowed(st);
    FG_FUZZ_CHECK(!allowed.empty());
    FG_FUZZ_CHECK(std::is_sorted(allowed.begin(), allowed.end()));
    int32_t t;
    if ((data[i] & 0x80) && i + 1 < size) {  // any token: Advance must agree with Allowed
      t = static_cast<int32_t>((((data[i] & 0x7F) << 8) | data[i + 1]) % s.tok->size());
      ++i;
    } else {
      t = allowed[data[i] % allowed.size()];
    }
    const bool in = std::binary_search(allowed.begin(), allowed.end(), t);
    CallGrammar::State next = st;
    const bool ok = g.Advance(&next, t).ok();
    FG_FUZZ_CHECK(ok == in);
    if (!ok) continue;
    const bool could_stop = g.CanStop(st);
    st = next;
    ids.push_back(t);
    if (!could_stop && g.CanStop(st)) CheckParses(s, compact, ids);
  }
  if (g.CanStop(st)) CheckParses(s, compact, ids);
  return 0;
}
