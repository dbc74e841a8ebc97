// libFuzzer target for the FunctionGemma call parsers: parse arbitrary model output in both
// dialects (official, and compact <tool_N>(...)), without and with a catalog. A crash,
// sanitizer report, exception or failed invariant (FG_FUZZ_CHECK) is a bug; a non-OK Status is
// the expected answer to garbage. Invariants: every parsed result dumps as JSON (valid UTF-8,
// finite numbers); with a catalog every call names a catalog tool; an official call whose keys
// the syntax can carry bare re-parses from its own rendering to the same arguments.
//   make fuzz FUZZ_SECONDS=60
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "src/text/call_parser.h"
#include "src/text/function_prompt.h"
#include "src/text/tool_catalog.h"

namespace {

using nlohmann::json;

const fg::text::ToolCatalog& Catalog() {
  static const fg::text::ToolCatalog* catalog = [] {
    auto c = fg::text::ParseToolCatalog(R"([
      {"name":"set_light","parameters":{"type":"object","properties":{
         "room":{"type":"string"},"state":{"type":"string","enum":["on","off"]},
         "brightness":{"type":"integer"},"level":{"type":"number"},"dim":{"type":"boolean"},
         "rooms":{"type":"array","items":{"type":"integer"}},
         "color":{"type":"object","properties":{"r":{"type":"integer"}}}},
         "required":["room"]}},
      {"name":"set_timer","parameters":{"type":"object","properties":{
         "seconds":{"type":"integer"}}}},
      {"name":"get_weather"}])");
    FG_FUZZ_CHECK(c.ok());
    return new fg::text::ToolCatalog(*std::move(c));
  }();
  return *catalog;
}

// True when every object key in `v` can be written bare in call syntax.
bool KeysRoundTrip(const json& v) {
  if (v.is_object()) {
    for (const auto& [k, item] : v.items()) {
      if (!fg::text::IsValidPropertyKey(k) || !KeysRoundTrip(item)) return false;
    }
  } else if (v.is_array()) {
    for (const json& item : v) {
      if (!KeysRoundTrip(item)) return false;
    }
  } else if (v.is_string()) {
    // A string holding the delimiter cannot be rendered back.
    if (v.get_ref<const std::string&>().find("<escape>") != std::string::npos) return false;
  }
  return true;
}

// The compact dialect's tool map: indexes 0-2 name catalog tools, 3 does not (an error with a
// catalog, kept as written without one).
const std::vector<std::string>& ToolMap() {
  static const std::vector<std::string>* map =
      new std::vector<std::string>{"set_light", "set_timer", "get_weather", "not_a_tool"};
  return *map;
}

// The invariants of any parse: an error is InvalidArgument; a result dumps as JSON and, with a
// catalog, names catalog tools only. True when `out` holds a result.
bool CheckResult(const fg::StatusOr<fg::text::ParsedOutput>& out,
                 const fg::text::ToolCatalog* catalog) {
  if (!out.ok()) {
    FG_FUZZ_CHECK(out.status().code() == fg::StatusCode::kInvalidArgument);
    return false;
  }
  try {
    (void)out->ToJson().dump();
  } catch (...) {
    FG_FUZZ_CHECK(false && "ToJson().dump() threw");
  }
  for (const fg::text::Call& call : out->calls) {
    if (catalog != nullptr) FG_FUZZ_CHECK(catalog->Find(call.name) != nullptr);
  }
  return true;
}

void Check(std::string_view text, const fg::text::ToolCatalog* catalog) {
  (void)CheckResult(fg::text::ParseCompactOutput(text, catalog, ToolMap()), catalog);
  auto out = fg::text::ParseModelOutput(text, catalog);
  if (!CheckResult(out, catalog)) return;
  for (const fg::text::Call& call : out->calls) {
    if (catalog == nullptr && KeysRoundTrip(call.arguments) &&
        call.name.find_first_of("{}<,\n") == std::string::npos) {
      auto again = fg::text::ParseModelOutput(fg::text::RenderCall(call.name, call.arguments));
      FG_FUZZ_CHECK(again.ok());
      FG_FUZZ_CHECK(again->calls.size() == 1);
      // Bare words re-read as what they look like; only escaped strings are exact, so compare
      // the renderings, which are canonical.
      FG_FUZZ_CHECK(fg::text::RenderValue(again->calls[0].arguments) ==
                    fg::text::RenderValue(call.arguments));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(text, nullptr);
  Check(text, &Catalog());
  return 0;
}
