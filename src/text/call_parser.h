// Parses FunctionGemma model output into function calls (docs/model.md "FunctionGemma prompt and
// output"):
//   <start_function_call>call:NAME{key:value,...}<end_function_call>   (several may follow)
// Values: <escape>...<escape> strings (delimiters removed, content verbatim), numbers, true,
// false, null, objects {k:v,...} (keys bare or <escape>d), arrays [v,...]. Spaces around
// punctuation are tolerated; a bare word that is no number/boolean/null is taken as a string.
// Text outside calls is returned as `content`, minus the stop markers <end_of_turn>, <eos> and
// <start_function_response>. The final <end_function_call> may be missing when the text ends
// right after the call's closing brace (generation stopped on token 49, not echoed).
//
// With a catalog, names snap to it (exact, then case/punctuation-insensitive, then edit
// distance <= 2 with a unique best match; otherwise an error) and values are typed by the
// tool's schema: a NUMBER/INTEGER given as an escaped string that parses as a number becomes a
// number, a BOOLEAN given as "true"/"false" becomes a boolean, a STRING given as a bare number
// keeps the digits as written ("007"), an INTEGER given as 3.0 becomes 3. Keys that are not in
// the schema are kept untyped (ValidateCall reports them).
//
// Malformed output gives InvalidArgument "offset N: what" (N a byte offset into the text),
// never a crash; nesting is bounded by kMaxValueDepth and strings must be valid UTF-8.
#ifndef FGEMMA_TEXT_CALL_PARSER_H_
#define FGEMMA_TEXT_CALL_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fgemma/status.h"
#include "src/text/tool_catalog.h"

namespace fg::text {

inline constexpr int kMaxValueDepth = 16;

struct Call {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
  // {"name": NAME, "arguments": {...}}
  nlohmann::json ToJson() const;
};

struct ParsedOutput {
  std::string content;
  std::vector<Call> calls;
  // One call: its object; several: an array of them; none: an empty array.
  nlohmann::json ToJson() const;
};

// `catalog` may be null: names are then kept as written and values untyped.
StatusOr<ParsedOutput> ParseModelOutput(std::string_view text,
                                        const ToolCatalog* catalog = nullptr);

// The compact dialect of the seed's fine-tune (docs/model.md): <tool_N>(key="value", key=3)<end>,
// several calls may follow each other. tool_map[N] is the tool's name (the manifest's toolMap);
// with a catalog it must name a catalog tool exactly, and values are typed by its schema as in
// ParseModelOutput. Strings are double-quoted with \" and \\ as the only escapes; arguments
// are separated by ',' (spaces around punctuation tolerated); nested objects are {k=v,...},
// arrays [v,...]. The final <end> may be missing when the text ends right after ')'. Text
// outside calls is `content`, minus the stop markers. Errors: InvalidArgument "offset N: what".
StatusOr<ParsedOutput> ParseCompactOutput(std::string_view text, const ToolCatalog* catalog,
                                          const std::vector<std::string>& tool_map);

// The catalog tool a model-written name refers to (rules above), or NotFound.
StatusOr<const Tool*> SnapToolName(const ToolCatalog& catalog, std::string_view name);

// A strict JSON number (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, finite) into *out: int64
// when integral and in range, else double. False when `tok` is not one.
bool ParseJsonNumber(std::string_view tok, nlohmann::json* out);
// The value the parser keeps for a scalar written as `raw` (its natural reading `value`; an
// <escape>d string when `was_escaped`) under `schema` (null: as read): strings as written,
// numbers from escaped text, integral floats as integers, "true"/"false" in any case as
// booleans.
nlohmann::json CoerceScalar(const Schema* schema, std::string_view raw, nlohmann::json value,
                            bool was_escaped);

// Checks a call against its tool: every required key present, no unknown keys, values of the
// declared types (recursively), enum membership. InvalidArgument naming the key otherwise.
Status ValidateCall(const Tool& tool, const nlohmann::json& arguments);

}  // namespace fg::text

#endif  // FGEMMA_TEXT_CALL_PARSER_H_
